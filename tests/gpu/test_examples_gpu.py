"""The family examples on a GPU (run on the device machine; skipped without CUDA/ROCm): each runs
to completion, and its GPU line either reports a torch engine's result (checked against the NumPy
reference inside the script) or names every torch engine's refusal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ROOT / "backends/hipdnn_graph_numpy_reference/families"


@pytest.mark.parametrize(
    ("script", "module"), [("mlp_block.py", "rmsnorm.py"), ("conv_block.py", "convolution.py")]
)
def test_family_example_on_the_gpu(script: str, module: str) -> None:
    if not (FAMILIES / module).is_file():
        pytest.skip(f"{script} needs families/{module}")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    gpu = [line for line in result.stdout.splitlines() if line.startswith("GPU")]
    assert gpu and all("no CUDA or ROCm device" not in line for line in gpu), result.stdout
    assert all(line.startswith(("GPU TORCH_", "GPU: no torch engine")) for line in gpu), gpu
