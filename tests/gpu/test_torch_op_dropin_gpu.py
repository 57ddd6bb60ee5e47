"""GPU suite of the torch op as a drop-in for F.sdpa (issue 35 items 1 and 2).

For every dtype torch takes (float32, float16, bfloat16, float64), causal or not, with and
without dropout, and under torch.autocast: the engine that runs the op's forward and backward
graphs is the one of the backend torch's own selection picks for the same call (the
memory-efficient kernel for float32, the math engine for float64, as F.sdpa), the outputs and
gradients are F.sdpa's (the same kernel: equal within the kernel's own reordering; with dropout
the same mask, so the same output bit for bit on a fused kernel, and the generator moved on
alike), the dtypes are F.sdpa's, and the sdpa_kernel context moves the op as it moves F.sdpa.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph.torch as hgt  # noqa: E402
from hipdnn_graph.torch import _choice  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]

F = torch.nn.functional
MATH = "TORCH_SDPA_MATH_ENGINE"
EFFICIENT = "TORCH_SDPA_EFFICIENT_ENGINE"
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
#: relative error (Frobenius) against F.sdpa, by dtype: one kernel, summed in its own order
TOL = {torch.float64: 1e-10, torch.float32: 1e-5, torch.float16: 5e-3, torch.bfloat16: 2e-2}


def _rel(a: Any, ref: Any) -> float:
    return float((a.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30))


def _leaves(dtypes: Any, shape: tuple[int, ...] = (2, 4, 256, 64)) -> list[Any]:
    g = torch.Generator(device="cuda").manual_seed(3)
    return [
        torch.randn(*shape, device="cuda", generator=g).to(dt).requires_grad_() for dt in dtypes
    ]


def _step(fn: Any, leaves: list[Any], seed: int, **kw: Any) -> tuple[Any, list[Any], int]:
    """fn's output, its leaves' gradients for a fixed upstream gradient, and the generator's
    offset after the forward."""
    torch.cuda.manual_seed(seed)
    out = fn(*leaves, **kw)
    offset = _generator().get_offset()
    g = torch.Generator(device="cuda").manual_seed(9)
    up = torch.randn(out.shape, device="cuda", generator=g).to(out.dtype)
    grads = torch.autograd.grad(out, leaves, up)
    return out, list(grads), offset


def _generator() -> Any:
    torch.cuda.init()
    return torch.cuda.default_generators[torch.cuda.current_device()]


def _torchs_engine(leaves: list[Any], p: float, causal: bool) -> str | None:
    """The engine of the backend torch's selection picks for these leaves (as F.sdpa does)."""
    q, k, v = leaves
    backend = int(torch._fused_sdp_choice(q, k, v, None, p, causal))
    return _choice.ENGINE_OF_BACKEND.get(backend)


def _engines() -> dict[str, str]:
    return {g.kind: g.engine for g in hgt.cached_graphs()}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("p", [0.0, 0.1])
def test_the_op_runs_torchs_kernel_with_sdpas_results(dtype: Any, causal: bool, p: float) -> None:
    hgt.graph_cache().clear()
    leaves = _leaves([dtype] * 3)
    want_engine = _torchs_engine(leaves, p, causal)
    for _ in range(2):  # a miss, then a hit (or the learnt route)
        out, grads, offset = _step(hgt.scaled_dot_product_attention, leaves, 5, dropout_p=p,
                                   is_causal=causal)  # fmt: skip
    ref, ref_grads, ref_offset = _step(F.scaled_dot_product_attention, leaves, 5, dropout_p=p,
                                       is_causal=causal)  # fmt: skip
    assert _engines() == {"forward": want_engine, "backward": want_engine}
    if dtype == torch.float32:
        assert want_engine == EFFICIENT  # float32's fused kernel, as the issue measured
    assert out.dtype == ref.dtype == dtype
    assert all(g.dtype == dtype for g in grads)
    if p and want_engine == MATH:  # torch's math backend draws its mask from another stream
        assert torch.isfinite(out).all()
        return
    if p:
        assert torch.equal(out, ref)  # one kernel, one seed and offset: one mask
        assert offset == ref_offset  # the generator moved on as F.sdpa moves it
    else:
        assert _rel(out, ref) < TOL[dtype]
    for a, b in zip(grads, ref_grads, strict=True):
        assert _rel(a, b) < TOL[dtype] * (4 if p else 1)


