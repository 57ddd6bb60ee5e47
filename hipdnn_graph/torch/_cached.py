"""The torch op's graph cache: its entries, their keys, and the hot path of a cache hit.

Graphs are keyed by everything that changes them or the variant-pack check (each slot's shape,
strides and dtype, Q's device, the options), so a hit builds nothing and checks nothing again:
the graph's plan is called directly (:class:`~hipdnn_graph.graph.prepared.PreparedRun`). A miss
builds the graph (the builder is passed in by :mod:`._graphs`) and runs it once through
``Graph.run``, with every check. :func:`cached_graphs` lists the entries with their engines.

Example:
    >>> import torch
    >>> from hipdnn_graph.torch._graphs import sdpa_forward
    >>> from hipdnn_graph.torch._cached import graph_cache
    >>> graph_cache().clear()
    >>> q = torch.randn(1, 1, 4, 8)
    >>> _ = sdpa_forward(q, q, q); _ = sdpa_forward(q + 1, q, q)
    >>> graph_cache().info()[:2]  # (hits, misses)
    (1, 1)
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

import torch

from ..backend import as_torch
from ..errors import HipdnnError
from ..graph import Graph
from ..graph.prepared import PreparedLaunch, PreparedRun, prepared_launch, prepared_run
from ..tensor import TensorAttributes
from ..types import DiagonalAlignment, ErrorCode
from ._cache import GraphCache

__all__ = [
    "CachedGraph",
    "Entry",
    "Options",
    "cached_graphs",
    "graph_cache",
    "remember",
    "run_cached",
]

Tensor = torch.Tensor

_CACHE: GraphCache[Entry] = GraphCache(256)

K = TypeVar("K")
V = TypeVar("V")

#: the most entries one of the op's memo tables holds before it starts afresh
MEMO_LIMIT = 1024


def remember(table: dict[K, V], key: K, value: V) -> V:
    """Store ``value`` under ``key`` in one of the op's memo tables and return it; a table past
    :data:`MEMO_LIMIT` entries is emptied first (its entries are cheap to make again).

    Example:
        >>> table: dict[int, str] = {}
        >>> remember(table, 1, "one"), table
        ('one', {1: 'one'})
    """
    if len(table) > MEMO_LIMIT:
        table.clear()
    table[key] = value
    return value


#: the op's graph builds and engine fall-throughs, at DEBUG (engine choices themselves are
#: logged by ``hipdnn_graph.engines``)
_LOG = logging.getLogger("hipdnn_graph.torch")


def graph_cache() -> GraphCache[Any]:
    """The LRU cache shared by every forward and backward graph of the torch op.

    ``graph_cache().info()`` reports hits and misses, ``resize(n)`` changes the bound (256 by
    default) and ``clear()`` empties it.
    """
    return _CACHE


class CachedGraph(NamedTuple):
    """One graph of the torch op's cache, as :func:`cached_graphs` lists it."""

    #: ``"forward"`` (SdpaFwd: O and Stats) or ``"backward"`` (SdpaBwd: the gradients)
    kind: str
    #: the engine its plan runs on (``Graph.get_plan_name()``)
    engine: str
    #: the engines that applied, best first (``Graph.get_engine_names()``)
    ranked: tuple[str, ...]
    #: each input tensor's dims by slot (``"Q"``, ``"K"``, ``"Bias"``, ``"SEQ_LEN_Q"``, …)
    shapes: dict[str, tuple[int, ...]]
    #: the built graph itself (``to_dot()``, ``get_engine_refusals()``, ``serialize()``, …)
    graph: Graph
    #: a forward graph whose op the torch op now calls under torch's autograd, because the
    #: backward graph's kernel is that op's own backward (see :mod:`hipdnn_graph.torch`)
    autograd_route: bool = False


def cached_graphs() -> list[CachedGraph]:
    """The graphs the torch op has built and cached, least recently used first, each with the
    engine it runs on.

    Example:
        >>> import torch
        >>> from hipdnn_graph.torch import cached_graphs, graph_cache
        >>> from hipdnn_graph.torch import scaled_dot_product_attention as sdpa
        >>> graph_cache().clear()
        >>> q = torch.randn(1, 2, 8, 4, requires_grad=True)
        >>> sdpa(q, q, q, is_causal=True).sum().backward()
        >>> for g in cached_graphs():
        ...     print(g.kind, g.engine, g.shapes["Q"])
        forward TORCH_SDPA_MATH_ENGINE (1, 2, 8, 4)
        backward TORCH_SDPA_MATH_ENGINE (1, 2, 8, 4)
    """
    return [
        CachedGraph(
            "backward" if "dO" in entry.slots else "forward",
            entry.graph.get_plan_name(),
            tuple(entry.graph.get_engine_names()),
            {slot: tuple(t.dim) for slot, t in entry.slots.items() if not t.is_pass_by_value},
            entry.graph,
            bool(entry.autograd),
        )
        for entry in _CACHE.values()
    ]


class Options(NamedTuple):
    """Every keyword that changes a graph (part of the cache key; a tuple, hashed in C)."""

    #: None for the default 1/sqrt(D), computed by the engine in the data's precision
    scale: float | None
    causal: bool
    alignment: DiagonalAlignment
    left_bound: int | None
    right_bound: int | None
    alibi: bool
    engine: str | None
    #: philox dropout: the probability (Seed and Offset are pass-by-value inputs, not keys)
    dropout_p: float = 0.0
    #: an engine ranked first without being forced (a philox forward: the fused op to match)
    prefer: str | None = None


