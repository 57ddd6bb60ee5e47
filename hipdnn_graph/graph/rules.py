"""The graph-level steps of ``Graph.validate()`` that are not about one node.

hipDNN's own steps (duplicate uids, graph inputs) come with its messages; the checks this project
adds (one producer per tensor, no virtual graph input) run after every rule of hipDNN's, so that
hipDNN's first failing rule stays the first. Every step is linear in the number of slots
(``benchmarks/validate_scale.py`` prints validation times of graphs up to 65,536 nodes).

Example:
    >>> import hipdnn_graph as hg
    >>> from hipdnn_graph.graph.rules import check_duplicate_uids
    >>> a, b = hg.TensorAttributes(name="a", uid=1), hg.TensorAttributes(name="b", uid=1)
    >>> check_duplicate_uids([[a]], [[b]])
    Traceback (most recent call last):
    ...
    hipdnn_graph.errors.HipdnnError: Duplicate tensor UIDs found in the graph: 1
"""

from __future__ import annotations

import gc
from collections.abc import Collection, Container, Iterable, Iterator, Mapping, Sequence, Sized
from contextlib import contextmanager
from typing import Any

from ..backend.registry import current_registry
from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import ErrorCode

__all__ = [
    "PAUSE_COLLECTOR_NODES",
    "check_duplicate_uids",
    "check_engine_name",
    "check_offsets_are_inputs",
    "check_real_inputs",
    "check_single_producer",
    "collector_paused",
    "graph_inputs",
    "ragged_offsets",
]

#: each node's tensors (input or output), one collection per node, in any order
Slots = Sequence[Collection[TensorAttributes]]


#: graphs with more nodes than this validate with Python's cyclic garbage collector paused
PAUSE_COLLECTOR_NODES = 1024


@contextmanager
def collector_paused(node_count: int) -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a large graph is validated.

    Validation creates no reference cycles, but it allocates a few containers per node (slot
    lists, the dependency graph, inferred dims and strides); in a process holding a large graph
    those allocations would trigger full collections that scan every object of the graph again
    and again. The collector is enabled again afterwards (if it was enabled before), also when a
    rule fails. Small graphs are left alone.

    The containers that outlive the pass (the dims and strides inference gives every output)
    live as long as the graph, so they join the oldest generation at once instead of being
    scanned by the young collections first (two scans of every one of them, for nothing):
    the young generations are collected when the pause begins, so that what is young when it
    ends was made by the pass, and that is moved to the oldest generation
    (``gc.freeze()`` then ``gc.unfreeze()``; skipped when the process keeps frozen objects of
    its own, which ``unfreeze`` would release).
    """
    pause = node_count > PAUSE_COLLECTOR_NODES and gc.isenabled()
    if pause:
        gc.collect(1)  # the young generations, before the pass: they hold nothing of it
        gc.disable()
    try:
        yield
    finally:
        if pause:
            if not gc.get_freeze_count():
                gc.freeze()  # everything tracked, the pass's containers included, ...
                gc.unfreeze()  # ... back into the oldest generation
            gc.enable()


def check_duplicate_uids(ins: Slots, outs: Slots) -> None:
    """hipDNN's step 1: no two tensors of the graph share a uid.

    Raises:
        HipdnnError: ``INVALID_VALUE`` listing the shared uids in ascending order.
    """
    owner: dict[int, int] = {}  # uid -> id of the first tensor holding it
    duplicates: set[int] = set()
    for slots in (ins, outs):
        for tensors in slots:
            for tensor in tensors:
                uid = tensor.uid
                if uid is not None and owner.setdefault(uid, id(tensor)) != id(tensor):
                    duplicates.add(uid)
    if duplicates:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            "Duplicate tensor UIDs found in the graph: " + ", ".join(map(str, sorted(duplicates))),
        )


def ragged_offsets(
    tensors: Iterable[TensorAttributes], known: Container[int] = ()
) -> list[TensorAttributes]:
    """The offsets tensors of the packed (ragged) ``tensors``, each once, skipping those whose id
    is in ``known``: a graph reads them too, although no node slot holds them.

    Example:
        >>> import hipdnn_graph as hg
        >>> off = hg.TensorAttributes(name="off")
        >>> q = hg.TensorAttributes(name="q").set_ragged_offset(off)
        >>> o = hg.TensorAttributes(name="o").set_ragged_offset(off)
        >>> [t.name for t in ragged_offsets([q, o])]
        ['off']
    """
    found: dict[int, TensorAttributes] = {}
    for tensor in tensors:
        offsets = tensor.__dict__["ragged_offset"]
        if offsets is not None and id(offsets) not in known:
            found.setdefault(id(offsets), offsets)
    return list(found.values())


def check_offsets_are_inputs(offsets: Iterable[TensorAttributes], produced: Container[int]) -> None:
    """Refuse a packed tensor's offsets tensor that a node of the graph writes: offsets are
    bound in the variant pack, as hipDNN's RFC 0014 has them (a check of this project).

    Example:
        >>> import hipdnn_graph as hg
        >>> off = hg.TensorAttributes(name="off")
        >>> check_offsets_are_inputs([off], {id(off)})
        Traceback (most recent call last):
        ...
        hipdnn_graph.errors.HipdnnError: Ragged offset tensor off is written by a node; offsets \
