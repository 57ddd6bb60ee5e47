"""Torch lowerings of hipDNN's node families: one function per family, keyed by node type.

``lower_<family>(node, inputs) -> outputs`` maps the node's set input slots (named as
``node.attributes.tensors_by_slot()`` names them; pass-by-value scalars as Python numbers or
one-element tensors) to every set output slot, computed in the node's compute type with eager
torch ops that ``torch.compile`` traces (no data-dependent Python control flow, no host
synchronisation). The engines (:mod:`hipdnn_graph_torch_rocm.family_engines`) cast each
result to its tensor's storage type, so virtual intermediates are rounded to their declared
type. ``prepare_<family>(node)`` reads the node once and returns the closure the engines run;
``<family>_refusal(node)`` says why a node cannot run (``None`` when it can). Where torch can
write a node's results straight into the caller's buffers (``out=``), ``prepare_<family>_writer
(node)`` returns a :data:`Writer` that does (``None`` where that node cannot), so ``execute``
copies nothing.

Example:
    >>> import hipdnn_graph as hg
    >>> sorted(t.name for t in TORCH_LOWERINGS)[:3]
    ['BATCHNORM', 'BATCHNORM_BACKWARD', 'BATCHNORM_INFERENCE']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hipdnn_graph as hg

from . import batchnorm as _bn
from . import block_scale as _bs
from . import convolution as _conv
from . import custom_op as _custom
from . import matmul as _mm
from . import moe_grouped_matmul as _moe
from . import norm_backward as _nb
from . import norms as _norms
from . import pointwise as _pw
from . import reduction as _red
from . import resample as _rs
from ._common import Prepared, Writer

__all__ = [
    "TORCH_HOST_CHECKED",
    "TORCH_LOWERINGS",
    "TORCH_PREPARERS",
    "TORCH_REFUSALS",
    "TORCH_WRITERS",
    "Prepared",
    "Writer",
    "refusal",
]

_T = hg.NodeType

#: node type -> ``lower_<family>(node, inputs) -> outputs``
TORCH_LOWERINGS: dict[hg.NodeType, Callable[..., dict[str, Any]]] = {
    _T.POINTWISE: _pw.lower_pointwise,
    _T.MATMUL: _mm.lower_matmul,
    _T.REDUCTION: _red.lower_reduction,
    _T.CONVOLUTION_FPROP: _conv.lower_conv_fprop,
    _T.CONVOLUTION_DGRAD: _conv.lower_conv_dgrad,
    _T.CONVOLUTION_WGRAD: _conv.lower_conv_wgrad,
    _T.BATCHNORM: _bn.lower_batchnorm,
    _T.BATCHNORM_INFERENCE: _bn.lower_batchnorm_inference,
    _T.BATCHNORM_INFERENCE_VARIANCE_EXT: _bn.lower_batchnorm_inference_variance,
    _T.BATCHNORM_BACKWARD: _bn.lower_batchnorm_backward,
    _T.LAYER_NORM: _norms.lower_layernorm,
    _T.RMS_NORM: _norms.lower_rmsnorm,
    _T.LAYERNORM_BACKWARD: _nb.lower_layernorm_backward,
    _T.RMS_NORM_BACKWARD: _nb.lower_rmsnorm_backward,
    _T.RESAMPLE_FWD: _rs.lower_resample,
    _T.RESAMPLE_BWD: _rs.lower_resample_bwd,
    _T.BLOCK_SCALE_QUANTIZE: _bs.lower_block_scale_quantize,
    _T.BLOCK_SCALE_DEQUANTIZE: _bs.lower_block_scale_dequantize,
    _T.MOE_GROUPED_MATMUL: _moe.lower_moe_grouped_matmul,
    _T.MOE_GROUPED_MATMUL_BWD: _moe.lower_moe_grouped_matmul_bwd,
}

#: node type -> ``prepare_<family>(node) -> closure(inputs) -> outputs`` (what engines run)
TORCH_PREPARERS: dict[hg.NodeType, Callable[[Any], Prepared]] = {
    _T.POINTWISE: _pw.prepare_pointwise,
    _T.MATMUL: _mm.prepare_matmul,
    _T.REDUCTION: _red.prepare_reduction,
    _T.CONVOLUTION_FPROP: _conv.prepare_conv_fprop,
    _T.CONVOLUTION_DGRAD: _conv.prepare_conv_dgrad,
    _T.CONVOLUTION_WGRAD: _conv.prepare_conv_wgrad,
    _T.BATCHNORM: _bn.prepare_batchnorm,
    _T.BATCHNORM_INFERENCE: _bn.prepare_batchnorm_inference,
    _T.BATCHNORM_INFERENCE_VARIANCE_EXT: _bn.prepare_batchnorm_inference_variance,
    _T.BATCHNORM_BACKWARD: _bn.prepare_batchnorm_backward,
    _T.LAYER_NORM: _norms.prepare_layernorm,
    _T.RMS_NORM: _norms.prepare_rmsnorm,
    _T.LAYERNORM_BACKWARD: _nb.prepare_layernorm_backward,
    _T.RMS_NORM_BACKWARD: _nb.prepare_rmsnorm_backward,
    _T.RESAMPLE_FWD: _rs.prepare_resample,
    _T.RESAMPLE_BWD: _rs.prepare_resample_bwd,
    _T.BLOCK_SCALE_QUANTIZE: _bs.prepare_block_scale_quantize,
    _T.BLOCK_SCALE_DEQUANTIZE: _bs.prepare_block_scale_dequantize,
    _T.MOE_GROUPED_MATMUL: _moe.prepare_moe_grouped_matmul,
    _T.MOE_GROUPED_MATMUL_BWD: _moe.prepare_moe_grouped_matmul_bwd,
}

#: node type -> ``prepare_<family>_writer(node) -> Writer or None`` (families with ``out=``)
TORCH_WRITERS: dict[hg.NodeType, Callable[[Any], Writer | None]] = {
    _T.MATMUL: _mm.prepare_matmul_writer,
    _T.CONVOLUTION_FPROP: _conv.prepare_conv_fprop_writer,
}

#: node types whose lowering checks its data on the host (MoE routes, a finite X to quantize):
#: run eagerly it synchronises, so a CUDA graph cannot capture it (the plans do not try)
TORCH_HOST_CHECKED: frozenset[hg.NodeType] = frozenset(
    {_T.BLOCK_SCALE_QUANTIZE, _T.MOE_GROUPED_MATMUL, _T.MOE_GROUPED_MATMUL_BWD}
)

#: node type -> ``<family>_refusal(node) -> reason or None``
TORCH_REFUSALS: dict[hg.NodeType, Callable[[Any], str | None]] = {
    _T.POINTWISE: _pw.pointwise_refusal,
    _T.MATMUL: _mm.matmul_refusal,
    _T.REDUCTION: _red.reduction_refusal,
    _T.CONVOLUTION_FPROP: _conv.conv_refusal,
    _T.CONVOLUTION_DGRAD: _conv.conv_refusal,
    _T.CONVOLUTION_WGRAD: _conv.conv_refusal,
    _T.BATCHNORM: _bn.batchnorm_refusal,
    _T.BATCHNORM_INFERENCE: _bn.batchnorm_refusal,
    _T.BATCHNORM_INFERENCE_VARIANCE_EXT: _bn.batchnorm_refusal,
    _T.BATCHNORM_BACKWARD: _bn.batchnorm_refusal,
    _T.LAYER_NORM: _norms.layernorm_refusal,
    _T.RMS_NORM: _norms.rmsnorm_refusal,
    _T.LAYERNORM_BACKWARD: _nb.layernorm_backward_refusal,
    _T.RMS_NORM_BACKWARD: _nb.rmsnorm_backward_refusal,
    _T.RESAMPLE_FWD: _rs.resample_refusal,
    _T.RESAMPLE_BWD: _rs.resample_bwd_refusal,
    _T.BLOCK_SCALE_QUANTIZE: _bs.block_scale_quantize_refusal,
    _T.BLOCK_SCALE_DEQUANTIZE: _bs.block_scale_dequantize_refusal,
    _T.MOE_GROUPED_MATMUL: _moe.moe_grouped_matmul_refusal,
    _T.MOE_GROUPED_MATMUL_BWD: _moe.moe_grouped_matmul_bwd_refusal,
    _T.CUSTOM_OP: _custom.custom_op_refusal,
}


def refusal(node: Any) -> str | None:
    """Why no torch lowering runs ``node`` (its family has none, or the family's rule refuses
    it), or None.

    Example:
        >>> import hipdnn_graph as hg
        >>> f = hg.DataType.FLOAT
        >>> g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
        >>> _ = g.pointwise(g.tensor(name="x", dim=[2]), mode=hg.PointwiseMode.EXP, name="e")
        >>> g.validate(); refusal(g.nodes[0]) is None
        True
    """
    kind = node.get_node_type()
    rule = TORCH_REFUSALS.get(kind)
    if rule is None:
        return f"no torch lowering for {kind.name} nodes (node '{node.name}')"
    return rule(node)
