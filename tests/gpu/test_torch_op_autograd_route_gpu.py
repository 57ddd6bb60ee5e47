"""GPU suite of the torch op's autograd route (issue 22 items 2 and 3; skipped without CUDA).

Where the op's forward and backward graphs both run aten's cuDNN attention directly, the op
learns in the second call's backward that the backward graph's kernel is the forward op's own
autograd formula; later calls run the op under torch's autograd, with no Python in the backward.
They give the graph path's results (the same ops on the same arguments), and with philox dropout
the mask ``F.scaled_dot_product_attention`` draws on cuDNN, moving the generator as it does.
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

CUDNN = "TORCH_SDPA_CUDNN_ENGINE"
F = torch.nn.functional


def _rel(a: Any, ref: Any) -> float:
    return float((a.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-12))


def _leaves(shape: tuple[int, ...] = (2, 4, 128, 64)) -> list[Any]:
    g = torch.Generator(device="cuda").manual_seed(9)
    return [
        torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
        for _ in range(3)
    ]


def _routed_by_aten(out: Any) -> bool:
    return "_SdpaFunction" not in type(out.grad_fn).__name__


@pytest.mark.parametrize("causal", [False, True])
def test_cudnn_calls_learn_the_route_and_give_the_graphs_results(causal: bool) -> None:
    hgt.graph_cache().clear()
    q, k, v = _leaves()
    runs, routed = [], []
    try:
        for _ in range(4):
            out = hgt.scaled_dot_product_attention(q, k, v, is_causal=causal, engine=CUDNN)
            routed.append(_routed_by_aten(out))
            runs.append((out, *torch.autograd.grad(out.float().square().sum(), [q, k, v])))
    except hg.NotSupportedError as err:
        pytest.skip(f"{CUDNN} does not run here: {err}")
    assert routed == [False, False, True, True]  # learnt in the second call's backward
    listed = sorted((c.kind, c.engine, c.autograd_route) for c in hgt.cached_graphs())
    assert listed == [("backward", CUDNN, False), ("forward", CUDNN, True)]
    graph, route = runs[1], runs[3]
    assert route[0].shape == graph[0].shape and route[0].stride() == graph[0].stride()
    assert torch.equal(route[0], graph[0])  # one forward kernel on the same arguments
    for a, b in zip(route[1:], graph[1:], strict=True):
        assert _rel(a, b) < 1e-2  # backward kernels may accumulate in another order
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    refs = torch.autograd.grad(ref.float().square().sum(), [q, k, v])
    assert _rel(route[0], ref) < 2e-2
    for a, b in zip(route[1:], refs, strict=True):
        assert _rel(a, b) < 3e-2


def test_the_dropout_route_draws_sdpas_cudnn_mask_and_moves_the_generator_alike() -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    hgt.graph_cache().clear()
    q, k, v = _leaves((2, 4, 256, 64))
    gen = torch.cuda.default_generators[torch.cuda.current_device()]
    routed, states = [], []
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):  # torch's choice, so the op's: cuDNN
        for seed in range(5):
            torch.cuda.manual_seed(seed)
            ours = hgt.scaled_dot_product_attention(q, k, v, dropout_p=0.2, is_causal=True)
            ours_offset = gen.get_offset()
            grads = torch.autograd.grad(ours.float().square().sum(), [q, k, v])
            torch.cuda.manual_seed(seed)
            ref = F.scaled_dot_product_attention(q, k, v, dropout_p=0.2, is_causal=True)
            assert gen.get_offset() == ours_offset
            refs = torch.autograd.grad(ref.float().square().sum(), [q, k, v])
            assert torch.equal(ours, ref), seed  # one kernel, one mask
            for a, b in zip(grads, refs, strict=True):
                assert _rel(a, b) < 1e-2
            routed.append(_routed_by_aten(ours))
            states.append(
                [(e.engine, e.autograd, e.route_tries) for e in hgt.graph_cache().values()]
            )
    engines = {c.engine for c in hgt.cached_graphs()}
    if engines != {CUDNN}:
        pytest.skip(f"the op's philox graphs ran on {engines}, not cuDNN")
    # learnt in a hit's backward once both launchers bound the op (the second or third call)
    assert routed[:2] == [False, False] and routed[3:] == [True, True], (routed, states)
