"""benchmarks/packed_attention.py keeps working: its CPU smoke run times varlen_attention, the
built packed graphs and the padded op on a tiny packed batch, and names the engines."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from benchmark_scripts import load_benchmark


def test_smoke_run_times_every_path_and_names_the_engines(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load_benchmark("packed_attention", monkeypatch)
    (row,) = module.main(["--smoke"])
    assert row["device"] == "cpu" and row["tokens"] == 17 and row["dtype"] == "float32"
    assert sorted(row["ms"]) == ["graph", "padded", "varlen_attention"]  # no kernel on the CPU
    assert all(ms > 0 for ms in row["ms"].values()) and row["vs_torch"] is None
    assert row["vs_padded"]["padded"] == 1.0
    assert row["graph_engines"] == ["TORCH_SDPA_MATH_ENGINE", "TORCH_SDPA_MATH_ENGINE"]
    assert "backward:TORCH_SDPA_MATH_ENGINE" in row["op_engines"]
    assert row["peak_mib"]["graph"] is None  # peak memory is measured on a GPU only
    assert "x padded (target >= 1.5)" in capsys.readouterr().out
