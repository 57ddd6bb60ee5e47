"""When the fusion engine compiles, and what a compiling build says (issue 41, items 18 and 24).

* On the CPU, Inductor's compile (tens of seconds) does not pay for a graph run a few times:
  the fusion engine defers to the eager engine unless the graph prefers it by name or
  ``autotune`` asks for the race; GPUs and the cheap compile backends are unaffected.
* A build that compiles logs at INFO (logger ``hipdnn_graph.engines``) and writes one progress
  line to standard error (``HIPDNN_GRAPH_PROGRESS=0`` silences it).
* The compile persists across processes through Inductor's own on-disk cache: a second process
  building the same graph loads it (counted by Inductor's counters, ``plan.inductor_cache``).
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend import compiling, isolated_registry, register_backend
from hipdnn_graph.backend.contract import checked_support
from hipdnn_graph.backend.progress import PROGRESS_ENV

torch = pytest.importorskip("torch")
from hipdnn_graph_torch_rocm.family_engines import (  # noqa: E402
    TorchEagerEngine,
    TorchFusionEngine,
)
from hipdnn_graph_torch_rocm.fusion_compile import (  # noqa: E402
    AUTOTUNE_ENV,
    BACKEND_ENV,
    compiler_refusal,
)

ROOT = Path(__file__).resolve().parents[1]
FUSION, EAGER = "TORCH_FUSION_ENGINE", "TORCH_EAGER_ENGINE"
F = hg.DataType.FLOAT


def conv_bias_relu() -> hg.Graph:
    """The issue's graph: a 3x3 convolution, a bias and a ReLU."""
    g = hg.Graph(name="conv_bias_relu", io_data_type=F, intermediate_data_type=F,
                 compute_data_type=F)  # fmt: skip
    x, w = g.tensor(name="x", dim=[2, 8, 12, 12]), g.tensor(name="w", dim=[16, 8, 3, 3])
    conv = g.conv_fprop(x, w, name="conv", pre_padding=[1, 1], post_padding=[1, 1],
                        stride=[1, 1], dilation=[1, 1])  # fmt: skip
    biased = g.pointwise(conv, g.tensor(name="b", dim=[1, 16, 1, 1]), mode=hg.PointwiseMode.ADD)
    g.pointwise(biased, mode=hg.PointwiseMode.RELU_FWD, name="relu").set_output(True)
    g.validate()
    return g


def two_pointwise(name: str = "two_pointwise") -> hg.Graph:
    g = hg.Graph(name=name, io_data_type=F, intermediate_data_type=F, compute_data_type=F)
    x = g.tensor(name="x", dim=[4, 8])
    y = g.pointwise(g.pointwise(x, mode=hg.PointwiseMode.EXP, name="e"),
                    mode=hg.PointwiseMode.TANH_FWD, name="t")  # fmt: skip
    y.set_output(True)
    g.validate()
    return g


