"""The smoke run of ``benchmarks/compile_backend.py`` (its ``--small`` CPU mode)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "compile_backend.py"


def _benchmark() -> object:
    spec = importlib.util.spec_from_file_location("compile_backend_benchmark", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_small_run_prints_each_backend_and_the_flops_share(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = _benchmark()
    args = bench.parse(["--small", "--models", "gpt2_blocks", "--repeats", "1", "--warmup", "1"])  # type: ignore[attr-defined]
    records = bench.run(args)  # type: ignore[attr-defined]
    assert [(r["model"], r["backend"]) for r in records] == [
        ("gpt2_blocks", "eager"),
        ("gpt2_blocks", "hipdnn"),
    ]
    assert records[1]["flops_share"] == 1.0  # every matmul and attention of fwd + bwd
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["gpt2_blocks", "eager", f"{records[0]['ms']:.3f}"]
    assert lines[1].endswith("hipDNN FLOPs 100.0 %")
