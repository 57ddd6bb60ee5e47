"""Attribute models of the graph and of each node."""

from .base import MaskWindow, NodeAttributes
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
