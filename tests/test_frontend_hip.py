"""hipdnn_graph.frontend's provisional HIP helpers (hipDNN's hip_bindings.cpp): HipEvent times on
the host clock without a device and with torch events on one; the stall gate, which needs
hipStreamWaitValue32, is refused with hipDNN's message (hipDNN's test_hip_event_bindings.py asks
that the six names exist)."""

from __future__ import annotations

import time

import pytest

import hipdnn_graph as hg
import hipdnn_graph.frontend as hipdnn

no_device = pytest.mark.skipif(
    hipdnn.hip_get_device_count() > 0, reason="host events: without a CUDA/ROCm device"
)


def test_the_hip_names_hipdnn_exports_exist() -> None:
    names = (
        "HipEvent",
        "HipStallGate",
        "hip_stream_synchronize",
        "hip_get_device_count",
        "hip_device_synchronize",
        "hip_can_use_stream_wait_value",
    )
    assert [n for n in names if not hasattr(hipdnn, n)] == []
    assert set(names) <= set(hipdnn.__all__)


def test_the_stall_gate_is_refused_as_on_a_device_without_stream_wait_value() -> None:
    assert hipdnn.hip_can_use_stream_wait_value() is False
    with pytest.raises(RuntimeError, match=r"^hipStreamWaitValue32 unsupported on this device$"):
        hipdnn.HipStallGate()
    with pytest.raises(hg.HipdnnError) as info:
        hipdnn.HipStallGate()
    assert info.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED


@no_device
class TestHostEvents:
    def test_elapsed_time_measures_the_host_clock(self) -> None:
        start, stop = hipdnn.HipEvent(), hipdnn.HipEvent()
        start.record(0)
        time.sleep(0.05)
        stop.record()
        stop.synchronize()
        elapsed = start.elapsed_time(stop)
        assert 45.0 <= elapsed < 5000.0

    def test_an_event_not_recorded_has_no_elapsed_time(self) -> None:
        start, stop = hipdnn.HipEvent(), hipdnn.HipEvent()
        start.record()
        with pytest.raises(RuntimeError, match="an event has not been recorded"):
            start.elapsed_time(stop)

    def test_stop_before_start_is_refused_as_negative(self) -> None:
        start, stop = hipdnn.HipEvent(), hipdnn.HipEvent()
        stop.record()
        time.sleep(0.001)
        start.record()
        with pytest.raises(RuntimeError, match="non-finite or negative elapsed time"):
            start.elapsed_time(stop)

    def test_a_nonzero_stream_does_not_exist_on_the_host(self) -> None:
        with pytest.raises(RuntimeError, match=r"^hipEventRecord failed: stream 0x10 does not"):
            hipdnn.HipEvent().record(16)

    def test_a_destroyed_event_raises(self) -> None:
        event = hipdnn.HipEvent()
        event.destroy()
        assert "(destroyed)" in repr(event)
        for call in (event.record, event.synchronize, lambda: event.elapsed_time(event)):
            with pytest.raises(RuntimeError, match=r"^HIP event has been destroyed$"):
                call()


@pytest.mark.gpu
def test_device_events_time_work_on_the_default_stream() -> None:
    if hipdnn.hip_get_device_count() <= 0:
        pytest.skip("needs a CUDA/ROCm device")
    torch = pytest.importorskip("torch")
    start, stop = hipdnn.HipEvent(), hipdnn.HipEvent()
    x = torch.randn(1024, 1024, device="cuda")
    start.record(0)
    for _ in range(10):
        x = x @ x / 1024
    stop.record(0)
    stop.synchronize()
    assert start.elapsed_time(stop) > 0.0
    stream = torch.cuda.Stream()
    start.record(stream.cuda_stream)
    stop.record(stream.cuda_stream)
    stop.synchronize()
    assert start.elapsed_time(stop) >= 0.0
