"""GPU suite of the torch op's hot path (issue 22 item 3; skipped without CUDA/ROCm).

A cache hit on the device builds nothing and calls no ``Graph.run``/``execute``: it calls the
fused engine's plan directly, with inputs that do not require grad (the flex kernels run under
``fail_on_recompile`` and are guarded on ``requires_grad``, so a hit with a leaf that requires
grad would raise there), and gives torch's results.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph as hg  # noqa: E402
import hipdnn_graph.torch as hgt  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]

BF16 = torch.bfloat16
F = torch.nn.functional


def _rel(a: Any, ref: Any) -> float:
    return float((a.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-12))


def _leaves(shape: tuple[int, ...] = (2, 4, 128, 64)) -> list[Any]:
    g = torch.Generator(device="cuda").manual_seed(5)
    return [
        torch.randn(*shape, device="cuda", dtype=BF16, generator=g).requires_grad_()
        for _ in range(3)
    ]


def test_cuda_cache_hits_call_the_fused_plan_directly(monkeypatch: Any) -> None:
    hgt.graph_cache().clear()
    q, k, v = _leaves()
    hgt.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    listed = hgt.cached_graphs()
    assert [c.kind for c in listed] == ["forward", "backward"]
    assert all(c.engine != "TORCH_SDPA_MATH_ENGINE" for c in listed), listed

    def no_build(*args: Any, **kw: Any) -> None:
        raise AssertionError("a cache hit built or re-checked something")

    monkeypatch.setattr(hg.Graph, "build", no_build)
    monkeypatch.setattr(hg.Graph, "run", no_build)
    monkeypatch.setattr(hg.Graph, "execute", no_build)
    for _ in range(3):
        out = hgt.scaled_dot_product_attention(q, k, v, is_causal=True)
        grads = torch.autograd.grad(out.float().square().sum(), [q, k, v])
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    refs = torch.autograd.grad(ref.float().square().sum(), [q, k, v])
    assert _rel(out, ref) < 2e-2
    for a, b in zip(grads, refs, strict=True):
        assert _rel(a, b) < 3e-2
    assert hgt.graph_cache().info()[:2] == (6, 2)


@pytest.mark.parametrize(
    "engine",
    [
        "TORCH_SDPA_FLEX_ENGINE",
        "TORCH_SDPA_CUDNN_ENGINE",
        "TORCH_SDPA_FLASH_ENGINE",
        "TORCH_SDPA_EFFICIENT_ENGINE",
    ],
)
def test_a_forced_fused_engine_takes_leaves_that_require_grad_on_hits(engine: str) -> None:
    hgt.graph_cache().clear()
    q, k, v = _leaves((1, 2, 128, 64))
    results = []
    for _ in range(3):  # a miss, then hits, with leaves that require grad
        try:
            out = hgt.scaled_dot_product_attention(q, k, v, is_causal=True, engine=engine)
            grads = torch.autograd.grad(out.sum(), [q, k, v])
        except hg.NotSupportedError as err:
            pytest.skip(f"{engine} does not run here: {err}")
        results.append((out, *grads))
    for later in results[1:]:
        for a, b in zip(results[0], later, strict=True):
            assert _rel(a, b) < 1e-2
    assert {c.engine for c in hgt.cached_graphs()} == {engine}
