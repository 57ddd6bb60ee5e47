"""The CUDA graph replay cache of the torch plans: which calls run eagerly, which capture, which
replay. The policy is plain Python, so it is tested here on the CPU with a stand-in capture; the
real capture and replay run in ``tests/gpu``."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from hipdnn_graph_torch_rocm import replay  # noqa: E402
from hipdnn_graph_torch_rocm.replay import CudaGraphReplay, graphs_per_plan  # noqa: E402


class _Graph:
    def __init__(self, log: list[str], key: Any) -> None:
        self.log, self.key = log, key

    def replay(self) -> None:
        self.log.append(f"replay {self.key}")


class _Recorder(CudaGraphReplay):
    """Recording a graph is a stand-in that logs (or fails as a host sync would); buffers count
    as one-device CUDA packs. Everything else is the real policy."""

    def __init__(self, capacity: int, fail: bool = False) -> None:
        super().__init__(frozenset({9}), capacity)
        self.log: list[str] = []
        self.fail = fail

    def _record(self, buffers: dict[int, Any], run_steps: Any) -> Any:
        if self.fail:
            raise RuntimeError("operation not permitted when stream is capturing")
        self.log.append(f"capture {buffers[1].data_ptr()}")
        return _Graph(self.log, buffers[1].data_ptr())


@pytest.fixture(autouse=True)
def _cpu_counts_as_one_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay, "_single_cuda_device", lambda buffers: "dev")


def _packs(n: int) -> list[dict[int, Any]]:
    return [{1: torch.zeros(4), 9: torch.zeros(4), 3: 0.5} for _ in range(n)]


def _calls(r: _Recorder, packs: list[dict[int, Any]]) -> list[str]:
    ran = []
    for pack in packs:
        ran.append("replayed" if r.run(pack, lambda b: None) else "eager")
    return ran


def test_first_call_eager_second_captures_then_replays() -> None:
    r = _Recorder(4)
    (a,) = _packs(1)
    assert _calls(r, [a, a, a]) == ["eager", "replayed", "replayed"]
    ptr = a[1].data_ptr()
    assert r.log == [f"capture {ptr}", f"replay {ptr}", f"replay {ptr}"]
    assert r.captures == 1


def test_alternating_buffer_sets_each_keep_their_graph() -> None:
    r = _Recorder(4)
    a, b = _packs(2)
    assert _calls(r, [a, b, a, b, a, b]) == ["eager"] * 2 + ["replayed"] * 4
    assert r.captures == 2


def test_a_cycle_longer_than_the_bound_never_captures() -> None:
    r = _Recorder(2)
    packs = _packs(3)
    assert _calls(r, packs * 4) == ["eager"] * 12
    assert r.captures == 0 and len(r.graphs) == 2


def test_least_recently_used_graph_is_dropped() -> None:
    r = _Recorder(2)
    a, b, c = _packs(3)
    _calls(r, [a, a, b, b, a, c])  # a and b captured; c evicts b, the older of the two
    assert r.captures == 2
    assert _calls(r, [a, b]) == ["replayed", "eager"]


def test_calls_without_every_output_leave_the_cache_alone() -> None:
    r = _Recorder(4)
    (a,) = _packs(1)
    _calls(r, [a, a])
    run_style = {k: v for k, v in a.items() if k != 9}  # Graph.run: the output is missing
    assert _calls(r, [run_style, a]) == ["eager", "replayed"]
    assert r.captures == 1


def test_new_scalar_values_are_new_keys() -> None:
    r = _Recorder(4)
    (a,) = _packs(1)
    b = {**a, 3: 0.25}
    assert _calls(r, [a, a, b, b]) == ["eager", "replayed", "eager", "replayed"]
    assert r.captures == 2


def test_capacity_zero_and_failed_captures_run_eagerly() -> None:
    (a,) = _packs(1)
    assert _calls(_Recorder(0), [a, a, a]) == ["eager"] * 3
    failing = _Recorder(4, fail=True)
    assert _calls(failing, [a, a, a]) == ["eager"] * 3
    assert failing.capacity == 0 and failing.captures == 0 and not failing.graphs


def test_cpu_tensors_and_other_values_are_never_captured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # the real device check
    r = _Recorder(4)
    (a,) = _packs(1)
    assert _calls(r, [a, a, a]) == ["eager"] * 3
    assert replay._single_cuda_device({1: torch.zeros(1)}) is None
    assert replay._single_cuda_device({1: 0.5, 2: 3}) is None  # no tensor, no device
    assert replay._single_cuda_device({1: "text"}) is None


@pytest.mark.parametrize(("raw", "expected"), [(None, 4), ("0", 0), ("1", 1), ("16", 16),
                                               ("-3", 0), ("many", 4), ("", 4)])  # fmt: skip
def test_graphs_per_plan_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch, raw: str | None, expected: int
) -> None:
    if raw is None:
        monkeypatch.delenv("HIPDNN_GRAPH_CUDA_GRAPHS", raising=False)
    else:
        monkeypatch.setenv("HIPDNN_GRAPH_CUDA_GRAPHS", raw)
    assert graphs_per_plan() == expected


class _WarningGraph:
    """A stand-in CUDA graph whose capture_end warns as torch's does on an empty capture."""

    ended = 0

    def capture_begin(self, **kw: Any) -> None:
        pass

    def capture_end(self) -> None:
        _WarningGraph.ended += 1
        import warnings

        warnings.warn("The CUDA Graph is empty. This usually means ...", UserWarning, stacklevel=1)


