"""The pytest plugin ``make test`` runs with (tests/compact_skips.py): skips print no progress
character and are summed up by reason, one line each."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parent

MODULE = textwrap.dedent(
    """
    import pytest

    @pytest.mark.skipif(True, reason="needs a device")
    @pytest.mark.parametrize("n", range(40))
    def test_on_a_device(n):
        pass

    @pytest.mark.parametrize("n", range(3))
    def test_passes(n):
        pass

    def test_skips_itself():
        pytest.skip("not today")

    @pytest.mark.xfail(reason="known")
    def test_expected_failure():
        assert False
    """
)


def _pytest(tmp_path: Path, *args: str) -> str:
    (tmp_path / "test_sample.py").write_text(MODULE)
    (tmp_path / "test_more.py").write_text(MODULE)
    path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_skips_are_summed_up_by_reason(tmp_path: Path) -> None:
    out = _pytest(tmp_path, "-p", "compact_skips", "-rfE")
    progress = [line.split() for line in out.splitlines() if line.startswith("test_")]
    # one line per file: passes and the xfail, no "s" for the 41 skips of each file
    assert progress == [["test_more.py", "...x", "[", "50%]"], ["test_sample.py", "...x", "[100%]"]]
    assert "80 skipped: needs a device (2 files)" in out.splitlines()
    assert "2 skipped: not today (2 files)" in out.splitlines()
    assert "6 passed, 82 skipped, 2 xfailed" in out


def test_without_the_plugin_every_skip_prints(tmp_path: Path) -> None:
    out = _pytest(tmp_path, "-q")
    assert "s" * 40 in out and "skipped tests, by reason" not in out


def test_gpu_tests_skip_for_one_reason_without_a_device() -> None:
    # files whose own conditions word it differently (two devices, CUDA's cuDNN) skip, on a
    # machine without a GPU, for the one reason tests/gpu/conftest.py gives (issue 41 item 23)
    import importlib.util

    import pytest

    if importlib.util.find_spec("torch") is not None:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU: the GPU tests run")
    files = [
        "test_context_parallel_gpu.py",
        "test_cudnn_frontend_gpu.py",
        "test_torch_kernels_gpu.py",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         *(str(TESTS / "gpu" / f) for f in files)],
        capture_output=True, text=True, timeout=300, cwd=TESTS.parent,
    )  # fmt: skip
    reasons = {
        line.rsplit(": ", 1)[1] for line in result.stdout.splitlines() if line.startswith("SKIPPED")
    }
    assert result.returncode == 0, result.stdout[-2000:]
    assert reasons == {"needs a CUDA or ROCm device"}
