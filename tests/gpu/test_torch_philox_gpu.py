"""GPU suite of philox dropout on the fused torch engines and the torch op (issue 22).

A keep mask is read back from a forward: with Q = 0 every softmax row is uniform (1/N) and with
V = [I_N | 0] the output is O[..., :N] = M / (N (1 − p)), so M = O > 0 (p = 0.5, N = 64: the
values 0 and 1/32 are exact in bf16). Checked: a philox graph runs forward and backward on each
fused engine; one (seed, offset) always gives one mask and another gives another; the CUDA
memory-efficient kernel draws hipdnn_graph.philox's stream bit for bit; a fused engine's
gradients equal the math engine's fed that engine's own mask; the pass-by-value path never syncs;
the torch op gives F.scaled_dot_product_attention's exact output under one torch.manual_seed with
the same fused kernel, advances the generator as it does, pins its backward to the forward's
engine and makes no [B, H, Sq, Skv] tensor.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph as hg  # noqa: E402
import hipdnn_graph.torch as hgt  # noqa: E402
from hipdnn_graph.philox import dropout_keep_mask  # noqa: E402
from hipdnn_graph.torch._graphs import (  # noqa: E402
    sdpa_backward,
    sdpa_forward,
)
from hipdnn_graph.torch._philox_graphs import philox_backward, philox_forward  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]

BF16 = torch.bfloat16
EFFICIENT, FLASH, CUDNN = (
    "TORCH_SDPA_EFFICIENT_ENGINE",
    "TORCH_SDPA_FLASH_ENGINE",
    "TORCH_SDPA_CUDNN_ENGINE",
)
FUSED = [EFFICIENT, FLASH] + ([] if torch.version.hip else [CUDNN])
B, H, N, D, P = 2, 3, 64, 64, 0.5


def _generator_state() -> tuple[int, int]:
    torch.cuda.init()
    gen = torch.cuda.default_generators[torch.cuda.current_device()]
    return gen.initial_seed(), gen.get_offset()


def _readback_inputs() -> tuple[Any, Any, Any]:
    """Q = 0, any K (from a private generator: the default one is the code under test's),
    V = [I_N | 0]."""
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.zeros(B, H, N, D, device="cuda", dtype=BF16)
    k = torch.randn(B, H, N, D, device="cuda", dtype=BF16, generator=g)
    v = torch.zeros(B, H, N, D, device="cuda", dtype=BF16)
    v[..., :N] = torch.eye(N, device="cuda", dtype=BF16)
    return q, k, v


def read_mask(engine: str, seed: int, offset: int) -> Any:
    """The keep mask [B, H, N, N] the engine's forward applies for (seed, offset)."""
    q, k, v = _readback_inputs()
    o, _, ran = philox_forward(q, k, v, dropout_p=P, seed=seed, offset=offset, engine=engine)
    assert ran == engine
    return o[..., :N] > 0


@pytest.mark.parametrize("engine", FUSED)
def test_one_seed_and_offset_give_one_mask_and_the_caller_keeps_its_generator(
    engine: str,
) -> None:
    torch.manual_seed(77)
    before = _generator_state()
    first = read_mask(engine, 1234, 8)
    assert _generator_state() == before  # set for the op, put back afterwards
    assert torch.equal(read_mask(engine, 1234, 8), first)
    assert 0.4 < first.float().mean().item() < 0.6
    assert not torch.equal(read_mask(engine, 1235, 8), first)
    assert not torch.equal(read_mask(engine, 1234, 8 + 4 * B * H * N * N), first)


@pytest.mark.skipif(bool(torch.version.hip), reason="ROCm's efficient op is AOTriton's stream")
@pytest.mark.parametrize(("seed", "offset"), [(1234, 0), (2**40 + 7, 4096), (-5, 12)])
def test_efficient_engine_draws_the_documented_stream(seed: int, offset: int) -> None:
    got = read_mask(EFFICIENT, seed, offset).cpu().numpy()
    want = dropout_keep_mask(seed, offset, P, (B, H, N, N))
    assert np.array_equal(got, want)


def _grads_case(engine: str) -> tuple[Any, ...]:
    g = torch.Generator(device="cuda").manual_seed(3)
    q, k, v, do = (torch.randn(B, H, N, D, device="cuda", dtype=BF16, generator=g)
                   for _ in range(4))  # fmt: skip
    kw: dict[str, Any] = {"scale": 0.125}  # no causal mask: read_mask's mask is the whole matrix
    o, stats, _ = philox_forward(q, k, v, dropout_p=P, seed=99, offset=16, engine=engine, **kw)
    grads = philox_backward(q, k, v, o, do, stats, dropout_p=P, seed=99, offset=16,
                            engine=engine, **kw)[:3]  # fmt: skip
    return q, k, v, do, o, stats, grads, kw


@pytest.mark.parametrize("engine", FUSED)
def test_fused_gradients_equal_the_math_engines_fed_the_same_mask(engine: str) -> None:
    q, k, v, do, o, _, grads, kw = _grads_case(engine)
    mask = read_mask(engine, 99, 16).to(BF16)
    math = "TORCH_SDPA_MATH_ENGINE"
    ro, rstats = sdpa_forward(q, k, v, dropout_mask=mask, dropout_scale=1 / (1 - P),
                              engine=math, **kw)  # fmt: skip
    rgrads = sdpa_backward(q, k, v, ro, do, rstats, dropout_mask=mask, dropout_scale=1 / (1 - P),
                           engine=math, **kw)[:3]  # fmt: skip

    def rel(a: Any, b: Any) -> float:
        return float((a.float() - b.float()).norm() / b.float().norm())

    assert rel(o, ro) < 2e-2
    for got, want in zip(grads, rgrads, strict=True):
        assert rel(got, want) < 3e-2
    other = sdpa_backward(q, k, v, ro, do, rstats, dropout_mask=1 - mask,
                          dropout_scale=1 / (1 - P), engine=math, **kw)[0]  # fmt: skip
    assert rel(grads[0], other) > 0.3  # another mask is far off: the comparison can fail


@pytest.mark.parametrize("engine", FUSED)
def test_pass_by_value_seed_and_offset_never_sync(engine: str) -> None:
    _grads_case(engine)  # builds and warms the plans
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        _grads_case(engine)
    finally:
        torch.cuda.set_sync_debug_mode(0)


@pytest.mark.parametrize("engine", FUSED)
def test_execute_on_the_same_buffers_keeps_the_graphs_mask(engine: str) -> None:
    """Repeated execute on one set of buffers is what CUDA-graph replay would capture; a philox
    plan refuses replay, so every call draws the graph's own mask."""
    g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    qt = g.tensor(name="Q", dim=[B, H, N, D])
    kt, vt = g.tensor_like(qt, "K"), g.tensor_like(qt, "V")
    seed = g.tensor(name="Seed", dim=[1], data_type=hg.DataType.INT64, is_pass_by_value=True)
    offset = g.tensor(name="Offset", dim=[1], data_type=hg.DataType.INT64).set_value(0)
    o, stats = g.sdpa(qt, kt, vt, generate_stats=True, dropout=(P, seed, offset))
    assert stats is not None
    for t in (o, stats):
        t.set_output(True)
    g.set_preferred_engine_id_ext(engine).build()
    assert g.get_plan_name() == engine
    q, k, v = _readback_inputs()
    out, st = torch.empty_like(q), torch.empty(B, H, N, 1, device="cuda")
    masks = []
    for value in (5, 5, 5, 5, 6):
        g.execute({qt: q, kt: k, vt: v, seed: value, o: out, stats: st})
        masks.append(out[..., :N] > 0)
    assert all(torch.equal(m, masks[0]) for m in masks[1:4])
    assert not torch.equal(masks[4], masks[0])


# ----- the torch op ---------------------------------------------------------------------------

_BACKENDS = {EFFICIENT: "EFFICIENT_ATTENTION", FLASH: "FLASH_ATTENTION", CUDNN: "CUDNN_ATTENTION"}


@pytest.mark.parametrize("engine", FUSED)
def test_op_matches_torch_sdpa_exactly_with_the_same_kernel(engine: str) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(2, 4, 256, 64, device="cuda", dtype=BF16, generator=g,
                           requires_grad=True) for _ in range(3))  # fmt: skip
    hgt.graph_cache().clear()
    with sdpa_kernel([getattr(SDPBackend, _BACKENDS[engine])]):
        results = []
        for fn in (torch.nn.functional.scaled_dot_product_attention,
                   hgt.scaled_dot_product_attention):  # fmt: skip
            torch.manual_seed(11)
            out = fn(q, k, v, dropout_p=0.1, is_causal=True)
            grads = torch.autograd.grad(out.float().square().sum(), [q, k, v])
            results.append((out, grads, _generator_state()))
    (ref, rgrads, rstate), (out, grads, state) = results
    assert torch.equal(out, ref)
    assert state == rstate  # the generator moved on as F.sdpa moves it
    for a, b in zip(grads, rgrads, strict=True):
        torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-2)
    plans = {e.graph.get_plan_name() for e in hgt.graph_cache().values()}
    assert plans == {engine}  # forward and backward on the same engine


