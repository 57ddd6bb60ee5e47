"""``CUDNN_FRONTEND_ENGINE`` releases cudnn-frontend's objects at interpreter exit
(:mod:`hipdnn_graph_torch_rocm.cudnn_fe.lifetime`), on CPU with a stand-in ``cudnn`` module; the
quiet exit itself (no nanobind leak report) is checked on the GPU in
``tests/gpu/test_cudnn_frontend_gpu.py``."""

from __future__ import annotations

import contextlib
import gc
import sys
import types
import typing
from typing import Any

import pytest

import hipdnn_graph as hg
from hipdnn_graph_torch_rocm.cudnn_fe import engine as fe_engine
from hipdnn_graph_torch_rocm.cudnn_fe import handles, lifetime
from hipdnn_graph_torch_rocm.cudnn_fe.node_graph import CudnnNodeGraph


class _Holder:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def release(self) -> None:
        self.log.append(self.name)


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> lifetime.Registry:
    """A fresh process registry; its atexit registrations recorded in ``registry.at_exit``."""
    fresh = lifetime.Registry()
    at_exit: list[Any] = []
    monkeypatch.setattr(lifetime, "REGISTRY", fresh)
    monkeypatch.setattr(lifetime, "atexit", types.SimpleNamespace(register=at_exit.append))
    fresh.at_exit = at_exit  # type: ignore[attr-defined]
    return fresh


@pytest.fixture
def fake_cudnn(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """A stand-in ``cudnn`` module recording handles made and destroyed."""
    made: list[str] = []
    destroyed: list[str] = []

    def create_handle() -> str:
        made.append(f"h{len(made)}")
        return made[-1]

    def destroy_handle(handle: str) -> None:
        if handle == "broken":
            raise RuntimeError("CUDA driver shutting down")
        destroyed.append(handle)

    module = types.ModuleType("cudnn")
    module.create_handle = create_handle  # type: ignore[attr-defined]
    module.destroy_handle = destroy_handle  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cudnn", module)
    monkeypatch.setattr(handles, "_HANDLES", {})
    return types.SimpleNamespace(made=made, destroyed=destroyed)


def test_release_drops_every_held_object_then_runs_the_last_steps(
    registry: lifetime.Registry,
) -> None:
    log: list[str] = []
    a, b = _Holder(log, "a"), _Holder(log, "b")
    registry.hold(a)
    registry.hold(b)
    registry.hold(a)  # held once
    registry.watch(lambda: log.append("last"))
    assert registry.release(collect=False) == 2
    assert sorted(log[:2]) == ["a", "b"] and log[2:] == ["last"]
    log.clear()
    assert registry.release(collect=False) == 0  # released holders are not held any more
    assert log == ["last"]


def test_holders_are_held_weakly(registry: lifetime.Registry) -> None:
    log: list[str] = []
    registry.hold(_Holder(log, "gone"))
    gc.collect()
    assert registry.release(collect=False) == 0
    assert log == []


def test_watch_registers_the_release_once_and_each_last_step_once(
    registry: lifetime.Registry,
) -> None:
    log: list[str] = []

    def step() -> None:
        log.append("step")

    registry.watch(step)
    registry.watch(step)
    assert registry.at_exit == [registry.release]  # type: ignore[attr-defined]
    registry.release(collect=False)
    assert log == ["step"]


def test_release_with_collect_clears_typing_caches(registry: lifetime.Registry) -> None:
    cached = typing.Optional[_Holder]  # noqa: UP045 -- a subscription typing caches
    assert typing.Optional[_Holder] is cached  # noqa: UP045 -- from its cache
    registry.release()
    if getattr(typing, "_cleanups", None) is not None:
        assert typing.Optional[_Holder] is not cached  # noqa: UP045 -- made anew


def test_destroy_handles_destroys_each_handle_once_and_survives_failures(
    fake_cudnn: types.SimpleNamespace,
) -> None:
    handles._HANDLES.update({0: "h0", 1: "broken", 2: "h2"})
    handles.destroy_handles()
    assert fake_cudnn.destroyed == ["h0", "h2"]
    assert handles._HANDLES == {}
    handles.destroy_handles()  # nothing left: nothing destroyed twice
    assert fake_cudnn.destroyed == ["h0", "h2"]


def test_the_first_handle_registers_the_release_at_exit(
    registry: lifetime.Registry, fake_cudnn: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "device", lambda index: contextlib.nullcontext())
    assert registry.at_exit == []  # type: ignore[attr-defined]
    assert handles.handle_for_device(0) == "h0"
    assert handles.handle_for_device(0) == "h0"  # one per device
    assert registry.at_exit == [registry.release]  # type: ignore[attr-defined]
    registry.release(collect=False)
    assert fake_cudnn.destroyed == ["h0"]
    assert handles.handle_for_device(0) == "h1"  # a new one after the release


def _step() -> CudnnNodeGraph:
    return CudnnNodeGraph(graph=object(), uids=(1,), sources=(None,), workspace_size=0)


def test_the_engine_and_its_plans_are_held_and_release_drops_their_cudnn_graphs(
    registry: lifetime.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = fe_engine.CudnnFrontendEngine()
    step = _step()
    monkeypatch.setattr(engine, "_node_graph", lambda p, index=0: step)
    engine._built[("key",)] = step
    g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, compute_data_type=hg.DataType.FLOAT)
    q = g.tensor(name="Q", dim=[1, 2, 64, 64])
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="n")
    o.set_output(True)
    g.build_operation_graph()
    plan = engine.build_plan(g)
    assert plan.steps == [step] and not plan.released
    assert registry.release(collect=False) == 2  # the engine (held when made) and its plan
    assert len(engine._built) == 0
    assert plan.released and step.graph is None


def test_a_released_plan_refuses_to_run_with_a_hipdnn_error() -> None:
    plan = fe_engine.CudnnFrontendPlan([_step()], [], frozenset({1}))
    plan.release()
    with pytest.raises(hg.HipdnnError) as err:
        plan._run({1: None}, None, None)
    assert err.value.code == hg.ErrorCode.GRAPH_EXECUTION_FAILED
    assert str(err.value) == (
        "CUDNN_FRONTEND_ENGINE: the plan's cuDNN graphs were released at interpreter exit"
    )
