"""The pointwise lowering: every :class:`~hipdnn_graph.PointwiseMode` as eager torch ops.

Inputs broadcast to OUT_0's dims from the right, as hipDNN's rule
(:func:`hipdnn_graph.nodes.pointwise.broadcast_compatible`) allows; the result is computed in
the node's compute type (comparisons and logic give booleans) and broadcast to OUT_0's dims.

Conventions (cuDNN's, which hipDNN follows):

* the ``*_BWD`` modes take the incoming gradient in ``IN_0`` and the forward input in ``IN_1``
  and return ``IN_0 * f'(IN_1)``;
* ``BINARY_SELECT`` returns ``IN_0`` where ``IN_2`` is non-zero, else ``IN_1``;
* ``ADD_SQUARE`` is ``IN_0 + IN_1²``; ``GEN_INDEX`` is the index along ``axis``;
* ``RELU_FWD`` clips below at ``relu_lower_clip`` (0 unless set) with slope
  ``relu_lower_clip_slope`` (0) and above at ``relu_upper_clip`` (no clip);
  ``ELU`` takes ``elu_alpha`` (1), ``SOFTPLUS`` ``softplus_beta`` (1), ``SWISH`` ``swish_beta`` (1).

Example:
    >>> import torch, hipdnn_graph as hg
    >>> f = hg.DataType.FLOAT
    >>> g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
    >>> y = g.pointwise(g.tensor(name="x", dim=[3]), mode=hg.PointwiseMode.RELU_FWD, name="r")
    >>> g.validate()
    >>> prepare_pointwise(g.nodes[0])({"IN_0": torch.tensor([-1.0, 0.5, 2.0])})["OUT_0"]
    tensor([0.0000, 0.5000, 2.0000])
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import hipdnn_graph as hg

from ._common import FLOATING, LOW_PRECISION, Prepared, TorchFamily, compute_dtype, dtype_refusal

__all__ = ["FAMILIES", "pointwise_refusal", "prepare_pointwise"]

M = hg.PointwiseMode
_SLOTS = ("IN_0", "IN_1", "IN_2")
#: storage types a pointwise node reads and writes
STORAGE = FLOATING | {
    hg.DataType.INT8, hg.DataType.UINT8, hg.DataType.INT32, hg.DataType.INT64, hg.DataType.BOOLEAN
}  # fmt: skip
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
#: modes that are one torch kernel, which computes 16-bit operands in float32 and rounds once:
#: with operands and result of one 16-bit type and a FLOAT compute type they run uncast
_ONE_KERNEL = frozenset({
    M.ABS, M.CEIL, M.ELU_FWD, M.ERF, M.EXP, M.FLOOR, M.GELU_APPROX_TANH_FWD, M.GELU_FWD,
    M.IDENTITY, M.LOG, M.NEG, M.RECIPROCAL, M.RELU_FWD, M.RSQRT, M.SIGMOID_FWD, M.SIN,
    M.SOFTPLUS_FWD, M.SQRT, M.SWISH_FWD, M.TAN, M.TANH_FWD, M.ADD, M.DIV, M.MAX, M.MIN,
    M.MUL, M.SUB,
})  # fmt: skip


def _param(value: float | None, default: float) -> float:
    return default if value is None else float(value)


def _gelu_tanh_inner(torch: Any, x: Any) -> Any:
    return _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)


def _modes(a: hg.PointwiseAttributes, out_dims: list[int]) -> dict[M, Callable[..., Any]]:
    """Each mode's function of the (compute-type) operands; parameters read now."""
    import torch
    import torch.nn.functional as F

    lower = _param(a.relu_lower_clip, 0.0)
    upper = a.relu_upper_clip
    slope = _param(a.relu_lower_clip_slope, 0.0)
    alpha = _param(a.elu_alpha, 1.0)
    sp_beta = _param(a.softplus_beta, 1.0)
    sw_beta = _param(a.swish_beta, 1.0)
    axis = 0 if a.axis is None else a.axis  # GEN_INDEX without an axis is refused

    def relu(x: Any) -> Any:
        if slope == 0.0:  # max(x, lower), clipped above: one kernel
            return torch.clamp(x, min=lower, max=None if upper is None else float(upper))
        y = torch.where(x > lower, x, lower + slope * (x - lower))
        return y if upper is None else torch.clamp(y, max=float(upper))

    def relu_bwd(dy: Any, x: Any) -> Any:
        grad = torch.where(x > lower, torch.ones_like(x), torch.full_like(x, slope))
        if upper is not None:
            grad = torch.where(x < float(upper), grad, torch.zeros_like(x))
        return dy * grad

    def gelu_bwd(dy: Any, x: Any) -> Any:
        cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
        pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        return dy * (cdf + x * pdf)

    def gelu_tanh_bwd(dy: Any, x: Any) -> Any:
        t = torch.tanh(_gelu_tanh_inner(torch, x))
        inner_grad = _SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * x * x)
        return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * inner_grad)

    def swish_bwd(dy: Any, x: Any) -> Any:
        s = torch.sigmoid(sw_beta * x)
        return dy * (s + sw_beta * x * s * (1.0 - s))

    def gen_index(x: Any) -> Any:
        rank = len(out_dims)
        ax = axis if axis >= 0 else axis + rank
        shape = [1] * rank
        shape[ax] = out_dims[ax]
        index = torch.arange(out_dims[ax], device=x.device, dtype=x.dtype)
        return index.reshape(shape).expand(out_dims)

    def nonzero(x: Any) -> Any:
        return x != 0

    return {
        M.ABS: torch.abs,
        M.CEIL: torch.ceil,
        M.ELU_FWD: lambda x: F.elu(x, alpha=alpha),
        M.ERF: torch.erf,
        M.EXP: torch.exp,
        M.FLOOR: torch.floor,
        M.GELU_APPROX_TANH_FWD: lambda x: F.gelu(x, approximate="tanh"),
        M.GELU_FWD: F.gelu,
        M.GEN_INDEX: gen_index,
        M.IDENTITY: lambda x: x,
        M.LOG: torch.log,
        M.LOGICAL_NOT: lambda x: torch.logical_not(nonzero(x)),
        M.NEG: torch.neg,
        M.RECIPROCAL: torch.reciprocal,
        M.RELU_FWD: relu,
        M.RSQRT: torch.rsqrt,
        M.SIGMOID_FWD: torch.sigmoid,
        M.SIN: torch.sin,
        M.SOFTPLUS_FWD: lambda x: F.softplus(x, beta=sp_beta),
        M.SQRT: torch.sqrt,
        M.SWISH_FWD: F.silu if sw_beta == 1.0 else lambda x: x * torch.sigmoid(sw_beta * x),
        M.TAN: torch.tan,
        M.TANH_FWD: torch.tanh,
        M.ADD: torch.add,
        M.ADD_SQUARE: lambda x, b: x + b * b,
        M.CMP_EQ: torch.eq,
        M.CMP_GE: torch.ge,
        M.CMP_GT: torch.gt,
        M.CMP_LE: torch.le,
        M.CMP_LT: torch.lt,
        M.CMP_NEQ: torch.ne,
        M.DIV: torch.div,
        M.ELU_BWD: lambda dy, x: dy * torch.where(x > 0, torch.ones_like(x), alpha * torch.exp(x)),
        M.GELU_APPROX_TANH_BWD: gelu_tanh_bwd,
        M.GELU_BWD: gelu_bwd,
        M.LOGICAL_AND: lambda x, b: torch.logical_and(nonzero(x), nonzero(b)),
        M.LOGICAL_OR: lambda x, b: torch.logical_or(nonzero(x), nonzero(b)),
        M.MAX: torch.maximum,
        M.MIN: torch.minimum,
        M.MUL: torch.mul,
        M.RELU_BWD: relu_bwd,
        M.SIGMOID_BWD: lambda dy, x: dy * torch.sigmoid(x) * (1.0 - torch.sigmoid(x)),
        M.SOFTPLUS_BWD: lambda dy, x: dy * torch.sigmoid(sp_beta * x),
        M.SUB: torch.sub,
        M.SWISH_BWD: swish_bwd,
        M.TANH_BWD: lambda dy, x: dy * (1.0 - torch.tanh(x) ** 2),
        M.BINARY_SELECT: lambda x, b, t: torch.where(nonzero(t), x, b),
    }


