"""The fusion engine's compiled-plan hooks: a loaded plan keeps the build's measured choice
without racing again; a saved ``eager`` choice compiles nothing; bytes it did not write are
refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend import isolated_registry, register_backend
from hipdnn_graph.descriptors.compiled_plan import read_compiled_plan, write_compiled_plan

torch = pytest.importorskip("torch")
import hipdnn_graph_torch_rocm.family_engines as fe  # noqa: E402
import hipdnn_graph_torch_rocm.family_fusion as ff  # noqa: E402

F = hg.DataType.FLOAT


class _Backend:
    name = "compiled-plans-fusion-test"

    def __init__(self, *engines: Any) -> None:
        self._engines = list(engines)

    def engines(self) -> list[Any]:
        return self._engines


def _graph() -> hg.Graph:
    g = hg.Graph(name="two", io_data_type=F, intermediate_data_type=F, compute_data_type=F)
    x = g.tensor(name="x", dim=[4, 8])
    y = g.pointwise(g.pointwise(x, mode=hg.PointwiseMode.EXP, name="e"),
                    mode=hg.PointwiseMode.TANH_FWD, name="t")  # fmt: skip
    y.set_output(True)
    return g


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """A fusion engine (eager compile backend, racing on the CPU) alone in the registry, with
    its races and torch.compile calls counted."""
    counts = {"races": 0, "compiles": 0}
    measure, compile_ = vars(ff)["measure"], torch.compile

    def counting_measure(*args: Any, **kwargs: Any) -> Any:
        counts["races"] += 1
        return measure(*args, **kwargs)

    def counting_compile(*args: Any, **kwargs: Any) -> Any:
        counts["compiles"] += 1
        return compile_(*args, **kwargs)

    monkeypatch.setattr(ff, "measure", counting_measure)
    monkeypatch.setattr(torch, "compile", counting_compile)
    monkeypatch.setattr(ff, "_VERDICTS", {})
    with isolated_registry(load_entry_points=False):
        register_backend(_Backend(fe.TorchFusionEngine(backend="eager", autotune=True)))
        yield counts


def _run(g: hg.Graph) -> np.ndarray:
    (x,) = (t for t in g.tensors if t.name == "x")
    (y,) = (t for t in g.tensors if t.name != "x" and not t.is_virtual)
    out = np.zeros((4, 8), np.float32)
    g.execute({x.uid: np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8), y.uid: out}, None)
    return out


EXPECTED = np.tanh(np.exp(np.linspace(-1, 1, 32))).reshape(4, 8)


def test_a_loaded_fusion_plan_keeps_its_choice_without_racing(counted: dict[str, int]) -> None:
    g = _graph()
    g.build_operation_graph().create_execution_plans().build_plans()
    assert counted == {"races": 1, "compiles": 1}
    data = g.to_compiled_plan_binary()
    choice = g._state.active.plan.choice  # type: ignore[union-attr]
    assert json.loads(read_compiled_plan(data).engine_payload) == {"format": 1, "choice": choice}
    ff._VERDICTS.clear()  # as in a fresh process
    loaded = hg.Graph.from_compiled_plan_binary(data)
    assert counted["races"] == 1  # no second race
    assert loaded._state.active.plan.choice == choice  # type: ignore[union-attr]
    np.testing.assert_allclose(_run(loaded), EXPECTED, rtol=1e-6)


def test_a_saved_eager_choice_compiles_nothing(counted: dict[str, int]) -> None:
    g = _graph()
    g.build_operation_graph().create_execution_plans().build_plans()
    record = read_compiled_plan(g.to_compiled_plan_binary())
    saved = b'{"format": 1, "choice": "eager"}'
    eager = write_compiled_plan(record.__class__(**{**record.__dict__, "engine_payload": saved}))
    before = dict(counted)
    loaded = hg.Graph.from_compiled_plan_binary(eager)
    assert counted == before
    plan: Any = loaded._state.active.plan  # type: ignore[union-attr]
    assert (plan.choice, plan.compiled) == ("eager", None)
    np.testing.assert_allclose(_run(loaded), EXPECTED, rtol=1e-6)


@pytest.mark.parametrize("payload", [b"junk", b'{"format": 2, "choice": "fused"}', b"[]",
                                     b'{"format": 1, "choice": "turbo"}'])  # fmt: skip
def test_foreign_fusion_bytes_are_refused(counted: dict[str, int], payload: bytes) -> None:
    g = _graph()
    g.build_operation_graph().create_execution_plans().build_plans()
    record = read_compiled_plan(g.to_compiled_plan_binary())
    data = write_compiled_plan(record.__class__(**{**record.__dict__, "engine_payload": payload}))
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph.from_compiled_plan_binary(data)
    assert info.value.code == hg.ErrorCode.GRAPH_EXECUTION_PLAN_CREATION_FAILED
    assert (
        "the saved plan is not format 1 with a choice of 'fused' or 'eager'" in info.value.message
    )
