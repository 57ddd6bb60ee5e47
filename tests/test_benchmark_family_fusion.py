"""``benchmarks/family_fusion.py`` runs end to end on the CPU at toy sizes (a smoke run: one
line per case, every contender timed; no timing thresholds)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]


def test_tiny_cpu_run_prints_one_line_per_case() -> None:
    path = [str(ROOT), str(ROOT / "backends"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "family_fusion.py"), "--tiny", "--quick",
         "--device", "cpu", "--backend", "eager"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [ln for ln in done.stdout.splitlines() if not ln.startswith("#")]
    assert len(lines) == 8, done.stdout
    graphs, singles = lines[:5], lines[5:]
    for line in graphs:
        assert "fusion[fused]" in line and "eager/fusion" in line and "nan" not in line, line
    for line in singles:
        assert "run/op" in line and "execute/op" in line and "nan" not in line, line
    assert lines[0].startswith("rmsnorm_matmul_16x32x24")
    assert singles[2].startswith("layernorm_16x32")
