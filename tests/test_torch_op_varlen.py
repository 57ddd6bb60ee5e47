"""``hipdnn_graph.torch.varlen_attention``: a packed batch ([T, H, D] tokens, cumulative sequence
lengths) forward and backward against torch's ``F.scaled_dot_product_attention`` and autograd
run on each sequence alone (float64 and float32; causal top-left and bottom-right, GQA,
``Sq ≠ Skv``), its argument checks with their codes and messages, and the graph cache: a batch
packed differently hits the graphs of the first."""

from __future__ import annotations

from typing import Any

import pytest

import hipdnn_graph as hg

torch = pytest.importorskip("torch")
hgt = pytest.importorskip("hipdnn_graph.torch")
F = torch.nn.functional

H, HK, D = 4, 2, 8
#: per sequence (Sq, Skv): Sq > Skv, Sq < Skv, equal, a single query
LENGTHS = [(5, 3), (2, 7), (6, 6), (1, 4)]
MASKS: dict[str, dict[str, Any]] = {
    "none": {},
    "causal_top_left": {"is_causal": True},
    "causal_bottom_right": {"is_causal": True, "diagonal_alignment": "bottom_right"},
}


def _cu(lengths: list[int], dtype: Any = torch.int32) -> Any:
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=dtype)


def _inputs(dtype: Any, seed: int = 0, lengths: list[tuple[int, int]] = LENGTHS) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(seed)
    tq, tk = sum(a for a, _ in lengths), sum(b for _, b in lengths)

    def leaf(*shape: int) -> Any:
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype).requires_grad_()

    return {
        "q": leaf(tq, H, D),
        "k": leaf(tk, HK, D),
        "v": leaf(tk, HK, D),
        "do": torch.randn(tq, H, D, generator=gen, dtype=torch.float64).to(dtype),
        "cu_q": _cu([a for a, _ in lengths]),
        "cu_k": _cu([b for _, b in lengths], torch.int64),
        "max_q": max(a for a, _ in lengths),
        "max_k": max(b for _, b in lengths),
    }


def _visible(sq: int, skv: int, mask: dict[str, Any]) -> Any:
    i, j = torch.arange(sq)[:, None], torch.arange(skv)[None, :]
    if not mask:
        return torch.ones(sq, skv, dtype=torch.bool)
    if mask.get("diagonal_alignment") == "bottom_right":
        return j <= i + skv - sq
    return j <= i


def _per_sequence(a: dict[str, Any], mask: dict[str, Any], scale: float | None = None) -> Any:
    """The packed output computed sequence by sequence with F.sdpa (a row that sees no key: 0)."""
    cq, ck = a["cu_q"].tolist(), a["cu_k"].tolist()
    outs = []
    for b in range(len(cq) - 1):
        q = a["q"][cq[b] : cq[b + 1]].transpose(0, 1)
        k, v = (a[n][ck[b] : ck[b + 1]].transpose(0, 1) for n in "kv")
        seen = _visible(q.shape[1], k.shape[1], mask)
        rows = seen.any(-1)
        safe = seen | ~rows[:, None]
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=safe, scale=scale, enable_gqa=True)
        outs.append(torch.where(rows[None, :, None], o, torch.zeros_like(o)).transpose(0, 1))
    return torch.cat(outs)


def _grads(a: dict[str, Any], out: Any) -> list[Any]:
    return list(torch.autograd.grad(out, [a["q"], a["k"], a["v"]], a["do"]))


def _packed(a: dict[str, Any], **kw: Any) -> Any:
    return hgt.varlen_attention(a["q"], a["k"], a["v"], a["cu_q"], a["cu_k"], a["max_q"],
                                a["max_k"], enable_gqa=True, **kw)  # fmt: skip


