"""hipdnn_graph.torch.scaled_dot_product_attention: torch's semantics, autograd, dropout, compile.

Checked against torch's own ``scaled_dot_product_attention`` and the independent float64
autograd reference, with ``torch.autograd.gradcheck`` in float64 for every argument
combination, ``torch.library.opcheck`` on the custom ops, and ``torch.compile(fullgraph=True)``
(backend ``aot_eager``: the 2-core CI box compiles with inductor too slowly to be worth it; the
op's fake kernels and autograd registration are what dynamo and AOTAutograd trace either way).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sdpa_autograd_reference import reference_backward, reference_forward  # noqa: E402

import hipdnn_graph as hg  # noqa: E402
import hipdnn_graph.torch as hgt  # noqa: E402
from hipdnn_graph.philox import dropout_keep_mask  # noqa: E402
from hipdnn_graph.torch import _dropout  # noqa: E402
from hipdnn_graph.torch._custom_ops import sdpa_bwd_op, sdpa_fwd_op  # noqa: E402

sdpa = hgt.scaled_dot_product_attention
F64 = torch.float64


def _qkv(b: int, h: int, hk: int, sq: int, skv: int, d: int, dv: int, seed: int = 0,
         dtype: Any = F64) -> tuple[Any, Any, Any]:  # fmt: skip
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(b, h, sq, d, generator=g, dtype=dtype, requires_grad=True),
        torch.randn(b, hk, skv, d, generator=g, dtype=dtype, requires_grad=True),
        torch.randn(b, hk, skv, dv, generator=g, dtype=dtype, requires_grad=True),
    )


# name → (q/k/v shape args, op keywords, a mask maker or None)
CASES: dict[str, tuple[tuple[int, ...], dict[str, Any], Any]] = {
    "plain": ((1, 2, 2, 3, 4, 3, 3), {}, None),
    "gqa_causal": ((1, 4, 2, 4, 4, 3, 2), {"is_causal": True, "enable_gqa": True}, None),
    "mqa_dv_differs": ((2, 2, 1, 3, 3, 2, 4), {"enable_gqa": True}, None),
    "bool_mask": ((1, 2, 2, 3, 4, 3, 3), {}, lambda: torch.tensor(
        [[True, False, True, True], [True, True, False, False], [False, True, True, True]])),
    "bias_grad_2d": ((1, 2, 2, 3, 4, 3, 3), {}, lambda: torch.randn(3, 4, dtype=F64)),
    "bias_grad_head_row": ((2, 2, 1, 3, 4, 2, 2), {"enable_gqa": True, "is_causal": True},
                           lambda: torch.randn(1, 2, 1, 4, dtype=F64)),
    "bias_grad_full": ((2, 2, 2, 2, 3, 2, 2), {}, lambda: torch.randn(2, 2, 2, 3, dtype=F64)),
    "causal_bottom_right": ((1, 2, 2, 3, 5, 3, 3),
                            {"is_causal": True, "diagonal_alignment": "bottom_right"}, None),
    "band": ((1, 2, 2, 5, 5, 2, 2), {"left_bound": 1, "right_bound": 1}, None),
    "padding": ((2, 2, 2, 4, 4, 2, 2), {"seq_len_q": [2, 4], "seq_len_kv": [3, 2]}, None),
    "alibi": ((1, 2, 2, 3, 3, 2, 2), {"alibi": True}, None),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_gradcheck_float64(case: str) -> None:
    shape, kw, make_mask = CASES[case]
    q, k, v = _qkv(*shape)
    args: tuple[Any, ...] = (q, k, v)
    if make_mask is not None:
        mask = make_mask()
        if mask.is_floating_point():
            mask.requires_grad_()
        args = (q, k, v, mask)

    def fn(*a: Any) -> Any:
        return sdpa(*a[:3], attn_mask=a[3] if len(a) > 3 else None, **kw)

    assert torch.autograd.gradcheck(fn, args)


def test_gradcheck_with_philox_dropout_at_a_fixed_seed() -> None:
    q, k, v = _qkv(1, 2, 1, 3, 4, 2, 3)
    bias = torch.randn(1, 1, 3, 4, dtype=F64, requires_grad=True)

    def fn(q: Any, k: Any, v: Any, bias: Any) -> Any:
        torch.manual_seed(1)  # one mask for every evaluation
        return sdpa(q, k, v, attn_mask=bias, dropout_p=0.3, scale=0.5, is_causal=True,
                    enable_gqa=True)  # fmt: skip

    assert torch.autograd.gradcheck(fn, (q, k, v, bias))


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"is_causal": True},
        {"scale": 0.3, "enable_gqa": True},
        {"mask": "bool"},
        {"mask": "float", "enable_gqa": True},
    ],
    ids=["plain", "causal", "scale_gqa", "bool_mask", "float_mask_gqa"],
)
def test_matches_torch_sdpa_values_and_gradients(kw: dict[str, Any]) -> None:
    kw = dict(kw)
    q, k, v = _qkv(2, 4, 2 if kw.get("enable_gqa") else 4, 8, 8, 16, 16, dtype=torch.float32)
    mask_kind = kw.pop("mask", None)
    mask = None
    if mask_kind == "bool":
        mask = torch.rand(2, 1, 8, 8, generator=torch.Generator().manual_seed(3)) > 0.4
        mask[..., 0] = True
    elif mask_kind == "float":
        mask = torch.randn(1, 4, 8, 8, requires_grad=True)
    ours = sdpa(q, k, v, attn_mask=mask, **kw)
    grads = torch.autograd.grad(ours.square().sum(), [q, k, v] + ([mask] if mask_kind ==
                                "float" else []))  # fmt: skip
    theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)
    tgrads = torch.autograd.grad(theirs.square().sum(), [q, k, v] + ([mask] if mask_kind ==
                                 "float" else []))  # fmt: skip
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    for a, b in zip(grads, tgrads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_expanded_float_mask_gets_the_gradient_of_its_own_shape() -> None:
    q, k, v = _qkv(2, 2, 2, 3, 4, 2, 2)
    base = torch.randn(1, 1, 1, 4, dtype=F64, requires_grad=True)
    out = sdpa(q, k, v, attn_mask=base.expand(2, 2, 3, 4), scale=0.5)
    (gbase,) = torch.autograd.grad(out.sum(), [base])
    ref = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=base.expand(2, 2, 3, 4), scale=0.5
    )
    (rbase,) = torch.autograd.grad(ref.sum(), [base])
    assert gbase.shape == (1, 1, 1, 4)
    torch.testing.assert_close(gbase, rbase, rtol=1e-6, atol=1e-6)


def test_dropout_is_philox_seeded_from_torch_generator_and_feeds_both_graphs() -> None:
    q, k, v = _qkv(2, 2, 2, 4, 5, 3, 3)
    p = 0.4
    hgt.graph_cache().clear()
    torch.manual_seed(123)
    out = sdpa(q, k, v, dropout_p=p, scale=0.5)
    grads = torch.autograd.grad(out.sum(), [q, k, v])
    torch.manual_seed(123)
    seed, offset = _dropout.draw(torch.device("cpu"))  # the op's draw (CPU: offset 0)
    keep = torch.from_numpy(dropout_keep_mask(seed, offset, p, (2, 2, 4, 5))).to(F64)
    scale = 1 / (1 - float(np.float32(p)))  # the graph keeps p as float32, as hipDNN does
    ro, rstats = reference_forward(q, k, v, scale=0.5, dropout_mask=keep.numpy(),
                                   dropout_scale=scale)  # fmt: skip
    np.testing.assert_allclose(out.detach().numpy(), ro, rtol=1e-9, atol=1e-9)
    rgrads = reference_backward(
        q, k, v, ro, np.ones_like(ro), rstats, scale=0.5, dropout_mask=keep.numpy(),
        dropout_scale=scale,
    )[:3]  # fmt: skip
    for a, b in zip(grads, rgrads, strict=True):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-9, atol=1e-9)
    torch.manual_seed(123)
    assert torch.equal(sdpa(q, k, v, dropout_p=p, scale=0.5), out)
    torch.manual_seed(124)
    assert not torch.equal(sdpa(q, k, v, dropout_p=p, scale=0.5), out)
    # the seed changes every call, the graphs do not: one forward and one backward graph
    entries = hgt.graph_cache().values()
    assert len(entries) == 2 and all("Seed" in e.slots for e in entries)
    assert {e.graph.get_plan_name() for e in entries} == {"TORCH_SDPA_MATH_ENGINE"}


def test_torch_compile_fullgraph_matches_eager() -> None:
    q, k, v = _qkv(2, 4, 2, 8, 8, 8, 8, dtype=torch.float32)
    bias = torch.randn(1, 4, 8, 8, requires_grad=True)

    def step(q: Any, k: Any, v: Any, bias: Any) -> Any:
        return sdpa(q, k, v, attn_mask=bias, is_causal=True, enable_gqa=True, dropout_p=0.2)

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    results = []
    for fn in (step, compiled):
        torch.manual_seed(7)
        out = fn(q, k, v, bias)
        results.append((out, *torch.autograd.grad(out.square().sum(), [q, k, v, bias])))
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_opcheck_on_the_custom_ops() -> None:
    q, k, v = _qkv(1, 2, 1, 3, 4, 2, 2, dtype=torch.float32)
    bias = torch.randn(1, 2, 3, 4, requires_grad=True)
    fwd_args = (q, k, v, bias, None, None, 0.0, 0.5, True, 0, None, None, False, None)
    torch.library.opcheck(sdpa_fwd_op, fwd_args)
    o, stats, state = sdpa_fwd_op(*fwd_args)
    do = torch.randn_like(o)
    detached = (q.detach(), k.detach(), v.detach(), o.detach(), do, stats.detach(), bias.detach())
    bwd_args = (*detached, None, None, state, 0.0, 0.5, True, 0, None, None, False, None, True)
    torch.library.opcheck(sdpa_bwd_op, bwd_args,
                          test_utils=("test_schema", "test_faketensor"))  # fmt: skip
    # with dropout: the state (seed, offset, engine) the forward hands to the backward
    drop_args = (q, k, v, bias, None, None, 0.25, *fwd_args[7:])
    torch.library.opcheck(sdpa_fwd_op, drop_args, test_utils=("test_schema", "test_faketensor"))
    o, stats, state = sdpa_fwd_op(*drop_args)
    assert state.device.type == "cpu" and state.dtype == torch.int64 and state.shape == (3,)
    detached = (q.detach(), k.detach(), v.detach(), o.detach(), do, stats.detach(), bias.detach())
    bwd_args = (*detached, None, None, state, 0.25, *bwd_args[11:])
    torch.library.opcheck(sdpa_bwd_op, bwd_args,
                          test_utils=("test_schema", "test_faketensor"))  # fmt: skip


def test_public_op_errors() -> None:
    q, k, v = _qkv(1, 4, 2, 3, 3, 2, 2)
    with pytest.raises(hg.HipdnnError, match="pass enable_gqa=True") as info:
        sdpa(q, k, v)
    assert info.value.code == hg.ErrorCode.INVALID_VALUE
    for p in (-0.1, 1.0, "0.1"):
        with pytest.raises(hg.HipdnnError, match=r"dropout_p must be in \[0, 1\)"):
            sdpa(q, k, v, dropout_p=p, enable_gqa=True)  # type: ignore[arg-type]
    with pytest.raises(hg.HipdnnError, match="diagonal_alignment must be"):
        sdpa(q, k, v, enable_gqa=True, diagonal_alignment=5)  # type: ignore[arg-type]
    before = q.detach().clone()
    with pytest.raises(hg.NotSupportedError):
        sdpa(q, k, v, enable_gqa=True, engine="TORCH_SDPA_CUDNN_ENGINE")
    assert torch.equal(q.detach(), before)


def test_fully_masked_rows_give_zero_output_and_gradient() -> None:
    q, k, v = _qkv(1, 2, 2, 3, 4, 2, 2)
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[1] = False
    out = sdpa(q, k, v, attn_mask=mask)
    (dq,) = torch.autograd.grad(out.sum(), [q])
    assert torch.all(out[:, :, 1] == 0) and torch.all(dq[:, :, 1] == 0)
    assert torch.isfinite(out).all() and torch.isfinite(dq).all()


def test_outputs_and_gradients_keep_the_input_layout() -> None:
    # transformers hands Q, K, V as [B, H, S, D] views of [B, S, H, D] memory
    base = [torch.randn(2, 5, h, 4, requires_grad=True) for h in (4, 2, 2)]
    q, k, v = (t.transpose(1, 2) for t in base)
    out = sdpa(q, k, v, is_causal=True, enable_gqa=True)
    assert out.transpose(1, 2).is_contiguous()  # so transformers' .contiguous() copies nothing
    fwd_args = (q.detach(), k.detach(), v.detach(), None, None, None, 0.0, 0.5, True, 0, None,
                None, False, None)  # fmt: skip
    torch.library.opcheck(sdpa_fwd_op, fwd_args, test_utils=("test_schema", "test_faketensor"))
    o, stats, state = sdpa_fwd_op(*fwd_args)
    grads = sdpa_bwd_op(*fwd_args[:3], o, torch.randn_like(o), stats, *fwd_args[3:6], state,
                        *fwd_args[6:], False)  # fmt: skip
    for grad, t in zip(grads[:3], (q, k, v), strict=True):
        assert grad.stride() == t.stride()


@pytest.mark.parametrize("d", [3, 48, 80])
def test_float64_with_the_default_scale_is_as_exact_as_torch(d: int) -> None:
    """Issue 23 item 10: the default scale 1/sqrt(D) used to be stored in the graph as a binary32
    attn_scale_value (2.5e-8 off for D=48); left unset, the engine computes it in float64."""
    q, k, v = _qkv(1, 2, 2, 6, 7, d, d)
    ours = sdpa(q, k, v)
    theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert (ours - theirs).abs().max().item() < 1e-13
    grads = torch.autograd.grad(ours.square().sum(), [q, k, v])
    tgrads = torch.autograd.grad(theirs.square().sum(), [q, k, v])
    for a, b in zip(grads, tgrads, strict=True):
        assert (a - b).abs().max().item() < 1e-12


def test_an_explicit_scale_is_stored_as_hipdnn_stores_it() -> None:
    """An explicit scale other than 1/sqrt(D) is hipDNN's binary32 attn_scale_value (documented),
    so the result is exactly torch's with that scale rounded to float32."""
    q, k, v = _qkv(1, 2, 2, 6, 7, 4, 4)
    ours = sdpa(q, k, v, scale=0.1)
    rounded = float(np.float32(0.1))
    theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=rounded)
    assert (ours - theirs).abs().max().item() < 1e-13
