"""The torch op as a drop-in for F.sdpa on every dtype torch takes and under torch.autocast
(issue 35 item 1), on the CPU: same calls, same output and gradient dtypes, same values, and
the mixed dtypes torch refuses refused with a HipdnnError that says what to do."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph.torch as hgt  # noqa: E402
from hipdnn_graph import ErrorCode, HipdnnError  # noqa: E402
from hipdnn_graph.torch import graph_cache  # noqa: E402
from hipdnn_graph.torch._autocast import AutocastOff, cast, region_dtype  # noqa: E402

F = torch.nn.functional
sdpa = hgt.scaled_dot_product_attention

#: tolerance on values against F.sdpa, by the dtype the op computes in
_TOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


def _leaves(*dtypes: Any, s: int = 8, d: int = 16) -> list[Any]:
    g = torch.Generator().manual_seed(3)
    return [torch.randn(2, 2, s, d, generator=g).to(dt).requires_grad_() for dt in dtypes]


def _run(fn: Any, tensors: list[Any], **kw: Any) -> tuple[Any, list[Any]]:
    """fn's output and the gradients of its leaves for a fixed upstream gradient."""
    for t in tensors:
        t.grad = None
    out = fn(*tensors, **kw)
    g = torch.Generator().manual_seed(5)
    out.backward(torch.randn(out.shape, generator=g).to(out.dtype))
    return out, [t.grad for t in tensors]


