"""The block-scale lowerings: MX quantize (``Y``, ``SCALE``) and dequantize (``Y``), bit for bit
the NumPy reference's math (:mod:`hipdnn_graph_numpy_reference.families.block_scale`, hipDNN's
CPU references), in the compute type (FLOAT or DOUBLE, as hipDNN's references compute).

* quantize: per block of ``block_size`` elements along ``axis``, ``amax = max |x|``;
  ``SCALE`` is ``amax / max(Y type)`` (in float64) rounded **up** to the scale type (the torch
  cast, then one bit pattern up where it fell below, for E8M0 twice the power of two;
  E8M0's least value 2^-127 for an all-zero block); ``Y = x / SCALE`` (0 where the scale is
  0), clamped to the Y type's range and rounded to nearest, ties to even (integer types:
  ``torch.round``, the limits where clamped). A DOUBLE quotient rounds to HALF through float32
  rounded to odd, so it rounds once, as NumPy's float64-to-float16 cast does (torch's own cast
  rounds twice);
* dequantize: ``Y = X · SCALE`` (or ``X · 2^(−SCALE)`` with ``is_negative_scale``), each SCALE
  element repeated over its block.

What hipDNN leaves undefined, these refuse with the reason the NumPy reference gives too (the
core's, :mod:`hipdnn_graph.nodes.block_scale_math`); types torch has no dtype for (FP4_E2M1
one element per byte, FP6_E2M3, FP6_E3M2) are refused by name. A non-finite X to quantize raises
``GRAPH_NOT_SUPPORTED`` eagerly (one host synchronisation); under ``torch.compile`` the check is
a :data:`~._common.CHECK` result instead.

Example:
    >>> import torch, hipdnn_graph as hg
    >>> f32 = hg.DataType.FLOAT
    >>> g = hg.Graph(io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)
    >>> y, s = g.block_scale_quantize(g.tensor(name="x", dim=[1, 4]), block_size=4)
    >>> _ = y.set_data_type(hg.DataType.FP8_E4M3).set_output(True)
    >>> _ = s.set_data_type(hg.DataType.FP8_E8M0).set_output(True)
    >>> g.validate()
    >>> out = prepare_block_scale_quantize(g.nodes[0])({"X": torch.tensor([[1., -2., 448., 0.]])})
    >>> out["SCALE"].float().tolist(), out["Y"].float().tolist()
    ([[1.0]], [[1.0, -2.0, 448.0, 0.0]])
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import hipdnn_graph as hg
from hipdnn_graph.nodes.block_scale_math import (
    block_scale_dequantize_refusal as _math_dequantize_refusal,
)
from hipdnn_graph.nodes.block_scale_math import (
    block_scale_quantize_refusal as _math_quantize_refusal,
)
from hipdnn_graph.nodes.block_scale_quantize import block_axis

from ._common import (
    CHECK,
    Prepared,
    TorchFamily,
    compiling,
    compute_dtype,
    tensor_dtype,
    torch_type_refusal,
)

__all__ = [
    "FAMILIES",
    "block_scale_dequantize_refusal",
    "block_scale_quantize_refusal",
    "prepare_block_scale_dequantize",
    "prepare_block_scale_quantize",
]

#: bit-pattern integer type of each storage width (bytes), for the round-up step
_BITS = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def block_scale_quantize_refusal(node: hg.BlockScaleQuantizeNode) -> str | None:
    """Why the lowering cannot run this quantize node (hipDNN's reasons, then types
    torch lacks), or None."""
    return _math_quantize_refusal(node) or torch_type_refusal(node)


def block_scale_dequantize_refusal(node: hg.BlockScaleDequantizeNode) -> str | None:
    """Why the lowering cannot run this dequantize node, or None."""
    return _math_dequantize_refusal(node) or torch_type_refusal(node)


def _limits(torch: Any, dtype: Any) -> tuple[float, float]:
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    return float(info.min), float(info.max)


def _round_up(torch: Any, wanted: Any, dtype: Any) -> Any:
    """hipDNN's ``quantizeRoundUp``: each (non-negative, float64) value as the least value of
    ``dtype`` not below it, saturating at its largest (E8M0: at least 2^-127)."""
    info = torch.finfo(dtype)
    wanted = torch.clamp(wanted, max=float(info.max))
    rounded = wanted.to(dtype)
    if dtype == getattr(torch, "float8_e8m0fnu", None):  # powers of two: one up is twice
        wanted = torch.clamp(wanted, min=float(info.tiny))
        rounded = wanted.to(dtype).to(torch.float64)  # (Inductor cannot bitcast E8M0)
        return torch.where(rounded < wanted, rounded * 2, rounded).to(dtype)
    below = rounded.to(torch.float64) < wanted
    bits = rounded.view(getattr(torch, _BITS[dtype.itemsize]))
    return torch.where(below, bits + 1, bits).to(bits.dtype).view(dtype)


def _round_once_to_half(torch: Any, q: Any) -> Any:
    """A float64 tensor rounded once to float16 (nearest, ties to even): through float32
    rounded to odd, which float16's rounding then cannot turn into a false tie."""
    f = q.to(torch.float32)
    bits = f.view(torch.int32)
    bits = torch.where(f.abs().to(torch.float64) > q.abs(), bits - 1, bits)  # toward zero
    bits = torch.where(bits.view(torch.float32).to(torch.float64) != q, bits | 1, bits)
    return bits.view(torch.float32).to(torch.float16)


