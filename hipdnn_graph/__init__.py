"""hipdnn-graph: a declarative Python graph frontend that mirrors AMD hipDNN.

The names below load on first use (PEP 562): ``import hipdnn_graph`` costs next to nothing, so
``hipdnn-graph --version`` and ``--help`` answer at once, and ``hg.Graph`` imports the core the
first time it is read. The imports under ``TYPE_CHECKING`` are the one list of what the package
exports and where from; type checkers read them, and :func:`__getattr__` reads the same lines.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 4, 64, 32])
    >>> o, stats = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="fwd")
    >>> g.validate(); o.get_dim()
    [1, 4, 64, 32]
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _moved

if TYPE_CHECKING:
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
        CustomOpAttributes,
        GraphAttributes,
        LayernormAttributes,
        LayernormBackwardAttributes,
        MaskWindow,
        MatmulAttributes,
        MoeGroupedMatmulAttributes,
        MoeGroupedMatmulBwdAttributes,
        NodeAttributes,
        PointwiseAttributes,
        ReductionAttributes,
        ResampleBwdAttributes,
        ResampleFwdAttributes,
        RMSNormAttributes,
        RMSNormBackwardAttributes,
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
        CustomOpNode,
        LayernormBackwardNode,
        LayerNormNode,
        MatmulNode,
        MoeGroupedMatmulBwdNode,
        MoeGroupedMatmulNode,
        Node,
        PointwiseNode,
        ReductionNode,
        ResampleBwdNode,
        ResampleFwdNode,
        RMSNormBackwardNode,
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
        MoeGroupedMatmulMode,
        NodeType,
        NormFwdPhase,
        PaddingMode,
        PointwiseMode,
        ReductionMode,
        ResampleMode,
    )

__version__ = "0.1.0"

# the module paths of before the root was split into rooms keep importing (hipdnn_graph._moved)
_moved.install()

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
    "CustomOpAttributes",
    "CustomOpNode",
    "DataType",
    "DiagonalAlignment",
    "ErrorCode",
    "Graph",
    "GraphAttributes",
    "HeuristicMode",
    "HipdnnError",
    "LayerNormNode",
    "LayernormAttributes",
    "LayernormBackwardAttributes",
    "LayernormBackwardNode",
    "MaskWindow",
    "MatmulAttributes",
    "MatmulNode",
    "MoeGroupedMatmulAttributes",
    "MoeGroupedMatmulBwdAttributes",
    "MoeGroupedMatmulBwdNode",
    "MoeGroupedMatmulMode",
    "MoeGroupedMatmulNode",
    "Node",
    "NodeAttributes",
    "NodeType",
    "NormFwdPhase",
    "NotSupportedError",
    "PaddingMode",
    "PointwiseAttributes",
    "PointwiseMode",
    "PointwiseNode",
    "RMSNormAttributes",
    "RMSNormBackwardAttributes",
    "RMSNormBackwardNode",
    "RMSNormNode",
    "ReductionAttributes",
    "ReductionMode",
    "ReductionNode",
    "ResampleBwdAttributes",
    "ResampleBwdNode",
    "ResampleFwdAttributes",
    "ResampleFwdNode",
    "ResampleMode",
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


if not TYPE_CHECKING:  # type checkers read the imports above; a typo stays an error there
    #: name -> the module (relative) it is imported from, read from the TYPE_CHECKING imports above
    _SOURCES: dict[str, str] = {}

    def _sources() -> dict[str, str]:
        if not _SOURCES:
            tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
            guard = next(
                n
                for n in tree.body
                if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
            )
            for node in guard.body:
                assert isinstance(node, ast.ImportFrom)
                for alias in node.names:
                    module = "." * node.level + (node.module or alias.name)
                    _SOURCES[alias.asname or alias.name] = module
        return _SOURCES

    def __getattr__(name: str) -> Any:
        """Import an exported name the first time it is read (``hg.Graph``, ``hg.backend``).

        Raises:
            AttributeError: for a name the package does not export.
        """
        module = _sources().get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        loaded = importlib.import_module(module, __name__)
        is_module = module == f".{name}" and not hasattr(loaded, name)  # `from . import backend`
        value = loaded if is_module else getattr(loaded, name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(__all__))
