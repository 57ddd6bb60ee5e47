"""hipDNN's provisional HIP helpers: ``HipEvent``, ``HipStallGate`` and
``hip_can_use_stream_wait_value`` (hipDNN's ``hip_bindings.cpp``).

``HipEvent`` times work the way :meth:`Graph.execute_timed_ext` does: with a CUDA/ROCm device
visible to torch, a torch event recorded on a stream (``0``, the default stream, or a stream
address); without one, the host clock (the host is then the device, and its only stream is
``0``). Errors are hipDNN's ``RuntimeError``\\ s (also :class:`~hipdnn_graph.HipdnnError`).

hipDNN's stall gate holds a stream with ``hipStreamWaitValue32``, which torch does not expose:
:func:`hip_can_use_stream_wait_value` answers ``False`` and ``HipStallGate()`` raises hipDNN's
message for a device without it, so code written for hipDNN takes its own fallback path.

Example:
    >>> import time
    >>> import hipdnn_graph.frontend as hipdnn
    >>> start, stop = hipdnn.HipEvent(), hipdnn.HipEvent()
    >>> start.record(0); time.sleep(0.01); stop.record(0); stop.synchronize()
    >>> start.elapsed_time(stop) >= 0.0, hipdnn.hip_can_use_stream_wait_value()
    (True, False)
"""

from __future__ import annotations

import math
import time
from typing import Any

from ..types import ErrorCode
from ._errors import FrontendRuntimeError
from ._memory import torch_device_available

__all__ = ["HipEvent", "HipStallGate", "hip_can_use_stream_wait_value"]

_DESTROYED = "HIP event has been destroyed"


def hip_can_use_stream_wait_value() -> bool:
    """Whether a stream can be stalled with ``hipStreamWaitValue32``: never here (torch has no
    such call), so hipDNN code that asks takes its fallback path."""
    return False


class HipStallGate:
    """hipDNN's host-released stall gate; never usable here (see the module docstring).

    Raises:
        FrontendRuntimeError: always, with hipDNN's message for a device without
            ``hipStreamWaitValue32`` (code ``GRAPH_NOT_SUPPORTED``).
    """

    def __init__(self) -> None:
        raise FrontendRuntimeError(
            "hipStreamWaitValue32 unsupported on this device", ErrorCode.GRAPH_NOT_SUPPORTED
        )


class HipEvent:
    """A timing event: a torch event with a device, the host clock without one.

    Raises (from its methods):
        FrontendRuntimeError: ``HIP event has been destroyed`` after :meth:`destroy`; a
            nonzero stream without a device; :meth:`elapsed_time` with an event not recorded.
    """

    def __init__(self) -> None:
        self._destroyed = False
        self._host_time: float | None = None
        self._event: Any = None
        if torch_device_available():
            import torch

            self._event = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]

    def _check(self) -> None:
        if self._destroyed:
            raise FrontendRuntimeError(_DESTROYED, ErrorCode.INVALID_VALUE)

    def record(self, stream: int = 0) -> None:
        """Record the event on ``stream`` (``0``: the default stream)."""
        self._check()
        if self._event is None:
            if stream:
                raise FrontendRuntimeError(
                    f"hipEventRecord failed: stream {stream:#x} does not exist without a "
                    "device (the host's only stream is 0)",
                    ErrorCode.HANDLE_ERROR,
                )
            self._host_time = time.perf_counter()
            return
        import torch

        on = torch.cuda.ExternalStream(stream) if stream else torch.cuda.default_stream()  # type: ignore[no-untyped-call]
        self._event.record(on)

    def synchronize(self) -> None:
        """Wait until the event has completed (at once on the host)."""
        self._check()
        if self._event is not None:
            self._event.synchronize()

    def elapsed_time(self, stop_event: HipEvent) -> float:
        """Milliseconds from this event to ``stop_event``.

        Raises:
            FrontendRuntimeError: an event not recorded, or a time that is negative or not
                finite (hipDNN refuses those too).
        """
        self._check()
        stop_event._check()
        if self._event is None:
            if self._host_time is None or stop_event._host_time is None:
                raise FrontendRuntimeError(
                    "hipEventElapsedTime failed: an event has not been recorded",
                    ErrorCode.INVALID_VALUE,
                )
            elapsed = (stop_event._host_time - self._host_time) * 1e3
        else:
            try:
                elapsed = float(self._event.elapsed_time(stop_event._event))
            except RuntimeError as exc:
                raise FrontendRuntimeError(
                    f"hipEventElapsedTime failed: {exc}", ErrorCode.INVALID_VALUE
                ) from None
        if not math.isfinite(elapsed) or elapsed < 0.0:
            raise FrontendRuntimeError(
                "hipEventElapsedTime returned a non-finite or negative elapsed time",
                ErrorCode.INVALID_VALUE,
            )
        return elapsed

    def destroy(self) -> None:
        """Release the event; later calls raise ``HIP event has been destroyed``."""
        self._destroyed = True
        self._event = None

    def __repr__(self) -> str:
        state = " (destroyed)" if self._destroyed else ""
        return f"<hipdnn_frontend.HipEvent at {id(self)}{state}>"
