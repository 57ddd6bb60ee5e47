"""cudnn-frontend's objects are released before the interpreter exits, so nanobind stays quiet.

cudnn-frontend's extension (``cudnn._compiled_module``) is built with nanobind, which checks at
interpreter exit that every object of its types was freed and otherwise prints a report of
"leaked" instances, types and functions on stderr (some 40 lines). Python does not promise to
free what module globals still hold at exit, and this engine holds cuDNN graphs to the end: in
its cache of built graphs, in the plan of every built ``hg.Graph`` (which scripts keep in
globals and the torch op in its graph cache) and in one handle per device.

So every such holder is registered here (:func:`hold`: anything with a ``release()``), and the
first handle made registers :func:`release` with :mod:`atexit` (:func:`watch`). atexit runs the
last-registered handler first: ours, registered after ``import cudnn``, runs before
cudnn-frontend's own exit handlers (which destroy its default handles) and before Python tears
the modules down. :func:`release` drops every held cuDNN graph, runs the ``last`` steps given to
:func:`watch` (destroying the handles), clears :mod:`typing`'s caches (they keep every type
that an annotation subscripted, nanobind's among them, until after nanobind's check) and
collects the cycles that held them. A plan used after that raises ``HipdnnError``.

Example:
    >>> from hipdnn_graph_torch_rocm.cudnn_fe.lifetime import Registry
    >>> class Holder:
    ...     graph = "a cuDNN graph"
    ...     def release(self):
    ...         self.graph = None
    >>> registry, holder = Registry(), Holder()
    >>> registry.hold(holder)
    >>> registry.release(collect=False)
    1
    >>> holder.graph is None
    True
"""

from __future__ import annotations

import atexit
import gc
import threading
import typing
import weakref
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["REGISTRY", "Registry", "Releasable", "hold", "release", "watch"]


class Releasable(Protocol):
    """An object holding cudnn-frontend's objects, which ``release()`` drops."""

    def release(self) -> None: ...


class Registry:
    """Holders to release at exit (held weakly: a holder freed earlier is gone), and the steps
    that run after them."""

    def __init__(self) -> None:
        self._held: weakref.WeakSet[Any] = weakref.WeakSet()
        self._last: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._watching = False

    def hold(self, holder: Releasable) -> None:
        """Release ``holder`` with the others."""
        with self._lock:
            self._held.add(holder)

    def watch(self, last: Callable[[], None]) -> None:
        """Register :meth:`release` with :mod:`atexit`, once; call it after ``import cudnn``
        so that it runs before cudnn-frontend's own exit handlers. ``last`` runs after the
        holders are released (each distinct function once)."""
        with self._lock:
            if last not in self._last:
                self._last.append(last)
            if self._watching:
                return
            self._watching = True
        atexit.register(self.release)

    def release(self, *, collect: bool = True) -> int:
        """Release every held object, then run the ``last`` steps; with ``collect``, also clear
        :mod:`typing`'s caches and collect garbage. Returns how many holders were released."""
        with self._lock:
            holders = list(self._held)
            self._held.clear()
            last = list(self._last)
        for holder in holders:
            holder.release()
        if collect:
            gc.collect()  # the graphs' own cycles, before their handles go
        for step in last:
            step()
        if collect:
            _clear_typing_caches()
            gc.collect()
        return len(holders)


#: the process's registry (the engine's, its plans', the handles')
REGISTRY = Registry()


def hold(holder: Releasable) -> None:
    """:meth:`Registry.hold` on :data:`REGISTRY`."""
    REGISTRY.hold(holder)


def watch(last: Callable[[], None]) -> None:
    """:meth:`Registry.watch` on :data:`REGISTRY`."""
    REGISTRY.watch(last)


def release(*, collect: bool = True) -> int:
    """:meth:`Registry.release` on :data:`REGISTRY`."""
    return REGISTRY.release(collect=collect)


def _clear_typing_caches() -> None:
    """Empty :mod:`typing`'s internal caches of subscripted annotations (CPython keeps their
    cache-clear functions in ``typing._cleanups``; another Python may have none)."""
    for clear in getattr(typing, "_cleanups", ()):
        clear()
