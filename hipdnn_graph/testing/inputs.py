"""Random inputs for any graph: :func:`make_inputs` builds a variant pack of declared shapes.

Values follow each tensor's role in the nodes that read it:

| role | values |
|---|---|
| Q, K, V, O, dO | standard normal |
| Bias | normal, standard deviation 0.5 |
| Stats (an input of a backward-only graph) | ``log(Skv) + 0.5`` plus small noise (plausible LSEs) |
| SEQ_LEN_Q / SEQ_LEN_KV | integers in ``[1, Sq]`` / ``[1, Skv]`` |
| Dropout_mask | 0 or 1, keeping about 80 % |
| runtime pass-by-value scalars | ``Attn_scale`` 1/sqrt(D), ``Dropout_scale`` 1.25, |
| (one element) | ``Dropout_scale_inv`` 0.8, ``Seed``/``Offset`` 7 |
| inputs a node's family constrains | what ``input_constraints.INPUT_CONSTRAINTS`` draws: MoE |
| | offsets and routes valid for the node's dims, mode and ``top_k``; positive |
| | variances and inverse deviations; epsilons and momenta in range |
| ragged offsets (a packed tensor's) | valid offsets: ``B`` random lengths in ``[1, S_max]``, |
| | cumulative, in the units of the first packed tensor that names them |
| anything else | standard normal (floats) or small integers |

A packed (ragged) tensor gets a packed buffer of the tokens its offsets reach, as a ``[T, H, D]``
array (:meth:`~hipdnn_graph.backend.ragged.RaggedLayout.token_view`).

Outputs (non-virtual tensors some node writes) are *poisoned*: NaN for floating types, the
largest value for integer types, so an engine that leaves an element unwritten is caught.
Buffers honour the declared strides (non-packed strides give strided views).

Example:
    >>> import numpy as np
    >>> from hipdnn_graph.testing import generate_cases, make_inputs, graph_outputs
    >>> g = generate_cases(1, seed=0)[0].graph
    >>> pack = make_inputs(g, np.random.default_rng(0))
    >>> all(np.isnan(pack[t].astype(np.float64)).all() for t in graph_outputs(g))
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from ..backend.allocation import check_allocation
from ..backend.dtypes import numpy_dtype, numpy_empty_strided
from ..backend.ragged import RaggedLayout, is_ragged
from ..backend.variant_pack import as_numpy, as_torch, is_runtime_scalar, is_torch_tensor
from ..errors import HipdnnError
from ..graph import Graph
from ..tensor import TensorAttributes, generate_strides
from ..types import ErrorCode
from .input_constraints import constrained_values

__all__ = [
    "default_device",
    "empty_for",
    "empty_packed",
    "graph_outputs",
    "make_inputs",
    "poison",
    "runtime_inputs",
    "tensor_roles",
    "to_device",
    "to_numpy",
    "workspace_for",
]

_FLOAT_KINDS = "fcV"  # numpy kinds holding floats (V: ml_dtypes bfloat16/fp8)


def graph_outputs(graph: Graph) -> list[TensorAttributes]:
    """Non-virtual tensors written by some node, in node then slot order."""
    seen: dict[int, TensorAttributes] = {}
    for node in graph.nodes:
        for tensor in node.outputs():
            if not tensor.is_virtual:
                seen.setdefault(id(tensor), tensor)
    return list(seen.values())


def runtime_inputs(graph: Graph) -> list[TensorAttributes]:
    """Graph inputs the caller provides: not virtual, and not compile-time constants."""
    return [
        t
        for t in graph.graph_inputs()
        if not t.is_virtual and not (t.value is not None and not t.is_pass_by_value)
    ]


def tensor_roles(graph: Graph) -> dict[int, tuple[str, dict[str, int]]]:
    """``id(tensor) -> (slot name, sizes)`` for every tensor a node reads or writes.

    ``sizes`` holds ``Sq``, ``Skv`` and ``D`` of the node, when its Q and K have rank 4.
    """
    roles: dict[int, tuple[str, dict[str, int]]] = {}
    for node in graph.nodes:
        a: Any = node.attributes
        slots = a.tensors_by_slot()
        sizes: dict[str, int] = {}
        q, k = slots.get("Q"), slots.get("K")
        if q is not None and len(q.dim) == 4:
            sizes.update(Sq=q.dim[2], D=q.dim[3])
        if k is not None and len(k.dim) == 4:
            sizes["Skv"] = k.dim[2]
        for slot, tensor in slots.items():
            roles.setdefault(id(tensor), (slot, sizes))
    return roles


def empty_for(tensor: TensorAttributes) -> np.ndarray[Any, Any]:
    """An uninitialised array with the tensor's dims, strides and dtype."""
    strides = list(tensor.stride) or generate_strides(tensor.dim)
    return numpy_empty_strided(tensor.dim, strides, tensor.data_type)


