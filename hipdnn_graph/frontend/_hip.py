"""hipDNN's provisional HIP helpers, over torch's device runtime: ``HipEvent`` (timing events),
``HipStallGate`` (a stream stall used to time without host gaps) and
``hip_can_use_stream_wait_value``.

``HipEvent`` is a timing event of torch's CUDA/ROCm runtime: it needs a device (without one,
constructing it raises ``RuntimeError``). Stream ``0`` is the device's default stream, any other
value a raw stream handle. ``HipStallGate`` needs ``hipStreamWaitValue32``, a stream memory
operation that torch does not expose, so ``hip_can_use_stream_wait_value()`` answers ``False``
here and a gate cannot be armed (``arm`` raises saying so; after ``destroy`` both ``arm`` and
``release`` raise that the gate was destroyed, as hipDNN's do).

Example:
    >>> import hipdnn_graph.frontend as hipdnn
    >>> hipdnn.hip_can_use_stream_wait_value()
    False
    >>> gate = hipdnn.HipStallGate()
    >>> gate.destroy()
    >>> try:
    ...     gate.release()
    ... except RuntimeError as err:
    ...     print(err)
    HipStallGate has been destroyed
"""

from __future__ import annotations

from typing import Any

from ._errors import FrontendRuntimeError
from ._memory import torch_device_available

__all__ = ["HipEvent", "HipStallGate", "hip_can_use_stream_wait_value"]


def _stream(stream: Any) -> Any:
    import torch

    address = int(stream)
    if address == 0:
        return torch.cuda.default_stream()
    return torch.cuda.ExternalStream(address)  # type: ignore[no-untyped-call]


class HipEvent:
    """A timing event (``record``, ``synchronize``, ``query``, ``elapsed_time``).

    Raises:
        FrontendRuntimeError: constructed without a device.
    """

    def __init__(self) -> None:
        if not torch_device_available():
            raise FrontendRuntimeError(
                "HipEvent needs a HIP or CUDA device: torch sees none on this machine"
            )
        import torch

        self._event = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]

    def record(self, stream: int = 0) -> None:
        """Record the event on ``stream`` (0: the default stream)."""
        self._event.record(_stream(stream))

    def synchronize(self) -> None:
        """Wait until the event has completed."""
        self._event.synchronize()

    def query(self) -> bool:
        """Whether the event has completed."""
        return bool(self._event.query())  # type: ignore[no-untyped-call]

    def elapsed_time(self, end: HipEvent) -> float:
        """Milliseconds from this event to ``end`` (both recorded and completed)."""
        return float(self._event.elapsed_time(end._event))


def hip_can_use_stream_wait_value() -> bool:
    """Whether a :class:`HipStallGate` can stall a stream: never here, torch exposes no stream
    wait-value operation."""
    return False


class HipStallGate:
    """A stream stall released from the host; it cannot be armed here (see the module
    docstring)."""

    def __init__(self) -> None:
        self._destroyed = False

    def _check(self) -> None:
        if self._destroyed:
            raise FrontendRuntimeError("HipStallGate has been destroyed")

    def arm(self, stream: int = 0) -> None:
        """Stall ``stream`` until :meth:`release`.

        Raises:
            FrontendRuntimeError: after :meth:`destroy`; always otherwise, as stream wait-value
                operations are not available.
        """
        self._check()
        raise FrontendRuntimeError(
            "HipStallGate.arm(): stream wait-value operations are not available "
            "(hip_can_use_stream_wait_value() is False)"
        )

    def release(self) -> None:
        """Release an armed stall (nothing is armed here).

        Raises:
            FrontendRuntimeError: after :meth:`destroy`.
        """
        self._check()

    def timed_out(self) -> bool:
        """Whether the watchdog released the last stall (never: none is armed here)."""
        return False

    def destroy(self) -> None:
        """Free the gate; ``arm`` and ``release`` raise afterwards."""
        self._destroyed = True
