"""``torch.compile(backend="hipdnn")`` on a GPU, bf16 (run on the device machine; skipped without
CUDA/ROCm): a GPT-2 style block's inference and training step against eager, and where the census
puts its ops."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_torch_compile import Block  # noqa: E402

import hipdnn_graph.torch.compile as hgc  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]

BF16_TOL = {"rtol": 2e-2, "atol": 2e-2}


@pytest.fixture(autouse=True)
def _fresh() -> None:
    torch._dynamo.reset()
    hgc.reset_census()


def _block() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    block = Block(dim=64, heads=4).to(device="cuda", dtype=torch.bfloat16)
    return block, torch.randn(2, 128, 64, device="cuda", dtype=torch.bfloat16)


def _conv_block(channels: int) -> torch.nn.Module:
    """The benchmarks' ResNet-style conv block, bf16 on the GPU (seeded)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from compile_backend import ConvBlock

    torch.manual_seed(0)
    model: torch.nn.Module = ConvBlock(channels).to(device="cuda", dtype=torch.bfloat16)
    return model


def _training_step_matches_eager(
    model: torch.nn.Module, x: torch.Tensor, out_tol: dict[str, float]
) -> None:
    """One training step (loss ``mean(out²)``) compiled and eager: the outputs within
    ``out_tol``, every parameter's and the input's gradient within 5e-2."""
    out = torch.compile(model, backend=hgc.compile_backend)(x)
    out.float().square().mean().backward()
    grads = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    model.zero_grad()
    x.grad = None
    want = model(x)
    want.float().square().mean().backward()
    torch.testing.assert_close(out, want, **out_tol)
    for got, ref in zip(grads, [p.grad for p in model.parameters()] + [x.grad], strict=True):
        torch.testing.assert_close(got, ref, rtol=5e-2, atol=5e-2)


def test_block_inference_bf16_matches_eager_all_flops_in_hipdnn() -> None:
    block, x = _block()
    with torch.no_grad():
        got = torch.compile(block, backend=hgc.compile_backend)(x)
        want = block(x)
    torch.testing.assert_close(got, want, **BF16_TOL)
    c = hgc.census()
    print(c.table())
    assert {"layernorm", "matmul", "pointwise", "sdpa"} <= {
        r.why for r in c.rows if r.placement == "hipdnn"
    }
    assert c.flops_fraction() == 1.0


def test_block_training_step_bf16_matches_eager() -> None:
    block, x = _block()
    x.requires_grad_(True)
    _training_step_matches_eager(block, x, BF16_TOL)
    c = hgc.census()
    print(c.table())
    # attention through the hipdnn_graph:: custom ops (their own hipDNN graphs), the rest
    # partitioned: every matmul and attention FLOP of forward and backward in hipDNN graphs
    assert ("forward", "sdpa") in {(r.graph, r.why) for r in c.rows if r.placement == "hipdnn"}
    assert ("backward", "sdpa_backward") in {
        (r.graph, r.why) for r in c.rows if r.placement == "hipdnn"
    }
    assert c.flops_fraction() == 1.0


def test_resnet_block_training_step_bf16_matches_eager() -> None:
    model = _conv_block(16)
    x = torch.randn(4, 16, 16, 16, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    # conv, batch norm and ReLU are one graph with float32 intermediates (eager rounds each to
    # bf16): results differ by up to one bf16 ulp of values up to 8
    _training_step_matches_eager(model, x, {"rtol": 2e-2, "atol": 4e-2})
    c = hgc.census()
    print(c.table())
    assert c.flops_fraction() == 1.0  # both convolutions, forward, dgrad and wgrad
    norms = {(r.graph, r.placement, r.why) for r in c.rows if "batch_norm" in r.op}
    assert norms == {
        ("forward", "hipdnn", "batchnorm"),
        ("backward", "hipdnn", "batchnorm_backward"),
    }


def test_resnet_block_inference_bf16_batchnorm_in_hipdnn() -> None:
    model = _conv_block(16).eval()
    x = torch.randn(4, 16, 16, 16, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        got = torch.compile(model, backend=hgc.compile_backend)(x)
        want = model(x)
    torch.testing.assert_close(got, want, **BF16_TOL)
    c = hgc.census()
    print(c.table())
    assert "batchnorm_inference" in {r.why for r in c.rows if r.placement == "hipdnn"}


def test_rmsnorm_mlp_training_step_bf16_matches_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.RMSNorm(64), torch.nn.Linear(64, 64)
    ).to(device="cuda", dtype=torch.bfloat16)
    x = torch.randn(8, 32, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    _training_step_matches_eager(model, x, BF16_TOL)
    c = hgc.census()
    print(c.table())
    assert ("forward", "rmsnorm") in {(r.graph, r.why) for r in c.rows if r.placement == "hipdnn"}