def test_op_philox_hits_match_torch_sdpa_and_follow_its_switches(monkeypatch: Any) -> None:
    """The hot path of a training call (hits ask nothing again) still draws F.sdpa's mask and
    moves the generator as it does, and a changed backend switch is a new signature."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from hipdnn_graph.torch import _choice

    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(2, 4, 256, 64, device="cuda", dtype=BF16, generator=g,
                           requires_grad=True) for _ in range(3))  # fmt: skip
    hgt.graph_cache().clear()
    _choice.clear_choices()
    asked: list[int] = []  # the op's questions to torch's selection (F.sdpa asks it in C++)
    choice = torch._fused_sdp_choice
    monkeypatch.setattr(
        torch, "_fused_sdp_choice", lambda *a, **kw: asked.append(1) or choice(*a, **kw)
    )
    for engine in (*FUSED, EFFICIENT):
        with sdpa_kernel([getattr(SDPBackend, _BACKENDS[engine])]):
            results = []
            ours = hgt.scaled_dot_product_attention
            for fn in (torch.nn.functional.scaled_dot_product_attention, ours, ours):
                torch.manual_seed(11)
                out = fn(q, k, v, dropout_p=0.1, is_causal=True)
                grads = torch.autograd.grad(out.float().square().sum(), [q, k, v])
                results.append((out, grads, _generator_state()))
        (ref, rgrads, rstate), *runs = results
        for out, grads, state in runs:  # the op's miss (or remembered signature), then a hit
            assert torch.equal(out, ref)
            assert state == rstate
            for a, b in zip(grads, rgrads, strict=True):
                torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-2)
    # one question per switch setting (the last EFFICIENT round was remembered)
    assert len(asked) == len(FUSED)


def test_op_makes_no_score_sized_tensor() -> None:
    def peak(fn: Any) -> int:
        g = torch.Generator(device="cuda").manual_seed(1)
        q, k, v = (torch.randn(2, 8, 2048, 64, device="cuda", dtype=BF16, generator=g,
                               requires_grad=True) for _ in range(3))  # fmt: skip
        fn(q, k, v, dropout_p=0.1, is_causal=True).sum().backward()  # warm (plans, caches)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn(q, k, v, dropout_p=0.1, is_causal=True).sum().backward()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base

    ours = peak(hgt.scaled_dot_product_attention)
    torchs = peak(torch.nn.functional.scaled_dot_product_attention)
    score_mask = 2 * 8 * 2048 * 2048 * 2  # a bf16 [B, H, S, S] mask: 128 MiB
    assert ours <= torchs + score_mask // 8
