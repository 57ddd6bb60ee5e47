"""CUDA graph replay of a torch plan's repeated ``execute`` calls.

A plan run again on the same buffers need not pay Python's and the launcher's cost for every
kernel again: the first call with a set of buffer addresses runs eagerly (which also warms every
lazy initialisation), the second captures the plan's kernels into a ``torch.cuda.CUDAGraph``,
and later calls only replay it. Graphs read the buffers' current contents, so new values in the
same buffers are picked up.

A plan keeps the graphs of its most recently used buffer sets, at most
``HIPDNN_GRAPH_CUDA_GRAPHS`` of them (default 4; ``0`` turns replay off). Each graph holds its
kernels' temporaries (for the fused ops: their result tensors before the copy into the caller's
buffers) in a private memory pool, so the bound is also a bound on that memory. Buffer sets used
in a cycle longer than the bound are never captured: they run eagerly, with no capture churn.

Only full packs (every output given, as ``execute`` gives) of CUDA tensors on one device and
plain Python numbers are captured; a plan whose kernels cannot be captured (a host sync) runs
eagerly from then on. A plan may also refuse replay when it is built
(:meth:`CudaGraphReplay.refuse`: philox dropout, whose generator use a capture cannot
reproduce; family graphs whose lowerings check their data on the host); ``refusal`` then says
why. The attention plans and the family plans (``TORCH_EAGER_ENGINE``, ``TORCH_FUSION_ENGINE``)
replay through this class.
"""

from __future__ import annotations

import os
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, cast

__all__ = ["DEFAULT_GRAPHS", "CudaGraphReplay", "ReplayedPlan", "graphs_per_plan", "record_graph"]

#: Graphs a plan keeps when ``HIPDNN_GRAPH_CUDA_GRAPHS`` is not set.
DEFAULT_GRAPHS = 4

_UNSEEN: Any = object()


def graphs_per_plan() -> int:
    """The ``HIPDNN_GRAPH_CUDA_GRAPHS`` setting: graphs kept per plan (0 = replay off).

    Unset, empty or not a number: :data:`DEFAULT_GRAPHS`; negative numbers count as 0.

    Example:
        ``HIPDNN_GRAPH_CUDA_GRAPHS=0 python train.py`` runs every ``execute`` eagerly;
        ``HIPDNN_GRAPH_CUDA_GRAPHS=8 python train.py`` keeps up to 8 graphs per plan.
    """
    raw = os.environ.get("HIPDNN_GRAPH_CUDA_GRAPHS", "").strip()
    if not raw:
        return DEFAULT_GRAPHS
    try:
        return max(0, int(raw))
    except ValueError:
        return DEFAULT_GRAPHS


class CudaGraphReplay:
    """The captured graphs of one plan, keyed by the addresses of the buffers they were built on.

    ``run(buffers, run_steps)`` replays (capturing first when this is the second call with these
    buffers) and returns True, or returns False when the caller must run ``run_steps`` eagerly.
    """

    def __init__(self, output_uids: frozenset[int], capacity: int | None = None) -> None:
        self.capacity = graphs_per_plan() if capacity is None else capacity
        self.output_uids = output_uids
        #: buffer-address key -> captured graph, or None when seen once; oldest first
        self.graphs: OrderedDict[Hashable, Any] = OrderedDict()
        self.captures = 0
        self._uids: tuple[int, ...] = ()
        self._streams: dict[Any, Any] = {}
        #: the frontend's addresses of the last buffers found not capturable (None: none)
        self._eager: Hashable | None = None
        #: why this plan never replays (None: it may)
        self.refusal: str | None = None

    def refuse(self, reason: str) -> None:
        """Never capture this plan's kernels: every ``run`` answers False (eager)."""
        self.refusal = reason
        self.capacity = 0
        self.graphs.clear()

    def run(
        self,
        buffers: dict[int, Any],
        run_steps: Callable[[dict[int, Any]], None],
        addresses: Hashable | None = None,
    ) -> bool:
        """Replay the graph for these buffers; False when the caller must run eagerly.

        ``addresses``: the frontend's key of the buffers (equal exactly when the same buffers
        sit at the same uids with the same scalar values), used instead of reading every
        buffer's address again; keys of either kind never equal one another.
        """
        if not self.capacity:
            return False
        graphs = self.graphs
        if addresses is not None:
            if addresses == self._eager:
                return False
            key: Hashable = addresses
        else:
            key = _key(buffers, self._uids) if len(buffers) == len(self._uids) else ()
        graph = graphs.get(key, _UNSEEN)
        if graph is _UNSEEN:  # new buffers: remember them and run eagerly
            self._remember(buffers, addresses)
            return False
        graphs.move_to_end(key)
        if graph is None:
            graph = self._capture(buffers, run_steps)
            if graph is None:
                return False
            graphs[key] = graph
        graph.replay()
        return True

    def _remember(self, buffers: dict[int, Any], addresses: Hashable | None = None) -> None:
        # outputs left to the plan (Graph.run, the torch op) are new tensors every call: the
        # cheap test first, so that such calls pay nothing more here
        if not self.output_uids.issubset(buffers) or _single_cuda_device(buffers) is None:
            self._eager = addresses  # (e.g. CPU tensors) the same buffers again: eager at once
            return
        if addresses is not None:
            self.graphs[addresses] = None
        else:
            uids = tuple(sorted(buffers))
            if uids != self._uids:
                self._uids = uids
                self.graphs.clear()
            self.graphs[_key(buffers, uids)] = None
        if len(self.graphs) > self.capacity:
            self.graphs.popitem(last=False)

    def _capture(
        self, buffers: dict[int, Any], run_steps: Callable[[dict[int, Any]], None]
    ) -> Any | None:
        """The captured graph, or None (and eager from now on) when the kernels cannot be
        captured."""
        try:
            graph = self._record(buffers, run_steps)
        except Exception:
            self.capacity = 0
            self.graphs.clear()
            return None
        self.captures += 1
        return graph

    def _record(self, buffers: dict[int, Any], run_steps: Callable[[dict[int, Any]], None]) -> Any:
        """Capture the plan's kernels on this plan's side stream of their device."""
        import torch

        device = _single_cuda_device(buffers)
        stream = self._streams.get(device)
        if stream is None:
            stream = self._streams[device] = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
        return record_graph(lambda: run_steps(dict(buffers)), device, stream)


