"""Nodes: one module per node family with its rules, inference and packing."""

from .base import Node
from .batchnorm import BatchnormNode
from .batchnorm_backward import BatchnormBackwardNode
from .batchnorm_inference import BatchnormInferenceNode
from .batchnorm_inference_variance import BatchnormInferenceVarianceNode
from .block_scale_dequantize import BlockScaleDequantizeNode
from .block_scale_quantize import BlockScaleQuantizeNode
from .conv_dgrad import ConvolutionDgradNode
from .conv_fprop import ConvolutionFpropNode
from .conv_wgrad import ConvolutionWgradNode
from .layernorm import LayerNormNode
from .matmul import MatmulNode
from .pointwise import PointwiseNode
from .reduction import ReductionNode
from .rmsnorm import RMSNormNode
from .sdpa_bwd import SdpaBwdNode
from .sdpa_fwd import SdpaFwdNode

__all__ = [
    "BatchnormBackwardNode",
    "BatchnormInferenceNode",
    "BatchnormInferenceVarianceNode",
    "BatchnormNode",
    "BlockScaleDequantizeNode",
    "BlockScaleQuantizeNode",
    "ConvolutionDgradNode",
    "ConvolutionFpropNode",
    "ConvolutionWgradNode",
    "LayerNormNode",
    "MatmulNode",
    "Node",
    "PointwiseNode",
    "RMSNormNode",
    "ReductionNode",
    "SdpaBwdNode",
    "SdpaFwdNode",
]
