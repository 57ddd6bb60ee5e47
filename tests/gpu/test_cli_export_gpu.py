"""GPU suite: ``hipdnn-graph run-export --check --device cuda`` on an exported transformer block
(JSON graphs) and MLP (hipDNN bytes): the best ranked engines on CUDA/ROCm tensors reproduce the
model's saved outputs within each dtype's tolerance (issue 38, item 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from compile_models import Block, make_mlp  # noqa: E402

import hipdnn_graph.torch as hgt  # noqa: E402
from hipdnn_graph.cli import main  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]


@pytest.mark.parametrize("model", ["block", "mlp"])
def test_run_export_checks_on_the_gpu(
    model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torch.manual_seed(0)
    if model == "block":
        hgt.export(Block(), (torch.randn(2, 6, 16),), tmp_path / model)
    else:
        hgt.export(make_mlp(), (torch.randn(4, 8),), tmp_path / model, graph_format="bin")
    status = main(["run-export", str(tmp_path / model), "--check", "--device", "cuda"])
    out, err = capsys.readouterr()
    assert (status, err) == (0, ""), out
    assert out.splitlines()[0].endswith(", on cuda")
    assert out.splitlines()[-1] == "every output is the model's within its dtype's tolerance"
