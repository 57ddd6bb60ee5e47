"""cuDNN handles: one per CUDA device, created on first use, run on torch's current stream."""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["handle_for_current_stream", "handle_for_device"]

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
