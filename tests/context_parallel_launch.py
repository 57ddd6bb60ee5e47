"""Start the ranks of ``context_parallel_worker.py`` (or ``context_parallel_packed_worker.py``)
as processes, collect their results and check the 16-bit ones (used by
``test_context_parallel.py`` and ``test_context_parallel_packed.py`` on CPUs and by
``gpu/test_context_parallel_gpu.py`` and ``gpu/test_context_parallel_packed_gpu.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

WORKER = Path(__file__).with_name("context_parallel_worker.py")
TIMEOUT_S = 120  # for a whole run; a hung collective fails the test instead of blocking CI


def run_world(world: int, tmp: Path, *extra: str, worker: Path = WORKER) -> list[dict[str, Any]]:
    """Start ``world`` workers (``extra``: more arguments for each; ``worker``: the script),
    wait (bounded), return each rank's results."""
    init = tmp / f"init{world}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(worker), str(r), str(world), str(init), f"{tmp}/{r}.json", *extra],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(world)
    ]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=TIMEOUT_S)[0])
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
            p.communicate()
        pytest.fail(f"the {world}-process run did not finish in {TIMEOUT_S} s")
    for r, (p, log) in enumerate(zip(procs, logs, strict=True)):
        assert p.returncode == 0, f"rank {r} exited with {p.returncode}:\n{log[-4000:]}"
    results = [json.loads((tmp / f"{r}.json").read_text()) for r in range(world)]
    for r, res in enumerate(results):
        assert "crashed" not in res, f"rank {r}:\n{res['crashed']}"
    return results


_RUNS: dict[tuple[Path, int, tuple[str, ...]], list[dict[str, Any]] | str] = {}


def session_run(
    world: int, factory: pytest.TempPathFactory, *extra: str, worker: Path = WORKER
) -> list[dict[str, Any]]:
    """:func:`run_world` once a session for each worker, world size and ``extra``: later calls
    get the same results, and a run that failed (a rank left waiting until the timeouts, a
    crash) fails every test that reads it, without running again."""
    key = (worker, world, extra)
    if key not in _RUNS:
        tmp = factory.mktemp(f"{worker.stem}-{world}")
        try:
            _RUNS[key] = run_world(world, tmp, *extra, worker=worker)
        except (AssertionError, pytest.fail.Exception) as err:
            _RUNS[key] = f"the {world}-process run failed: {err}"
    got = _RUNS[key]
    if isinstance(got, str):
        pytest.fail(got, pytrace=False)
    return got


def two_gpu_marks() -> list[pytest.MarkDecorator]:
    """The marks of a two-GPU module: ``gpu``, skipped with fewer than two devices."""
    import torch

    return [
        pytest.mark.gpu,
        pytest.mark.skipif(
            not torch.cuda.is_available() or torch.cuda.device_count() < 2,
            reason="needs two CUDA or ROCm devices",
        ),
    ]


def check_16_bit(ranks: list[dict[str, Any]], case: str, dtype: str) -> None:
    """Each rank's 16-bit value ``case`` against float64: within twice the op's own error on the
    whole sequence in that dtype plus one 16-bit step at 2 (the largest values there), in
    ``dtype`` (``"torch.bfloat16"``) and the inputs' dimension order, the inputs untouched."""
    for r, res in enumerate(ranks):
        got = res[f"value/{case}"]
        for name in ("out", "dq", "dk", "dv"):
            err, own = got["errors"][name], got["op_errors"][name]
            assert own > 0  # 16-bit really rounds: the bound is not vacuous
            assert err <= 2 * own + 2**-6, f"rank {r} {name}: {err:.3g} vs the op's {own:.3g}"
        assert got["out_dtype"] == dtype and got["grad_dtypes"] == [dtype] * 3
        assert got["inputs_unchanged"] and got["strides_follow_inputs"]