@pytest.mark.parametrize("mask_name", sorted(MASKS))
def test_float64_values_and_gradients_match_each_sequence_alone(mask_name: str) -> None:
    mask = MASKS[mask_name]
    a = _inputs(torch.float64)
    out = _packed(a, **mask)
    ref = _per_sequence(a, mask)
    assert out.shape == (sum(s for s, _ in LENGTHS), H, D) and out.dtype == torch.float64
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    for got, want in zip(_grads(a, out), _grads(a, ref), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("mask_name", ["causal_top_left", "causal_bottom_right"])
def test_float32_with_a_scale_matches_each_sequence_alone(mask_name: str) -> None:
    mask = MASKS[mask_name]
    a = _inputs(torch.float32, seed=3)
    out = _packed(a, scale=0.25, **mask)
    ref = _per_sequence(a, mask, scale=0.25)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    for got, want in zip(_grads(a, out), _grads(a, ref), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_gradcheck_float64() -> None:
    a = _inputs(torch.float64, lengths=[(3, 2), (2, 4)])

    def f(q: Any, k: Any, v: Any) -> Any:
        return hgt.varlen_attention(q, k, v, a["cu_q"], a["cu_k"], 3, 4, is_causal=True,
                                    enable_gqa=True)  # fmt: skip

    assert torch.autograd.gradcheck(f, (a["q"], a["k"], a["v"]))


def test_layouts_and_max_seqlen_tensors_are_taken() -> None:
    """A non-contiguous [T, H, D] view (as [1, H, T, D].transpose gives) and max_seqlen as a
    0-dim integer tensor (transformers' cu_seq_lens.diff().max()) give the same result."""
    a = _inputs(torch.float64, seed=5)
    base = a["q"].detach().transpose(0, 1).contiguous().transpose(0, 1).requires_grad_()
    assert not base.is_contiguous()
    out = hgt.varlen_attention(base, a["k"], a["v"], a["cu_q"], a["cu_k"],
                               a["cu_q"].diff().max(), torch.tensor(a["max_k"]),
                               is_causal=True, enable_gqa=True)  # fmt: skip
    torch.testing.assert_close(out, _packed(a, is_causal=True), rtol=0, atol=0)
    (dq,) = torch.autograd.grad(out, [base], a["do"])
    (want,) = torch.autograd.grad(_packed(a, is_causal=True), [a["q"]], a["do"])
    torch.testing.assert_close(dq, want, rtol=0, atol=0)


def test_a_batch_packed_differently_hits_the_cached_graphs() -> None:
    """The graphs are keyed by B, S_max (rounded up to a power of two), heads and dtypes, not by
    the offsets or the token count: a second batch of other lengths builds nothing."""
    hgt.graph_cache().clear()
    a = _inputs(torch.float64)
    _grads(a, _packed(a, is_causal=True))
    assert hgt.graph_cache().info()[:2] == (0, 2)  # (hits, misses): forward and backward built
    other = [(4, 4), (1, 8), (7, 5), (3, 2)]  # other lengths and token counts, same B, S_max 8
    b = _inputs(torch.float64, seed=1, lengths=other)
    out = _packed(b, is_causal=True)
    got = _grads(b, out)
    assert hgt.graph_cache().info()[:2] == (2, 2)
    ref = _per_sequence(b, MASKS["causal_top_left"])
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    for g, want in zip(got, _grads(b, ref), strict=True):
        torch.testing.assert_close(g, want, rtol=1e-10, atol=1e-10)
    kinds = [(c.kind, c.engine, c.shapes["Q"]) for c in hgt.cached_graphs()]
    assert kinds == [
        ("forward", "TORCH_SDPA_MATH_ENGINE", (4, H, 8, D)),
        ("backward", "TORCH_SDPA_MATH_ENGINE", (4, H, 8, D)),
    ]


def test_empty_key_sequences_give_zeros() -> None:
    a = _inputs(torch.float64, lengths=[(2, 0), (3, 3)])
    out = _packed(a, is_causal=True, diagonal_alignment="bottom_right")
    assert (out[:2] == 0).all()
    torch.testing.assert_close(out, _per_sequence(a, MASKS["causal_bottom_right"]))


def _call(a: dict[str, Any], **change: Any) -> None:
    args = {**a, **change}
    kw = {k: args.pop(k) for k in list(args) if k in ("enable_gqa", "is_causal", "scale")}
    kw.setdefault("enable_gqa", True)
    hgt.varlen_attention(args["q"], args["k"], args["v"], args["cu_q"], args["cu_k"],
                         args["max_q"], args["max_k"], **kw)  # fmt: skip


T_Q, T_K = sum(a for a, _ in LENGTHS), sum(b for _, b in LENGTHS)
BAD: list[tuple[str, dict[str, Any], str]] = [
    ("rank", {"q": torch.zeros(1, T_Q, H, D)}, "query must be rank-3 [T, H, D] (packed tokens), "
     f"got [1, {T_Q}, {H}, {D}]"),
    ("dtype", {"k": torch.zeros(T_K, HK, D, dtype=torch.float32)},
     "key dtype torch.float32 differs from query dtype torch.float64"),
    ("int query", {"q": torch.zeros(T_Q, H, D, dtype=torch.int32)},
     "query dtype torch.int32 is not supported (float16, bfloat16, float32, float64)"),
    ("kv tokens", {"v": torch.zeros(T_K + 1, HK, D, dtype=torch.float64)},
     f"key and value hold different token counts ({T_K}, {T_K + 1})"),
    ("heads", {"k": torch.zeros(T_K, 3, D, dtype=torch.float64)},
     f"key heads (3) must divide query heads ({H}) for GQA"),
    ("gqa", {"enable_gqa": False}, f"key/value heads ({HK}, {HK}) differ from query heads ({H}); "
     "pass enable_gqa=True for grouped-query attention"),
    ("float offsets", {"cu_q": torch.tensor([0.0, 5.0, 7.0, 13.0, 14.0])},
     "cu_seqlens_q must be int32 or int64, got torch.float32"),
    ("2-D offsets", {"cu_k": torch.tensor([[0, 3, 10, 16, 20]])},
     "cu_seqlens_k must be 1-D with B + 1 >= 2 offsets, got shape [1, 5]"),
    ("list offsets", {"cu_q": [0, 5, 7, 13, 14]}, "cu_seqlens_q must be a torch.Tensor, got list"),
    ("device", {"cu_q": torch.zeros(5, dtype=torch.int32, device="meta")},
     "cu_seqlens_q is on meta but query is on cpu"),
    ("start", {"cu_q": torch.tensor([1, 5, 7, 13, 14])}, "cu_seqlens_q must start at 0, got 1"),
    ("decreasing", {"cu_k": torch.tensor([0, 3, 2, 16, 20])},
     "cu_seqlens_k must not decrease, but [1] = 3 > [2] = 2"),
    ("end", {"cu_q": torch.tensor([0, 5, 7, 13, 13])},
     f"cu_seqlens_q must end at the query's token count ({T_Q}), got 13"),
    ("too long", {"max_q": 5},
     "cu_seqlens_q: sequence 2 holds 6 tokens, more than max_seqlen_q (5)"),
    ("max bool", {"max_k": True}, "max_seqlen_k must be a positive integer, got True"),
    ("max zero", {"max_q": 0}, "max_seqlen_q must be a positive integer, got 0"),
    ("batches", {"cu_k": torch.tensor([0, 10, 20])},
     "cu_seqlens_q and cu_seqlens_k describe different batches (5 and 3 offsets)"),
    ("causal", {"is_causal": 1}, "is_causal must be True or False, got 1"),
    ("scale", {"scale": float("nan")}, "scale must be a finite number, got nan"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_arguments_raise_invalid_value(change: dict[str, Any], message: str) -> None:
    a = _inputs(torch.float64)
    with pytest.raises(hg.HipdnnError) as err:
        _call(a, **change)
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == message


def test_a_forced_engine_that_refuses_packed_graphs_says_why() -> None:
    a = _inputs(torch.float64)
    with pytest.raises(hg.NotSupportedError) as err:
        _packed(a, engine="TORCH_SDPA_CUDNN_ENGINE")
    assert "engine 'TORCH_SDPA_CUDNN_ENGINE' cannot run graph 'hipdnn_torch_varlen_fwd'" in str(
        err.value
    )
    assert "ragged" in str(err.value)


def test_autocast_casts_as_for_sdpa_and_gradients_come_back_in_the_callers_dtypes() -> None:
    """Under ``torch.autocast`` float32 q/k and a bfloat16 v (Llama's rotary output beside a
    projection) run in bfloat16, as torch's autocast runs SDPA; the gradients are float32 for
    q/k and bfloat16 for v, and the result matches the same call on bfloat16 inputs."""
    a = _inputs(torch.float32, seed=7)
    v16 = a["v"].detach().bfloat16().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = hgt.varlen_attention(a["q"], a["k"], v16, a["cu_q"], a["cu_k"], a["max_q"],
                                   a["max_k"], is_causal=True, enable_gqa=True)  # fmt: skip
        dq, dk, dv = torch.autograd.grad(out, [a["q"], a["k"], v16], a["do"].bfloat16())
    assert out.dtype == torch.bfloat16
    assert (dq.dtype, dk.dtype, dv.dtype) == (torch.float32, torch.float32, torch.bfloat16)
    b = {n: a[n].detach().bfloat16() for n in ("q", "k")}
    want = hgt.varlen_attention(b["q"], b["k"], v16.detach(), a["cu_q"], a["cu_k"], a["max_q"],
                                a["max_k"], is_causal=True, enable_gqa=True)  # fmt: skip
    torch.testing.assert_close(out, want, rtol=0, atol=0)


def test_torch_compile_runs_it_eagerly_behind_a_graph_break() -> None:
    a = _inputs(torch.float64, seed=8)

    def f(q: Any, k: Any, v: Any) -> Any:
        out = hgt.varlen_attention(q * 1.0, k, v, a["cu_q"], a["cu_k"], a["max_q"],
                                   a["max_k"], is_causal=True, enable_gqa=True)  # fmt: skip
        return out * 2.0

    compiled = torch.compile(f, backend="eager", fullgraph=False)
    got = compiled(a["q"], a["k"], a["v"])
    torch.testing.assert_close(got, 2.0 * _packed(a, is_causal=True), rtol=0, atol=0)
    (dq,) = torch.autograd.grad(got, [a["q"]], a["do"])
    (want,) = torch.autograd.grad(2.0 * _packed(a, is_causal=True), [a["q"]], a["do"])
    torch.testing.assert_close(dq, want, rtol=0, atol=0)


def test_values_may_have_their_own_head_dim() -> None:
    a = _inputs(torch.float64, seed=9)
    a["v"] = torch.randn(a["v"].shape[0], HK, 5, dtype=torch.float64, requires_grad=True)
    a["do"] = torch.randn(a["q"].shape[0], H, 5, dtype=torch.float64)
    out = _packed(a, is_causal=True)
    ref = _per_sequence(a, MASKS["causal_top_left"])
    assert out.shape == (a["q"].shape[0], H, 5)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    for got, want in zip(_grads(a, out), _grads(a, ref), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_a_batch_without_tokens_gives_an_empty_result() -> None:
    z = torch.zeros(0, H, D, dtype=torch.float64)
    cu = torch.zeros(2, dtype=torch.int32)
    assert hgt.varlen_attention(z, z, z, cu, cu, 1, 1).shape == (0, H, D)


def test_a_batch_without_tokens_runs_backward_too() -> None:
    """The gradient torch hands back for zero tokens has strides 0: an empty block."""
    z = torch.zeros(0, H, D, dtype=torch.float64, requires_grad=True)
    cu = torch.zeros(2, dtype=torch.int32)
    out = hgt.varlen_attention(z, z, z, cu, cu, 1, 1)
    out.sum().backward()
    assert z.grad is not None and z.grad.shape == (0, H, D)


def test_a_max_seqlen_past_the_tokens_sizes_nothing() -> None:
    """``max_seqlen`` only bounds the sequences: one far past the tokens (2**62: S_max past what
    a tensor can hold) gives the graphs of the token count, and the same values."""
    from hipdnn_graph.torch._varlen_args import normalise_varlen

    a = _inputs(torch.float64, seed=10)
    args = (a["q"], a["k"], a["v"], a["cu_q"], a["cu_k"])
    call = normalise_varlen(*args, 2**62, 2**40, True, None, None, True, None)
    assert call.seq_max == (16, 32)  # 14 query and 20 key tokens, rounded up
    want = _packed(a, is_causal=True)
    got = hgt.varlen_attention(*args, 2**62, 2**40, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    for g, w in zip(_grads(a, got), _grads(a, want), strict=True):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_offsets_on_the_meta_device_are_refused() -> None:
    """Meta tensors have no values to read: refused by name (never torch's NotImplementedError)."""
    a = {k: (v.detach().to("meta") if isinstance(v, torch.Tensor) else v) for k, v in
         _inputs(torch.float64).items()}  # fmt: skip
    with pytest.raises(hg.HipdnnError) as err:
        _call(a)
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == (
        "cu_seqlens_q is on meta: its values are read on the host, and it has none"
    )
