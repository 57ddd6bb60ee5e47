"""NumPy reference of the MoE grouped matmul and its weight gradient, as hipDNN defines them
(its CPU references ``CpuFpReferenceMoeGroupedMatmul`` and ``CpuFpReferenceMoeGroupedMatmulBwd``).

Forward: the offsets ``FIRST_TOKEN_OFFSET`` (``[G, 1, 1]``, laid out batch-major, expert-minor)
split the routed rows into groups: group ``g`` owns rows ``[offset[g], offset[g + 1])`` (the last
group runs to the end) and multiplies by expert ``g % experts``. Routed row ``r`` reads token row
``src`` and writes output row ``dst``:

========  ==================  =======================================
mode      ``src``             ``dst``
========  ==================  =======================================
NONE      ``r``               ``r``
GATHER    ``TOKEN_INDEX[r]``  ``r``
SCATTER   ``r``               ``TOKEN_INDEX[r] * top_k + TOKEN_KS[r]``
========  ==================  =======================================

``OUTPUT[0, dst, :] = TOKEN[0, src, :] @ WEIGHT[expert]``; rows no group writes are zero.

Backward: one group per expert (``FIRST_TOKEN_OFFSET`` is ``[experts, 1, 1]``, its first offset
0); ``DWEIGHT[e] = TOKEN[0, rows(e)]^T @ DOUTPUT[0, rows(e)]``.

Routing tensors and ``top_k`` a mode does not use are ignored (hipDNN's packer does not hand them
to the backend). Offsets or routes that hipDNN's references reject are refused with
``INVALID_VALUE`` naming the value; a compute type other than FLOAT or DOUBLE with
``GRAPH_NOT_SUPPORTED``.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> F, I = hg.DataType.FLOAT, hg.DataType.INT32
    >>> g = hg.Graph(io_data_type=F, compute_data_type=F, intermediate_data_type=F)
    >>> out = g.moe_grouped_matmul(g.tensor(name="t", dim=[1, 3, 2]),
    ...                            g.tensor(name="w", dim=[2, 2, 1]),
    ...                            g.tensor(name="o", dim=[2, 1, 1], data_type=I), None, None)
    >>> g.validate()
    >>> inputs = {"TOKEN": np.ones((1, 3, 2)), "WEIGHT": np.array([[[1.0], [1.0]], [[2.0], [3.0]]]),
    ...           "FIRST_TOKEN_OFFSET": np.array([0, 2]).reshape(2, 1, 1)}
    >>> run_moe_grouped_matmul(g.nodes[0], inputs)["OUTPUT"].ravel().tolist()
    [2.0, 2.0, 5.0]
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise
from typing import Any

import numpy as np

import hipdnn_graph as hg

__all__ = [
    "check_offsets",
    "moe_grouped_matmul_bwd_refusal",
    "moe_grouped_matmul_refusal",
    "moe_routes",
    "run_moe_grouped_matmul",
    "run_moe_grouped_matmul_bwd",
]

Array = np.ndarray[Any, Any]
#: the compute types the reference computes in, and their NumPy dtypes
_COMPUTE: dict[hg.DataType, np.dtype[Any]] = {
    hg.DataType.FLOAT: np.dtype(np.float32),
    hg.DataType.DOUBLE: np.dtype(np.float64),
}


def _refusal(node: Any) -> str | None:
    data_type = hg.DataType(node.attributes.compute_data_type)
    if data_type not in _COMPUTE:
        return f"compute type {data_type.name} (FLOAT or DOUBLE only)"
    return None


def moe_grouped_matmul_refusal(node: hg.MoeGroupedMatmulNode) -> str | None:
    """Why the reference does not run ``node`` (``None`` when it does): a compute type other
    than FLOAT or DOUBLE."""
    return _refusal(node)


def moe_grouped_matmul_bwd_refusal(node: hg.MoeGroupedMatmulBwdNode) -> str | None:
    """Why the reference does not run ``node`` (``None`` when it does), as
    :func:`moe_grouped_matmul_refusal`."""
    return _refusal(node)


def _compute_dtype(node: Any) -> np.dtype[Any]:
    reason = _refusal(node)
    if reason is not None:
        raise hg.HipdnnError(hg.ErrorCode.GRAPH_NOT_SUPPORTED, f"node '{node.name}': {reason}")
    return _COMPUTE[hg.DataType(node.attributes.compute_data_type)]


def _invalid(node: Any, message: str) -> hg.HipdnnError:
    return hg.HipdnnError(hg.ErrorCode.INVALID_VALUE, f"node '{node.name}': {message}")


def _ints(node: Any, inputs: Mapping[str, Any], slot: str) -> Array:
    """An INT32 routing input as a flat int64 vector (its dims are ``[n, 1, 1]`` or ``[1, n, 1]``).

    Raises:
        HipdnnError: ``INVALID_VALUE`` when the slot has no input or holds non-integers.
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


def _operand(node: Any, inputs: Mapping[str, Any], slot: str, dtype: np.dtype[Any]) -> Array:
    if slot not in inputs:
        raise _invalid(node, f"no input for {slot}")
    return np.asarray(inputs[slot], dtype=dtype)


