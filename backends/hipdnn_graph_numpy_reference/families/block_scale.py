"""The block-scale references: MX quantize (``run_block_scale_quantize``) and dequantize
(``run_block_scale_dequantize``) as hipDNN's CPU references define them (its test SDK,
``hipdnn_test_sdk/utilities/CpuFpReferenceBlockScaleQuantize.hpp`` @ dcccab94 and
``CpuReferenceBlockScaleDequantize.hpp`` @ 3669bd85, with ``CpuFpReferenceBlockScaleDequantize``
for the dims the block sizes apply to):

* quantize: X is cut into blocks of ``block_size`` consecutive elements along ``axis`` (the last
  dim when unset; a last, shorter block where the dim is not a multiple). Per block, in the
  compute type, ``amax = max |x|``; ``SCALE = round_up(amax / max(Y type))``, the quotient taken
  in double and rounded **up** to the scale type (the least value of that type not below it,
  saturating at its largest; E8M0 has no zero, so an all-zero block's scale is 2^-127);
  ``Y = x / SCALE`` in the compute type (0 where the scale is 0), clamped to the Y type's range,
  then rounded to the Y type: to nearest, ties to even (integer types: ``nearbyint``, the limits
  where clamped);
* dequantize: ``Y = X · SCALE[block of the element]``, or ``X · 2^(−SCALE)`` with
  ``is_negative_scale``, in the compute type; ``block_size[i]`` elements of X share a scale
  element along the i-th blocked dim.

What hipDNN leaves undefined is refused with ``GRAPH_NOT_SUPPORTED`` naming why (the reasons known
before any data is seen are the core's, :mod:`hipdnn_graph.nodes.block_scale_math`): a compute type
other than FLOAT or DOUBLE (its references compute in those); a quantize Y type or scale type
outside the lists its quantize reference accepts; NaN or ±inf in a quantized X (its reference
refuses them); a dequantize whose blocked dims its two reference versions read differently
(one applies ``block_size`` to the trailing dims, the other to the dims where X and SCALE
differ) or whose SCALE does not have the shape those block sizes give.

The quantized outputs (quantize's Y and SCALE) are returned in their storage types: rounding into
them is the operation itself, so an engine's cast to storage is the identity. Dequantize's Y is
returned in the compute type.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> f32 = hg.DataType.FLOAT
    >>> g = hg.Graph(io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)
    >>> y, s = g.block_scale_quantize(g.tensor(name="x", dim=[1, 4]), block_size=4)
    >>> _ = y.set_data_type(hg.DataType.FP8_E4M3).set_output(True)
    >>> _ = s.set_data_type(hg.DataType.FP8_E8M0).set_output(True)
    >>> g.validate()
    >>> out = run_block_scale_quantize(g.nodes[0], {"X": np.array([[1.0, -2.0, 448.0, 0.0]])})
    >>> out["SCALE"].astype(float).tolist(), out["Y"].astype(float).tolist()
    ([[1.0]], [[1.0, -2.0, 448.0, 0.0]])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import ml_dtypes
import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.backend.dtypes import numpy_dtype
from hipdnn_graph.nodes.block_scale_math import (
    BLOCK_SCALE_COMPUTE_TYPES,
    QUANTIZE_SCALE_TYPES,
    QUANTIZE_Y_TYPES,
    block_scale_dequantize_refusal,
    block_scale_quantize_refusal,
    dequantize_block_sizes,
    dequantize_reason,
    quantize_reason,
)
from hipdnn_graph.nodes.block_scale_quantize import block_axis

from ._common import ReferenceFamily

# the type lists and the refusals are hipdnn_graph.nodes.block_scale_math's (the core's: every
# engine refuses by them), re-exported here where they were first defined
__all__ = [
    "FAMILIES",
    "QUANTIZE_SCALE_TYPES",
    "QUANTIZE_Y_TYPES",
    "block_scale_dequantize_refusal",
    "block_scale_quantize_refusal",
    "round_up_to",
    "run_block_scale_dequantize",
    "run_block_scale_quantize",
]

Array = np.ndarray[Any, Any]

#: the NumPy dtype of each compute type hipDNN's block-scale references compute in
_COMPUTE: dict[hg.DataType, np.dtype[Any]] = {t: numpy_dtype(t) for t in BLOCK_SCALE_COMPUTE_TYPES}
_E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_finfo: Any = ml_dtypes.finfo  # (untyped) the limits of NumPy's and ml_dtypes' float types


def _refuse(node: Any, why: str) -> hg.HipdnnError:
    return hg.HipdnnError(
        hg.ErrorCode.GRAPH_NOT_SUPPORTED,
        f"{type(node).__name__} '{node.name}': the NumPy reference does not run it: {why}",
    )


def _operand(node: Any, inputs: Mapping[str, Any], slot: str, dims: Sequence[int]) -> Array:
    value = inputs.get(slot)
    if value is None:
        raise hg.HipdnnError(hg.ErrorCode.INVALID_VALUE, f"node '{node.name}': no {slot} given")
    array = np.asarray(value)
    if list(array.shape) != list(dims):
        raise hg.HipdnnError(
            hg.ErrorCode.INVALID_VALUE,
            f"node '{node.name}': {slot} has shape {list(array.shape)}, the tensor's dims are "
            f"{list(dims)}",
        )
    return array


def round_up_to(values: Array, dtype: np.dtype[Any]) -> Array:
    """hipDNN's ``quantizeRoundUp``: each value (not negative) as the least value of ``dtype``
    not below it, or ``dtype``'s largest where it is above that (E8M0, which has no zero, gives
    2^-127 for every value up to 2^-127).

    Example:
        >>> import ml_dtypes
        >>> e8m0 = np.dtype(ml_dtypes.float8_e8m0fnu)
        >>> round_up_to(np.array([0.0, 0.3, 0.5, 3.0, 1e40]), e8m0).astype(float).tolist()
        [5.877471754111438e-39, 0.5, 0.5, 4.0, 1.7014118346046923e+38]
    """
    info = _finfo(dtype)
    wanted = np.minimum(np.asarray(values, np.float64), float(info.max))
    if dtype == _E8M0:
        wanted = np.maximum(wanted, float(info.tiny))
    rounded = wanted.astype(dtype)
    below = rounded.astype(np.float64) < wanted
    if below.any():  # one step up: the next bit pattern of a non-negative value
        bits = rounded.view(_BITS[dtype.itemsize]).copy()
        bits[below] += 1
        rounded = bits.view(dtype)
    return rounded


def _limits(dtype: np.dtype[Any]) -> tuple[float, float]:
    """(lowest, largest) of a storage type."""
    if np.issubdtype(dtype, np.integer):
        ints = np.iinfo(dtype)
        return float(ints.min), float(ints.max)
    floats = _finfo(dtype)
    return float(floats.min), float(floats.max)


def _to_storage(q: Array, dtype: np.dtype[Any], compute: np.dtype[Any]) -> Array:
    """``q`` (clamped, in the compute type) rounded to the storage type ``dtype``."""
    if not np.issubdtype(dtype, np.integer):
        return q.astype(dtype)  # round to nearest, ties to even
    ints = np.iinfo(dtype)
    low, high = compute.type(ints.min), compute.type(ints.max)
    middle = np.clip(np.rint(q), low, high).astype(np.float64).astype(np.int64)
    out = np.where(q <= low, ints.min, np.where(q >= high, ints.max, middle))
    return out.astype(dtype)


def _checked_compute(node: Any, reason: str | None) -> np.dtype[Any]:
    """The node's compute dtype, once its refusal ``reason`` is ``None`` (the reference runs it).

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` naming ``reason`` otherwise.
    """
    if reason is not None:
        raise _refuse(node, reason)
    return _COMPUTE[node.attributes.get_compute_data_type()]


def run_block_scale_quantize(node: Any, inputs: Mapping[str, Any]) -> dict[str, Array]:
    """Y and SCALE of a block-scale quantize node from ``inputs["X"]`` (see the module).

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for what hipDNN leaves undefined (the module lists
            it); ``INVALID_VALUE`` for an X missing or of other dims than the tensor's.
    """
    a = node.attributes
    compute = _checked_compute(node, quantize_reason(node))
    y_dtype = numpy_dtype(a.get_y().get_data_type())
    s_dtype = numpy_dtype(a.get_scale().get_data_type())
    x = _operand(node, inputs, "X", a.get_x().get_dim()).astype(compute)  # a copy of X
    if not np.isfinite(x).all():
        raise _refuse(node, "X holds NaN or ±inf, which hipDNN's quantize reference refuses")
    block = a.get_block_size()
    axis = block_axis(a.get_axis(), x.ndim)
    count = math.ceil(x.shape[axis] / block)
    # blocks on the last axis: [..., count, block], the short last block padded with zeros
    moved = np.moveaxis(x, axis, -1)
    pad = count * block - moved.shape[-1]
    blocks = np.pad(moved, [(0, 0)] * (moved.ndim - 1) + [(0, pad)]).reshape(
        *moved.shape[:-1], count, block
    )
    amax = np.abs(blocks).max(axis=-1)
    low, high = _limits(y_dtype)
    scale = round_up_to(amax.astype(np.float64) / high, s_dtype)
    divisor = scale.astype(compute)[..., None]
    safe = np.where(divisor != 0, divisor, compute.type(1))
    quotient = np.where(divisor != 0, blocks / safe, compute.type(0)).astype(compute)
    clamped = np.clip(quotient, compute.type(low), compute.type(high))
    y = _to_storage(clamped, y_dtype, compute).reshape(*moved.shape[:-1], count * block)
    y = np.moveaxis(y[..., : moved.shape[-1]], -1, axis)
    return {
        "Y": np.ascontiguousarray(y),
        "SCALE": np.ascontiguousarray(np.moveaxis(scale, -1, axis)),
    }


def run_block_scale_dequantize(node: Any, inputs: Mapping[str, Any]) -> dict[str, Array]:
    """Y of a block-scale dequantize node from ``inputs["X"]`` and ``inputs["SCALE"]`` (see the
    module), in the compute type.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for what hipDNN leaves undefined (the module lists
            it); ``INVALID_VALUE`` for an input missing or of other dims than its tensor's.
    """
    a = node.attributes
    compute = _checked_compute(node, dequantize_reason(node))
    x = _operand(node, inputs, "X", a.get_x().get_dim()).astype(compute)
    scale = _operand(node, inputs, "SCALE", a.get_scale().get_dim()).astype(compute)
    sizes = dequantize_block_sizes(node, x.shape, scale.shape)
    assert not isinstance(sizes, str)  # the dims are the tensors', checked above
    spread = scale
    for axis, size in enumerate(sizes):  # each scale element over its block
        if size > 1:
            spread = np.repeat(spread, size, axis=axis)
    spread = spread[tuple(slice(0, n) for n in x.shape)]
    if a.get_is_negative_scale():
        spread = np.power(compute.type(2), -spread)
    return {"Y": (x * spread).astype(compute)}


#: the node types this module runs, as the package collects them
FAMILIES = (
    ReferenceFamily(
        hg.NodeType.BLOCK_SCALE_QUANTIZE, run_block_scale_quantize, block_scale_quantize_refusal
    ),
    ReferenceFamily(
        hg.NodeType.BLOCK_SCALE_DEQUANTIZE,
        run_block_scale_dequantize,
        block_scale_dequantize_refusal,
    ),
)
