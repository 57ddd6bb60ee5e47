"""``Handle`` and the module-level helpers around it: streams, engine metadata, plugins, devices.

A handle carries a stream. With a CUDA/ROCm device visible to torch, the stream is a torch
stream address (``0`` is the default stream) and ``Graph.execute`` runs torch engines on it; on a
machine without a device the handle is a host handle whose only stream is ``0``. Engines are
hipdnn-graph's registered backends (:func:`hipdnn_graph.list_backends`); an engine's id is the
FNV-1a hash of its name, as in hipDNN.

Example:
    >>> import hipdnn_graph.frontend as hipdnn
    >>> handle = hipdnn.create_handle()
    >>> handle.get_stream(), hipdnn.engine_id_to_name(
    ...     hipdnn.Graph().set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE")
    ...     .get_preferred_engine_id_ext())
    (0, 'NUMPY_REFERENCE_ENGINE')
    >>> hipdnn.destroy_handle(handle); "destroyed" in repr(handle)
    True
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from typing import Any

from ..backend.contract import engine_id
from ..backend.registry import current_registry
from ..types import ErrorCode
from ._enums import PluginLoadingMode
from ._errors import FrontendIndexError, FrontendRuntimeError
from ._memory import torch_device_available

__all__ = [
    "EngineInfo",
    "Handle",
    "create_handle",
    "destroy_handle",
    "engine_id_to_name",
    "get_loaded_engine_plugin_paths",
    "get_stream",
    "hip_device_synchronize",
    "hip_get_device_count",
    "hip_stream_synchronize",
    "set_engine_plugin_paths",
    "set_stream",
]

_DESTROYED = "Handle has been destroyed"


def _stream_address(stream: Any) -> int:
    """A stream as an address: an int, or a torch stream (its ``cuda_stream``)."""
    address = getattr(stream, "cuda_stream", stream)
    if isinstance(address, bool):
        raise FrontendRuntimeError("Failed to set stream: a bool is not a stream", _HANDLE)
    try:
        return operator.index(address)
    except TypeError:
        raise FrontendRuntimeError(
            f"Failed to set stream: expected an int or a torch stream, got {type(stream).__name__}",
            _HANDLE,
        ) from None


_HANDLE = ErrorCode.HANDLE_ERROR


@dataclass(frozen=True)
class EngineInfo:
    """What a loaded engine is: id, name, the plugin (backend) providing it, version, type."""

    engine_id: int
    engine_name: str
    plugin_name: str
    version: str
    type: str = "HIPDNN_PLUGIN_TYPE_ENGINE"


class Handle:
    """hipDNN's handle: a stream, engine metadata, and a nonzero address (``get()``).

    Args:
        stream: ``0`` (the default stream), a torch stream address, or a torch stream object.

    Raises:
        FrontendRuntimeError: ``HANDLE_ERROR`` for a nonzero stream without a device.
    """

    def __init__(self, stream: Any = 0) -> None:
        self._destroyed = False
        self._stream = 0
        self.set_stream(stream)

    def _check(self) -> None:
        if self._destroyed:
            raise FrontendRuntimeError(_DESTROYED, _HANDLE)

    def get(self) -> int:
        """The handle's address (nonzero while it lives)."""
        self._check()
        return id(self)

    def __int__(self) -> int:
        return self.get()

    def __index__(self) -> int:
        return self.get()

    def set_stream(self, stream: Any) -> None:
        """Run on ``stream`` from now on."""
        self._check()
        address = _stream_address(stream)
        if address != 0 and not torch_device_available():
            raise FrontendRuntimeError(
                f"Failed to set stream {address:#x}: no CUDA/ROCm device is visible, so the "
                "only stream is 0 (the host)",
                _HANDLE,
            )
        self._stream = address

    def get_stream(self) -> int:
        """The stream address (0 is the default stream)."""
        self._check()
        return self._stream

    def get_engine_info(self, engine: int) -> EngineInfo:
        """Metadata of a loaded engine.

        Raises:
            FrontendIndexError: ``Engine ID is not loaded``.
        """
        self._check()
        for backend in current_registry().backends():
            for candidate in backend.engines():
                if engine_id(candidate.name) == engine:
                    from .. import __version__

                    version = str(getattr(backend, "version", "") or __version__)
                    return EngineInfo(engine, candidate.name, backend.name, version)
        raise FrontendIndexError("Engine ID is not loaded")

    def engine_id_to_name(self, engine: int) -> str:
        """The name of the engine with this id among the engines loaded now.

        Unlike the module-level :func:`engine_id_to_name` (``""`` for an unknown id), the
        handle's lookup raises for an id no loaded engine carries, as hipDNN's does.

        Raises:
            FrontendRuntimeError: ``Handle has been destroyed``.
            FrontendIndexError: ``Engine ID is not loaded``.
        """
        self._check()
        name = engine_id_to_name(engine)
        if not name:
            raise FrontendIndexError("Engine ID is not loaded")
        return name

    def get_loaded_engine_plugin_paths(self) -> list[str]:
        """Where each loaded plugin came from (entry-point values, ``"runtime"`` for plugins
        registered in-process)."""
        self._check()
        return [info.source for info in current_registry().infos() if info.loaded]

    def destroy(self) -> None:
        self._destroyed = True

    def __repr__(self) -> str:
        if self._destroyed:
            return "<hipdnn_frontend.Handle (destroyed)>"
        return f"<hipdnn_frontend.Handle at {id(self)}>"