@dataclass
class Entry:
    """A built graph, its graph tensors by slot name, and what a cache hit needs to run it."""

    graph: Graph
    slots: dict[str, TensorAttributes]
    outputs: tuple[TensorAttributes, ...]
    #: the engine the graph runs on (``graph.get_plan_name()``)
    engine: str = field(init=False)
    #: the plan's launcher called directly (the cache key fixed every fact the variant-pack
    #: check reads), or None where the plan offers none
    launch: PreparedLaunch | None = field(init=False)
    #: the slots the launcher takes, in its order
    launch_slots: tuple[str, ...] = field(init=False)
    #: the plan called directly on a ``{uid: buffer}`` dict where it has no launcher, or None
    #: for engines that need ``Graph.run``'s conversions
    call: PreparedRun | None = field(init=False)
    #: (slot, uid) of every graph input, and the uids of the outputs, in ``outputs`` order
    order: tuple[tuple[str, int], ...] = field(init=False)
    out_uids: tuple[int, ...] = field(init=False)
    #: a forward graph's autograd route (see :mod:`._hot`): None until the op has learnt it,
    #: False where there is none, else the call that runs the forward's op under torch's
    #: autograd (whose backward is this graph's backward graph's own kernel)
    autograd: Any = field(default=None, init=False)
    #: backwards that found no autograd form yet (:func:`._hot.learn_route`)
    route_tries: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.engine = str(self.graph.get_plan_name())
        self.order = tuple((slot, t.get_uid()) for slot, t in self.slots.items())
        self.out_uids = tuple(t.get_uid() for t in self.outputs)
        slot_of = {uid: slot for slot, uid in self.order}
        launch = prepared_launch(self.graph)
        if launch is not None and (
            launch.outputs != self.out_uids or not set(launch.inputs) <= set(slot_of)
        ):
            launch = None
        self.launch = launch
        self.launch_slots = tuple(slot_of[uid] for uid in launch.inputs) if launch else ()
        self.call = None if launch is not None else prepared_run(self.graph)

    def run(self, pack: dict[str, Any]) -> list[Tensor]:
        """The outputs of one run on ``pack`` (slot -> value, with this entry's cache key)."""
        launch = self.launch
        if launch is not None:
            return launch([pack[slot] for slot in self.launch_slots])  # type: ignore[return-value]
        call = self.call
        if call is None:
            out = self.graph.run(_variant_pack(self, pack))
            return [_torch(out[t]) for t in self.outputs]
        buffers = call({uid: pack[slot] for slot, uid in self.order})
        return [buffers[uid] for uid in self.out_uids]


def run_cached(
    key: Hashable, pack: dict[str, Any], options: Options, build: Any
) -> tuple[Entry, list[Tensor]]:
    """The cached graph for ``key`` (built and checked on a miss) and its outputs on ``pack``."""
    entry = _CACHE.get(key)
    if entry is not None:
        return entry, entry.run(pack)
    first: list[tuple[Entry, list[Tensor]]] = []

    def make() -> Entry:
        first.append(_first_run(build(pack, options), pack, options, build))
        return first[0][0]

    entry = _CACHE.get_or_build(key, make)
    if first:  # the outputs of the entry that ran (another thread's may have been cached)
        return first[0]
    return entry, entry.run(pack)


def _variant_pack(entry: Entry, pack: dict[str, Any]) -> dict[TensorAttributes, Any]:
    return {entry.slots[s]: t for s, t in pack.items() if s in entry.slots}


def _first_run(
    entry: Entry, pack: dict[str, Any], options: Options, build: Any
) -> tuple[Entry, list[Tensor]]:
    """Run a freshly built graph through ``Graph.run`` (every variant-pack check, once per
    cache entry); CPU tensors skip engines that cannot run on the CPU.

    The engine contract has no device: on a machine with a GPU the fused engines accept a
    graph of CPU tensors and fail when they run, so the next ranked engine is tried (only when
    no engine was forced, and only for ``GRAPH_EXECUTION_FAILED``).
    """
    names = entry.graph.get_engine_names()
    while True:
        try:
            out = entry.graph.run(_variant_pack(entry, pack))
            if _LOG.isEnabledFor(logging.DEBUG):
                shapes = {s: tuple(t.dim) for s, t in entry.slots.items() if not t.is_pass_by_value}
                _LOG.debug("built graph '%s' on engine %s for %s (cached)",
                           entry.graph.get_name(), entry.graph.get_plan_name(), shapes)  # fmt: skip
            return entry, [_torch(out[t]) for t in entry.outputs]
        except HipdnnError as err:
            tried = entry.graph.get_plan_name()
            rest = names[names.index(tried) + 1 :] if tried in names else []
            retry = (
                err.code == ErrorCode.GRAPH_EXECUTION_FAILED
                and pack["Q"].device.type == "cpu"
                and options.engine is None
                and rest
            )
            if not retry:
                raise
            if _LOG.isEnabledFor(logging.DEBUG):
                _LOG.debug("graph '%s': engine %s failed on CPU tensors (%s); trying %s",
                           entry.graph.get_name(), tried, err, rest[0])  # fmt: skip
            entry = build(pack, options, prefer=rest[0])
            names = rest


def _torch(value: Any) -> Tensor:
    return value if isinstance(value, torch.Tensor) else as_torch(value)
