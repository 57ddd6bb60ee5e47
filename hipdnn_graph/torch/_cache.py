"""A bounded, thread-safe LRU cache of built graphs.

Graphs are keyed by everything that changes them (shapes, strides, dtypes, device, flags,
engine); a hit returns the built graph without rebuilding anything. The torch op keeps one
cache for its forward and backward graphs (:func:`hipdnn_graph.torch.graph_cache`).

Example:
    >>> from hipdnn_graph.torch._cache import GraphCache
    >>> cache = GraphCache(maxsize=2)
    >>> cache.get_or_build(("a",), lambda: "graph a")
    'graph a'
    >>> cache.get_or_build(("a",), lambda: "never built")
    'graph a'
    >>> cache.info()
    CacheInfo(hits=1, misses=1, maxsize=2, currsize=1)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, NamedTuple, TypeVar

from ..errors import HipdnnError
from ..types import ErrorCode

__all__ = ["CacheInfo", "GraphCache"]

T = TypeVar("T")


class CacheInfo(NamedTuple):
    """Counters of a :class:`GraphCache`, like :func:`functools.lru_cache`'s."""

    hits: int
    misses: int
    maxsize: int
    currsize: int


class GraphCache(Generic[T]):
    """Least-recently-used cache of built graphs, safe to share between threads.

    A miss builds the value outside the lock (building can take milliseconds), so two threads
    that miss the same key at once may both build; the first stored value wins and both get it.

    Args:
        maxsize: how many entries to keep (at least 1); the least recently used goes first.

    Raises:
        HipdnnError: ``INVALID_VALUE`` when ``maxsize`` is not a positive integer.
    """

    def __init__(self, maxsize: int = 256) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, T] = OrderedDict()
        self._hits = 0
        self._misses = 0
        self._maxsize = _checked_size(maxsize)

    def get(self, key: Hashable) -> T | None:
        """The cached value for ``key`` (counted as a hit), or ``None`` (not counted: the
        caller goes on to :meth:`get_or_build`, which counts the miss)."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
                self._hits += 1
            return value

    def peek(self, key: Hashable) -> T | None:
        """The cached value for ``key`` or ``None``, neither counted nor made recent."""
        with self._lock:
            return self._entries.get(key)

    def get_or_build(self, key: Hashable, build: Callable[[], T]) -> T:
        """The cached value for ``key``, or ``build()``'s result (stored) on a miss."""
        value = self.get(key)
        if value is not None:
            return value
        with self._lock:
            self._misses += 1
        built = build()  # a failed build stores nothing and raises to the caller
        with self._lock:
            value = self._entries.setdefault(key, built)
            self._entries.move_to_end(key)
            while len(self._entries) > self._maxsize:
                self._entries.popitem(last=False)
        return value

    def resize(self, maxsize: int) -> None:
        """Change the bound, dropping the least recently used entries beyond it."""
        size = _checked_size(maxsize)
        with self._lock:
            self._maxsize = size
            while len(self._entries) > size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._entries.clear()
            self._hits = self._misses = 0

    def info(self) -> CacheInfo:
        """Hits, misses, bound and current size."""
        with self._lock:
            return CacheInfo(self._hits, self._misses, self._maxsize, len(self._entries))

    def values(self) -> list[T]:
        """A snapshot of the cached values, least recently used first."""
        with self._lock:
            return list(self._entries.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def _checked_size(maxsize: object) -> int:
    if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"Graph cache size must be a positive integer, got {maxsize!r}"
        )
    return maxsize
