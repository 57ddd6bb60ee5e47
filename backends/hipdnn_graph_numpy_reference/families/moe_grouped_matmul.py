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
``GRAPH_NOT_SUPPORTED``. Those rules are the core's (:mod:`hipdnn_graph.nodes.moe_math`), shared
with every engine that runs MoE nodes.

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
from hipdnn_graph.backend.dtypes import numpy_dtype
from hipdnn_graph.nodes.moe_math import (
    MOE_COMPUTE_TYPES,
    check_offsets,
    moe_grouped_matmul_bwd_refusal,
    moe_grouped_matmul_refusal,
    moe_routes,
    routing_ints,
)

from ._common import ReferenceFamily

# check_offsets, moe_routes and the refusals are hipdnn_graph.nodes.moe_math's (the core's:
# every engine checks by them), re-exported here where they were first defined
__all__ = [
    "FAMILIES",
    "check_offsets",
    "moe_grouped_matmul_bwd_refusal",
    "moe_grouped_matmul_refusal",
    "moe_routes",
    "run_moe_grouped_matmul",
    "run_moe_grouped_matmul_bwd",
]

Array = np.ndarray[Any, Any]
#: the NumPy dtype of each compute type the reference computes in
_COMPUTE: dict[hg.DataType, np.dtype[Any]] = {t: numpy_dtype(t) for t in MOE_COMPUTE_TYPES}


def _compute_dtype(node: Any) -> np.dtype[Any]:
    reason = moe_grouped_matmul_refusal(node)
    if reason is not None:
        raise hg.HipdnnError(hg.ErrorCode.GRAPH_NOT_SUPPORTED, f"node '{node.name}': {reason}")
    return _COMPUTE[hg.DataType(node.attributes.compute_data_type)]


def _operand(node: Any, inputs: Mapping[str, Any], slot: str, dtype: np.dtype[Any]) -> Array:
    if slot not in inputs:
        raise hg.HipdnnError(hg.ErrorCode.INVALID_VALUE, f"node '{node.name}': no input for {slot}")
    return np.asarray(inputs[slot], dtype=dtype)


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
    offsets = routing_ints(node, inputs, "FIRST_TOKEN_OFFSET")
    tokens = token.shape[0]
    check_offsets(node, offsets, tokens, first_zero=True)
    bounds = np.append(offsets, tokens)
    dweight = np.stack([token[start:end].T @ dout[start:end] for start, end in pairwise(bounds)])
    return {"DWEIGHT": dweight.astype(dtype, copy=False)}


#: the node types this module runs, as the package collects them
FAMILIES = (
    ReferenceFamily(
        hg.NodeType.MOE_GROUPED_MATMUL, run_moe_grouped_matmul, moe_grouped_matmul_refusal
    ),
    ReferenceFamily(
        hg.NodeType.MOE_GROUPED_MATMUL_BWD,
        run_moe_grouped_matmul_bwd,
        moe_grouped_matmul_bwd_refusal,
    ),
)
