"""benchmarks/torch_op_dropout.py keeps working: its CPU smoke run times the op and torch's SDPA
with dropout on a tiny shape, and reports the engine the op's philox graphs ran on."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from benchmark_scripts import load_benchmark


def test_smoke_run_times_both_and_names_the_engine(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load_benchmark("torch_op_dropout", monkeypatch)
    (row,) = module.main(["--smoke"])
    assert row["shape"] == [1, 2, 16, 8] and row["device"] == "cpu"
    assert row["sdpa_ms"] > 0 and row["hipdnn_ms"] > 0 and row["ratio"] > 0
    assert row["engines"] == ["TORCH_SDPA_MATH_ENGINE"]
    assert row["hipdnn_peak_mib"] is None  # peak memory is measured on a GPU only
    assert "ratio" in capsys.readouterr().out
