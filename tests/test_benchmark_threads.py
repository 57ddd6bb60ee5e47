"""The NumPy-engine benchmark reports the thread settings its figures depend on (issue 11,
item 15): every thread pool with its size, the wait policy of torch's OpenMP workers (PASSIVE
unless the caller chose one), the load, and each contender's CPU split between its main thread
and its worker threads (where busy-waiting BLAS workers show up)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
threadpoolctl = pytest.importorskip("threadpoolctl")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "numpy_reference.py"


def _run(*args: str, env: dict[str, str] | None = None) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY",)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--skip-16k", "--repeats", "1", "--seq", "64", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**base, **(env or {})},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _blas_threads_by_default() -> int:
    import numpy  # noqa: F401  (loads OpenBLAS in this process too)

    pools = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
    assert pools
    return int(pools[0]["num_threads"])


def test_benchmark_prints_its_thread_pools_policy_and_cpu_split() -> None:
    out = _run()
    assert "OMP_WAIT_POLICY=PASSIVE" in out
    blas = re.search(r"pool: openblas \(.*\) (\d+) threads", out)
    assert blas is not None, out
    assert int(blas.group(1)) == _blas_threads_by_default()
    assert re.search(r"pool: openmp \(libgomp\) \d+ threads", out), out
    assert re.search(r"torch \S+: \d+ intra-op threads, \d+ inter-op threads", out), out
    assert re.search(r"CPUs: \d+ usable of \d+, load average \d+\.\d\d", out), out
    for mask in ("full", "causal"):
        assert re.search(
            rf"S=64 D=128 {mask}: NumPy engine CPU \d+ ms main thread \+ \d+ ms other threads; "
            r"torch CPU \d+ \+ \d+ ms",
            out,
        ), out


def test_benchmark_keeps_the_callers_policy_and_can_limit_blas() -> None:
    out = _run("--blas-threads", "1", env={"OMP_WAIT_POLICY": "ACTIVE"})
    assert "OMP_WAIT_POLICY=ACTIVE" in out
    assert re.search(r"pool: openblas \(.*\) 1 threads", out), out
