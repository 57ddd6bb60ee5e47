"""Attribute models of the graph and of each node."""

from .batchnorm import BatchnormAttributes
from .batchnorm_backward import BatchnormBackwardAttributes
from .batchnorm_inference import BatchnormInferenceAttributes
from .batchnorm_inference_variance import BatchnormInferenceAttributesVarianceExt
from .block_scale_dequantize import BlockScaleDequantizeAttributes
from .block_scale_quantize import BlockScaleQuantizeAttributes
from .convolution import (
    ConvDgradAttributes,
    ConvFpropAttributes,
    ConvolutionAttributes,
    ConvWgradAttributes,
)
from .custom_op import CustomOpAttributes
from .graph_attributes import GraphAttributes
from .layernorm import LayernormAttributes
from .layernorm_backward import LayernormBackwardAttributes
from .mask_window import MaskWindow
from .matmul import MatmulAttributes
from .moe_grouped_matmul import MoeGroupedMatmulAttributes, MoeGroupedMatmulBwdAttributes
from .node_attributes import NodeAttributes
from .pointwise import PointwiseAttributes
from .reduction import ReductionAttributes
from .resample import ResampleAttributes, ResampleBwdAttributes, ResampleFwdAttributes
from .rmsnorm import RMSNormAttributes
from .rmsnorm_backward import RMSNormBackwardAttributes
from .sdpa import SdpaAttributes
from .sdpa_backward import SdpaBackwardAttributes

__all__ = [
    "BatchnormAttributes",
    "BatchnormBackwardAttributes",
    "BatchnormInferenceAttributes",
    "BatchnormInferenceAttributesVarianceExt",
    "BlockScaleDequantizeAttributes",
    "BlockScaleQuantizeAttributes",
    "ConvDgradAttributes",
    "ConvFpropAttributes",
    "ConvWgradAttributes",
    "ConvolutionAttributes",
    "CustomOpAttributes",
    "GraphAttributes",
    "LayernormAttributes",
    "LayernormBackwardAttributes",
    "MaskWindow",
    "MatmulAttributes",
    "MoeGroupedMatmulAttributes",
    "MoeGroupedMatmulBwdAttributes",
    "NodeAttributes",
    "PointwiseAttributes",
    "RMSNormAttributes",
    "RMSNormBackwardAttributes",
    "ReductionAttributes",
    "ResampleAttributes",
    "ResampleBwdAttributes",
    "ResampleFwdAttributes",
    "SdpaAttributes",
    "SdpaBackwardAttributes",
]