@pytest.mark.parametrize("region", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("p", [0.0, 0.1])
@pytest.mark.parametrize(
    "dtypes",
    [(torch.float32,) * 3, (torch.float32, torch.float32, torch.bfloat16)],
    ids=["float32", "rotary_mixed"],
)
def test_autocast_casts_and_runs_torchs_kernel(region: Any, p: float, dtypes: Any) -> None:
    hgt.graph_cache().clear()
    leaves = _leaves(dtypes)
    want_engine = _torchs_engine([t.detach().to(region).requires_grad_() for t in leaves], p, True)
    with torch.autocast("cuda", dtype=region):
        for _ in range(2):
            out, grads, offset = _step(hgt.scaled_dot_product_attention, leaves, 7,
                                       dropout_p=p, is_causal=True)  # fmt: skip
        ref, ref_grads, ref_offset = _step(F.scaled_dot_product_attention, leaves, 7,
                                           dropout_p=p, is_causal=True)  # fmt: skip
    assert _engines() == {"forward": want_engine, "backward": want_engine}
    assert out.dtype == ref.dtype == region
    for leaf, g, r in zip(leaves, grads, ref_grads, strict=True):
        assert g.dtype == r.dtype == leaf.dtype
        assert _rel(g, r) < TOL[region] * (4 if p else 1)
    if p:
        assert torch.equal(out, ref) and offset == ref_offset
    else:
        assert _rel(out, ref) < TOL[region]


def test_autocast_refuses_float64_beside_float32_as_torch_does() -> None:
    import hipdnn_graph as hg

    q, k, v = _leaves([torch.float64, torch.float32, torch.float32])
    with torch.autocast("cuda", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError):
            F.scaled_dot_product_attention(q, k, v)
        with pytest.raises(hg.HipdnnError, match="leaves float64 ones as they are"):
            hgt.scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize(
    ("backend", "dtype"),
    [("MATH", torch.bfloat16), ("EFFICIENT_ATTENTION", torch.bfloat16),
     ("FLASH_ATTENTION", torch.float16), ("MATH", torch.float32)],
)  # fmt: skip
def test_the_sdpa_kernel_context_moves_the_op_as_it_moves_sdpa(backend: str, dtype: Any) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    hgt.graph_cache().clear()
    leaves = _leaves([dtype] * 3)
    with sdpa_kernel([getattr(SDPBackend, backend)]):
        want_engine = _torchs_engine(leaves, 0.0, True)
        out, grads, _ = _step(hgt.scaled_dot_product_attention, leaves, 1, is_causal=True)
        ref, ref_grads, _ = _step(F.scaled_dot_product_attention, leaves, 1, is_causal=True)
    assert want_engine == _choice.ENGINE_OF_BACKEND[int(getattr(SDPBackend, backend))]
    assert _engines() == {"forward": want_engine, "backward": want_engine}
    assert _rel(out, ref) < TOL[dtype]
    for a, b in zip(grads, ref_grads, strict=True):
        assert _rel(a, b) < TOL[dtype] * 2


@pytest.mark.parametrize("p", [0.0, 0.1])
def test_float32_training_peak_memory_is_no_more_than_sdpas(p: float) -> None:
    """(8, 12, 1024, 64) float32 causal forward + backward: the issue measured 817 MiB (math
    engine) against F.sdpa's 73; on torch's kernel the op holds what F.sdpa holds (allocator
    rounding aside)."""

    def peak(fn: Any) -> int:
        leaves = _leaves([torch.float32] * 3, (8, 12, 1024, 64))
        fn(*leaves, dropout_p=p, is_causal=True).sum().backward()  # warm: plans, caches
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn(*leaves, dropout_p=p, is_causal=True).sum().backward()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base

    hgt.graph_cache().clear()
    ours = peak(hgt.scaled_dot_product_attention)
    torchs = peak(F.scaled_dot_product_attention)
    assert ours <= torchs + (2 << 20), (ours >> 20, torchs >> 20)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_ops_output_and_gradients_are_laid_out_as_sdpas(dtype: Any) -> None:
    """The op hands back O (and the gradients) in the layout F.sdpa's kernel gives: torch's
    memory-efficient kernel (float32's) writes O with [B, S, H, D] memory; a copy into Q's layout
    cost time and a second O-sized buffer in the backward (issue 35)."""
    hgt.graph_cache().clear()
    results = []
    for fn in (hgt.scaled_dot_product_attention, F.scaled_dot_product_attention):
        leaves = _leaves([dtype] * 3, (2, 4, 128, 64))
        o = fn(*leaves, is_causal=True)
        o.sum().backward()
        results.append((o.stride(), [t.grad.stride() for t in leaves]))
    assert results[0] == results[1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_custom_ops_hand_back_the_layouts_their_fakes_declare(dtype: Any) -> None:
    """torch.compile plans its code by the custom ops' fake strides; the graphs may declare the
    memory-efficient kernel's own [B, S, H, D] layout (float32's kernel), so the ops hand their
    outputs back as the fakes say (torch.library.opcheck's fake-tensor check as well)."""
    from hipdnn_graph.torch._custom_ops import (
        _sdpa_bwd_fake,
        _sdpa_fwd_fake,
        sdpa_bwd_op,
        sdpa_fwd_op,
    )

    q, k, v = (t.detach() for t in _leaves([dtype] * 3, (2, 4, 128, 64)))
    fwd_args = (q, k, v, None, None, None, 0.0, None, True, 0, None, None, False, None)
    o, stats, state = sdpa_fwd_op(*fwd_args)
    fake_o, fake_stats, _ = _sdpa_fwd_fake(*fwd_args)
    assert (o.stride(), stats.stride()) == (fake_o.stride(), fake_stats.stride())
    do = torch.randn_like(o)
    bwd_args = (q, k, v, o, do, stats, None, None, None, state, 0.0, None, True, 0, None, None,
                False, None, False)  # fmt: skip
    grads = sdpa_bwd_op(*bwd_args)
    fakes = _sdpa_bwd_fake(*bwd_args)
    assert [g.stride() for g in grads[:3]] == [f.stride() for f in fakes[:3]]
    torch.library.opcheck(sdpa_fwd_op, fwd_args, test_utils=("test_schema", "test_faketensor"))