must be graph inputs
    """
    for tensor in offsets:
        if id(tensor) in produced:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"Ragged offset tensor {tensor.name} is written by a node; "
                "offsets must be graph inputs",
            )


def graph_inputs(
    order: Iterable[int], ins: Sequence[Mapping[Any, TensorAttributes]], produced: Container[int]
) -> list[TensorAttributes]:
    """Tensors some node reads and none produces, each once, in node (``order``) then slot order.

    ``ins`` holds each node's input slots (slot -> tensor, in any order); ``produced`` the id of
    every tensor some node writes (``ordering.last_producers``). Only a node that reads a tensor
    not found yet has its slots sorted.

    Example:
        >>> import hipdnn_graph as hg
        >>> a, b, c = (hg.TensorAttributes(name=n) for n in "abc")
        >>> [t.name for t in graph_inputs([1, 0], [{1: a, 0: b}, {2: c, 1: a}], {id(c)})]
        ['a', 'b']
    """
    found: dict[int, TensorAttributes] = {}
    for index in order:
        slots = ins[index]
        if _nothing_new(slots, produced, found):
            continue  # the common case: every tensor it reads is produced or found already
        for slot in sorted(slots):
            tensor = slots[slot]
            if id(tensor) not in produced:
                found.setdefault(id(tensor), tensor)
    return list(found.values())


def _nothing_new(
    slots: Mapping[Any, TensorAttributes], produced: Container[int], found: Container[int]
) -> bool:
    for tensor in slots.values():
        key = id(tensor)
        if key not in produced and key not in found:
            return False
    return True


def check_single_producer(nodes: Sequence[Any], outs: Slots, produced: Sized) -> None:
    """This project's check: a tensor is written by one node at most (else a result is lost).

    A tensor in two output slots of the same node is reported by the node's post-validation.
    ``outs`` holds each node's output tensors (in any order); ``produced`` the id of every tensor
    some node writes (``ordering.last_producers``): when there are as many as output slots, no
    tensor is written twice. Otherwise the first tensor written twice, in node then slot order,
    is reported.

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the tensor and two of its producers.
    """
    if len(produced) == sum(map(len, outs)):
        return  # the common case, known without the loop below
    producer: dict[int, int] = {}
    for index, node in enumerate(nodes):
        for tensor in node.outputs():
            first = producer.setdefault(id(tensor), index)
            if first != index:
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"Tensor {tensor.name} is an output of more than one node "
                    f"({nodes[first].name} and {nodes[index].name}); "
                    "each tensor must have a single producer",
                )


def check_real_inputs(inputs: Iterable[TensorAttributes]) -> None:
    """This project's check: no graph input is virtual (no buffer would ever fill it).

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the first virtual graph input.
    """
    for tensor in inputs:
        if tensor.is_virtual:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"Tensor {tensor.name} is virtual but no node produces it: a graph input must be "
                "a real tensor (set_is_virtual(False))",
            )


def check_engine_name(name: str) -> None:
    """Raise unless an engine called ``name`` is registered in this process.

    Raises:
        HipdnnError: ``INVALID_VALUE`` listing the registered engines.
    """
    known = [engine.name for engine in current_registry().engines()]
    if name not in known:
        listed = ", ".join(sorted(known)) if known else "none (no backend is registered)"
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Unknown engine name '{name}'; registered engines: {listed}. "
            "Pass an engine id (hg.backend.engine_id(name)) to prefer an engine that is not "
            "registered here",
        )
