"""Which block-scale quantize and dequantize nodes hipDNN defines the math of.

hipDNN's CPU references (its test SDK, ``CpuFpReferenceBlockScaleQuantize.hpp`` @ dcccab94 and
``CpuReferenceBlockScaleDequantize.hpp`` @ 3669bd85, with
``CpuFpReferenceBlockScaleDequantize`` for the dims the block sizes apply to) compute in FLOAT or
DOUBLE, quantize into the Y and scale types listed here, and read a dequantize's ``block_size``
in two ways. What they leave undefined is a fact about the operation, not about one engine, so
every engine that runs these nodes (the NumPy reference, the torch engines, a third-party plugin)
refuses with these reasons, known before any data is seen:

* a compute type other than FLOAT or DOUBLE;
* a quantize Y type outside :data:`QUANTIZE_Y_TYPES` or scale type outside
  :data:`QUANTIZE_SCALE_TYPES`, or a SCALE of other dims than the blocks of X;
* a dequantize whose blocked dims the two reference versions read differently (one applies
  ``block_size`` to the trailing dims, the other to the dims where X and SCALE differ) or whose
  SCALE does not have the shape those block sizes give.

Example:
    >>> import hipdnn_graph as hg
    >>> f32 = hg.DataType.FLOAT
    >>> g = hg.Graph(io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)
    >>> y, s = g.block_scale_quantize(g.tensor(name="x", dim=[1, 4]), block_size=4)
    >>> _ = y.set_data_type(hg.DataType.INT4).set_output(True)
    >>> _ = s.set_data_type(hg.DataType.FP8_E8M0).set_output(True)
    >>> g.validate()
    >>> quantize_reason(g.nodes[0]).split(":")[0]
    'Y data type INT4'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..types import DataType
from .block_scale_dequantize import BlockScaleDequantizeNode
from .block_scale_quantize import BlockScaleQuantizeNode, block_axis

__all__ = [
    "BLOCK_SCALE_COMPUTE_TYPES",
    "QUANTIZE_SCALE_TYPES",
    "QUANTIZE_Y_TYPES",
    "block_scale_dequantize_refusal",
    "block_scale_quantize_refusal",
    "dequantize_block_sizes",
    "dequantize_reason",
    "quantize_reason",
]

_T = DataType

#: the compute types hipDNN's block-scale references compute in
BLOCK_SCALE_COMPUTE_TYPES = frozenset({_T.FLOAT, _T.DOUBLE})
#: the Y (and X) types hipDNN's quantize reference accepts (its ``IS_VALID_IO_TYPE_V``)
QUANTIZE_Y_TYPES = frozenset(
    {
        _T.FLOAT, _T.HALF, _T.BFLOAT16, _T.FP4_E2M1, _T.FP6_E2M3, _T.FP6_E3M2, _T.FP8_E4M3,
        _T.FP8_E4M3_FNUZ, _T.FP8_E5M2, _T.FP8_E5M2_FNUZ, _T.INT8, _T.UINT8, _T.INT32,
    }
)  # fmt: skip
#: the scale types hipDNN's quantize reference accepts (its ``IS_VALID_SCALE_TYPE_V``)
QUANTIZE_SCALE_TYPES = frozenset({_T.FLOAT, _T.HALF, _T.BFLOAT16, _T.FP8_E8M0})


def _compute_refusal(node: Any) -> str | None:
    data_type = node.attributes.get_compute_data_type()
    if data_type not in BLOCK_SCALE_COMPUTE_TYPES:
        return (
            f"compute data type {data_type.name}: hipDNN's block-scale references compute in "
            "FLOAT or DOUBLE only"
        )
    return None


def _type_refusal(tensor: Any, role: str, allowed: frozenset[DataType]) -> str | None:
    data_type = tensor.get_data_type()
    if data_type not in allowed:
        names = ", ".join(sorted(t.name for t in allowed))
        return f"{role} data type {data_type.name}: hipDNN's quantize reference takes {names}"
    return None


def _missing(tensors: dict[str, Any]) -> str | None:
    """The reason of a node not validated yet: a tensor missing."""
    missing = [slot for slot, tensor in tensors.items() if tensor is None]
    return f"no {' or '.join(missing)} tensor" if missing else None


def quantize_reason(node: BlockScaleQuantizeNode) -> str | None:
    """Why hipDNN defines no math for this quantize node (a compute type, Y type or scale
    type its reference does not take, or a SCALE of other dims than the blocks of X; for a
    node not validated yet, a tensor missing), or ``None``; the reason does not name the node.

    Example:
        >>> import hipdnn_graph as hg
        >>> f32 = hg.DataType.FLOAT
        >>> g = hg.Graph(io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)
        >>> y, s = g.block_scale_quantize(g.tensor(name="x", dim=[2, 64]), block_size=32)
        >>> _ = y.set_data_type(hg.DataType.FP8_E4M3).set_output(True)
        >>> _ = s.set_data_type(hg.DataType.FP8_E8M0).set_output(True)
        >>> g.validate()
        >>> quantize_reason(g.nodes[0]) is None
        True
    """
    a = node.attributes
    x_t, y_t, s_t = a.get_x(), a.get_y(), a.get_scale()
    missing = _missing({"X": x_t, "Y": y_t, "SCALE": s_t})
    if missing is not None or x_t is None or y_t is None or s_t is None:
        return missing
    reason = (
        _compute_refusal(node)
        or _type_refusal(y_t, "Y", QUANTIZE_Y_TYPES)
        or _type_refusal(s_t, "SCALE", QUANTIZE_SCALE_TYPES)
    )
    if reason:
        return reason
    dims, block = list(x_t.get_dim()), a.get_block_size()
    axis = block_axis(a.get_axis(), len(dims))
    if block is None or block <= 0 or not 0 <= axis < len(dims):
        return f"block_size {block} and axis {a.get_axis()} define no blocks of X"
    scale_dims = [*dims[:axis], math.ceil(dims[axis] / block), *dims[axis + 1 :]]
    if list(s_t.get_dim()) != scale_dims:
        return (
            f"SCALE dims {s_t.get_dim()} are not {scale_dims}, the blocks of X {dims} "
            "(hipDNN's reference refuses them)"
        )
    return None


def block_scale_quantize_refusal(node: BlockScaleQuantizeNode) -> str | None:
    """:func:`quantize_reason` naming the node (``node 'name': reason``), or ``None``."""
    reason = quantize_reason(node)
    return None if reason is None else f"node '{node.name}': {reason}"


def dequantize_block_sizes(
    node: BlockScaleDequantizeNode, x_dims: Sequence[int], s_dims: Sequence[int]
) -> list[int] | str:
    """Each dim of X's block size (1 where the dim is not blocked), where hipDNN's two readings
    of the node's ``block_size`` agree and SCALE has the dims those blocks give; else why not.

    Example:
        >>> import hipdnn_graph as hg
        >>> node = hg.BlockScaleDequantizeNode(
        ...     hg.BlockScaleDequantizeAttributes().set_name("d").set_block_size([32]))
        >>> dequantize_block_sizes(node, [4, 64], [4, 2])
        [1, 32]
        >>> dequantize_block_sizes(node, [2, 64, 32, 32], [2, 2, 32, 32]).split(" (")[1]
        'the trailing dims: [1, 1, 1, 32]; the dims where X and SCALE differ: [1, 32, 1, 1])'
    """
    blocks = node.attributes.get_block_size()
    rank = len(x_dims)
    if len(s_dims) != rank:
        return f"SCALE has rank {len(s_dims)}, X {rank}: hipDNN's reference needs one rank"
    if not blocks or len(blocks) > rank or min(blocks) <= 0:
        return f"block_size {blocks} does not give X's {rank} dims block sizes"
    trailing = [1] * (rank - len(blocks)) + list(blocks)
    differing = [d for d in range(rank) if x_dims[d] != s_dims[d]]
    by_shape = [1] * rank
    for d, size in zip(differing, blocks, strict=False):
        by_shape[d] = size
    if trailing != by_shape:
        return (
            f"hipDNN's references read block_size {blocks} for X {list(x_dims)} and SCALE "
            f"{list(s_dims)} differently (the trailing dims: {trailing}; the dims where X and "
            f"SCALE differ: {by_shape})"
        )
    expected = [math.ceil(n / b) for n, b in zip(x_dims, trailing, strict=True)]
    if list(s_dims) != expected:
        return f"SCALE dims {list(s_dims)} are not {expected}, the blocks of X {list(x_dims)}"
    return trailing


def dequantize_reason(node: BlockScaleDequantizeNode) -> str | None:
    """Why hipDNN defines no math for this dequantize node (a compute type its references do
    not compute in, or block sizes :func:`dequantize_block_sizes` refuses; for a node not
    validated yet, a tensor missing), or ``None``; the reason does not name the node.

    Example:
        >>> import hipdnn_graph as hg
        >>> dequantize_reason(hg.BlockScaleDequantizeNode(hg.BlockScaleDequantizeAttributes()))
        'no X or SCALE tensor'
    """
    a = node.attributes
    x_t, s_t = a.get_x(), a.get_scale()
    missing = _missing({"X": x_t, "SCALE": s_t})
    if missing is not None or x_t is None or s_t is None:
        return missing
    sizes = dequantize_block_sizes(node, x_t.get_dim(), s_t.get_dim())
    return _compute_refusal(node) or (sizes if isinstance(sizes, str) else None)


def block_scale_dequantize_refusal(node: BlockScaleDequantizeNode) -> str | None:
    """:func:`dequantize_reason` naming the node (``node 'name': reason``), or ``None``."""
    reason = dequantize_reason(node)
    return None if reason is None else f"node '{node.name}': {reason}"