def workspace_for(graph: Graph, device: str | None = None) -> Any:
    """A workspace buffer of the active plan's size: a uint8 NumPy array, or a torch tensor on
    ``device``; ``None`` when the plan needs none.

    Example:
        >>> import hipdnn_graph as hg
        >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
        ...              intermediate_data_type=hg.DataType.FLOAT)
        >>> q = g.tensor(name="Q", dim=[1, 1, 4, 8])
        >>> o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
        >>> _ = o.set_output(True)
        >>> _ = g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
        >>> workspace_for(g) is None  # the NumPy engine needs none
        True
    """
    size = graph.get_workspace_size()
    if not size:
        return None
    if device:
        import torch

        return torch.empty(size, dtype=torch.uint8, device=device)
    return np.empty(size, dtype=np.uint8)


def poison(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Fill ``array`` in place with NaN (floats) or the type's largest value (integers)."""
    if array.dtype.kind in _FLOAT_KINDS:
        array[...] = np.nan
    elif array.dtype.kind == "b":
        array[...] = True
    else:
        array[...] = np.iinfo(array.dtype).max
    return array


def _scalar(slot: str, tensor: TensorAttributes, sizes: dict[str, int]) -> int | float:
    if slot == "Attn_scale":
        return 1.0 / math.sqrt(sizes.get("D", 64))
    if slot == "Dropout_scale":
        return 1.25
    if slot == "Dropout_scale_inv":
        return 0.8
    if slot in ("Seed", "Offset"):
        return 7
    return 1 if numpy_dtype(tensor.data_type).kind in "iub" else 0.5


def _values(
    slot: str, tensor: TensorAttributes, sizes: dict[str, int], rng: np.random.Generator
) -> np.ndarray[Any, Any]:
    dims = tuple(tensor.dim)
    kind = numpy_dtype(tensor.data_type).kind
    if slot == "SEQ_LEN_Q":
        return rng.integers(1, sizes.get("Sq", 1) + 1, size=dims)
    if slot == "SEQ_LEN_KV":
        return rng.integers(1, sizes.get("Skv", 1) + 1, size=dims)
    if slot == "Dropout_mask":
        return (rng.random(dims) < 0.8).astype(np.float64)
    if slot == "Stats":
        lse = math.log(max(sizes.get("Skv", 1), 1)) + 0.5
        return lse + 0.1 * rng.standard_normal(dims)
    if kind not in _FLOAT_KINDS:
        return rng.integers(0, 4, size=dims)
    scale = 0.5 if slot == "Bias" else 1.0
    return scale * rng.standard_normal(dims)


def _from_values(tensor: TensorAttributes, values: Any) -> Any:
    """A runtime scalar's Python number, or a buffer of the tensor's layout holding
    ``values``."""
    if is_runtime_scalar(tensor):
        number = np.asarray(values).reshape(-1)[0]
        return int(number) if numpy_dtype(tensor.data_type).kind in "iub" else float(number)
    array = empty_for(tensor)
    array[...] = np.asarray(values).astype(array.dtype)
    return array


def make_inputs(graph: Graph, rng: np.random.Generator) -> dict[TensorAttributes, Any]:
    """A variant pack for ``graph``: random inputs by role, poisoned outputs.

    The graph must be validated (dims and data types known). Runtime pass-by-value scalars (one
    element) get Python numbers; compile-time constants and virtual tensors are left out.

    Args:
        graph: a validated graph.
        rng: the random generator to draw from.

    Returns:
        ``{tensor: buffer}`` ready for ``graph.execute``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` above the allocation limit (the graph's tensors and the
            padded inputs it implies, checked before anything is allocated; see
            :mod:`hipdnn_graph.backend.allocation`), or when a buffer cannot be allocated.
    """
    check_allocation(graph, f"Making inputs for graph '{graph.get_name() or '<unnamed>'}'")
    try:
        return _make_inputs(graph, rng)
    except MemoryError as exc:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"Cannot allocate the graph's inputs: MemoryError: {exc}"
        ) from None


