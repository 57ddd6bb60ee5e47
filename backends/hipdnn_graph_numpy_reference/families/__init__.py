"""The NumPy reference of each node family: one ``run_<family>(node, inputs)`` per family.

Every runner takes a validated node and ``inputs``, its set input slots by the names
``node.attributes.tensors_by_slot()`` gives (arrays of the tensors' dims, pass-by-value scalars
as Python numbers), and returns every set output slot as an array of that tensor's dims computed
in the node's compute type; the engine casts each to its tensor's data type. A runner raises
``HipdnnError`` (``GRAPH_NOT_SUPPORTED``) naming the node and the feature for what it does not
define. :data:`REFERENCE_RUNNERS` maps each :class:`~hipdnn_graph.NodeType` to its runner;
:data:`REFERENCE_CHECKS` maps a family to the function that says, when the plan is chosen, why
the reference refuses a node (``None`` when it runs it). SDPA forward and backward are not here:
their steps keep their own fast paths (:mod:`hipdnn_graph_numpy_reference.sdpa_step`).

Example:
    >>> import hipdnn_graph as hg
    >>> len(REFERENCE_RUNNERS), hg.NodeType.CONVOLUTION_FPROP in REFERENCE_RUNNERS
    (21, True)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

import hipdnn_graph as hg

from .batchnorm import run_batchnorm, run_batchnorm_inference, run_batchnorm_inference_variance_ext
from .batchnorm_backward import run_batchnorm_backward
from .block_scale import (
    block_scale_dequantize_refusal,
    block_scale_quantize_refusal,
    run_block_scale_dequantize,
    run_block_scale_quantize,
)
from .convolution import convolution_refusal, run_conv_dgrad, run_conv_fprop, run_conv_wgrad
from .custom_op import custom_op_refusal, run_custom_op
from .layernorm import layernorm_refusal, run_layernorm
from .layernorm_backward import run_layernorm_backward
from .matmul import matmul_refusal, run_matmul
from .moe_grouped_matmul import (
    moe_grouped_matmul_bwd_refusal,
    moe_grouped_matmul_refusal,
    run_moe_grouped_matmul,
    run_moe_grouped_matmul_bwd,
)
from .pointwise import pointwise_refusal, run_pointwise
from .reduction import reduction_refusal, run_reduction
from .resample import (
    resample_bwd_refusal,
    resample_fwd_refusal,
    run_resample_bwd,
    run_resample_fwd,
)
from .rmsnorm import run_rmsnorm
from .rmsnorm_backward import run_rmsnorm_backward

__all__ = ["REFERENCE_CHECKS", "REFERENCE_RUNNERS", "Runner"]

#: ``run_<family>(node, inputs) -> {output slot: array}``
Runner = Callable[[Any, Mapping[str, Any]], dict[str, np.ndarray[Any, Any]]]

#: node family → its NumPy reference
REFERENCE_RUNNERS: dict[hg.NodeType, Runner] = {
    hg.NodeType.POINTWISE: run_pointwise,
    hg.NodeType.MATMUL: run_matmul,
    hg.NodeType.REDUCTION: run_reduction,
    hg.NodeType.CONVOLUTION_FPROP: run_conv_fprop,
    hg.NodeType.CONVOLUTION_DGRAD: run_conv_dgrad,
    hg.NodeType.CONVOLUTION_WGRAD: run_conv_wgrad,
    hg.NodeType.BATCHNORM: run_batchnorm,
    hg.NodeType.BATCHNORM_INFERENCE: run_batchnorm_inference,
    hg.NodeType.BATCHNORM_INFERENCE_VARIANCE_EXT: run_batchnorm_inference_variance_ext,
    hg.NodeType.BATCHNORM_BACKWARD: run_batchnorm_backward,
    hg.NodeType.LAYER_NORM: run_layernorm,
    hg.NodeType.LAYERNORM_BACKWARD: run_layernorm_backward,
    hg.NodeType.RMS_NORM: run_rmsnorm,
    hg.NodeType.RMS_NORM_BACKWARD: run_rmsnorm_backward,
    hg.NodeType.MOE_GROUPED_MATMUL: run_moe_grouped_matmul,
    hg.NodeType.MOE_GROUPED_MATMUL_BWD: run_moe_grouped_matmul_bwd,
    hg.NodeType.CUSTOM_OP: run_custom_op,
    hg.NodeType.RESAMPLE_FWD: run_resample_fwd,
    hg.NodeType.RESAMPLE_BWD: run_resample_bwd,
    hg.NodeType.BLOCK_SCALE_QUANTIZE: run_block_scale_quantize,
    hg.NodeType.BLOCK_SCALE_DEQUANTIZE: run_block_scale_dequantize,
}

#: node family → why the reference refuses a node of it (``None``: it runs it); families
#: without an entry are refused only for their data and compute types
REFERENCE_CHECKS: dict[hg.NodeType, Callable[[Any], str | None]] = {
    hg.NodeType.POINTWISE: pointwise_refusal,
    hg.NodeType.MATMUL: matmul_refusal,
    hg.NodeType.REDUCTION: reduction_refusal,
    hg.NodeType.CONVOLUTION_FPROP: convolution_refusal,
    hg.NodeType.CONVOLUTION_DGRAD: convolution_refusal,
    hg.NodeType.CONVOLUTION_WGRAD: convolution_refusal,
    hg.NodeType.LAYER_NORM: layernorm_refusal,
    hg.NodeType.MOE_GROUPED_MATMUL: moe_grouped_matmul_refusal,
    hg.NodeType.MOE_GROUPED_MATMUL_BWD: moe_grouped_matmul_bwd_refusal,
    hg.NodeType.CUSTOM_OP: custom_op_refusal,
    hg.NodeType.RESAMPLE_FWD: resample_fwd_refusal,
    hg.NodeType.RESAMPLE_BWD: resample_bwd_refusal,
    hg.NodeType.BLOCK_SCALE_QUANTIZE: block_scale_quantize_refusal,
    hg.NodeType.BLOCK_SCALE_DEQUANTIZE: block_scale_dequantize_refusal,
}
