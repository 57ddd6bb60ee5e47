"""cuDNN handles: one per CUDA device, created on first use, run on torch's current stream,
destroyed at interpreter exit (:mod:`.lifetime`)."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from . import lifetime

__all__ = ["destroy_handles", "handle_for_current_stream", "handle_for_device"]

_HANDLES: dict[int, Any] = {}
_LOCK = threading.Lock()


def handle_for_device(index: int) -> Any:
    """The cuDNN handle of CUDA device ``index`` (created once, on that device)."""
    handle = _HANDLES.get(index)
    if handle is None:
        import cudnn
        import torch

        with _LOCK:
            handle = _HANDLES.get(index)
            if handle is None:
                with torch.cuda.device(index):
                    handle = cudnn.create_handle()
                _HANDLES[index] = handle
        # after `import cudnn`: the release runs before cudnn-frontend's own exit handlers
        lifetime.watch(destroy_handles)
    return handle


def handle_for_current_stream(device: Any) -> Any:
    """``device``'s handle, set to torch's current stream there (cudnn-frontend skips the call
    when the stream is unchanged)."""
    import cudnn
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    handle = handle_for_device(index)
    cudnn.set_stream(handle, torch.cuda.current_stream(index).cuda_stream)
    return handle


def destroy_handles() -> None:
    """Destroy every handle made here (the next use makes a new one). A handle that cannot be
    destroyed (CUDA already torn down) is dropped all the same."""
    with _LOCK:
        handles = list(_HANDLES.values())
        _HANDLES.clear()
    if not handles:
        return
    import cudnn

    for handle in handles:
        with contextlib.suppress(Exception):  # at exit, CUDA may be gone already
            cudnn.destroy_handle(handle)