def _constrained(graph: Graph, rng: np.random.Generator) -> dict[int, Any]:
    """``id(tensor) -> values`` for the inputs a node's family constrains (the first node that
    reads a tensor decides)."""
    values: dict[int, Any] = {}
    for node in graph.nodes:
        slots = node.attributes.tensors_by_slot()
        for slot, value in constrained_values(node, rng).items():
            values.setdefault(id(slots[slot]), value)
    return values


def _ragged_layouts(graph: Graph) -> dict[int, RaggedLayout]:
    """``id(tensor) -> layout`` of the graph's packed tensors that a packed buffer can hold."""
    layouts = {}
    for tensor in graph.graph_tensors():
        if is_ragged(tensor):
            try:
                layouts[id(tensor)] = RaggedLayout.of(tensor)
            except HipdnnError:
                continue  # no packed buffer holds it: it gets a buffer of its dims
    return layouts


def _ragged_offsets(
    graph: Graph, layouts: Mapping[int, RaggedLayout], rng: np.random.Generator
) -> dict[int, Any]:
    """``id(offsets tensor) -> values``: random lengths in ``[1, S_max]`` (in whole multiples of
    the tokens one stored unit can count), cumulative, in the first packed tensor's units."""
    values: dict[int, Any] = {}
    for tensor in graph.graph_tensors():
        layout, offsets = layouts.get(id(tensor)), tensor.get_ragged_offset()
        if layout is None or offsets is None or id(offsets) in values:
            continue
        unit = layout.multiplier // math.gcd(layout.token_stride, layout.multiplier)
        lengths = rng.integers(1, layout.seq_max + 1, size=layout.batch) // unit * unit
        tokens = np.concatenate([[0], np.cumsum(lengths)])
        stored = tokens * layout.token_stride // layout.multiplier
        values[id(offsets)] = stored.reshape(tuple(offsets.dim))
    return values


def empty_packed(tensor: TensorAttributes, offsets: Any) -> np.ndarray[Any, Any]:
    """An uninitialised packed buffer for a packed (ragged) tensor: the tokens its ``offsets``
    (values of its offsets tensor) reach, as ``[T, H, D]``; never more elements than the
    tensor's dims and strides span (``B × S_max`` tokens), so that offsets starting far along
    ask for no memory.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a tensor no packed buffer holds,
            ``INVALID_VARIANT_PACK`` for invalid offsets or offsets reaching past that span.
    """
    return _packed_buffer(tensor, RaggedLayout.of(tensor), offsets)


