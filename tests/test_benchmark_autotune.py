"""``benchmarks/autotune.py --small`` runs end to end on the CPU (a smoke run: one row per
configuration of the three sets, each tuned, every engine timed, and a child process that finds
every choice in the store and times nothing; no timing thresholds, the CPU here is shared)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]


def test_small_cpu_run_tunes_every_configuration_and_reuses_it(tmp_path: Path) -> None:
    path = [str(ROOT), str(ROOT / "backends"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "HIPDNN_GRAPH_PROGRESS": "0"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "autotune.py"), "--small", "--check-reuse",
         "--store", str(tmp_path / "store.json")],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [ln for ln in done.stdout.splitlines() if ln.startswith("| ") and "---" not in ln]
    assert len(rows) == 1 + 2 + 3 + 2, done.stdout  # header, backward, masked, family
    for row in rows[1:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert float(cells[1]) > 0 and int(cells[2]) >= 1 and float(cells[7]) > 0, row
    assert json.loads(done.stdout.splitlines()[-1]) == {"missed": []}
    stored = json.loads((tmp_path / "store.json").read_text())["engine_overrides"]
    assert len(stored) == 7