@pytest.fixture
def cpu_with_cxx(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU, with a C++ compiler found and no environment choosing for the engine."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    for name in (AUTOTUNE_ENV, BACKEND_ENV):
        monkeypatch.delenv(name, raising=False)


def test_on_the_cpu_inductor_defers_to_the_eager_engine(cpu_with_cxx: None) -> None:
    g = conv_bias_relu()
    with isolated_registry(load_entry_points=False):
        register_backend(_Backend(TorchFusionEngine(), TorchEagerEngine()))
        g.build()  # compiles nothing
        assert g.get_plan_name() == EAGER
        reason = g.get_engine_refusals()[FUSION]
    assert reason.startswith("on the CPU compiling does not pay by default (Inductor's CPU build")
    assert "set_preferred_engine_id_ext" in reason and f"{AUTOTUNE_ENV}=1" in reason


@pytest.mark.parametrize(
    "ask",
    ["preferred", "autotune", "autotune_env", "cheap_backend", "gpu"],
)
def test_it_compiles_where_asked_or_where_it_pays(
    cpu_with_cxx: None, monkeypatch: pytest.MonkeyPatch, ask: str
) -> None:
    g = conv_bias_relu()
    engine = TorchFusionEngine(autotune=True if ask == "autotune" else None)
    if ask == "preferred":
        g.set_preferred_engine_id_ext(FUSION)
    elif ask == "autotune_env":
        monkeypatch.setenv(AUTOTUNE_ENV, "1")
    elif ask == "cheap_backend":
        monkeypatch.setenv(BACKEND_ENV, "aot_eager")
    elif ask == "gpu":  # the GPU choice is the race's, as before
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr("importlib.util.find_spec", lambda name: object())
    g.build_operation_graph()
    assert checked_support(engine, g) == (True, "")


def test_a_compiling_build_logs_and_writes_one_progress_line(
    cpu_with_cxx: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    g = two_pointwise()
    with isolated_registry(load_entry_points=False), caplog.at_level(logging.INFO):
        register_backend(_Backend(TorchFusionEngine(backend="aot_eager"), TorchEagerEngine()))
        g.build()
    assert g.get_plan_name() == FUSION
    err = capsys.readouterr().err
    start = "hipdnn-graph: TORCH_FUSION_ENGINE compiles graph 'two_pointwise' (aot_eager on cpu) "
    assert err.startswith(start + "... done in ") and err.endswith(" s\n")
    assert err.count("\n") == 1
    messages = [r.getMessage() for r in caplog.records if r.name == "hipdnn_graph.engines"]
    assert "graph 'two_pointwise': TORCH_FUSION_ENGINE compiles (aot_eager on cpu)" in messages
    assert any(m.startswith("graph 'two_pointwise': TORCH_FUSION_ENGINE compile done in ")
               for m in messages)  # fmt: skip
    plan: Any = g._state.active.plan  # type: ignore[union-attr]
    assert plan.compile_seconds > 0 and plan.inductor_cache is None  # no Inductor compile


def test_the_progress_line_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setenv(PROGRESS_ENV, "0")
    with compiling("E", "g", "x on cpu", stream=err):
        pass
    assert err.getvalue() == ""


def test_a_failed_compile_ends_its_line_with_failed() -> None:
    err = io.StringIO()
    with pytest.raises(RuntimeError), compiling("E", "", "x on cpu", stream=err) as note:
        note.outcome = "never shown"
        raise RuntimeError("boom")
    assert err.getvalue() == "hipdnn-graph: E compiles graph '<unnamed>' (x on cpu) ... failed\n"


def test_a_flex_kernel_build_announces_its_compile(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hipdnn_graph_torch_rocm.kernels import flex

    monkeypatch.setenv(flex.CPU_ENV, "1")
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    spec = flex.FlexSpec(b=1, h=2, hk=2, hv=2, sq=12, skv=20, d=8, dv=8, dtype=torch.float32,
                         device="cpu", forward=True)  # fmt: skip
    flex._KERNELS.pop(spec, None)
    flex.kernel(spec, "attn")
    err = capsys.readouterr().err
    assert err.startswith("hipdnn-graph: TORCH_SDPA_FLEX_ENGINE compiles node 'attn' "
                          "(flex attention on cpu) ... done in ")  # fmt: skip
    flex.kernel(spec, "attn")  # built once per process: no second line
    assert capsys.readouterr().err == ""


_BUILD = """
import sys
sys.path.insert(0, {tests!r})
from test_fusion_compile_choice import two_pointwise
from hipdnn_graph_torch_rocm.family_engines import TorchFusionEngine
g = two_pointwise("persisted")
g.build_operation_graph()
plan = TorchFusionEngine(autotune=False).build_plan(g)
print("inductor_cache", plan.inductor_cache, plan.compiles)
"""


@pytest.mark.slow
def test_a_second_process_loads_the_compile_from_inductors_cache(tmp_path: Path) -> None:
    reason = compiler_refusal(TorchFusionEngine().config(), "cpu")
    if reason is not None:
        pytest.skip(reason)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
           "CUDA_VISIBLE_DEVICES": "", PROGRESS_ENV: "0"}  # fmt: skip
    env.pop(BACKEND_ENV, None)
    script = _BUILD.format(tests=str(ROOT / "tests"))
    outcomes = []
    for _ in range(2):
        result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                                text=True, timeout=600, cwd=ROOT)  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        outcomes.append(result.stdout.split("inductor_cache ")[-1].strip())
    assert outcomes == ["miss 1", "hit 1"]


class _Backend:
    name = "fusion-choice-test"

    def __init__(self, *engines: Any) -> None:
        self._engines = list(engines)

    def engines(self) -> list[Any]:
        return self._engines
