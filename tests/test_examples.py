"""Every example script under ``examples/`` runs to completion (exit status 0).

Each ``examples/*.py`` runs in its own Python process, as a reader of the docs would run it.
Packages under ``examples/`` (such as ``custom_backend/``) have their own tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import hipdnn_graph as hg

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("*.py"))
FAMILIES = Path(__file__).resolve().parents[1] / "backends/hipdnn_graph_numpy_reference/families"

#: examples whose graphs need NumPy references of these families: (module, node type) each
NEEDS = {
    "mlp_block.py": [("rmsnorm.py", "RMS_NORM")],
    "conv_block.py": [("convolution.py", "CONVOLUTION_FPROP")],
}


def _reference_runs(script: str) -> None:
    """Skip while a family's reference module is not in this checkout; fail when it is but
    ``REFERENCE_FAMILY_OF`` does not register it (the engine would refuse the example's graph)."""
    from hipdnn_graph_numpy_reference.families import REFERENCE_FAMILY_OF

    for module, family in NEEDS.get(script, []):
        if not (FAMILIES / module).is_file():
            pytest.skip(f"{script} needs families/{module} (the {family} reference)")
        assert hg.NodeType[family] in REFERENCE_FAMILY_OF, (
            f"families/{module} exists but REFERENCE_FAMILY_OF does not register {family}"
        )


def _run(script: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=EXAMPLES.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_main_example_exists() -> None:
    assert EXAMPLES / "sdpa_backward_numpy.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_example_runs(script: Path) -> None:
    _reference_runs(script.name)
    result = _run(script)
    assert result.returncode == 0, (
        f"{script.name} exited with {result.returncode}\n"
        f"--- stdout ---\n{result.stdout[-3000:]}\n--- stderr ---\n{result.stderr[-3000:]}"
    )
    assert result.stdout.strip(), f"{script.name} printed nothing"


def test_mlp_block_runs_on_the_reference_and_serializes() -> None:
    _reference_runs("mlp_block.py")
    out = _run(EXAMPLES / "mlp_block.py").stdout.splitlines()
    assert out[0] == (
        "['norm:RMS_NORM', 'gate_proj:MATMUL', 'up_proj:MATMUL', 'silu:POINTWISE', "
        "'gate_mul:POINTWISE', 'down_proj:MATMUL']"
    )
    assert out[1].startswith("hipDNN binary: ") and out[1].endswith("both read back")
    assert out[2].startswith("NUMPY_REFERENCE_ENGINE: y [16, 64], max error / max |y| = ")
    assert out[3].startswith("GPU")


def test_conv_block_runs_on_the_reference_and_serializes() -> None:
    _reference_runs("conv_block.py")
    out = _run(EXAMPLES / "conv_block.py").stdout.splitlines()
    assert out[0] == "['conv:CONVOLUTION_FPROP', 'bias_add:POINTWISE', 'relu:POINTWISE']"
    assert out[1].startswith("conv_bias_relu: hipDNN binary ")
    assert out[2].startswith("NUMPY_REFERENCE_ENGINE: y [2, 16, 12, 12], max error / max |y| = ")
    assert out[3].startswith("GPU")


def test_the_demo_times_no_warm_up_run() -> None:
    # `make demo`'s first row timed the first executions of the process (issue 41 item 23):
    # its times are medians of runs after untimed warm-ups
    import importlib.util
    import time

    spec = importlib.util.spec_from_file_location("demo", EXAMPLES / "sdpa_backward_numpy.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    sys.modules["demo"] = demo  # its dataclass looks its module up
    try:
        spec.loader.exec_module(demo)
    finally:
        del sys.modules["demo"]
    calls: list[float] = []

    def first_calls_are_slow() -> None:
        calls.append(0.0)
        if len(calls) <= demo.WARMUP_RUNS:
            time.sleep(0.05)

    assert demo.median_seconds(first_calls_are_slow) < 0.01
    assert len(calls) == demo.WARMUP_RUNS + demo.TIMED_RUNS
    assert demo.WARMUP_RUNS >= 1 and demo.TIMED_RUNS >= 3