def pointwise_refusal(node: hg.PointwiseNode) -> str | None:
    """Why the lowering cannot run this node, or None."""
    reason = dtype_refusal(node, STORAGE)
    if reason is None and node.attributes.mode == M.GEN_INDEX and node.attributes.axis is None:
        reason = f"node '{node.name}': GEN_INDEX needs an axis"
    return reason


def prepare_pointwise(node: hg.PointwiseNode) -> Prepared:
    """The node's lowering with its mode and parameters read now."""
    import torch

    a = node.attributes
    out = a.get_output_0()
    assert out is not None
    dims = list(out.dim)
    fn = _modes(a, dims)[a.mode]
    compute = compute_dtype(node)
    tensors = a.tensors_by_slot()
    slots = [s for s in _SLOTS if s in tensors]
    types = {t.data_type for t in tensors.values()}
    if (
        a.mode in _ONE_KERNEL
        and node.attributes.compute_data_type == hg.DataType.FLOAT
        and len(types) == 1
        and types <= LOW_PRECISION
        and not (a.mode == M.RELU_FWD and _param(a.relu_lower_clip_slope, 0.0) != 0.0)
        and not (a.mode == M.SWISH_FWD and _param(a.swish_beta, 1.0) != 1.0)
    ):
        compute = None  # torch computes one 16-bit kernel in float32 and rounds once

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        args = []
        for s in slots:
            v = inputs[s]
            args.append(v.to(compute) if compute is not None and isinstance(v, torch.Tensor) else v)
        y = fn(*args)
        return {"OUT_0": torch.broadcast_to(y, dims)}

    return run


#: the node types this module lowers, as the package collects them
FAMILIES = (TorchFamily(hg.NodeType.POINTWISE, prepare_pointwise, pointwise_refusal),)
