"""The conformance kit (hipdnn_graph.testing): generators, inputs, check_engine and its verdicts."""

from __future__ import annotations

import runpy
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend import Support, current_registry, isolated_registry
from hipdnn_graph.testing import (
    FEATURES,
    KINDS,
    TOLERANCES,
    Tolerance,
    assert_engine_conforms,
    check_engine,
    generate_cases,
    graph_outputs,
    make_inputs,
    random_sdpa_case,
    tensor_roles,
)

ROOT = Path(__file__).resolve().parents[1]
ALL_IO = (hg.DataType.FLOAT, hg.DataType.HALF, hg.DataType.BFLOAT16, hg.DataType.DOUBLE)


# ----- generators -----
def test_generated_graphs_validate_and_cover_every_feature() -> None:
    cases = generate_cases(120, seed=3, io_types=ALL_IO)
    assert all(c.graph.is_validated for c in cases)
    seen = {f for c in cases for f in c.features}
    assert seen == set(FEATURES)
    assert {c.kind for c in cases} == set(KINDS)
    assert {c.io_data_type for c in cases} == set(ALL_IO)
    for c in cases:
        assert not {"causal", "causal_bottom_right"} <= c.features
        assert not {"scale_value", "scale_tensor"} <= c.features
        assert "dbias" not in c.features or ("bias" in c.features and c.kind != "fwd")
        assert graph_outputs(c.graph), c.label


def test_generation_is_reproducible_and_restricted() -> None:
    a = random_sdpa_case(42, kind="bwd", features={"gqa", "causal"})
    b = random_sdpa_case(42, kind="bwd", features={"gqa", "causal"})
    assert a.graph.to_json() == b.graph.to_json()
    assert a.features <= {"gqa", "causal"}
    plain = generate_cases(10, seed=1, features=())
    assert all(not c.features for c in plain)
    assert all(c.shape["Sq"] == c.shape["Skv"] and c.shape["D"] == c.shape["Dv"] for c in plain)


def test_unknown_feature_or_kind_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown features"):
        random_sdpa_case(0, features={"flash"})
    with pytest.raises(ValueError, match="unknown graph kind"):
        random_sdpa_case(0, kind="both")  # type: ignore[arg-type]


# ----- inputs -----
def test_make_inputs_values_follow_roles() -> None:
    feats = {"padding", "dropout_mask", "scale_tensor", "bias"}
    for case in generate_cases(20, seed=5, features=feats, kinds=("bwd",)):
        g = case.graph
        pack = make_inputs(g, np.random.default_rng(0))
        roles = tensor_roles(g)
        sizes = case.shape
        for tensor, value in pack.items():
            slot = roles[id(tensor)][0]
            if tensor in graph_outputs(g):
                assert np.isnan(value.astype(np.float64)).all()
            elif slot == "SEQ_LEN_Q":
                assert value.min() >= 1 and value.max() <= sizes["Sq"]
            elif slot == "SEQ_LEN_KV":
                assert value.min() >= 1 and value.max() <= sizes["Skv"]
            elif slot == "Dropout_mask":
                assert set(np.unique(value.astype(np.float64))) <= {0.0, 1.0}
            elif tensor.is_pass_by_value:  # the scalar slots: one element
                assert isinstance(value, float) and value > 0
            else:
                assert value.shape == tuple(tensor.dim)
                assert np.isfinite(value.astype(np.float64)).all()


