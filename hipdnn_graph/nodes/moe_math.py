"""Where hipDNN defines the MoE grouped matmul's math, and the data checks a run makes.

hipDNN's CPU references (``CpuFpReferenceMoeGroupedMatmul`` and
``CpuFpReferenceMoeGroupedMatmulBwd`` in its test SDK) compute in FLOAT or DOUBLE and reject
offsets and routes they cannot place. These are facts about the operation, not about one
engine, so every engine that runs MoE nodes (the NumPy reference, the torch engines, a
third-party plugin) refuses and checks with these functions and raises the same messages.

Forward: the offsets ``FIRST_TOKEN_OFFSET`` split the routed rows into groups: group ``g`` owns
rows ``[offset[g], offset[g + 1])`` (the last group runs to the end; rows before the first
offset belong to none) and multiplies by expert ``g % experts``. Routed row ``r`` reads token row
``src`` and writes output row ``dst``: ``(r, r)`` for NONE, ``(TOKEN_INDEX[r], r)`` for GATHER,
``(r, TOKEN_INDEX[r] * top_k + TOKEN_KS[r])`` for SCATTER. Backward: one group per expert, the
first offset 0.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> F, I = hg.DataType.FLOAT, hg.DataType.INT32
    >>> g = hg.Graph(io_data_type=F, compute_data_type=F, intermediate_data_type=F)
    >>> out = g.moe_grouped_matmul(g.tensor(name="t", dim=[1, 3, 2]),
    ...                            g.tensor(name="w", dim=[2, 2, 1]),
    ...                            g.tensor(name="o", dim=[2, 1, 1], data_type=I), None, None)
    >>> g.validate()
    >>> src, dst, expert = moe_routes(g.nodes[0], {"FIRST_TOKEN_OFFSET": np.array([0, 2])},
    ...                               tokens=3, experts=2, out_rows=3)
    >>> src.tolist(), dst.tolist(), expert.tolist()
    ([0, 1, 2], [0, 1, 2], [0, 0, 1])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import HipdnnError
from ..types import DataType, ErrorCode, MoeGroupedMatmulMode
from .moe_grouped_matmul import MoeGroupedMatmulNode
from .moe_grouped_matmul_bwd import MoeGroupedMatmulBwdNode

__all__ = [
    "MOE_COMPUTE_TYPES",
    "check_offsets",
    "moe_grouped_matmul_bwd_refusal",
    "moe_grouped_matmul_refusal",
    "moe_routes",
    "routing_ints",
]

Array = np.ndarray[Any, Any]
#: the compute types hipDNN's MoE references compute in
MOE_COMPUTE_TYPES = frozenset({DataType.FLOAT, DataType.DOUBLE})


def _refusal(node: Any) -> str | None:
    data_type = DataType(node.attributes.compute_data_type)
    if data_type not in MOE_COMPUTE_TYPES:
        return f"compute type {data_type.name} (FLOAT or DOUBLE only)"
    return None


def moe_grouped_matmul_refusal(node: MoeGroupedMatmulNode) -> str | None:
    """Why hipDNN defines no math for ``node`` (``None`` when it does): a compute type other
    than FLOAT or DOUBLE. The reason does not name the node; engines prefix it.

    Example:
        >>> import hipdnn_graph as hg
        >>> node = hg.MoeGroupedMatmulNode(hg.MoeGroupedMatmulAttributes().set_name("m")
        ...                                .set_compute_data_type(hg.DataType.HALF))
        >>> moe_grouped_matmul_refusal(node)
        'compute type HALF (FLOAT or DOUBLE only)'
    """
    return _refusal(node)


def moe_grouped_matmul_bwd_refusal(node: MoeGroupedMatmulBwdNode) -> str | None:
    """Why hipDNN defines no math for ``node`` (``None`` when it does), as
    :func:`moe_grouped_matmul_refusal`.

    Example:
        >>> import hipdnn_graph as hg
        >>> node = hg.MoeGroupedMatmulBwdNode(hg.MoeGroupedMatmulBwdAttributes().set_name("m")
        ...                                   .set_compute_data_type(hg.DataType.DOUBLE))
        >>> moe_grouped_matmul_bwd_refusal(node) is None
        True
    """
    return _refusal(node)


def _invalid(node: Any, message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, f"node '{node.name}': {message}")


def routing_ints(node: Any, inputs: Mapping[str, Any], slot: str) -> Array:
    """An INT32 routing input as a flat int64 vector (its dims are ``[n, 1, 1]`` or
    ``[1, n, 1]``); integral floats are accepted.

    Raises:
        HipdnnError: ``INVALID_VALUE`` when the slot has no input or holds non-integers.

    Example:
        >>> import numpy as np, hipdnn_graph as hg
        >>> node = hg.MoeGroupedMatmulNode(hg.MoeGroupedMatmulAttributes().set_name("m"))
        >>> routing_ints(node, {"TOKEN_INDEX": np.array([[[2.0]], [[0.0]]])}, "TOKEN_INDEX")
        array([2, 0])
    """
    if slot not in inputs:
        raise _invalid(node, f"no input for {slot}")
    values = np.asarray(inputs[slot])
    if values.dtype.kind not in "iu":
        rounded = np.rint(values)
        if not np.array_equal(rounded, values):
            raise _invalid(node, f"{slot} holds values that are not integers")
        values = rounded
    return values.astype(np.int64).reshape(-1)


def check_offsets(node: Any, offsets: Array, rows: int, first_zero: bool) -> None:
    """hipDNN's offset checks: each in ``[0, rows]``, non-decreasing (and, for the backward,
    the first one 0: rows before the first expert would be dropped silently).

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the first offset that fails.

    Example:
        >>> import numpy as np, hipdnn_graph as hg
        >>> node = hg.MoeGroupedMatmulNode(hg.MoeGroupedMatmulAttributes().set_name("m"))
        >>> check_offsets(node, np.array([0, 3, 2]), 4, first_zero=False)
        Traceback (most recent call last):
        ...
        hipdnn_graph.errors.HipdnnError: ...must be non-decreasing (violated at 2)
    """
    bad = np.flatnonzero((offsets < 0) | (offsets > rows))
    if bad.size:
        g = int(bad[0])
        raise _invalid(
            node, f"FIRST_TOKEN_OFFSET[{g}] = {int(offsets[g])} is out of range [0, {rows}]"
        )
    falling = np.flatnonzero(np.diff(offsets) < 0)
    if falling.size:
        raise _invalid(
            node, f"FIRST_TOKEN_OFFSET must be non-decreasing (violated at {int(falling[0]) + 1})"
        )
    if first_zero and offsets.size and offsets[0] != 0:
        raise _invalid(node, f"FIRST_TOKEN_OFFSET[0] must be 0, got {int(offsets[0])}")


def _routes(
    node: MoeGroupedMatmulNode, inputs: Mapping[str, Any], tokens: int, experts: int
) -> tuple[Array, Array, Array]:
    """``(src, dst, expert)`` of every routed row some group owns."""
    a = node.attributes
    mode = a.get_mode()
    if mode == MoeGroupedMatmulMode.GATHER:
        index = routing_ints(node, inputs, "TOKEN_INDEX")
        routed = index.size
    else:
        routed = tokens
    offsets = routing_ints(node, inputs, "FIRST_TOKEN_OFFSET")
    check_offsets(node, offsets, routed, first_zero=False)
    rows = np.arange(routed, dtype=np.int64)
    group = np.searchsorted(offsets, rows, side="right") - 1  # the last group at or before r
    owned = group >= 0  # rows before the first offset belong to no group
    rows, group = rows[owned], group[owned]
    src, dst = rows, rows
    if mode == MoeGroupedMatmulMode.GATHER:
        src = index[rows]
    elif mode == MoeGroupedMatmulMode.SCATTER:
        index = routing_ints(node, inputs, "TOKEN_INDEX")
        ks = routing_ints(node, inputs, "TOKEN_KS")
        if index.size != tokens or ks.size != tokens:
            raise _invalid(
                node, "SCATTER mode requires the routed row count to equal the token row count"
            )
        top_k = a.get_top_k()
        bad = np.flatnonzero((ks[rows] < 0) | (ks[rows] >= top_k))
        if bad.size:
            r = int(rows[bad[0]])
            raise _invalid(node, f"TOKEN_KS[{r}] = {int(ks[r])} is out of range [0, {top_k})")
        dst = index[rows] * top_k + ks[rows]
    elif mode != MoeGroupedMatmulMode.NONE:
        raise HipdnnError(
            ErrorCode.GRAPH_NOT_SUPPORTED, f"node '{node.name}': routing mode {mode.name}"
        )
    return src, dst, group % experts


def moe_routes(
    node: MoeGroupedMatmulNode,
    inputs: Mapping[str, Any],
    tokens: int,
    experts: int,
    out_rows: int,
) -> tuple[Array, Array, Array]:
    """``(src, dst, expert)`` of every routed row some group owns, each checked as hipDNN's
    reference checks it (every engine checks its routes here, whatever it computes with).

    Args:
        node: The forward node (its mode and ``top_k`` are read).
        inputs: ``FIRST_TOKEN_OFFSET`` and the routing tensors the mode uses (``TOKEN_INDEX``,
            ``TOKEN_KS``), as host arrays; other entries are ignored.
        tokens: TOKEN's row count.
        experts: WEIGHT's expert count.
        out_rows: OUTPUT's row count.

    Returns:
        Three int64 vectors: the token row each routed row reads, the output row it writes, and
        its expert.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for offsets out of range or decreasing, a routed source
            or destination row outside its tensor, two SCATTER rows with one destination, a
            ``TOKEN_KS`` value outside ``[0, top_k)``, or a missing routing input;
            ``GRAPH_NOT_SUPPORTED`` for a routing mode other than NONE, GATHER or SCATTER.
    """
    src, dst, expert = _routes(node, inputs, tokens, experts)
    for values, bound, what in ((src, tokens, "source"), (dst, out_rows, "destination")):
        bad = np.flatnonzero((values < 0) | (values >= bound))
        if bad.size:
            raise _invalid(
                node, f"routed {what} row {int(values[bad[0]])} is out of range [0, {bound})"
            )
    taken, counts = np.unique(dst, return_counts=True)
    if np.any(counts > 1):
        raise _invalid(node, f"duplicate SCATTER destination row {int(taken[counts > 1][0])}")
    return src, dst, expert