def check_offsets(node: Any, offsets: Array, rows: int, first_zero: bool) -> None:
    """hipDNN's offset checks: each in ``[0, rows]``, non-decreasing (and, for the backward,
    the first one 0: rows before the first expert would be dropped silently).

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the first offset that fails.
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
    node: hg.MoeGroupedMatmulNode, inputs: Mapping[str, Any], tokens: int, experts: int
) -> tuple[Array, Array, Array]:
    """``(src, dst, expert)`` of every routed row some group owns."""
    a = node.attributes
    mode = a.get_mode()
    if mode == hg.MoeGroupedMatmulMode.GATHER:
        index = _ints(node, inputs, "TOKEN_INDEX")
        routed = index.size
    else:
        routed = tokens
    offsets = _ints(node, inputs, "FIRST_TOKEN_OFFSET")
    check_offsets(node, offsets, routed, first_zero=False)
    rows = np.arange(routed, dtype=np.int64)
    group = np.searchsorted(offsets, rows, side="right") - 1  # the last group at or before r
    owned = group >= 0  # rows before the first offset belong to no group
    rows, group = rows[owned], group[owned]
    src, dst = rows, rows
    if mode == hg.MoeGroupedMatmulMode.GATHER:
        src = index[rows]
    elif mode == hg.MoeGroupedMatmulMode.SCATTER:
        index, ks = _ints(node, inputs, "TOKEN_INDEX"), _ints(node, inputs, "TOKEN_KS")
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
    elif mode != hg.MoeGroupedMatmulMode.NONE:
        raise hg.HipdnnError(
            hg.ErrorCode.GRAPH_NOT_SUPPORTED, f"node '{node.name}': routing mode {mode.name}"
        )
    return src, dst, group % experts


def moe_routes(
    node: hg.MoeGroupedMatmulNode,
    inputs: Mapping[str, Any],
    tokens: int,
    experts: int,
    out_rows: int,
) -> tuple[Array, Array, Array]:
    """``(src, dst, expert)`` of every routed row some group owns, each checked as hipDNN's
    reference checks it (the engines that compute elsewhere check their routes here too).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for offsets out of range or decreasing, a routed source
            or destination row outside its tensor, two SCATTER rows with one destination, a
            ``TOKEN_KS`` value outside ``[0, top_k)``, or a missing routing input.
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


def run_moe_grouped_matmul(
    node: hg.MoeGroupedMatmulNode, inputs: Mapping[str, Any]
) -> dict[str, Array]:
    """``OUTPUT`` of a validated MoE grouped matmul node (see the module doc).

    Args:
        node: The node (validated: its OUTPUT has dims).
        inputs: ``TOKEN``, ``WEIGHT``, ``FIRST_TOKEN_OFFSET`` and the routing tensors the mode
            uses (``TOKEN_INDEX``, ``TOKEN_KS``), as arrays of the tensors' dims.

    Returns:
        ``{"OUTPUT": array}`` of OUTPUT's dims in the node's compute type.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a compute type other than FLOAT or DOUBLE;
            ``INVALID_VALUE`` for offsets out of range or decreasing, a routed source or
            destination row outside its tensor, two SCATTER rows with one destination, a
            ``TOKEN_KS`` value outside ``[0, top_k)``, or a missing input.
    """
    dtype = _compute_dtype(node)
    a = node.attributes
    token = _operand(node, inputs, "TOKEN", dtype)[0]  # [tokens, K]
    weight = _operand(node, inputs, "WEIGHT", dtype)  # [experts, K, N]
    output = a.get_output()
    assert output is not None
    out_rows = output.get_dim()[1]
    src, dst, expert = moe_routes(node, inputs, token.shape[0], weight.shape[0], out_rows)
    result = np.zeros((out_rows, weight.shape[2]), dtype=dtype)
    for e in np.unique(expert):  # one GEMM per expert over its routed rows
        rows = expert == e
        result[dst[rows]] = token[src[rows]] @ weight[e]
    return {"OUTPUT": result.reshape(output.get_dim())}


def run_moe_grouped_matmul_bwd(
    node: hg.MoeGroupedMatmulBwdNode, inputs: Mapping[str, Any]
) -> dict[str, Array]:
    """``DWEIGHT`` of a validated MoE grouped matmul backward node (see the module doc).

    Args:
        node: The node (validated: its DWEIGHT has dims).
        inputs: ``DOUTPUT``, ``TOKEN`` and ``FIRST_TOKEN_OFFSET`` as arrays of the tensors' dims.

    Returns:
        ``{"DWEIGHT": array}`` of DWEIGHT's dims ``[experts, K, N]`` in the node's compute type.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a compute type other than FLOAT or DOUBLE;
            ``INVALID_VALUE`` for offsets out of range, decreasing or not starting at 0, or a
            missing input.
    """
    dtype = _compute_dtype(node)
    dout = _operand(node, inputs, "DOUTPUT", dtype)[0]  # [tokens, N]
    token = _operand(node, inputs, "TOKEN", dtype)[0]  # [tokens, K]
    offsets = _ints(node, inputs, "FIRST_TOKEN_OFFSET")
    tokens = token.shape[0]
    check_offsets(node, offsets, tokens, first_zero=True)
    bounds = np.append(offsets, tokens)
    dweight = np.stack([token[start:end].T @ dout[start:end] for start, end in pairwise(bounds)])
    return {"DWEIGHT": dweight.astype(dtype, copy=False)}
