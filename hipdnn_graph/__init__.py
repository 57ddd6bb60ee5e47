"""hipdnn-graph: a declarative Python graph frontend that mirrors AMD hipDNN.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 4, 64, 32])
    >>> o, stats = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="fwd")
    >>> g.validate(); o.get_dim()
    [1, 4, 64, 32]
"""

from . import backend
from .attributes import (
    BatchnormAttributes,
    BatchnormBackwardAttributes,
    BatchnormInferenceAttributes,
    BatchnormInferenceAttributesVarianceExt,
    BlockScaleDequantizeAttributes,
    BlockScaleQuantizeAttributes,
    ConvDgradAttributes,
    ConvFpropAttributes,
    ConvWgradAttributes,
    GraphAttributes,
    LayernormAttributes,
    MaskWindow,
    MatmulAttributes,
    NodeAttributes,
    PointwiseAttributes,
    ReductionAttributes,
    RMSNormAttributes,
    SdpaAttributes,
    SdpaBackwardAttributes,
)
from .backend.registry import list_backends, register_backend
from .errors import HipdnnError, NotSupportedError
from .graph import Graph
from .nodes import (
    BatchnormBackwardNode,
    BatchnormInferenceNode,
    BatchnormInferenceVarianceNode,
    BatchnormNode,
    BlockScaleDequantizeNode,
    BlockScaleQuantizeNode,
    ConvolutionDgradNode,
    ConvolutionFpropNode,
    ConvolutionWgradNode,
    LayerNormNode,
    MatmulNode,
    Node,
    PointwiseNode,
    ReductionNode,
    RMSNormNode,
    SdpaBwdNode,
    SdpaFwdNode,
)
from .tensor import TensorAttributes, generate_strides
from .types import (
    BuildPlanPolicy,
    ConvolutionMode,
    DataType,
    DiagonalAlignment,
    ErrorCode,
    HeuristicMode,
    NodeType,
    NormFwdPhase,
    PointwiseMode,
    ReductionMode,
)

__version__ = "0.1.0"

__all__ = [
    "BatchnormAttributes",
    "BatchnormBackwardAttributes",
    "BatchnormBackwardNode",
    "BatchnormInferenceAttributes",
    "BatchnormInferenceAttributesVarianceExt",
    "BatchnormInferenceNode",
    "BatchnormInferenceVarianceNode",
    "BatchnormNode",
    "BlockScaleDequantizeAttributes",
    "BlockScaleDequantizeNode",
    "BlockScaleQuantizeAttributes",
    "BlockScaleQuantizeNode",
    "BuildPlanPolicy",
    "ConvDgradAttributes",
    "ConvFpropAttributes",
    "ConvWgradAttributes",
    "ConvolutionDgradNode",
    "ConvolutionFpropNode",
    "ConvolutionMode",
    "ConvolutionWgradNode",
    "DataType",
    "DiagonalAlignment",
    "ErrorCode",
    "Graph",
    "GraphAttributes",
    "HeuristicMode",
    "HipdnnError",
    "LayerNormNode",
    "LayernormAttributes",
    "MaskWindow",
    "MatmulAttributes",
    "MatmulNode",
    "Node",
    "NodeAttributes",
    "NodeType",
    "NormFwdPhase",
    "NotSupportedError",
    "PointwiseAttributes",
    "PointwiseMode",
    "PointwiseNode",
    "RMSNormAttributes",
    "RMSNormNode",
    "ReductionAttributes",
    "ReductionMode",
    "ReductionNode",
    "SdpaAttributes",
    "SdpaBackwardAttributes",
    "SdpaBwdNode",
    "SdpaFwdNode",
    "TensorAttributes",
    "__version__",
    "backend",
    "generate_strides",
    "list_backends",
    "register_backend",
]