def _packed_buffer(
    tensor: TensorAttributes, layout: RaggedLayout, offsets: Any
) -> np.ndarray[Any, Any]:
    """An uninitialised packed buffer of the tokens ``offsets`` reach, as ``[T, H, D]``."""
    bounds = layout.token_bounds(offsets)
    dims, strides = list(tensor.dim), list(tensor.stride)
    needed = layout.elements_needed(bounds)
    span = 1 + sum((d - 1) * abs(st) for d, st in zip(dims, strides, strict=True))
    if needed > span:  # B x S_max tokens span this much: offsets starting far along
        raise HipdnnError(
            ErrorCode.INVALID_VARIANT_PACK,
            f"Ragged offsets '{layout.offsets_name}' of tensor '{layout.name}' reach {needed} "
            f"elements ({int(bounds[-1])} tokens), more than its dims {dims} and strides "
            f"{strides} span ({span})",
        )
    flat = np.empty(needed, numpy_dtype(tensor.data_type))
    return layout.token_view(flat, int(bounds[-1]))  # type: ignore[no-any-return]


def _make_inputs(graph: Graph, rng: np.random.Generator) -> dict[TensorAttributes, Any]:
    roles = tensor_roles(graph)
    layouts = _ragged_layouts(graph)
    constrained = {**_constrained(graph, rng), **_ragged_offsets(graph, layouts, rng)}
    ragged: list[TensorAttributes] = []
    pack: dict[TensorAttributes, Any] = {}
    for tensor in runtime_inputs(graph):
        slot, sizes = roles.get(id(tensor), ("", {}))
        if id(tensor) in constrained:
            pack[tensor] = _from_values(tensor, constrained[id(tensor)])
            continue
        if is_runtime_scalar(tensor):  # more elements: a host buffer, like any input
            pack[tensor] = _scalar(slot, tensor, sizes)
            continue
        if id(tensor) in layouts:
            ragged.append(tensor)  # after its offsets
            continue
        array = empty_for(tensor)
        array[...] = _values(slot, tensor, sizes, rng).astype(array.dtype)
        pack[tensor] = array
    for tensor in ragged:
        offsets = cast("TensorAttributes", tensor.get_ragged_offset())
        array = _packed_buffer(tensor, layouts[id(tensor)], pack[offsets])
        slot, sizes = roles.get(id(tensor), ("", {}))
        values = _values(slot, tensor, sizes, rng).reshape(-1)[: array.size]
        array[...] = values.reshape(array.shape).astype(array.dtype)
        pack[tensor] = array
    for tensor in graph_outputs(graph):
        layout = layouts.get(id(tensor))
        if layout is None:
            pack[tensor] = poison(empty_for(tensor))
        else:
            offsets = pack[cast("TensorAttributes", tensor.get_ragged_offset())]
            pack[tensor] = poison(_packed_buffer(tensor, layout, offsets))
    return pack


def to_device(pack: Mapping[TensorAttributes, Any], device: str) -> dict[TensorAttributes, Any]:
    """A copy of ``pack`` whose arrays are torch tensors on ``device`` (imports torch).

    Strides are kept for packed layouts; Python numbers (pass-by-value scalars) stay numbers.

    Example:
        >>> import numpy as np
        >>> from hipdnn_graph.testing import generate_cases, make_inputs, to_device
        >>> g = generate_cases(1)[0].graph
        >>> pack = to_device(make_inputs(g, np.random.default_rng(0)), "cpu")
        >>> sorted({type(v).__name__ for v in pack.values()})
        ['Tensor']
    """
    moved: dict[TensorAttributes, Any] = {}
    for tensor, value in pack.items():
        if isinstance(value, np.ndarray):
            moved[tensor] = as_torch(value).to(device, copy=True)
        else:
            moved[tensor] = value
    return moved


def default_device(engine: Any) -> str | None:
    """``"cuda"`` for an engine that takes torch tensors when a CUDA or ROCm device is present
    (fused GPU kernels need their buffers there), else ``None`` (NumPy arrays)."""
    if getattr(engine, "array_kind", "numpy") != "torch":
        return None
    try:
        import torch
    except ImportError:
        return None
    return "cuda" if torch.cuda.is_available() else None


def to_numpy(value: Any) -> np.ndarray[Any, Any]:
    """A NumPy copy of a buffer: a NumPy array, or a torch tensor on any device."""
    if is_torch_tensor(value):
        return np.array(as_numpy(value.detach().cpu()), copy=True)
    return np.asarray(value)
