"""The backend registry: plugins from entry points, loaded lazily, plus in-process ones.

Plugins register in the entry-point group ``hipdnn_graph.backends``; each entry point names a
callable that returns a :class:`~hipdnn_graph.backend.Backend`, a Backend class (instantiated
with no arguments), or a Backend object itself. The registry loads them the first time engines
are needed. A plugin that fails to import is skipped with a warning and listed, with its error,
by :func:`list_backends`.

The registry is thread-safe: the first threads to need engines wait while one of them loads the
plugins, and the loaded backends are published only once loading is complete.
:func:`isolated_registry` swaps the registry for the current thread (and the asyncio task or
context it runs in) only; other threads keep the process-wide registry.

Example:
    >>> import hipdnn_graph as hg
    >>> with hg.backend.isolated_registry(load_entry_points=False) as registry:
    ...     registry.backends()
    []
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from importlib import metadata
from typing import Any

from ..errors import HipdnnError
from ..types import ErrorCode
from .contract import Backend, BackendInfo, Engine

__all__ = [
    "ENTRY_POINT_GROUP",
    "Registry",
    "current_registry",
    "isolated_registry",
    "list_backends",
    "register_backend",
]

ENTRY_POINT_GROUP = "hipdnn_graph.backends"


class Registry:
    """Holds backends: those found through entry points and those registered in-process."""

    def __init__(self, *, load_entry_points: bool = True) -> None:
        self._load_entry_points = load_entry_points
        self._loaded = False
        #: the thread loading the entry points (a plugin that asks for the registry while it
        #: loads sees what is registered so far instead of deadlocking)
        self._loading_thread: int | None = None
        # re-entrant: a plugin's factory may call register_backend() while it loads
        self._lock = threading.RLock()
        self._backends: dict[str, Backend] = {}
        self._infos: dict[str, BackendInfo] = {}

    # ----- loading -----
    def _ensure_loaded(self) -> None:
        if self._loaded:  # published only after loading finished (see below)
            return
        with self._lock:
            if self._loaded or self._loading_thread == threading.get_ident():
                return
            self._loading_thread = threading.get_ident()
            try:
                if self._load_entry_points:
                    entries = sorted(
                        metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name
                    )
                    for entry in entries:
                        self._load_entry(entry.name, entry.value, entry.load)
                self._loaded = True
            finally:
                self._loading_thread = None

    def _load_entry(self, name: str, source: str, load: Callable[[], Any]) -> None:
        try:
            factory = load()
            # a factory function, a Backend class (instantiated), or a Backend object
            is_class = isinstance(factory, type)
            if is_class or (callable(factory) and not _is_backend(factory)):
                backend = factory()
            else:
                backend = factory
            if not _is_backend(backend):
                raise TypeError(
                    f"{source} did not produce a Backend (got {type(backend).__name__})"
                )
            engines = [e.name for e in backend.engines()]
        except Exception as exc:  # a broken plugin must not break the others
            message = f"{type(exc).__name__}: {exc}"
            warnings.warn(
                f"hipdnn_graph: backend plugin '{name}' ({source}) failed to load and is skipped: "
                f"{message}",
                RuntimeWarning,
                stacklevel=3,
            )
            self._infos[name] = BackendInfo(name=name, source=source, error=message)
            return
        self._backends[backend.name] = backend
        self._infos[backend.name] = BackendInfo(name=backend.name, engines=engines, source=source)

    # ----- public API -----
    def register(self, backend: Backend, *, replace: bool = False) -> Backend:
        """Register a backend object in this process.

        Raises:
            HipdnnError: ``INVALID_VALUE`` when it is not a Backend, or when a backend of the
                same name exists and ``replace`` is False.
        """
        self._ensure_loaded()
        if not _is_backend(backend):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"register_backend() expects a Backend (name and engines()), "
                f"got {type(backend).__name__}",
            )
        engines = [e.name for e in backend.engines()]
        with self._lock:
            if backend.name in self._backends and not replace:
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"A backend named '{backend.name}' is already registered (pass replace=True)",
                )
            self._backends[backend.name] = backend
            self._infos[backend.name] = BackendInfo(
                name=backend.name, engines=engines, source="runtime"
            )
        return backend

    def unregister(self, name: str) -> None:
        """Remove a backend by name (no error when absent)."""
        with self._lock:
            self._backends.pop(name, None)
            self._infos.pop(name, None)

    def backends(self) -> list[Backend]:
        """Loaded backends, in registration order."""
        self._ensure_loaded()
        with self._lock:
            return list(self._backends.values())

    def engines(self) -> list[Engine]:
        """Every engine of every loaded backend."""
        return [engine for backend in self.backends() for engine in backend.engines()]

    def find_engine(self, name: str) -> Engine | None:
        """The engine called ``name``, or ``None``."""
        for engine in self.engines():
            if engine.name == name:
                return engine
        return None

    def infos(self) -> list[BackendInfo]:
        """Every plugin seen, loaded or not, with its engines or its load error."""
        self._ensure_loaded()
        with self._lock:
            return list(self._infos.values())


def _is_backend(obj: Any) -> bool:
    return isinstance(getattr(obj, "name", None), str) and callable(getattr(obj, "engines", None))


_default = Registry()
#: the isolated registries entered in this context, innermost last (empty: the default one)
_isolated: ContextVar[tuple[Registry, ...]] = ContextVar("hipdnn_graph_isolated", default=())


def current_registry() -> Registry:
    """The registry in use: the process-wide one, or this thread's innermost
    :func:`isolated_registry`."""
    stack = _isolated.get()
    return stack[-1] if stack else _default


@contextmanager
def isolated_registry(*, load_entry_points: bool = True) -> Iterator[Registry]:
    """Use a fresh registry inside a ``with`` block (for tests and experiments).

    Only the calling thread (more exactly, its :mod:`contextvars` context, which asyncio tasks
    started inside the block inherit) sees the fresh registry; other threads keep using theirs,
    and so do threads started inside the block (a new thread starts with an empty context).

    Args:
        load_entry_points: also load the installed plugins into the fresh registry.
    """
    registry = Registry(load_entry_points=load_entry_points)
    token = _isolated.set((*_isolated.get(), registry))
    try:
        yield registry
    finally:
        _isolated.reset(token)


def register_backend(backend: Backend, *, replace: bool = False) -> Backend:
    """Register ``backend`` in the current registry (see :meth:`Registry.register`)."""
    return current_registry().register(backend, replace=replace)


def list_backends() -> list[BackendInfo]:
    """Every backend plugin, loaded or failed, with its engines or load error."""
    return current_registry().infos()
