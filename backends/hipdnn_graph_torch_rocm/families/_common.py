"""What every torch lowering shares: the record a family declares itself by
(:class:`TorchFamily`), data types, scalars and the rules of refusal.

A lowering is prepared once per node (:func:`Prepared`): everything read from the node's
attributes is read then, so the closure it returns sees only tensors and plain Python values
and traces under ``torch.compile`` without guards on pydantic models.

Example:
    >>> import hipdnn_graph as hg
    >>> compute_dtype_name(hg.DataType.FLOAT)
    'float32'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import hipdnn_graph as hg
from hipdnn_graph.backend.dtypes import TORCH_DTYPE_NAMES, torch_dtype

__all__ = [
    "CHECK",
    "FLOATING",
    "LOW_PRECISION",
    "Prepared",
    "Refusal",
    "TorchFamily",
    "Writer",
    "as_scalar",
    "compiling",
    "compute_dtype",
    "compute_dtype_name",
    "dtype_refusal",
    "tensor_dtype",
    "torch_type_refusal",
]

#: a prepared lowering: slot name -> tensor (or Python number) in, slot name -> tensor out
Prepared = Callable[[Mapping[str, Any]], dict[str, Any]]
#: a prepared lowering that writes every output of its node into given tensors (slot name ->
#: the caller's buffer, of the tensor's declared shape, strides and storage type) instead of
#: returning new ones, with the results :data:`Prepared` gives, bit for bit
Writer = Callable[[Mapping[str, Any], Mapping[str, Any]], None]
#: ``<family>_refusal(node) -> why no lowering runs it, or None``
Refusal = Callable[[Any], str | None]

#: the extra result key of a lowering whose input data can be invalid (MoE routes, non-finite
#: values to quantize): under ``torch.compile`` it maps to a 0-d bool tensor, True when the data
#: is valid (the lowering raises no host-synchronising error there); run eagerly, the lowering
#: checks the data itself and raises the exact ``HipdnnError`` instead
CHECK = "CHECK"

#: the compute types the lowerings honour (a floating type torch computes in on every device)
FLOATING = frozenset(
    {hg.DataType.FLOAT, hg.DataType.DOUBLE, hg.DataType.HALF, hg.DataType.BFLOAT16}
)
#: 16-bit storage types whose matmuls and convolutions accumulate in float32 natively
LOW_PRECISION = frozenset({hg.DataType.HALF, hg.DataType.BFLOAT16})


@dataclass(frozen=True)
class TorchFamily:
    """How the torch engines run the nodes of one :class:`~hipdnn_graph.NodeType`: declared
    once, in the family's own module (its ``FAMILIES``), and only collected by the package.

    Example:
        >>> from hipdnn_graph_torch_rocm.families.matmul import FAMILIES
        >>> [(f.node_type.name, f.prepare.__name__, f.host_checked) for f in FAMILIES]
        [('MATMUL', 'prepare_matmul', False)]
    """

    #: the node type this record lowers
    node_type: hg.NodeType
    #: ``prepare_<family>(node)``: reads the node once, returns the closure the engines run
    prepare: Callable[[Any], Prepared]
    #: ``<family>_refusal(node)``: why a node cannot run (``None`` when it can)
    refusal: Refusal
    #: ``prepare_<family>_writer(node)``: a :data:`Writer` into the caller's buffers (torch's
    #: ``out=``), or ``None`` where that node cannot; ``None`` here: the family has none
    writer: Callable[[Any], Writer | None] | None = None
    #: whether the lowering checks its data on the host (MoE routes, a finite X to quantize):
    #: run eagerly it synchronises, so a CUDA graph cannot capture it (the plans do not try)
    host_checked: bool = False
    #: the id of a family that is not hipDNN's (its node class's ``family_id``; ``node_type``
    #: is then ``CUSTOM_OP``), whose module registers the record (``families.register_family``);
    #: ``""`` for hipDNN's families
    family_id: str = ""


def compute_dtype_name(data_type: hg.DataType) -> str:
    """The name of the torch dtype of ``data_type`` (no torch import)."""
    return TORCH_DTYPE_NAMES[hg.DataType(data_type)]


def compiling() -> bool:
    """Whether the caller is being traced by ``torch.compile`` (a constant to the tracer)."""
    import torch

    return bool(torch.compiler.is_compiling())


def compute_dtype(node: Any) -> Any:
    """The torch dtype a node computes in (its compute data type)."""
    return torch_dtype(node.attributes.compute_data_type)


def tensor_dtype(tensor: hg.TensorAttributes) -> Any:
    """The torch dtype a tensor is stored in."""
    return torch_dtype(tensor.data_type)


def as_scalar(value: Any, dtype: Any) -> Any:
    """A one-element operand as something that broadcasts as a scalar: a Python number as it
    is, a tensor of any one-element shape as a 0-d tensor of ``dtype``."""
    if isinstance(value, bool | int | float):
        return value
    return value.reshape(()).to(dtype)


def dtype_refusal(
    node: Any, allowed: Iterable[hg.DataType], slots: Iterable[str] | None = None
) -> str | None:
    """Why a node's compute type or a tensor's storage type is not one the lowering runs, or
    None.

    Example:
        >>> import hipdnn_graph as hg
        >>> g = hg.Graph(io_data_type=hg.DataType.INT8, intermediate_data_type=hg.DataType.INT8,
        ...              compute_data_type=hg.DataType.FLOAT)
        >>> c = g.matmul(g.tensor(name="a", dim=[2, 3]), g.tensor(name="b", dim=[3, 4]), name="mm")
        >>> g.validate()
        >>> dtype_refusal(g.nodes[0], {hg.DataType.FLOAT})
        "node 'mm': tensor 'a' (slot A) is INT8; this lowering takes FLOAT"
    """
    compute = node.attributes.compute_data_type
    name = f"node '{node.name}'"
    if compute not in FLOATING:
        return f"{name}: compute type {compute.name} (FLOAT, DOUBLE, HALF or BFLOAT16 only)"
    allowed = frozenset(allowed)
    for slot, tensor in node.attributes.tensors_by_slot().items():
        if slots is not None and slot not in slots:
            continue
        if tensor.data_type not in allowed:
            takes = ", ".join(sorted(t.name for t in allowed))
            return (
                f"{name}: tensor '{tensor.name}' (slot {slot}) is {tensor.data_type.name}; "
                f"this lowering takes {takes}"
            )
    return None


def torch_type_refusal(node: Any) -> str | None:
    """Why a tensor of ``node`` has a type torch cannot hold, or None."""
    import torch

    for slot, tensor in node.attributes.tensors_by_slot().items():
        data_type = tensor.data_type
        name = TORCH_DTYPE_NAMES.get(data_type)
        if name is None or not hasattr(torch, name):
            packed = (
                " (its float4_e2m1fn_x2 packs two elements per byte)"
                if data_type == hg.DataType.FP4_E2M1
                else ""
            )
            return (
                f"node '{node.name}': tensor '{tensor.name}' (slot {slot}) is "
                f"{data_type.name}, which torch has no dtype for{packed}"
            )
    return None