def test_make_inputs_gives_a_multi_element_pass_by_value_tensor_a_buffer() -> None:
    """One element: a runtime scalar (a number); more: a host buffer the CPU engines read."""
    g = hg.Graph(
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    x = g.tensor(name="x", dim=[2, 3])
    one = g.tensor(name="one", dim=[1, 1]).set_is_pass_by_value(True)
    many = g.tensor(name="many", dim=[2, 3]).set_is_pass_by_value(True)
    y = g.pointwise(g.pointwise(x, one, mode=hg.PointwiseMode.MUL), many, mode=hg.PointwiseMode.ADD)
    y.set_output(True)
    g.validate()
    pack = make_inputs(g, np.random.default_rng(0))
    assert isinstance(pack[one], float)
    assert isinstance(pack[many], np.ndarray) and pack[many].shape == (2, 3)
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    g.execute(pack)
    np.testing.assert_allclose(pack[y], pack[x] * pack[one] + pack[many], rtol=1e-6)


def test_make_inputs_honours_non_packed_strides() -> None:
    g = hg.Graph(
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    # Q stored as [B, S, H, D] in memory, declared as [B, H, S, D]
    q = g.tensor(name="Q", dim=[1, 2, 8, 16], stride=[256, 16, 32, 1])
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
    o.set_output(True)
    g.build()
    pack = make_inputs(g, np.random.default_rng(1))
    assert pack[q].strides == (1024, 64, 128, 4)
    g.execute(pack)
    assert np.isfinite(pack[o]).all()


# ----- check_engine on the reference and on broken engines -----
def test_reference_conforms_to_itself() -> None:
    report = assert_engine_conforms("NUMPY_REFERENCE_ENGINE", cases=9, seed=2, io_types=ALL_IO)
    assert len(report.passed) == 9 and report.ok
    assert "9 passed, 0 skipped, 0 failed" in report.summary()
    assert all(0 <= e <= 1 for r in report.passed for e in r.errors.values())


def _reference() -> Any:
    engine = current_registry().find_engine("NUMPY_REFERENCE_ENGINE")
    assert engine is not None
    return engine


class _Plan:
    def __init__(
        self, inner: Any, after: Callable[[Mapping[int, Any], list[int]], None], outs: list[int]
    ) -> None:
        self.inner, self.after, self.outs = inner, after, outs
        self.engine_name = inner.engine_name
        self.workspace_size = 0

    def execute(self, variant_pack: Mapping[int, Any], workspace: Any) -> None:
        self.inner.execute(variant_pack, workspace)
        self.after(variant_pack, self.outs)


class _Engine:
    """Runs the reference, then does something wrong to the result (or refuses)."""

    priority = 1
    array_kind = "numpy"

    def __init__(
        self, name: str, after: Callable[[Mapping[int, Any], list[int]], None], refuse: str = ""
    ) -> None:
        self.name, self.after, self.refuse = name, after, refuse

    def check(self, graph: hg.Graph) -> Support:
        return Support.no(self.refuse) if self.refuse else Support.yes()

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0

    def build_plan(self, graph: hg.Graph) -> _Plan:
        outs = [t.get_uid() for t in graph_outputs(graph)]
        return _Plan(_reference().build_plan(graph), self.after, outs)


class _Backend:
    def __init__(self, *engines: _Engine) -> None:
        self.name = "broken"
        self._engines = list(engines)

    def engines(self) -> list[_Engine]:
        return self._engines


def _scale_first_output(pack: Mapping[int, Any], outs: list[int]) -> None:
    out = pack[outs[0]]
    out[...] = out * 1.2 + 0.5  # wrong by 20 % plus 0.5, beyond any dtype's tolerance


def _unwritten_last_output(pack: Mapping[int, Any], outs: list[int]) -> None:
    pack[outs[-1]][...] = np.nan


def _writes_input(pack: Mapping[int, Any], outs: list[int]) -> None:
    for uid, value in pack.items():
        if uid not in outs and isinstance(value, np.ndarray) and value.ndim == 4:
            value[...] = 0
            return


def _nothing(pack: Mapping[int, Any], outs: list[int]) -> None:
    pass


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (_scale_first_output, "exceeds"),
        (_unwritten_last_output, "was not written"),
        (_writes_input, "modified input"),
    ],
)
def test_wrong_engine_fails_the_kit(after: Any, expected: str) -> None:
    with isolated_registry() as registry:
        registry.register(_Backend(_Engine("WRONG_ENGINE", after)))
        report = check_engine("WRONG_ENGINE", cases=6, seed=1)
        assert not report.ok
        assert len(report.failed) == 6, report.details()
        assert all(expected in r.reason for r in report.failed), report.details()
        with pytest.raises(AssertionError, match="WRONG_ENGINE: 0 passed, 0 skipped, 6 failed"):
            assert_engine_conforms("WRONG_ENGINE", cases=6, seed=1)
    assert current_registry().find_engine("WRONG_ENGINE") is None


def test_refused_graphs_are_skipped_not_failed() -> None:
    with isolated_registry() as registry:
        registry.register(_Backend(_Engine("PICKY_ENGINE", _nothing, refuse="no thanks")))
        report = check_engine("PICKY_ENGINE", cases=4)
        assert report.ok and len(report.skipped) == 4
        assert all(r.reason == "no thanks" for r in report.skipped)
        with pytest.raises(AssertionError, match="only 0 case"):
            assert_engine_conforms("PICKY_ENGINE", cases=4)
        assert_engine_conforms("PICKY_ENGINE", cases=4, min_passed=0)


class _CountingEngine(_Engine):
    """Accepts every graph (ranked after the engine under test) and counts its plan builds."""

    priority = 2

    def __init__(self) -> None:
        super().__init__("COUNTING_ENGINE", _nothing)
        self.builds = 0

    def build_plan(self, graph: hg.Graph) -> _Plan:
        self.builds += 1
        return super().build_plan(graph)


def test_refused_cases_are_skipped_before_any_plan_is_built() -> None:
    # issue 41 item 19: a refused case built the next engine's plan (a compile) before skipping
    counting = _CountingEngine()
    with isolated_registry() as registry:
        registry.register(_Backend(_Engine("PICKY_ENGINE", _nothing, refuse="no thanks"), counting))
        report = check_engine("PICKY_ENGINE", cases=3)
    assert [r.status for r in report.results] == ["skipped"] * 3
    assert counting.builds == 0