def create_handle(stream: Any = 0) -> Handle:
    """A new :class:`Handle` on ``stream``."""
    return Handle(stream)


def destroy_handle(handle: Handle) -> None:
    """Make ``handle`` unusable (its methods then raise ``Handle has been destroyed``)."""
    handle.destroy()


def set_stream(handle: Handle, stream: Any) -> None:
    handle.set_stream(stream)


def get_stream(handle: Handle) -> int:
    return handle.get_stream()


def get_loaded_engine_plugin_paths(handle: Handle) -> list[str]:
    return handle.get_loaded_engine_plugin_paths()


def engine_id_to_name(engine: int) -> str:
    """The name of the loaded engine with this id, ``""`` if none."""
    for candidate in current_registry().engines():
        if engine_id(candidate.name) == engine:
            return candidate.name
    return ""


def set_engine_plugin_paths(
    paths: list[str], mode: PluginLoadingMode = PluginLoadingMode.ADDITIVE
) -> None:
    """Load plugins by entry-point value (``"package.module:factory"``) into the current
    registry; ``ABSOLUTE`` first unloads every other plugin.

    Raises:
        FrontendRuntimeError: ``Failed to set engine plugin paths`` with the reason.
    """
    registry = current_registry()
    backends = []
    for path in paths:
        try:
            factory = EntryPoint(name=path, value=path, group="hipdnn_graph.backends").load()
            backend = factory if _is_backend(factory) else factory()
            if not _is_backend(backend):
                raise TypeError(f"{path} did not produce a Backend")
        except Exception as exc:
            raise FrontendRuntimeError(
                f"Failed to set engine plugin paths: {path}: {type(exc).__name__}: {exc}"
            ) from None
        backends.append(backend)
    if PluginLoadingMode(mode) == PluginLoadingMode.ABSOLUTE:
        for info in registry.infos():
            registry.unregister(info.name)
    for backend in backends:
        registry.register(backend, replace=True)


def _is_backend(obj: Any) -> bool:
    return not isinstance(obj, type) and callable(getattr(obj, "engines", None))


def hip_get_device_count() -> int:
    """CUDA/ROCm devices visible to torch (0 without torch or without a device)."""
    if not torch_device_available():
        return 0
    import torch

    return int(torch.cuda.device_count())


def hip_stream_synchronize(stream: int = 0) -> None:
    """Wait for ``stream`` (no-op without a device)."""
    if torch_device_available():
        import torch

        if stream:
            torch.cuda.ExternalStream(stream).synchronize()  # type: ignore[no-untyped-call]
        else:
            torch.cuda.current_stream().synchronize()


def hip_device_synchronize() -> None:
    """Wait for the device (no-op without one)."""
    if torch_device_available():
        import torch

        torch.cuda.synchronize()