def _close(got: Any, want: Any, dtype: Any) -> None:
    assert got.dtype == want.dtype
    assert torch.allclose(got.double(), want.double(), atol=_TOL[dtype], rtol=_TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("causal", [False, True])
def test_every_dtype_gives_f_sdpas_output_and_gradients(dtype: Any, causal: bool) -> None:
    leaves = _leaves(dtype, dtype, dtype)
    out, grads = _run(sdpa, leaves, is_causal=causal)
    ref, ref_grads = _run(F.scaled_dot_product_attention, leaves, is_causal=causal)
    assert out.dtype == dtype
    _close(out, ref, dtype)
    for g, r in zip(grads, ref_grads, strict=True):
        _close(g, r, dtype)


@pytest.mark.parametrize("region", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    "dtypes",
    [
        (torch.float32,) * 3,
        (torch.float32, torch.float32, torch.bfloat16),  # Llama's rotary q, k beside a bf16 v
        (torch.float16, torch.bfloat16, torch.float32),
    ],
)
def test_autocast_casts_as_torch_does(region: Any, dtypes: Any) -> None:
    leaves = _leaves(*dtypes)
    with torch.autocast("cpu", dtype=region):
        out, grads = _run(sdpa, leaves, is_causal=True)
        ref, ref_grads = _run(F.scaled_dot_product_attention, leaves, is_causal=True)
    assert out.dtype == ref.dtype == region
    _close(out, ref, region)
    for leaf, g, r in zip(leaves, grads, ref_grads, strict=True):
        assert g.dtype == r.dtype == leaf.dtype  # the gradients come back in the leaves' dtypes
        _close(g, r, region)


def test_autocast_runs_the_graphs_on_the_cast_inputs_with_autocast_off() -> None:
    """The graphs compute as on bfloat16 inputs outside autocast, bit for bit (autocast does not
    cast the engines' own matmuls again)."""
    leaves = _leaves(torch.float32, torch.float32, torch.float32)
    low = [t.detach().bfloat16().requires_grad_() for t in leaves]
    want, want_grads = _run(sdpa, low, is_causal=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, grads = _run(sdpa, leaves, is_causal=True)
    assert torch.equal(got, want)
    for g, w in zip(grads, want_grads, strict=True):
        assert torch.equal(g, w.float())


def test_autocast_casts_a_float_mask_and_keeps_a_bool_one() -> None:
    q, k, v = _leaves(torch.float32, torch.float32, torch.float32)
    g = torch.Generator().manual_seed(9)
    bias = torch.randn(1, 1, 8, 8, generator=g, requires_grad=True)
    keep = torch.rand(8, 8, generator=g) > 0.3
    keep[:, 0] = True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for mask in (bias, keep):
            out = sdpa(q, k, v, attn_mask=mask)
            ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            _close(out, ref, torch.bfloat16)
        out = sdpa(q, k, v, attn_mask=bias)
    out.float().sum().backward()
    assert bias.grad is not None and bias.grad.dtype == torch.float32


def test_autocast_leaves_float64_alone() -> None:
    leaves = _leaves(torch.float64, torch.float64, torch.float64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, grads = _run(sdpa, leaves)
        ref, ref_grads = _run(F.scaled_dot_product_attention, leaves)
    assert out.dtype == torch.float64
    _close(out, ref, torch.float64)
    for g, r in zip(grads, ref_grads, strict=True):
        _close(g, r, torch.float64)


def test_autocast_refuses_float64_beside_other_dtypes_as_torch_does() -> None:
    q, k, v = _leaves(torch.float64, torch.float32, torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError):  # torch refuses it too
            F.scaled_dot_product_attention(q, k, v)
        with pytest.raises(HipdnnError) as err:
            sdpa(q, k, v)
    assert err.value.code == ErrorCode.INVALID_VALUE
    assert str(err.value) == (
        "key dtype torch.bfloat16 differs from query dtype torch.float64 under "
        "torch.autocast('cpu', torch.bfloat16), which casts float16, bfloat16 and float32 "
        "inputs but leaves float64 ones as they are: pass query, key and value in one dtype"
    )


def test_mixed_dtypes_outside_autocast_are_refused_saying_what_to_do() -> None:
    q, k, v = _leaves(torch.float32, torch.float32, torch.bfloat16)
    with pytest.raises(RuntimeError):  # torch refuses it too
        F.scaled_dot_product_attention(q, k, v)
    with pytest.raises(HipdnnError) as err:
        sdpa(q, k, v)
    assert err.value.code == ErrorCode.INVALID_VALUE
    assert str(err.value) == (
        "value dtype torch.bfloat16 differs from query dtype torch.float32: pass query, key and "
        "value in one dtype (e.g. value.to(query.dtype)), or call under torch.autocast, which "
        "casts float16, bfloat16 and float32 inputs to its dtype"
    )


def test_dropout_under_autocast_trains_in_the_region_dtype() -> None:
    leaves = _leaves(torch.float32, torch.float32, torch.bfloat16)
    torch.manual_seed(0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, grads = _run(sdpa, leaves, dropout_p=0.25, is_causal=True)
    low = [t.detach().bfloat16().requires_grad_() for t in leaves]
    torch.manual_seed(0)
    want, want_grads = _run(sdpa, low, dropout_p=0.25, is_causal=True)
    assert out.dtype == torch.bfloat16 and torch.equal(out, want)  # one seed: one mask
    for leaf, g, w in zip(leaves, grads, want_grads, strict=True):
        assert g.dtype == leaf.dtype and torch.equal(g, w.to(leaf.dtype))


def test_a_backward_inside_the_region_gives_the_gradients_of_one_outside() -> None:
    leaves = _leaves(torch.float32, torch.float32, torch.float32, s=5, d=3)  # no fused CPU form
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, inside = _run(sdpa, leaves, is_causal=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = sdpa(*leaves, is_causal=True)
    for t in leaves:
        t.grad = None
    g = torch.Generator().manual_seed(5)
    out.backward(torch.randn(out.shape, generator=g).to(out.dtype))
    for a, t in zip(inside, leaves, strict=True):
        assert torch.equal(a, t.grad)


def test_region_dtype_cast_and_autocast_off() -> None:
    q = torch.zeros(1, 1, 2, 2)
    assert region_dtype("cpu") is None and region_dtype("meta") is None
    assert cast(q, q, q, None) == (q, q, q, None)
    assert cast([1.0], q, q, None)[0] == [1.0]  # the argument checks name it afterwards
    with torch.autocast("cpu", dtype=torch.float16):
        assert region_dtype("cpu") == torch.float16
        q2, k2, v2, m2 = cast(q, q.bfloat16(), q, q > 0)
        assert (q2.dtype, k2.dtype, v2.dtype, m2.dtype) == (
            torch.float16, torch.float16, torch.float16, torch.bool,
        )  # fmt: skip
        with pytest.raises(HipdnnError, match=r"differs from query dtype torch\.float64"):
            cast(q.double(), q, q, None)
        assert cast(q, q.int(), q, None)[1].dtype == torch.int32  # the checks name it
        with pytest.raises(HipdnnError, match=r"key dtype torch\.int32 differs"):
            sdpa(q, q.int(), q)
        with AutocastOff("cpu"):
            assert not torch.is_autocast_enabled("cpu")
        assert torch.is_autocast_enabled("cpu")
    with AutocastOff("cpu"):  # off already: stays off
        assert not torch.is_autocast_enabled("cpu")


def test_graphs_are_cached_per_cast_dtype() -> None:
    graph_cache().clear()
    leaves = _leaves(torch.float32, torch.float32, torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        sdpa(*leaves)
    sdpa(*leaves)
    dtypes = sorted(str(g.graph.get_io_data_type()) for g in hgt.cached_graphs())
    assert len(dtypes) == 2 and dtypes[0] != dtypes[1]


def test_compiled_calls_follow_autocast_too() -> None:
    leaves = _leaves(torch.float32, torch.float32, torch.bfloat16)
    compiled = torch.compile(
        lambda q, k, v: sdpa(q, k, v, is_causal=True), fullgraph=True, backend="eager"
    )
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, grads = _run(compiled, leaves)
        ref, ref_grads = _run(F.scaled_dot_product_attention, leaves, is_causal=True)
    _close(out, ref, torch.bfloat16)
    for g, r in zip(grads, ref_grads, strict=True):
        _close(g, r, torch.bfloat16)