def test_faithful_wrapper_passes_and_tolerances_apply() -> None:
    with isolated_registry() as registry:
        registry.register(_Backend(_Engine("SLIGHTLY_OFF", _scale_first_output)))
        loose = {dt: Tolerance(rtol=0.25, atol=0.6) for dt in TOLERANCES}
        assert check_engine("SLIGHTLY_OFF", cases=4, tolerances=loose).ok
        registry.register(_Backend(_Engine("FAITHFUL", _nothing)), replace=True)
        assert check_engine("FAITHFUL", cases=4, seed=9).ok


def test_unregistered_engine_is_an_error() -> None:
    with pytest.raises(hg.HipdnnError, match="No engine named 'NOPE'") as info:
        check_engine("NOPE", cases=1)
    assert info.value.code == hg.ErrorCode.INVALID_VALUE


def _run_conformance_example(*argv: str) -> None:
    path = ROOT / "examples" / "conformance.py"
    old_argv = sys.argv
    sys.argv = [str(path), *argv]
    try:
        with pytest.raises(SystemExit) as exit_info:
            runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv = old_argv
    assert exit_info.value.code == 0


@pytest.mark.usefixtures("example_plugin")
def test_conformance_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    _run_conformance_example("--cases", "6")
    out = capsys.readouterr().out
    assert "NUMPY_REFERENCE_ENGINE: 6 passed" in out
    # issue 41 item 19: the example engine is checked on the graphs it runs, not skipped on all
    assert "CUSTOM_NUMPY_SDPA_FWD_ENGINE: 6 passed, 0 skipped, 0 failed" in out


@pytest.mark.usefixtures("example_plugin")  # this checkout's copy, imported afresh
def test_conformance_example_registers_the_example_plugin_when_none_is_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from importlib import metadata

    real = metadata.entry_points

    def without_plugins(group: str) -> Any:
        return [p for p in real(group=group) if p.name in ("numpy", "torch")]

    monkeypatch.setattr(metadata, "entry_points", without_plugins)
    with isolated_registry():
        _run_conformance_example("--cases", "4")
    out = capsys.readouterr().out
    assert "checking the example plugin custom_backend/, registered for this run only" in out
    assert "CUSTOM_NUMPY_SDPA_FWD_ENGINE: 4 passed, 0 skipped, 0 failed" in out


def test_device_runs_the_engine_on_torch_tensors() -> None:
    pytest.importorskip("torch")
    from hipdnn_graph.testing import to_device, to_numpy

    report = check_engine("NUMPY_REFERENCE_ENGINE", cases=3, seed=4, device="cpu")
    assert report.ok and len(report.passed) == 3
    g = generate_cases(1, seed=4)[0].graph
    pack = make_inputs(g, np.random.default_rng(0))
    moved = to_device(pack, "cpu")
    for tensor, value in pack.items():
        if isinstance(value, np.ndarray):
            assert type(moved[tensor]).__name__ == "Tensor"
            back = to_numpy(moved[tensor])
            assert back.dtype == value.dtype
            np.testing.assert_array_equal(back.astype(np.float64), value.astype(np.float64))


def test_conformance_example_checks_plugins_named_like_the_built_in_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # plugins.md suggests packages named hipdnn_graph_<name>: such a plugin is third-party and
    # gets checked; only hipdnn-graph's own entry points (numpy, torch) are built in.
    from importlib import metadata

    from hipdnn_graph.backend import ENTRY_POINT_GROUP

    (tmp_path / "hipdnn_graph_einsum.py").write_text(
        "from hipdnn_graph_numpy_reference import create_backend as numpy_backend\n"
        "class Einsum:\n"
        "    name = 'einsum'\n"
        "    def engines(self):\n"
        "        engine = numpy_backend().engines()[0]\n"
        "        return [type('E', (), {'name': 'EINSUM_SDPA_ENGINE', 'priority': 1,\n"
        "            'check': engine.check, 'workspace_size': engine.workspace_size,\n"
        "            'build_plan': engine.build_plan})()]\n"
        "def create_backend():\n"
        "    return Einsum()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    real = metadata.entry_points(group=ENTRY_POINT_GROUP)
    einsum = metadata.EntryPoint("einsum", "hipdnn_graph_einsum:create_backend", ENTRY_POINT_GROUP)

    def entry_points(group: str) -> list[metadata.EntryPoint]:
        return [*real, einsum] if group == ENTRY_POINT_GROUP else []

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    example = runpy.run_path(str(ROOT / "examples" / "conformance.py"))
    with isolated_registry():
        engines = example["third_party_engines"]()
    assert "EINSUM_SDPA_ENGINE" in engines
    assert "NUMPY_REFERENCE_ENGINE" not in engines
    assert not any(name.startswith("TORCH_SDPA_") for name in engines)
    assert example["built_in_sources"]() == {
        "hipdnn_graph_numpy_reference:create_backend",
        "hipdnn_graph_torch_rocm:create_backend",
    }
