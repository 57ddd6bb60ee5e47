"""Heuristic modes, engine filtering and autotuning: hipDNN's own Python tests of them
(``test_autotune.py``'s tier that needs no AMD runtime, on engines that run on any machine)
and the core's rules (the content key, the store, reuse across processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
import hipdnn_graph.frontend as hipdnn
from hipdnn_graph.backend.heuristics import MEASURED
from hipdnn_graph.graph.autotune import autotune_table
from hipdnn_graph.graph.autotune_types import (
    AutotuneConfig,
    AutotuneStorageConfig,
    AutotuneStrategy,
    EngineSweepSpec,
    KnobSweepAxis,
)
from hipdnn_graph.graph.content_key import graph_content_key

ROOT = Path(__file__).resolve().parents[1]
NUMPY = "NUMPY_REFERENCE_ENGINE"


class _NullHandle:
    def get(self) -> int:
        return 0


def _sdpa(name: str = "g", uid: int | None = None) -> tuple[hg.Graph, dict[Any, Any]]:
    g = hg.Graph(name=name, io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
                 intermediate_data_type=hg.DataType.FLOAT)  # fmt: skip
    q = g.tensor(name=name + "Q", dim=[1, 2, 16, 8], uid=uid)
    k, v = g.tensor_like(q, name + "K"), g.tensor_like(q, name + "V")
    o, _ = g.sdpa(q, k, v, generate_stats=False)
    o.set_output(True)
    rng = np.random.default_rng(0)
    pack: dict[Any, Any] = {t: rng.standard_normal((1, 2, 16, 8)).astype(np.float32)
                            for t in (q, k, v)}  # fmt: skip
    pack[o] = np.zeros((1, 2, 16, 8), np.float32)
    return g, pack


def _quick() -> AutotuneConfig:
    return AutotuneConfig(strategy=AutotuneStrategy.FIXED_AVERAGE, timed_iterations=2)


# ----- heuristic modes -------------------------------------------------------------------------
class TestHeuristicModes:
    def test_fallback_puts_the_engine_that_always_runs_first(self) -> None:
        g, _ = _sdpa()
        g.create_execution_plans([hg.HeuristicMode.FALLBACK])
        assert g.get_engine_names()[0] == NUMPY

    def test_fallback_with_a_device_keeps_the_host_only_reference_last(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """hipDNN's own scripts ask for FALLBACK and pass device memory: where a device is
        visible the torch math engine (it reads device memory) runs first, NumPy last."""
        pytest.importorskip("torch")
        from hipdnn_graph.graph import lifecycle

        monkeypatch.setattr(lifecycle, "device_visible", lambda: True)
        g, _ = _sdpa()
        names = g.create_execution_plans([hg.HeuristicMode.FALLBACK]).get_engine_names()
        assert names[0] == "TORCH_SDPA_MATH_ENGINE" and names[-1] == NUMPY

    def test_default_and_a_rank_by_declared_priority(self) -> None:
        g, _ = _sdpa()
        default = g.create_execution_plans().get_engine_names()
        assert g.create_execution_plans([hg.HeuristicMode.A]).get_engine_names() == default
        assert default[-1] == NUMPY  # priority 1000, the lowest

    def test_modes_rank_in_the_order_given(self) -> None:
        g, _ = _sdpa()
        both = g.create_execution_plans([hg.HeuristicMode.A, hg.HeuristicMode.FALLBACK])
        assert both.get_engine_names()[-1] == NUMPY
        reverse = g.create_execution_plans([hg.HeuristicMode.FALLBACK, hg.HeuristicMode.A])
        assert reverse.get_engine_names()[0] == NUMPY

    def test_b_ranks_by_the_measured_table(self) -> None:
        row = MEASURED["sdpa_backward"].figures
        assert row["TORCH_SDPA_CUDNN_ENGINE"] > row["TORCH_SDPA_FLASH_ENGINE"]
        assert row["TORCH_SDPA_FLASH_ENGINE"] > row["TORCH_SDPA_EFFICIENT_ENGINE"]
        assert row["TORCH_SDPA_EFFICIENT_ENGINE"] > row["TORCH_SDPA_MATH_ENGINE"]
        from hipdnn_graph.backend.heuristics import rank_by_modes

        class E:
            def __init__(self, name: str, priority: int) -> None:
                self.name, self.priority = name, priority

        class G:  # a graph with an SDPA backward node, as problem_class sees it
            def __init__(self) -> None:
                self.nodes = [type("SdpaBwdNode", (), {})()]

        engines = [E("TORCH_SDPA_FLASH_ENGINE", 10), E("TORCH_SDPA_CUDNN_ENGINE", 20),
                   E("OTHER", 1)]  # fmt: skip
        ranked = rank_by_modes(engines, [hg.HeuristicMode.B], G())
        assert [e.name for e in ranked] == [
            "TORCH_SDPA_CUDNN_ENGINE",
            "TORCH_SDPA_FLASH_ENGINE",
            "OTHER",
        ]
        assert rank_by_modes(engines, [hg.HeuristicMode.A], G())[0].name == "OTHER"


# ----- engine filtering ------------------------------------------------------------------------
class TestFiltering:
    def test_deselected_engines_are_refused_with_the_filter(self) -> None:
        g, _ = _sdpa()
        names = g.create_execution_plans().get_engine_names()
        g.deselect_engines(names)
        with pytest.raises(hg.NotSupportedError) as caught:
            g.build()
        assert f"  {NUMPY}: deselected by deselect_engines()" in caught.value.message

    def test_workspace_and_behavior_note_filters(self) -> None:
        g, _ = _sdpa()
        g.deselect_workspace_greater_than(0).create_execution_plans()
        assert NUMPY in g.get_engine_names()  # needs no workspace
        with pytest.raises(hg.HipdnnError, match="must not be negative"):
            g.deselect_workspace_greater_than(-1)
        with pytest.raises(hg.HipdnnError, match="A behavior note must be one of"):
            g.deselect_behavior_notes([99])

    def test_filters_survive_a_rebuild(self) -> None:
        g, _ = _sdpa()
        g.deselect_engines([hg.backend.engine_id(NUMPY)])
        g.create_execution_plans()
        g.set_name("renamed")
        assert NUMPY not in g.create_execution_plans().get_engine_names()


# ----- the content key -------------------------------------------------------------------------
class TestContentKey:
    def test_names_and_uids_do_not_change_the_key(self) -> None:
        assert graph_content_key(_sdpa("a")[0]) == graph_content_key(_sdpa("b", uid=40)[0])

    def test_shapes_and_attributes_change_the_key(self) -> None:
        g, _ = _sdpa()
        other = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
                         intermediate_data_type=hg.DataType.FLOAT)  # fmt: skip
        q = other.tensor(name="Q", dim=[1, 2, 16, 8])
        o, _ = other.sdpa(q, other.tensor_like(q, "K"), other.tensor_like(q, "V"),
                          generate_stats=False, use_causal_mask=True)  # fmt: skip
        o.set_output(True)
        assert graph_content_key(g) != graph_content_key(other)


# ----- autotune (core) -------------------------------------------------------------------------
class TestAutotune:
    def test_times_the_sweep_and_keeps_the_fastest(self, tmp_path: Path) -> None:
        g, pack = _sdpa()
        inputs = {t: a.copy() for t, a in list(pack.items())[:3]}  # Q, K, V
        axis = KnobSweepAxis("numpy_reference.sdpa_block_q", [0, 4, 8])
        spec = EngineSweepSpec(hg.backend.engine_id(NUMPY), [axis])
        g.build_operation_graph().add_engine_sweep([spec])
        store = AutotuneStorageConfig(tmp_path / "s.json")
        results = g.autotune(pack, config=_quick(), storage=store)
        wins = [r for r in results if r.succeeded]
        assert len(results) == len(g.get_plan_specs()) == 3
        assert sorted(r.knob_settings[0].value for r in results) == [0, 4, 8]
        assert [r.rank for r in wins] == list(range(len(wins)))
        assert wins == sorted(wins, key=lambda r: r.min_time_ms)
        assert g.get_plan_name() == wins[0].engine_name
        for t, a in inputs.items():  # inputs only read
            np.testing.assert_array_equal(pack[t], a)
        assert "rank" in autotune_table(results).splitlines()[0]
        stored = json.loads((tmp_path / "s.json").read_text())["engine_overrides"]
        assert [e["engine_name"] for e in stored] == [wins[0].engine_name]

    def test_knob_sweeps_add_every_engine_that_applies(self) -> None:
        g, _ = _sdpa()
        g.build_operation_graph().add_knob_sweeps()
        names = {s.engine_name for s in g.get_plan_specs()}
        assert NUMPY in names and len(g.get_plan_specs()) >= 2

    def test_a_long_sweep_writes_a_progress_line_per_candidate(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("HIPDNN_GRAPH_PROGRESS", raising=False)
        g, pack = _sdpa()
        axis = KnobSweepAxis("numpy_reference.sdpa_block_q", [0, 2, 4, 8])
        g.build_operation_graph().add_engine_sweep(
            [EngineSweepSpec(hg.backend.engine_id(NUMPY), [axis])]
        )
        g.autotune(pack, config=_quick(), storage=AutotuneStorageConfig(enabled=False))
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 4 and all(ln.endswith(" ms") for ln in lines), lines
        assert lines[0].startswith("hipdnn-graph: autotune graph 'g' [1/4] NUMPY_REFERENCE_ENGINE")
        assert g.autotune_write_outcome == hipdnn.AutotuneCacheWriteOutcome.DECLINED_DISABLED

    def test_knob_sweeps_take_at_most_per_engine(self) -> None:
        g, _ = _sdpa()
        g.build_operation_graph().add_knob_sweeps(per_engine=1)
        names = [s.engine_name for s in g.get_plan_specs()]
        assert len(names) == len(set(names)) and NUMPY in names
        with pytest.raises(hg.HipdnnError, match="per_engine must be at least 1; got 0"):
            _sdpa()[0].build_operation_graph().add_knob_sweeps(per_engine=0)

    def test_no_candidate_ran_lists_each_error(self, tmp_path: Path) -> None:
        g, pack = _sdpa()
        g.build_operation_graph().add_engine(NUMPY)
        out = next(t for t in pack if t.name.endswith("O"))
        pack[out] = np.zeros((3,), np.float32)  # the wrong shape: every run fails
        with pytest.raises(hg.HipdnnError) as caught:
            g.autotune(pack, config=_quick(), storage=AutotuneStorageConfig(enabled=False))
        assert caught.value.code == hg.ErrorCode.GRAPH_EXECUTION_FAILED
        assert caught.value.message.startswith(
            "autotune(): no execution plan ran successfully:\n  NUMPY_REFERENCE_ENGINE"
        )
        assert not (tmp_path / "s.json").exists()

    def test_reuses_the_stored_choice_and_retunes_on_request(self, tmp_path: Path) -> None:
        store = AutotuneStorageConfig(tmp_path / "s.json")
        g, pack = _sdpa()
        g.build_operation_graph().add_engine(NUMPY)
        first = g.autotune(pack, config=_quick(), storage=store)
        assert not first[0].from_store
        assert g.autotune_write_outcome == hipdnn.AutotuneCacheWriteOutcome.WRITTEN
        again, pack2 = _sdpa("renamed", uid=10)  # the same content
        again.build_operation_graph().add_engine(NUMPY)
        reused = again.autotune(pack2, config=_quick(), storage=store)
        assert reused[0].from_store and again.get_plan_name() == NUMPY
        assert again.autotune_write_outcome == hipdnn.AutotuneCacheWriteOutcome.UNCHANGED
        retuned, pack3 = _sdpa()
        retuned.build_operation_graph().add_engine(NUMPY)
        config = _quick()
        config.retune = True
        assert not retuned.autotune(pack3, config=config, storage=store)[0].from_store

    def test_a_corrupt_store_warns_and_is_rewritten(self, tmp_path: Path) -> None:
        path = tmp_path / "s.json"
        path.write_text("{not json")
        g, pack = _sdpa()
        g.build_operation_graph().add_engine(NUMPY)
        with pytest.warns(RuntimeWarning, match="cannot be read"):
            g.autotune(pack, config=_quick(), storage=AutotuneStorageConfig(path))
        assert json.loads(path.read_text())["engine_overrides"][0]["engine_name"] == NUMPY

    def test_a_second_process_reuses_without_timing(self, tmp_path: Path) -> None:
        script = (
            "import sys\n"
            "sys.path.insert(0, sys.argv[2])\n"
            "from test_frontend_autotune import _sdpa, _quick\n"
            "g, pack = _sdpa()\n"
            "g.build_operation_graph().add_engine('NUMPY_REFERENCE_ENGINE')\n"
            "from hipdnn_graph.graph.autotune_types import AutotuneStorageConfig\n"
            "store = AutotuneStorageConfig(sys.argv[1])\n"
            "print(g.autotune(pack, config=_quick(), storage=store)[0].from_store)\n"
        )
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'backends'}"}
        args = [sys.executable, "-c", script, str(tmp_path / "s.json"), str(ROOT / "tests")]
        outs = [subprocess.run(args, env=env, capture_output=True, text=True, check=True)
                .stdout.split()[-1] for _ in range(2)]  # fmt: skip
        assert outs == ["False", "True"]

    def test_nothing_benchmarkable_counts_the_reasons(self, tmp_path: Path) -> None:
        g, pack = _sdpa()
        g.build_operation_graph().add_engine(NUMPY)
        g.deselect_engines([NUMPY])
        with pytest.raises(hg.HipdnnError) as caught:
            g.autotune(pack, storage=AutotuneStorageConfig(tmp_path / "s.json"))
        assert caught.value.message == (
            "No execution plans were benchmarkable (1 candidates: 1 deselected)."
        )

    def test_engine_id_filter_and_missing_tensors(self, tmp_path: Path) -> None:
        g, pack = _sdpa()
        g.build_operation_graph().add_engine(NUMPY)
        config = _quick()
        config.engine_id_filter = [12345]
        store = AutotuneStorageConfig(tmp_path / "s.json")
        with pytest.raises(hg.HipdnnError, match="1 excluded by engineIdFilter"):
            g.autotune(pack, config=config, storage=store)
        del pack[next(iter(pack))]
        with pytest.raises(hg.HipdnnError) as caught:
            g.autotune(pack, config=_quick(), storage=store)
        assert caught.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
        assert "missing required non-virtual tensor UIDs" in caught.value.message


# ----- hipDNN's test_autotune.py, CPU tier -----------------------------------------------------
def test_autotune_enums() -> None:
    for enum in (hipdnn.TuneMode, hipdnn.AutotuneStrategy, hipdnn.PrimingFailurePolicy):
        assert len(set(enum)) == 2
    assert [m.name for m in hipdnn.AutotuneStrategy] == ["FIXED_AVERAGE", "RUN_UNTIL_STABLE"]
    assert hipdnn.TuneMode.EXHAUSTIVE.name == "EXHAUSTIVE"
    assert hipdnn.PrimingFailurePolicy.BENCHMARK_UNPRIMED.name == "BENCHMARK_UNPRIMED"
    assert hipdnn.AutotuneCacheWriteOutcome.UNCHANGED.name == "UNCHANGED"


def test_sweep_specs_round_trip() -> None:
    axis = hipdnn.KnobSweepAxis()
    axis.knob_id, axis.values = "tile.size", [1, 2, 4]
    spec = hipdnn.EngineSweepSpec()
    assert (spec.engine_id, spec.axes, spec.fixed_settings) == (-1, [], {})
    spec.engine_id, spec.axes, spec.fixed_settings = 3, [axis], {"k": 1}
    assert [a.knob_id for a in spec.axes] == ["tile.size"] and spec.fixed_settings == {"k": 1}


def test_autotune_config_defaults() -> None:
    cfg = hipdnn.AutotuneConfig()
    assert cfg.mode == hipdnn.TuneMode.STANDARD
    assert cfg.strategy == hipdnn.AutotuneStrategy.RUN_UNTIL_STABLE
    assert (cfg.warmup_iterations, cfg.timed_iterations, cfg.max_iterations) == (1, 10, 100)
    assert cfg.window_size == 3 and cfg.stability_threshold == pytest.approx(0.05)
    assert cfg.engine_id_filter == []
    assert cfg.priming_failure_policy == hipdnn.PrimingFailurePolicy.ABORT_ON_PRIMING_FAILURE


def test_autotune_result_defaults_and_read_only() -> None:
    result = hipdnn.AutotuneResult()
    assert (result.engine_id, result.engine_name, result.knob_settings) == (-1, "", [])
    assert (result.rank, result.succeeded, result.compiled_plan_index) == (-1, False, -1)
    assert result.mode_used == hipdnn.TuneMode.STANDARD
    assert result.strategy_used == hipdnn.AutotuneStrategy.RUN_UNTIL_STABLE
    with pytest.raises(AttributeError):
        result.engine_id = 5  # type: ignore[misc]


def test_autotune_storage_config(tmp_path: Path) -> None:
    cfg = hipdnn.AutotuneStorageConfig()
    assert cfg.delete_all_existing_file_content is False
    assert str(cfg.file_path) in ("", ".")
    cfg.file_path = tmp_path / "hipdnn_autotune.json"
    assert Path(cfg.file_path) == tmp_path / "hipdnn_autotune.json"


def test_add_engine_sweep_without_built_graph() -> None:
    error = hipdnn.Graph().add_engine_sweep([])
    assert error.is_bad() and "build_operation_graph" in error.get_message()


def test_deselect_returns_same_graph() -> None:
    graph = hipdnn.Graph()
    assert graph.deselect_workspace_greater_than(1024) is graph
    assert graph.deselect_engines(["MIOPEN_ENGINE"]) is graph
    assert graph.deselect_engines([1234]) is graph


def test_workspace_without_compiled_plans() -> None:
    assert hipdnn.Graph().get_autotune_workspace_size() == 0


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("warmup_iterations", -1, "warmupIterations"),
        ("timed_iterations", 0, "timedIterations"),
        ("max_iterations", 0, "maxIterations"),
        ("window_size", 1, "windowSize"),
        ("stability_threshold", 0.0, "stabilityThreshold"),
    ],
)
def test_autotune_rejects_invalid_config(field: str, value: Any, expected: str) -> None:
    cfg = hipdnn.AutotuneConfig()
    if field == "timed_iterations":
        cfg.strategy = hipdnn.AutotuneStrategy.FIXED_AVERAGE
    setattr(cfg, field, value)
    with pytest.raises(RuntimeError) as caught:
        hipdnn.Graph().autotune(_NullHandle(), {1: 1}, config=cfg)
    assert expected in str(caught.value)


def test_autotune_rejects_null_handle() -> None:
    with pytest.raises(RuntimeError) as caught:
        hipdnn.Graph().autotune(_NullHandle(), {1: 1})
    assert "handle must not be null" in str(caught.value)


def test_facade_autotune_runs_and_activates_the_winner(tmp_path: Path) -> None:
    graph = hipdnn.Graph().set_io_data_type(hipdnn.DataType.FLOAT)
    graph.set_compute_data_type(hipdnn.DataType.FLOAT)
    graph.set_intermediate_data_type(hipdnn.DataType.FLOAT)
    q, k, v = (hipdnn.Tensor.create([1, 2, 8, 16], hipdnn.DataType.FLOAT) for _ in range(3))
    o, _ = graph.sdpa(q, k, v, hipdnn.SdpaAttributes().set_generate_stats(False))
    o.set_output(True)
    handle = hipdnn.create_handle()
    assert graph.build_operation_graph(handle).is_good()
    assert graph.add_engines([hg.backend.engine_id(NUMPY)]).is_good()
    x = np.ones((1, 2, 8, 16), np.float32)
    out = np.zeros_like(x)
    storage = hipdnn.AutotuneStorageConfig()
    storage.file_path = tmp_path / "s.json"
    cfg = hipdnn.AutotuneConfig()
    cfg.strategy, cfg.timed_iterations = hipdnn.AutotuneStrategy.FIXED_AVERAGE, 1
    results = graph.autotune(handle, {q: x, k: x, v: x, o: out}, 0, config=cfg,
                             storage_config=storage)  # fmt: skip
    winner = next(r for r in results if r.succeeded)
    assert winner.rank == 0 and winner.min_time_ms > 0
    assert graph.get_execution_plan_engine_id() == winner.engine_id
    assert graph.execute(handle, {q: x, k: x, v: x, o: out}).is_good() and out[0, 0, 0, 0] == 1


# ----- hipDNN's test_hip_event_bindings.py, what runs without an AMD runtime ----------------------
def test_hip_event_symbols_are_exported() -> None:
    names = ("HipEvent", "HipStallGate", "hip_stream_synchronize", "hip_get_device_count",
             "hip_device_synchronize", "hip_can_use_stream_wait_value")  # fmt: skip
    assert [n for n in names if not hasattr(hipdnn, n)] == []