@pytest.fixture
def _fake_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    import contextlib

    class _Stream:
        def __init__(self, device: Any = None) -> None:
            pass

        def wait_stream(self, other: Any) -> None:
            pass

    _WarningGraph.ended = 0
    monkeypatch.setattr(torch.cuda, "CUDAGraph", _WarningGraph)
    monkeypatch.setattr(torch.cuda, "Stream", _Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: _Stream())
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())


@pytest.mark.usefixtures("_fake_cuda")
def test_a_failed_capture_ends_without_torchs_empty_graph_warning() -> None:
    """A plan that syncs with the host fails its capture: the capture is ended, the error goes
    to the caller (which then runs eagerly) and torch's "graph is empty" warning is silenced."""
    import warnings

    def syncs(buffers: dict[int, Any]) -> None:
        raise RuntimeError("operation not permitted when stream is capturing")

    r = CudaGraphReplay(frozenset({9}), 4)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="not permitted"):
            r._record(_packs(1)[0], syncs)
    assert _WarningGraph.ended == 1
    assert seen == []


@pytest.mark.usefixtures("_fake_cuda")
def test_a_successful_capture_leaves_torchs_warnings_alone() -> None:
    """Only failed captures are quiet: a capture that succeeds but records nothing still warns,
    as torch does for the caller's own captures."""
    import warnings

    r = CudaGraphReplay(frozenset({9}), 4)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        graph = r._record(_packs(1)[0], lambda buffers: None)
    assert isinstance(graph, _WarningGraph) and _WarningGraph.ended == 1
    assert [str(w.message)[:25] for w in seen] == ["The CUDA Graph is empty. "]


class _InvalidatedGraph(_WarningGraph):
    """A capture that a host sync invalidated: ending it raises, as torch's does."""

    def capture_end(self) -> None:
        raise RuntimeError("CUDA error: operation failed due to a previous error during capture")


class _Generator:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def clone_state(self) -> _Generator:
        self.log.append(f"clone {self.name}")
        return _Generator(self.log, f"copy of {self.name}")

    def graphsafe_set_state(self, state: _Generator) -> None:
        self.log.append(f"set {self.name} <- {state.name}")


@pytest.mark.usefixtures("_fake_cuda")
@pytest.mark.parametrize(("graph", "released"), [(_InvalidatedGraph, True), (_WarningGraph, False)],
                         ids=["invalidated", "ended"])  # fmt: skip
def test_a_capture_that_cannot_end_gives_the_generator_a_fresh_state(
    monkeypatch: pytest.MonkeyPatch, graph: type, released: bool
) -> None:
    """Ending an invalidated capture raises before torch takes the default generator out of
    capture mode: the generator of the capture's device gets a copy of its own state (its seed
    and offset, not capturing); a capture that ends normally leaves it alone. The caller sees
    the kernels' own error either way."""
    log: list[str] = []
    monkeypatch.setattr(torch.cuda, "CUDAGraph", graph)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "default_generators",
                        (_Generator(log, "gen0"), _Generator(log, "gen1")))  # fmt: skip

    def syncs() -> None:
        raise RuntimeError("operation not permitted when stream is capturing")

    for device in ("cuda:0", "cuda"):
        with pytest.raises(RuntimeError, match="not permitted"):
            replay.record_graph(syncs, device, torch.cuda.Stream())
    expected = ["clone gen0", "set gen0 <- copy of gen0", "clone gen1", "set gen1 <- copy of gen1"]
    assert log == (expected if released else [])
