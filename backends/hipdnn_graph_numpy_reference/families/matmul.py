"""The matmul reference: ``C[..., m, n] = sum_k A[..., m, k] * B[..., k, n]`` in the compute type.

Batch dims broadcast as hipDNN's rule allows (:func:`hipdnn_graph.nodes.matmul.check_batch_dims`):
each of C's batch dims is a multiple of A's and of B's, and an operand whose batch dim is
smaller repeats along it, batch ``i`` of C reading batch ``i // (c / d)`` of an operand of batch
dim ``d`` beside C's ``c``, as hipDNN's CPU reference (``CpuFpReferenceMatmul``) indexes it: each
batch of the operand serves ``c / d`` consecutive batches of C (a dim of 1 is NumPy's
broadcasting; a proper divisor, such as 2 beside 4, repeats each batch, ``[0, 0, 1, 1]``).

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> c = g.matmul(g.tensor(name="a", dim=[2, 1, 2]), g.tensor(name="b", dim=[4, 2, 1]),
    ...              name="mm")
    >>> g.validate()
    >>> a = np.array([[[1.0, 2.0]], [[3.0, 4.0]]])
    >>> out = run_matmul(g.nodes[0], {"A": a, "B": np.ones((4, 2, 1))})["C"]
    >>> out.shape, out.reshape(-1).tolist()
    ((4, 1, 1), [3.0, 3.0, 7.0, 7.0])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import hipdnn_graph as hg

from ._common import ReferenceFamily, as_compute, compute_dtype, raise_refusal

__all__ = ["FAMILIES", "matmul_refusal", "run_matmul"]

Array = np.ndarray[Any, Any]


def _repeats(dims: Sequence[int], batch: Sequence[int]) -> tuple[int, ...] | None:
    """How often an operand's batch dims repeat to make C's, or None when one does not divide."""
    reps = []
    for d, c in zip(dims, batch, strict=True):
        if d == 0 or c % d:
            return None
        reps.append(c // d)
    return tuple(reps)


def matmul_refusal(node: hg.MatmulNode) -> str | None:
    """Why the reference cannot run this matmul node, or ``None``."""
    a = node.attributes
    x, y, c = a.get_a(), a.get_b(), a.get_c()
    if x is None or y is None or c is None:
        return f"node '{node.name}': A, B and C must all be set"
    batch = c.dim[:-2]
    if len(x.dim) != len(c.dim) or len(y.dim) != len(c.dim):
        return f"node '{node.name}': A, B and C must have one rank"
    for name, t in (("A", x), ("B", y)):
        if _repeats(t.dim[:-2], batch) is None:
            return (
                f"node '{node.name}': {name}'s batch dims {t.dim[:-2]} do not divide C's "
                f"{batch} (batch broadcasting)"
            )
    if (c.dim[-2], c.dim[-1]) != (x.dim[-2], y.dim[-1]) or x.dim[-1] != y.dim[-2]:
        return f"node '{node.name}': C's dims {c.dim} are not [..., M, N] of A {x.dim} @ B {y.dim}"
    return None


def _batched(array: Array, batch: Sequence[int]) -> Array:
    reps = _repeats(array.shape[:-2], batch)
    assert reps is not None  # matmul_refusal checked it
    if all(r == 1 or d == 1 for r, d in zip(reps, array.shape[:-2], strict=True)):
        return array  # equal dims or dims of 1: NumPy's own broadcasting
    for axis, (r, d) in enumerate(zip(reps, array.shape[:-2], strict=True)):
        if d != 1 and r != 1:  # each batch serves r consecutive batches of C
            array = np.repeat(array, r, axis=axis)
    return array


def run_matmul(node: hg.MatmulNode, inputs: Mapping[str, Any]) -> dict[str, Array]:
    """``C = A @ B`` with hipDNN's batch broadcasting, accumulated in the compute type.

    Args:
        node: a validated matmul node.
        inputs: ``A`` and ``B`` as arrays of the tensors' dims.

    Returns:
        ``{"C": array of C's dims}``.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for what :func:`matmul_refusal` names or a compute
            type the reference does not compute in.
    """
    raise_refusal(matmul_refusal(node))
    ct = compute_dtype(node)
    c = node.attributes.get_c()
    assert c is not None
    batch = c.dim[:-2]
    a = _batched(as_compute(inputs["A"], ct), batch)
    b = _batched(as_compute(inputs["B"], ct), batch)
    result = np.matmul(a, b)
    return {"C": np.broadcast_to(result, tuple(c.dim))}


#: the node types this module runs, as the package collects them
FAMILIES = (ReferenceFamily(hg.NodeType.MATMUL, run_matmul, matmul_refusal),)
