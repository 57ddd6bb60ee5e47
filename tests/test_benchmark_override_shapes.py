"""``benchmarks/override_shapes.py --small``: the CPU smoke run of the override-shape benchmark
prints its table and returns its figures (the GPU run is the lead's; see the module)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "override_shapes.py"


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("override_shapes", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


override_shapes = _load()


def test_the_small_run_prints_totals_and_per_execute_ratios(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = override_shapes.main(["--small", "--repeats", "1", "--rounds", "1"])
    out = capsys.readouterr().out
    assert result["lengths"] == 6 and result["range"] == [64, 384]
    assert result["engine"] == "TORCH_SDPA_MATH_ENGINE"
    assert [row["seq"] for row in result["per_execute"]] == [64, 384]
    assert result["total_override_s"] > 0 and result["total_each_s"] > 0
    assert result["worst_execute_ratio"] == max(r["ratio"] for r in result["per_execute"])
    assert "total ratio (each / override, target >= 10):" in out
    assert "worst per-execute ratio (override / built, target <= 1.02):" in out
    assert out.count("\n") == 8


def test_lengths_are_evenly_spaced_multiples_of_the_step() -> None:
    spread = override_shapes.lengths(50, 256, 16384, 64)
    assert len(spread) == 50 and spread[0] == 256 and spread[-1] == 16384
    assert all(seq % 64 == 0 for seq in spread) and len(set(spread)) == 50
