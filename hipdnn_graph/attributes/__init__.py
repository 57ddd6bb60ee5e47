"""Attribute models of the graph and of each node."""

from .base import MaskWindow, NodeAttributes
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
from .graph_attributes import GraphAttributes
from .layernorm import LayernormAttributes
from .matmul import MatmulAttributes
from .pointwise import PointwiseAttributes
from .reduction import ReductionAttributes
from .rmsnorm import RMSNormAttributes
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
    "GraphAttributes",
    "LayernormAttributes",
    "MaskWindow",
    "MatmulAttributes",
    "NodeAttributes",
    "PointwiseAttributes",
    "RMSNormAttributes",
    "ReductionAttributes",
    "SdpaAttributes",
    "SdpaBackwardAttributes",
]
