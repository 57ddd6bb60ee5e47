"""The smoke run of ``benchmarks/compile_backend.py`` (its ``--small`` CPU mode)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from benchmark_scripts import load_benchmark


def test_small_run_prints_each_backend_and_the_flops_share(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_benchmark("compile_backend", monkeypatch)
    args = bench.parse(["--small", "--models", "gpt2_blocks", "--repeats", "1", "--warmup", "1"])
    records = bench.run(args)
    assert [(r["model"], r["backend"]) for r in records] == [
        ("gpt2_blocks", "eager"),
        ("gpt2_blocks", "hipdnn"),
    ]
    assert records[1]["flops_share"] == 1.0  # every matmul and attention of fwd + bwd
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["gpt2_blocks", "eager", f"{records[0]['ms']:.3f}"]
    assert lines[1].endswith("hipDNN FLOPs 100.0 %")