def _to_storage(torch: Any, q: Any, dtype: Any, low: float, high: float) -> Any:
    """``q`` (clamped, in the compute type) rounded to the storage type, as the reference."""
    if not dtype.is_floating_point:
        lo = torch.full((), low, dtype=q.dtype, device=q.device)  # (a kernel: capturable)
        hi = torch.full((), high, dtype=q.dtype, device=q.device)
        middle = torch.clamp(torch.round(q), lo, hi).to(torch.float64).to(torch.int64)
        info = torch.iinfo(dtype)
        out = torch.where(q <= lo, info.min, torch.where(q >= hi, info.max, middle))
        return out.to(dtype)
    if q.dtype == torch.float64 and dtype == torch.float16:
        return _round_once_to_half(torch, q)
    return q.to(dtype)


def _finite_error(node: Any) -> hg.HipdnnError:
    return hg.HipdnnError(
        hg.ErrorCode.GRAPH_NOT_SUPPORTED,
        f"{type(node).__name__} '{node.name}': the torch lowering does not run it: X holds NaN or "
        "±inf, which hipDNN's quantize reference refuses",
    )


def prepare_block_scale_quantize(node: hg.BlockScaleQuantizeNode) -> Prepared:
    """Y and SCALE of a quantize node, its blocks and types read now."""
    import torch

    a = node.attributes
    x_t, y_t, s_t = a.get_x(), a.get_y(), a.get_scale()
    assert x_t is not None and y_t is not None and s_t is not None
    compute = compute_dtype(node)
    y_dtype, s_dtype = tensor_dtype(y_t), tensor_dtype(s_t)
    block = a.get_block_size()
    assert block is not None
    dims = list(x_t.dim)
    axis = block_axis(a.get_axis(), len(dims))
    count = math.ceil(dims[axis] / block)
    pad = count * block - dims[axis]
    low, high = _limits(torch, y_dtype)
    low_c = float(torch.tensor(low, dtype=compute))  # the limits as the compute type holds them
    high_c = float(torch.tensor(high, dtype=compute))

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        x = inputs["X"].to(compute)
        finite = torch.isfinite(x).all()
        if not compiling() and not bool(finite):
            raise _finite_error(node)
        moved = torch.movedim(x, axis, -1)
        padded = torch.nn.functional.pad(moved, (0, pad)) if pad else moved
        blocks = padded.reshape(*moved.shape[:-1], count, block)
        amax = blocks.abs().amax(dim=-1)
        scale = _round_up(torch, amax.to(torch.float64) / high, s_dtype)
        divisor = scale.to(compute).unsqueeze(-1)
        nonzero = divisor != 0
        safe = torch.where(nonzero, divisor, torch.ones_like(divisor))
        quotient = torch.where(nonzero, blocks / safe, torch.zeros_like(blocks))
        clamped = torch.clamp(quotient, low_c, high_c)
        y = _to_storage(torch, clamped, y_dtype, low_c, high_c)
        y = y.reshape(*moved.shape[:-1], count * block)[..., : moved.shape[-1]]
        out = {"Y": torch.movedim(y, -1, axis), "SCALE": torch.movedim(scale, -1, axis)}
        if compiling():
            out[CHECK] = finite
        return out

    return run


def prepare_block_scale_dequantize(node: hg.BlockScaleDequantizeNode) -> Prepared:
    """Y of a dequantize node, its block sizes read now."""
    import torch

    a = node.attributes
    x_t, s_t = a.get_x(), a.get_scale()
    assert x_t is not None and s_t is not None
    compute = compute_dtype(node)
    blocks = list(a.get_block_size())
    dims = list(x_t.dim)
    sizes = [1] * (len(dims) - len(blocks)) + blocks  # the trailing dims (the refusal checked)
    negative = a.get_is_negative_scale()

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        x, spread = inputs["X"].to(compute), inputs["SCALE"].to(compute)
        for axis, size in enumerate(sizes):  # each scale element over its block
            if size > 1:
                spread = torch.repeat_interleave(spread, size, dim=axis)
        spread = spread[tuple(slice(0, n) for n in dims)]
        if negative:
            spread = torch.pow(torch.full((), 2.0, dtype=compute, device=x.device), -spread)
        return {"Y": x * spread}

    return run


#: the node types this module lowers, as the package collects them
FAMILIES = (
    TorchFamily(
        hg.NodeType.BLOCK_SCALE_QUANTIZE,
        prepare_block_scale_quantize,
        block_scale_quantize_refusal,
        host_checked=True,
    ),
    TorchFamily(
        hg.NodeType.BLOCK_SCALE_DEQUANTIZE,
        prepare_block_scale_dequantize,
        block_scale_dequantize_refusal,
    ),
)
