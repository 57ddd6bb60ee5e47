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
from .custom_op import CustomOpNode
from .layernorm import LayerNormNode
from .layernorm_backward import LayernormBackwardNode
from .matmul import MatmulNode
from .moe_grouped_matmul import MoeGroupedMatmulNode
from .moe_grouped_matmul_bwd import MoeGroupedMatmulBwdNode
from .pointwise import PointwiseNode
from .reduction import ReductionNode
from .resample_bwd import ResampleBwdNode
from .resample_fwd import ResampleFwdNode
from .rmsnorm import RMSNormNode
from .rmsnorm_backward import RMSNormBackwardNode
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
    "CustomOpNode",
    "LayerNormNode",
    "LayernormBackwardNode",
    "MatmulNode",
    "MoeGroupedMatmulBwdNode",
    "MoeGroupedMatmulNode",
    "Node",
    "PointwiseNode",
    "RMSNormBackwardNode",
    "RMSNormNode",
    "ReductionNode",
    "ResampleBwdNode",
    "ResampleFwdNode",
    "SdpaBwdNode",
    "SdpaFwdNode",
]