class ReplayedPlan:
    """A plan whose ``execute`` goes through its :class:`CudaGraphReplay`: a replayed graph when
    these buffers came before, else :meth:`run_now`. Subclasses set ``replay`` and define
    ``run_now(buffers)`` (every kernel now, on a fresh dict of the pack, which it may extend
    with the outputs it hands over)."""

    replay: CudaGraphReplay

    def run_now(self, buffers: dict[int, Any]) -> None:
        raise NotImplementedError

    def execute(self, variant_pack: Mapping[int, Any], workspace: Any) -> None:
        buffers = cast("dict[int, Any]", variant_pack)  # a fresh dict from the frontend
        if not self.replay.run(buffers, self.run_now):
            self.run_now(buffers)

    def execute_at(self, variant_pack: Mapping[int, Any], workspace: Any, addresses: Any) -> None:
        """:meth:`execute` of a pack whose buffers' ``addresses`` the frontend read already (the
        CUDA-graph replay is keyed by them)."""
        buffers = cast("dict[int, Any]", variant_pack)
        if not self.replay.run(buffers, self.run_now, addresses):
            self.run_now(buffers)


def record_graph(run: Callable[[], Any], device: Any, stream: Any) -> Any:
    """``run``'s kernels captured into a ``torch.cuda.CUDAGraph`` on ``stream`` (a side stream
    of ``device``); raises what ``run`` raised (a host synchronisation, say) after ending the
    capture. Unlike ``torch.cuda.graph`` this neither synchronizes the device nor empties the
    memory cache, and other threads may keep using the GPU meanwhile (thread-local capture).

    Example:
        ``graph = record_graph(lambda: fn(*args), "cuda:0", torch.cuda.Stream())`` then
        ``graph.replay()`` runs ``fn``'s kernels again on the same buffers.
    """
    import torch

    graph = torch.cuda.CUDAGraph()
    current = torch.cuda.current_stream(device)
    stream.wait_stream(current)
    with torch.cuda.device(device), torch.cuda.stream(stream):
        graph.capture_begin(capture_error_mode="thread_local")
        try:
            run()
        except BaseException:
            _end_failed_capture(graph, device)
            raise
        graph.capture_end()
    current.wait_stream(stream)
    return graph


def _end_failed_capture(graph: Any, device: Any) -> None:
    """End a capture whose kernels raised (a plan that syncs with the host fails at its first
    sync): torch then also warns that the graph is empty, which tells the caller nothing more
    (the plan runs eagerly from then on), so that warning is silenced, and only here.

    A sync invalidates the capture, and ending an invalidated capture raises before torch takes
    the device's default generator out of capture mode; every later random draw on that device
    (dropout, ``torch.rand``) would then fail with "Offset increment outside graph capture
    encountered unexpectedly". The generator is given a fresh copy of its own state (same seed
    and offset, not capturing) instead. The plans never capture random draws (philox plans
    refuse replay), so no captured graph needs the old state.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The CUDA Graph is empty")
        try:
            graph.capture_end()
        except Exception:
            _release_generator(device)


def _release_generator(device: Any) -> None:
    """Take the default CUDA generator of ``device`` out of a capture that never ended."""
    import torch

    index = torch.device(device).index
    generator = torch.cuda.default_generators[
        torch.cuda.current_device() if index is None else index
    ]
    if hasattr(generator, "graphsafe_set_state"):  # torch >= 2.5
        generator.graphsafe_set_state(generator.clone_state())


def _key(buffers: dict[int, Any], uids: tuple[int, ...]) -> tuple[Hashable, ...]:
    """The buffers' addresses (numbers as they are) in ``uids`` order; ``()``, never a stored
    key, when a uid is missing."""
    try:
        values = [buffers[uid] for uid in uids]
    except KeyError:
        return ()
    try:  # all tensors (the usual pack): no attribute test per value
        return tuple([v.data_ptr() for v in values])
    except AttributeError:
        return tuple([v.data_ptr() if hasattr(v, "data_ptr") else v for v in values])


def _single_cuda_device(buffers: dict[int, Any]) -> Any | None:
    """The one CUDA device all tensors are on, when the rest are plain numbers; else None."""
    import torch

    device = None
    for value in buffers.values():
        if isinstance(value, torch.Tensor):
            if not value.is_cuda or (device is not None and value.device != device):
                return None
            device = value.device
        elif not isinstance(value, int | float):
            return None
    return device
