"""The torch op's arguments (issue 23 item 5), bool masks (item 6) and hot path (issue 22 item 3).

Bad arguments raise ``HipdnnError(INVALID_VALUE)`` naming the argument, as the op documents,
before anything reaches a custom op or a graph; a bool mask is converted on every call; a cache
hit builds nothing, checks nothing the key already fixed and calls the plan directly; plain CPU
problems run torch's fused CPU kernel through the math engine.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph as hg  # noqa: E402
from hipdnn_graph.torch import graph_cache, scaled_dot_product_attention  # noqa: E402
from hipdnn_graph.torch._graphs import sdpa_backward, sdpa_forward  # noqa: E402

F = torch.nn.functional


def _qkv(
    b: int = 2, h: int = 2, s: int = 5, d: int = 4, dtype: Any = torch.float64
) -> tuple[Any, Any, Any]:
    g = torch.Generator().manual_seed(3)
    return tuple(  # type: ignore[return-value]
        torch.randn(b, h, s, d, generator=g, dtype=dtype, requires_grad=True) for _ in range(3)
    )


def _invalid(match: str, **kw: Any) -> None:
    q, k, v = _qkv()
    with pytest.raises(hg.HipdnnError, match=match) as info:
        scaled_dot_product_attention(q, k, v, **kw)
    assert info.value.code == hg.ErrorCode.INVALID_VALUE


# ----- issue 23 item 5: arguments refused as the core API refuses them -----
@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"is_causal": "false"}, "is_causal must be True or False, got 'false'"),
        ({"is_causal": 1}, "is_causal must be True or False"),
        ({"alibi": "no"}, "alibi must be True or False, got 'no'"),
        ({"enable_gqa": "yes"}, "enable_gqa must be True or False"),
        ({"left_bound": 1.5}, r"left_bound must be an integer \(int64\) or None, got 1.5"),
        ({"left_bound": 2**64}, r"left_bound must be an integer \(int64\) or None"),
        ({"right_bound": -(2**63) - 1}, r"right_bound must be an integer \(int64\) or None"),
        ({"left_bound": True}, r"left_bound must be an integer \(int64\) or None, got True"),
        ({"engine": 5}, "engine must be an engine name or None, got 5"),
        ({"scale": "0.5"}, "scale must be a finite number"),
        ({"seq_len_kv": [3, 2**63]}, r"seq_len_kv lengths must be in \[0, 2\*\*31 - 1\]"),
        ({"seq_len_kv": [3, 2**32 + 3]}, r"seq_len_kv lengths must be in \[0, 2\*\*31 - 1\]"),
        ({"seq_len_q": [-1, 2]}, r"seq_len_q lengths must be in \[0, 2\*\*31 - 1\], got -1"),
        ({"seq_len_q": [1.5, 2]}, "seq_len_q must be a tensor or a sequence of integers"),
        ({"seq_len_q": ["3", 2]}, "seq_len_q must be a tensor or a sequence of integers"),
        ({"seq_len_q": [True, 2]}, "seq_len_q must be a tensor or a sequence of integers"),
        (
            {"seq_len_kv": torch.tensor([3, 2**32 + 3])},
            r"seq_len_kv lengths must be in \[0, 2\*\*31 - 1\], got 4294967299",
        ),
        ({"seq_len_kv": torch.tensor([3, -2])}, r"seq_len_kv lengths .*, got -2"),
    ],
)
def test_bad_arguments_are_invalid_value_errors(kw: dict[str, Any], match: str) -> None:
    _invalid(match, **kw)


def test_the_graph_functions_check_flags_too() -> None:
    q, k, v = (t.detach() for t in _qkv())
    with pytest.raises(hg.HipdnnError, match="is_causal must be True or False"):
        sdpa_forward(q, k, v, is_causal="false")  # type: ignore[arg-type]
    with pytest.raises(hg.HipdnnError, match="alibi must be True or False"):
        sdpa_forward(q, k, v, alibi="no")  # type: ignore[arg-type]


def test_a_sparse_tensor_is_refused_by_name() -> None:
    q, k, v = (t.detach() for t in _qkv())
    with pytest.raises(hg.HipdnnError, match="key must be a dense"):
        scaled_dot_product_attention(q, k.to_sparse(), v)


def test_numpy_integer_lengths_are_taken() -> None:
    np = pytest.importorskip("numpy")
    q, k, v = _qkv()
    out = scaled_dot_product_attention(q, k, v, seq_len_kv=[np.int64(3), 5])
    ref = scaled_dot_product_attention(q, k, v, seq_len_kv=[3, 5])
    assert torch.equal(out, ref)


# ----- issue 23 item 6: a bool mask is never served from a stale conversion -----
@pytest.mark.parametrize("how", ["data", "numpy", "in_place"])
def test_a_bool_mask_changed_behind_its_version_counter_is_read_again(how: str) -> None:
    q, k, v = _qkv()
    keep = torch.ones(5, 5, dtype=torch.bool)
    first = scaled_dot_product_attention(q, k, v, attn_mask=keep)
    if how == "data":
        keep.data[:, 2:] = False  # the version counter of `keep` does not move
    elif how == "numpy":
        keep.numpy()[:, 2:] = False  # neither does it here
    else:
        keep[:, 2:] = False
    second = scaled_dot_product_attention(q, k, v, attn_mask=keep)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=keep.clone())
    assert not torch.allclose(first, second)
    torch.testing.assert_close(second, ref)
    grads = torch.autograd.grad(second.sum(), [q, k, v])
    refs = torch.autograd.grad(ref.sum(), [q, k, v])
    for a, b in zip(grads, refs, strict=True):
        torch.testing.assert_close(a, b)


# ----- issue 22 item 3: the hot path -----
def test_a_cache_hit_calls_the_plan_directly_and_builds_nothing(monkeypatch: Any) -> None:
    graph_cache().clear()
    q, k, v = _qkv(dtype=torch.float32)
    scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    assert graph_cache().info()[:2] == (0, 2)

    def no_build(*args: Any, **kw: Any) -> None:
        raise AssertionError("a cache hit built or re-checked something")

    monkeypatch.setattr(hg.Graph, "build", no_build)
    monkeypatch.setattr(hg.Graph, "run", no_build)
    monkeypatch.setattr(hg.Graph, "execute", no_build)
    for _ in range(2):
        out = scaled_dot_product_attention(q, k, v, is_causal=True)
        grads = torch.autograd.grad(out.square().sum(), [q, k, v])
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, ref)
    for a, b in zip(grads, torch.autograd.grad(ref.square().sum(), [q, k, v]), strict=True):
        torch.testing.assert_close(a, b)
    # the second call hits both graphs and learns the autograd route (torch's fused CPU
    # kernel); the third hits the forward graph alone
    assert graph_cache().info()[:2] == (3, 2)


def test_engines_get_inputs_that_do_not_require_grad_on_hits_too(monkeypatch: Any) -> None:
    # as the variant-pack check hands them over (compiled kernels are guarded on requires_grad)
    from hipdnn_graph_torch_rocm._engines import TorchSdpaPlan

    seen: list[bool] = []
    execute = TorchSdpaPlan.execute

    def recording(self: Any, variant_pack: Any, workspace: Any) -> None:
        seen.extend(v.requires_grad for v in variant_pack.values() if torch.is_tensor(v))
        execute(self, variant_pack, workspace)

    monkeypatch.setattr(TorchSdpaPlan, "execute", recording)
    graph_cache().clear()
    q, k, v = _qkv()
    for _ in range(2):  # a miss, then a hit
        scaled_dot_product_attention(q, k, v).sum().backward()
        o, stats = sdpa_forward(q, k, v)
        sdpa_backward(q, k, v, o, torch.ones_like(o), stats)
    assert seen and not any(seen)


def test_a_hit_with_new_layout_or_device_facts_is_a_miss() -> None:
    graph_cache().clear()
    q, k, v = (t.detach() for t in _qkv(dtype=torch.float32))
    sdpa_forward(q, k, v)
    sdpa_forward(q.transpose(2, 3).contiguous().transpose(2, 3), k, v)  # other strides
    sdpa_forward(q[:1], k[:1], v[:1])  # other shape
    assert graph_cache().info()[:2] == (0, 3)


def test_graph_functions_do_not_record_autograd_history_on_a_hit() -> None:
    graph_cache().clear()
    q, k, v = _qkv()
    for _ in range(2):  # a miss (Graph.run) then a hit (the prepared plan)
        o, stats = sdpa_forward(q, k, v)
        assert o.grad_fn is None and not o.requires_grad and stats.grad_fn is None
        grads = sdpa_backward(q, k, v, o, torch.ones_like(o), stats)
        assert all(g is None or g.grad_fn is None for g in grads)


def test_backward_on_a_broadcast_gradient_and_a_float_mask_gradient() -> None:
    q, k, v = _qkv()
    bias = torch.randn(1, 2, 1, 5, dtype=torch.float64, requires_grad=True)
    for _ in range(2):
        out = scaled_dot_product_attention(q, k, v, attn_mask=bias)
        grads = torch.autograd.grad(out.sum(), [q, k, v, bias])  # dO is an expanded scalar
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    refs = torch.autograd.grad(ref.sum(), [q, k, v, bias])
    for a, b in zip(grads, refs, strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b)


# ----- the math engine's CPU shortcut -----
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_plain_cpu_problems_run_torchs_fused_cpu_kernel(dtype: Any, causal: bool) -> None:
    q, k, v = _qkv(s=7, d=8, dtype=dtype)
    out = scaled_dot_product_attention(q, k, v, is_causal=causal, scale=0.5)
    ref, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q.detach(), k.detach(), v.detach(), 0.0, causal, scale=0.5
    )
    assert torch.equal(out.detach(), ref)  # the very kernel F.sdpa runs on the CPU
    do = torch.randn_like(out)
    grads = torch.autograd.grad(out, [q, k, v], do)
    ref_grads = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
        do, q.detach(), k.detach(), v.detach(), ref, lse, 0.0, causal, scale=0.5
    )
    for a, b in zip(grads, ref_grads, strict=True):
        assert torch.equal(a, b)


def test_problems_the_fused_cpu_kernel_cannot_run_keep_the_chunked_kernels() -> None:
    # GQA, a bottom-right causal mask on a non-square problem and ALiBi stay on the math
    # kernels and still match the reference (here: torch's own math for what it has)
    q = torch.randn(1, 4, 3, 8, dtype=torch.float64)
    kv = torch.randn(1, 2, 6, 8, dtype=torch.float64)
    out = scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True))
    br = scaled_dot_product_attention(
        q, kv, kv, enable_gqa=True, is_causal=True, diagonal_alignment="bottom_right"
    )
    mask = torch.ones(3, 6, dtype=torch.bool).tril(diagonal=3)
    ref = F.scaled_dot_product_attention(q, kv, kv, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(br, ref)


# ----- issue 22 item 3: the hot path of a training call (philox dropout) -----
def _philox_step(q: Any, k: Any, v: Any, seed: int) -> tuple[Any, ...]:
    torch.manual_seed(seed)
    out = scaled_dot_product_attention(q, k, v, dropout_p=0.3, is_causal=True)
    return (out, *torch.autograd.grad(out.square().sum(), [q, k, v]))


def test_a_philox_hit_asks_nothing_again_and_draws_the_graphs_mask(monkeypatch: Any) -> None:
    from hipdnn_graph.torch import _hot
    from hipdnn_graph.torch._philox_graphs import philox_backward, philox_forward

    graph_cache().clear()
    q, k, v = _qkv(dtype=torch.float32)
    asked: list[int] = []
    general = _hot.run_forward_on  # the general route (torch's choice is asked on a GPU only)
    monkeypatch.setattr(
        _hot, "run_forward_on", lambda *a, **kw: asked.append(1) or general(*a, **kw)
    )
    first = _philox_step(q, k, v, seed=5)
    assert len(asked) == 1 and graph_cache().info()[:2] == (0, 2)

    def no_build(*args: Any, **kw: Any) -> None:
        raise AssertionError("a philox hit built or re-checked something")

    monkeypatch.setattr(hg.Graph, "build", no_build)
    monkeypatch.setattr(hg.Graph, "run", no_build)
    for _ in range(2):
        again = _philox_step(q, k, v, seed=5)
    assert len(asked) == 1  # the general route was not taken again
    assert graph_cache().info()[:2] == (4, 2)
    for a, b in zip(first, again, strict=True):
        assert torch.equal(a, b)  # torch.manual_seed reproduces the call
    # the same seed on the graph functions (the route before the hot path) gives the same call
    torch.manual_seed(5)
    seed = int(torch.randint(0, 1 << 62, (), dtype=torch.int64))  # the op's CPU draw
    monkeypatch.undo()
    qd, kd, vd = (t.detach() for t in (q, k, v))
    o, stats, engine = philox_forward(qd, kd, vd, dropout_p=0.3, seed=seed, offset=0,
                                      is_causal=True)  # fmt: skip
    dq, dk, dv, _ = philox_backward(qd, kd, vd, o, 2 * o, stats, dropout_p=0.3, seed=seed,
                                    offset=0, engine=engine, is_causal=True)  # fmt: skip
    for a, b in zip(first, (o, dq, dk, dv), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_a_philox_hit_draws_a_new_seed_per_call_and_survives_an_emptied_cache() -> None:
    graph_cache().clear()
    q, k, v = _qkv(dtype=torch.float32)
    torch.manual_seed(9)
    outs = [scaled_dot_product_attention(q, k, v, dropout_p=0.5) for _ in range(3)]
    assert not torch.equal(outs[1], outs[2])  # a new mask per call (hits included)
    graph_cache().clear()  # the remembered signature's graph is gone: rebuilt, same stream
    torch.manual_seed(9)
    again = [scaled_dot_product_attention(q, k, v, dropout_p=0.5) for _ in range(3)]
    for a, b in zip(outs, again, strict=True):
        assert torch.equal(a, b)
    assert graph_cache().info()[:2] == (2, 1)  # clear() reset the counters: one rebuild


def test_forgetting_torchs_choices_forgets_the_philox_signatures(monkeypatch: Any) -> None:
    from hipdnn_graph.torch import _choice, _hot

    graph_cache().clear()
    q, k, v = _qkv(dtype=torch.float32)
    asked: list[int] = []  # calls of the general route (what the first call of a signature takes)
    general = _hot.run_forward_on
    monkeypatch.setattr(
        _hot, "run_forward_on", lambda *a, **kw: asked.append(1) or general(*a, **kw)
    )
    for _ in range(2):
        scaled_dot_product_attention(q, k, v, dropout_p=0.1)
    assert len(asked) == 1
    _choice.clear_choices()
    scaled_dot_product_attention(q, k, v, dropout_p=0.1)
    assert len(asked) == 2
    scaled_dot_product_attention(q, k, v, dropout_p=0.2)  # another probability: asked too
    assert len(asked) == 3
