"""The matmul lowering: ``C = A @ B`` with batch broadcasting, in the compute type.

Batch dims broadcast as hipDNN allows: from 1 (torch's broadcasting), or from a proper divisor
of C's batch dim, each batch of the operand then serving ``c / d`` consecutive batches of C
(``repeat_interleave``), as hipDNN's CPU reference indexes batch ``i`` of C to batch
``i // (c / d)`` of an operand of batch dim ``d``.

When A, B and C share a 16-bit type and the node computes in FLOAT, the 16-bit matmul runs as
it is: its kernels accumulate in float32 and round once, the result the compute type defines.
Otherwise A and B are cast to the compute type first.

Example:
    >>> import torch, hipdnn_graph as hg
    >>> f = hg.DataType.FLOAT
    >>> g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
    >>> c = g.matmul(g.tensor(name="a", dim=[1, 2, 3]), g.tensor(name="b", dim=[1, 3, 2]))
    >>> g.validate()
    >>> a, b = torch.ones(1, 2, 3), torch.ones(1, 3, 2)
    >>> prepare_matmul(g.nodes[0])({"A": a, "B": b})["C"].tolist()
    [[[3.0, 3.0], [3.0, 3.0]]]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import hipdnn_graph as hg

from ._common import (
    FLOATING,
    LOW_PRECISION,
    Prepared,
    TorchFamily,
    Writer,
    compute_dtype,
    dtype_refusal,
    tensor_dtype,
)

__all__ = [
    "FAMILIES",
    "matmul_refusal",
    "native_low_precision",
    "prepare_matmul",
    "prepare_matmul_writer",
]


def native_low_precision(node: Any, slots: tuple[str, ...]) -> bool:
    """Whether the tensors at ``slots`` share one 16-bit type and the node computes in FLOAT."""
    tensors = node.attributes.tensors_by_slot()
    types = {tensors[s].data_type for s in slots if s in tensors}
    return (
        node.attributes.compute_data_type == hg.DataType.FLOAT
        and len(types) == 1
        and types <= LOW_PRECISION
    )


def matmul_refusal(node: hg.MatmulNode) -> str | None:
    """Why the lowering cannot run this node, or None."""
    return dtype_refusal(node, FLOATING)


def _repeats(node: hg.MatmulNode, slot: str) -> tuple[tuple[int, int], ...]:
    """``(axis, times)`` for each batch axis of ``slot`` whose dim properly divides C's."""
    t = node.attributes.tensors_by_slot()
    dims, batch = t[slot].dim[:-2], t["C"].dim[:-2]
    return tuple((i, c // d) for i, (d, c) in enumerate(zip(dims, batch, strict=True))
                 if d not in (1, c))  # fmt: skip


def _operand_maker(node: hg.MatmulNode) -> tuple[Any, Any]:
    """``(operand, cast)``: a function giving A or B in the type the product runs in, with its
    batch repeats, and that type."""
    import torch

    if native_low_precision(node, ("A", "B", "C")):
        a = node.attributes.get_a()
        assert a is not None
        cast = tensor_dtype(a)
    else:
        cast = compute_dtype(node)

    repeats = {slot: _repeats(node, slot) for slot in ("A", "B")}

    def operand(inputs: Mapping[str, Any], slot: str) -> Any:
        value = inputs[slot].to(cast)
        for axis, times in repeats[slot]:
            value = torch.repeat_interleave(value, times, dim=axis)
        return value

    return operand, cast


def prepare_matmul(node: hg.MatmulNode) -> Prepared:
    """The node's lowering with its types and batch repeats read now."""
    import torch

    operand, _ = _operand_maker(node)

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        return {"C": torch.matmul(operand(inputs, "A"), operand(inputs, "B"))}

    return run


def _product_dims(node: hg.MatmulNode) -> tuple[int, ...] | None:
    """The dims of ``torch.matmul``'s result on the repeated operands (None: no such product)."""
    t = node.attributes.tensors_by_slot()
    a, b = (list(t[s].dim) for s in ("A", "B"))
    if len(a) != len(b) or len(a) < 2:
        return None
    for dims, slot in ((a, "A"), (b, "B")):
        for axis, times in _repeats(node, slot):
            dims[axis] *= times
    batch = [x if y in (1, x) else y if x == 1 else -1 for x, y in zip(a[:-2], b[:-2], strict=True)]
    return None if -1 in batch else (*batch, a[-2], b[-1])


def prepare_matmul_writer(node: hg.MatmulNode) -> Writer | None:
    """The lowering writing C into the caller's buffer (``torch.matmul(..., out=C)``: the
    product lands there, no copy), or None where C's storage type is not the type the product
    runs in (the result is then rounded, which the returning lowering does)."""
    import torch

    operand, cast = _operand_maker(node)
    t = node.attributes.tensors_by_slot()
    c = t["C"]
    if tensor_dtype(c) != cast or _product_dims(node) != tuple(c.dim):
        return None  # (a product of another shape would resize the caller's buffer)

    def write(inputs: Mapping[str, Any], outs: Mapping[str, Any]) -> None:
        torch.matmul(operand(inputs, "A"), operand(inputs, "B"), out=outs["C"])

    return write


#: the node types this module lowers, as the package collects them
FAMILIES = (
    TorchFamily(hg.NodeType.MATMUL, prepare_matmul, matmul_refusal, writer=prepare_matmul_writer),
)
