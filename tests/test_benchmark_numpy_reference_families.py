"""The family benchmark (issue 25 item 4, CPU part) runs and prints a NumPy/torch ratio for each
convolution kind and layout and for matmul, with the thread pools and the kernels OpenBLAS runs
(tiny shapes; no timing thresholds)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "numpy_reference_families.py"
RATIO = r"\| numpy +\d+\.\d\d ms .*\| torch +\d+\.\d\d ms \| ratio numpy/torch +\d+\.\d\d$"


def test_benchmark_prints_a_ratio_per_kind_layout_and_matmul() -> None:
    path = os.pathsep.join([str(ROOT), str(ROOT / "backends"), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--tiny", "--repeats", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT / "benchmarks",
        env={**os.environ, "PYTHONPATH": path},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert re.search(r"^pool: openblas .* \d+ threads", out, re.MULTILINE), out
    assert "OPENBLAS_CORETYPE=" in out
    for kind in ("fprop", "dgrad", "wgrad"):
        for layout in ("NCHW", "NHWC"):
            rows = re.findall(rf"^conv {kind} {layout} N=\d+ .*{RATIO}", out, re.MULTILINE)
            assert len(rows) == 3, out  # one per tiny 2-D shape
            grouped = rf"^conv {kind} {layout} N=\d+ .* groups 2 {RATIO}"
            assert re.search(grouped, out, re.MULTILINE), out
        for layout in ("NCDHW", "NDHWC"):
            volume = rf"^conv {kind} {layout} N=\d+ .*4x4x4 .*3x3x3 .*{RATIO}"
            assert re.search(volume, out, re.MULTILINE), out
    assert re.search(rf"^matmul 8x8 @ 8x8 .*{RATIO}", out, re.MULTILINE), out
