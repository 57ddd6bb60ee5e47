"""The NumPy reference SDPA math against the float64 torch-autograd reference, feature by feature.

Every case runs the forward, compares O and Stats, then runs the backward from the forward's own
O and Stats and compares dQ, dK, dV (and dBias). float64 compute must agree to ~1e-10 relative,
float32 to ~1e-5 (both relative to the largest magnitude of the reference array, at least 1).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")

from numerics_cases import compare
from sdpa_autograd_reference import reference_backward, reference_forward

from hipdnn_graph_numpy_reference import sdpa_math, sdpa_problem, sdpa_small, sdpa_tiled
from hipdnn_graph_numpy_reference.masks import KeyBand
from hipdnn_graph_numpy_reference.sdpa_math import sdpa_backward, sdpa_forward

RTOL = {np.float64: 1e-10, np.float32: 2e-5}


def _inputs(
    seed: int = 0,
    *,
    b: int = 2,
    h: int = 4,
    hk: int | None = None,
    hv: int | None = None,
    sq: int = 9,
    skv: int = 11,
    d: int = 8,
    dv: int | None = None,
    dtype: Any = np.float64,
) -> dict[str, Any]:
    """Fresh random q, k, v, do (never zeros)."""
    rng = np.random.default_rng(seed)
    hk, hv, dv = hk or h, hv or h, dv or d

    def rnd(*shape: int) -> Any:
        return rng.standard_normal(shape).astype(dtype)

    return {"q": rnd(b, h, sq, d), "k": rnd(b, hk, skv, d), "v": rnd(b, hv, skv, dv),
            "do": rnd(b, h, sq, dv)}  # fmt: skip


def check(
    x: dict[str, Any], ct: Any = np.float64, rtol: float | None = None, **kw: Any
) -> tuple[Any, ...]:
    """Forward and backward of sdpa_math vs the autograd reference; returns the math's results."""
    rtol = RTOL[ct] if rtol is None else rtol
    kw.setdefault("scale", 0.37)
    fkw = {n: a for n, a in kw.items() if n != "dbias_shape"}
    o, stats = sdpa_forward(x["q"], x["k"], x["v"], compute_dtype=ct, **fkw)
    ref_o, ref_stats = reference_forward(x["q"], x["k"], x["v"], **fkw)
    assert o.dtype == ct and stats.dtype == ct
    compare("O", o, ref_o, rtol)
    compare("Stats", stats, ref_stats, rtol)
    grads = sdpa_backward(x["q"], x["k"], x["v"], o, x["do"], stats, compute_dtype=ct, **kw)
    ref = reference_backward(x["q"], x["k"], x["v"], ref_o, x["do"], ref_stats, **kw)
    for name, got, want in zip(("dQ", "dK", "dV", "dBias"), grads, ref, strict=True):
        if want is None:
            assert got is None, f"{name} should be None"
        else:
            assert got is not None and got.dtype == ct
            compare(name, got, want, rtol)
    return (o, stats, *grads)


CTS = [np.float64, np.float32]


@pytest.mark.parametrize("ct", CTS)
def test_plain_mha(ct: Any) -> None:
    check(_inputs(1), ct)


@pytest.mark.parametrize("ct", CTS)
def test_gqa_with_different_k_and_v_heads(ct: Any) -> None:
    check(_inputs(2, h=6, hk=2, hv=3), ct)


@pytest.mark.parametrize("ct", CTS)
def test_mqa(ct: Any) -> None:
    check(_inputs(3, h=4, hk=1, hv=1), ct)


@pytest.mark.parametrize("ct", CTS)
def test_value_head_dim_differs(ct: Any) -> None:
    check(_inputs(4, d=8, dv=5), ct)


@pytest.mark.parametrize(("sq", "skv"), [(5, 13), (13, 5), (1, 7), (7, 1)])
@pytest.mark.parametrize("ct", CTS)
def test_seq_q_differs_from_seq_kv(sq: int, skv: int, ct: Any) -> None:
    check(_inputs(5, sq=sq, skv=skv), ct)


@pytest.mark.parametrize(
    ("bias_shape", "dbias_shape"),
    [
        ((1, 1, 9, 11), None),
        ((2, 1, 1, 11), None),
        ((9, 11), None),
        ((2, 4, 9, 11), None),
        ((11,), None),
        ((2, 4, 9, 11), (1, 4, 1, 11)),  # dbias reduced below the bias's shape
        ((9, 11), (2, 1, 9, 1)),
    ],
)
@pytest.mark.parametrize("ct", CTS)
def test_bias_and_dbias(bias_shape: Any, dbias_shape: Any, ct: Any) -> None:
    x = _inputs(6, sq=9, skv=11)
    bias = np.random.default_rng(7).standard_normal(bias_shape)
    _, _, _, _, _, dbias = check(x, ct, bias=bias, dbias_shape=dbias_shape)
    assert dbias.shape == (dbias_shape or bias_shape)


@pytest.mark.parametrize("ct", CTS)
def test_bias_with_minus_infinity_entries(ct: Any) -> None:
    x = _inputs(25, sq=9, skv=11)
    bias = np.random.default_rng(25).standard_normal((9, 11))
    bias[np.random.default_rng(26).random((9, 11)) < 0.4] = -np.inf  # an additive mask
    bias[:, 0] = 0.0  # every row keeps a key: the reference's softmax stays defined
    _, _, _, _, _, dbias = check(x, ct, bias=bias)
    assert (dbias[np.isneginf(bias)] == 0).all()


def test_bias_row_of_minus_infinity_acts_like_a_keyless_row() -> None:
    x = _inputs(27, sq=5, skv=6)
    bias = np.zeros((5, 6))
    bias[2] = -np.inf
    kw: dict[str, Any] = {"scale": 0.5, "bias": bias}
    o, stats = sdpa_forward(x["q"], x["k"], x["v"], compute_dtype=np.float64, **kw)
    dq, dk, dv, dbias = sdpa_backward(
        x["q"], x["k"], x["v"], o, x["do"], stats, compute_dtype=np.float64, **kw
    )
    assert (o[:, :, 2] == 0).all() and np.isposinf(stats[:, :, 2]).all()
    assert dbias is not None and (dbias[2] == 0).all() and (dq[:, :, 2] == 0).all()
    assert not any(np.isnan(g).any() for g in (o, stats, dq, dk, dv, dbias))


@pytest.mark.parametrize("ct", CTS)
def test_dbias_without_bias(ct: Any) -> None:
    check(_inputs(8), ct, dbias_shape=(1, 1, 9, 11))


@pytest.mark.parametrize(("sq", "skv"), [(7, 12), (12, 7), (9, 9)])
@pytest.mark.parametrize("bottom_right", [False, True])
@pytest.mark.parametrize("ct", CTS)
def test_causal(sq: int, skv: int, bottom_right: bool, ct: Any) -> None:
    check(_inputs(9, sq=sq, skv=skv), ct, right_bound=0, bottom_right=bottom_right)


@pytest.mark.parametrize(("left", "right"), [(2, 1), (0, 0), (3, None), (None, 2), (1, -1)])
@pytest.mark.parametrize("bottom_right", [False, True])
@pytest.mark.parametrize("ct", CTS)
def test_band(left: int | None, right: int | None, bottom_right: bool, ct: Any) -> None:
    x = _inputs(10, sq=10, skv=13)
    check(x, ct, left_bound=left, right_bound=right, bottom_right=bottom_right)


@pytest.mark.parametrize("ct", CTS)
def test_sliding_window(ct: Any) -> None:
    check(_inputs(11, sq=16, skv=16), ct, left_bound=4, right_bound=0, block_q=4)


@pytest.mark.parametrize("ct", CTS)
def test_padding_gives_exactly_zero_gradients(ct: Any) -> None:
    x = _inputs(12, b=3, sq=9, skv=11)
    lq, lkv = np.array([9, 4, 6]), np.array([[[[5]]], [[[11]]], [[[0]]]])  # any shape, B ints
    o, stats, dq, dk, dv, _ = check(x, ct, seq_len_q=lq, seq_len_kv=lkv)
    for b in range(3):
        assert (dq[b, :, lq[b] :] == 0).all() and (o[b, :, lq[b] :] == 0).all()
        assert np.isposinf(stats[b, :, lq[b] :]).all()
        assert (dk[b, :, lkv.flat[b] :] == 0).all() and (dv[b, :, lkv.flat[b] :] == 0).all()
    assert (dq[2] == 0).all() and np.isposinf(stats[2]).all()  # batch 2 sees no key


@pytest.mark.parametrize("ct", CTS)
def test_padding_with_bottom_right_causal(ct: Any) -> None:
    x = _inputs(13, b=3, sq=8, skv=10)
    lq, lkv = np.array([8, 3, 6], dtype=np.int32), np.array([10, 7, 2], dtype=np.int32)
    check(x, ct, seq_len_q=lq, seq_len_kv=lkv, bottom_right=True, right_bound=0, block_q=3)


@pytest.mark.parametrize("ct", CTS)
def test_fully_masked_rows(ct: Any) -> None:
    # Bottom-right causal with Sq > Skv: the first Sq - Skv rows see no key at all.
    x = _inputs(14, sq=10, skv=4)
    o, stats, dq, *_ = check(x, ct, right_bound=0, bottom_right=True, block_q=4)
    assert (o[:, :, :6] == 0).all() and (dq[:, :, :6] == 0).all()
    assert np.isposinf(stats[:, :, :6]).all() and np.isfinite(stats[:, :, 6:]).all()


def test_every_row_masked() -> None:
    x = _inputs(15)
    o, stats, dq, dk, dv, _ = check(x, right_bound=-20)
    assert not o.any() and not dq.any() and not dk.any() and not dv.any()
    assert np.isposinf(stats).all()


def test_negative_infinite_stats_are_read_as_positive() -> None:
    x = _inputs(16, sq=6, skv=3)
    kw: dict[str, Any] = {"scale": 0.5, "right_bound": 0, "bottom_right": True}
    o, stats = sdpa_forward(x["q"], x["k"], x["v"], compute_dtype=np.float64, **kw)
    neg = np.where(np.isinf(stats), -np.inf, stats)
    a = sdpa_backward(x["q"], x["k"], x["v"], o, x["do"], stats, compute_dtype=np.float64, **kw)
    b = sdpa_backward(x["q"], x["k"], x["v"], o, x["do"], neg, compute_dtype=np.float64, **kw)
    for ga, gb in zip(a[:3], b[:3], strict=True):
        assert np.array_equal(ga, gb)


@pytest.mark.parametrize(
    ("mask_shape", "mask_dtype"),
    [((2, 4, 9, 11), np.uint8), ((1, 4, 9, 11), np.bool_), ((2, 1, 9, 11), np.float32),
     ((1, 1, 9, 11), np.int64), ((2, 4, 9, 11), ml_dtypes.bfloat16)],
)  # fmt: skip
@pytest.mark.parametrize("ct", CTS)
def test_dropout_mask_with_scale(mask_shape: Any, mask_dtype: Any, ct: Any) -> None:
    keep = np.random.default_rng(17).random(mask_shape) > 0.3
    x = _inputs(17)
    _, stats, *_ = check(x, ct, dropout_mask=keep.astype(mask_dtype), dropout_scale=1 / 0.7)
    _, undropped = sdpa_forward(x["q"], x["k"], x["v"], scale=0.37, compute_dtype=ct)
    assert np.array_equal(stats, undropped)  # dropout leaves Stats alone


@pytest.mark.parametrize("ct", CTS)
def test_alibi(ct: Any) -> None:
    check(_inputs(18, h=4, sq=7, skv=10), ct, alibi=True, right_bound=0, bottom_right=True)


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_low_precision_inputs(dtype: Any) -> None:
    x = _inputs(19, dtype=dtype)
    o, *_ = check(x, np.float32, right_bound=1)
    assert o.dtype == np.float32


def test_non_contiguous_inputs() -> None:
    x = _inputs(20, sq=9, skv=11, d=8)
    strided = {
        "q": np.ascontiguousarray(x["q"].transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3),
        "k": np.repeat(x["k"], 2, axis=3)[..., ::2],
        "v": np.asfortranarray(x["v"]),
        "do": np.ascontiguousarray(x["do"][:, :, ::-1])[:, :, ::-1],  # negative strides
    }
    assert not any(a.flags.c_contiguous for a in strided.values())
    assert all(np.array_equal(strided[n], x[n]) for n in x)
    check(strided, bias=np.random.default_rng(0).standard_normal((11, 9)).T)


def test_inputs_are_not_modified() -> None:
    x = _inputs(21, dtype=np.float32)
    extra: dict[str, Any] = {
        "bias": np.random.default_rng(1).standard_normal((9, 11)).astype(np.float32),
        "dropout_mask": (np.random.default_rng(2).random((2, 4, 9, 11)) > 0.5).astype(np.float32),
        "seq_len_q": np.array([7, 9], dtype=np.int32),
        "seq_len_kv": np.array([11, 5], dtype=np.int32),
    }
    o, stats = sdpa_forward(x["q"], x["k"], x["v"], scale=0.3, **extra)
    stats[0, 0, 0, 0] = -np.inf  # also exercises the -inf rewrite on a private copy
    before = {n: a.copy() for n, a in {**x, **extra, "o": o, "stats": stats}.items()}
    sdpa_backward(x["q"], x["k"], x["v"], o, x["do"], stats, scale=0.3, **extra)
    after = {**x, **extra, "o": o, "stats": stats}
    for name, arr in before.items():
        assert np.array_equal(arr, after[name]), f"{name} was modified"


CASES: list[dict[str, Any]] = [
    {},
    {"right_bound": 0},
    {"right_bound": 0, "bottom_right": True},
    {"left_bound": 3, "right_bound": 2},
    {"alibi": True, "bias": np.linspace(-1, 1, 24 * 20).reshape(24, 20)},
    {"seq_len_q": np.array([24, 10]), "seq_len_kv": np.array([5, 20]), "right_bound": 0},
]


@pytest.mark.parametrize("kw", CASES)
@pytest.mark.parametrize("block_q", [1, 3, 7, 24])
@pytest.mark.parametrize("tile_bytes", [64, 1 << 12, 1 << 20])
def test_block_q_and_tile_size_do_not_change_results(
    kw: dict[str, Any], block_q: int, tile_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small blocks, per-head tiles and stacked-head tiles (with GQA) all give one answer."""
    x = _inputs(22, h=6, hk=3, hv=2, sq=24, skv=20)
    args = (x["q"], x["k"], x["v"])
    o, stats = sdpa_forward(*args, scale=0.3, compute_dtype=np.float64, **kw)
    grads = sdpa_backward(*args, o, x["do"], stats, scale=0.3, compute_dtype=np.float64, **kw)
    monkeypatch.setattr(sdpa_problem, "TILE_BYTES", tile_bytes)
    o2, stats2 = sdpa_forward(*args, scale=0.3, compute_dtype=np.float64, block_q=block_q, **kw)
    grads2 = sdpa_backward(
        *args, o, x["do"], stats, scale=0.3, compute_dtype=np.float64, block_q=block_q, **kw
    )
    for got, want in zip((o2, stats2, *grads2), (o, stats, *grads), strict=True):
        if want is not None:
            compare("block", got, want, 1e-12)


def test_default_blocks_follow_the_band() -> None:
    h, sq, skv = 8, 16384, 16384
    for whole_rows in (True, False):
        bq, bkv, hc = sdpa_tiled.choose_blocks(h, sq, skv, (1, 1), skv, 4, None, whole_rows)
        assert hc == 1 and 64 <= bq <= 1024 and bq * bkv * 4 <= sdpa_problem.TILE_BYTES
        assert bkv == skv if whole_rows else bq == 1024
        causal = sdpa_tiled.choose_blocks(h, 2048, 2048, (1, 1), 1024.5, 4, None, whole_rows)
        assert 64 <= causal[0] <= 2048 / 4
        small = sdpa_tiled.choose_blocks(h, 16, 16, (8, 1), 16, 4, None, whole_rows)
        assert small == (16, 16, 8)  # heads stacked
        assert sdpa_tiled.choose_blocks(6, 16, 16, (3, 2), 16, 4, 16, whole_rows)[2] == 6


def test_the_reference_agrees_with_torch_sdpa() -> None:
    """A check of the checker: plain, causal, bias and GQA against torch's own SDPA."""
    import torch
    import torch.nn.functional as F

    x = _inputs(28, h=4, hk=2, hv=2, sq=10, skv=10)
    q, k, v, do = (torch.from_numpy(x[n]).requires_grad_() for n in ("q", "k", "v", "do"))
    bias = np.random.default_rng(28).standard_normal((10, 10))
    cases: list[tuple[dict[str, Any], dict[str, Any]]] = [
        ({}, {}),
        ({"right_bound": 0}, {"is_causal": True}),
        ({"bias": bias}, {"attn_mask": torch.from_numpy(bias)}),
    ]
    for kw, tkw in cases:
        out = F.scaled_dot_product_attention(q, k, v, scale=0.37, enable_gqa=True, **tkw)
        grads = torch.autograd.grad(out, (q, k, v), do)
        o, stats = reference_forward(x["q"], x["k"], x["v"], scale=0.37, **kw)
        ref = reference_backward(x["q"], x["k"], x["v"], o, x["do"], stats, scale=0.37, **kw)
        np.testing.assert_allclose(o, out.detach().numpy(), rtol=1e-12, atol=1e-12)
        for got, want in zip(ref[:3], grads, strict=True):
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=1e-12)


def test_key_band_matches_the_definition() -> None:
    for offset, left, right in [(0, None, 0), (3, 2, 1), (-2, 0, None), (1, 4, -1)]:
        band = KeyBand(seq_q=6, seq_kv=8, offset=offset, left_bound=left, right_bound=right)
        i, j = np.arange(6)[:, None], np.arange(8)[None, :]
        want = np.ones((6, 8), dtype=bool)
        if right is not None:
            want &= j <= i + offset + right
        if left is not None:
            want &= j >= i + offset - left
        assert np.array_equal(band.visible(), want)
        covered = np.zeros_like(want)
        for blk in band.blocks(4):
            covered[blk.i0 : blk.i1, blk.c0 : blk.c1] = True
        assert not (want & ~covered).any()  # blocks cover every visible pair


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"compute_dtype": np.float16}, "compute_dtype"),
        ({"bias": np.zeros((3, 11))}, "bias"),
        ({"dropout_mask": np.ones((2, 4, 9))}, "dropout_mask"),
        ({"seq_len_q": np.array([1, 2, 3])}, "2 elements"),
    ],
)
def test_bad_arguments_raise(kw: dict[str, Any], message: str) -> None:
    x = _inputs(23)
    with pytest.raises(ValueError, match=message):
        sdpa_forward(x["q"], x["k"], x["v"], scale=1.0, **kw)


def test_bad_shapes_raise() -> None:
    x = _inputs(24)
    with pytest.raises(ValueError, match="divisible"):
        sdpa_forward(x["q"], x["k"][:, :3], x["v"], scale=1.0)
    with pytest.raises(ValueError, match="do not fit"):
        sdpa_forward(x["q"], x["k"][..., :4], x["v"], scale=1.0)
    o, stats = sdpa_forward(x["q"], x["k"], x["v"], scale=1.0)
    with pytest.raises(ValueError, match="stats"):
        sdpa_backward(x["q"], x["k"], x["v"], o, x["do"], stats[:, :2], scale=1.0)
    with pytest.raises(ValueError, match="dbias_shape"):
        sdpa_backward(x["q"], x["k"], x["v"], o, x["do"], stats, scale=1.0, dbias_shape=(3, 1))


@st.composite
def _problems(draw: st.DrawFn) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    b = draw(st.integers(1, 2))
    hk = draw(st.integers(1, 2))
    hv = draw(st.integers(1, 2))
    h = hk * hv * draw(st.integers(1, 2))
    sq, skv = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    d, dv = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    x = _inputs(draw(st.integers(0, 2**16)), b=b, h=h, hk=hk, hv=hv, sq=sq, skv=skv, d=d, dv=dv)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    kw: dict[str, Any] = {
        "scale": draw(st.floats(0.05, 2.0)),
        "bottom_right": draw(st.booleans()),
        "left_bound": draw(st.none() | st.integers(-2, 12)),
        "right_bound": draw(st.none() | st.integers(-2, 12)),
        "alibi": draw(st.booleans()),
        "block_q": draw(st.none() | st.integers(1, 12)),
    }
    if draw(st.booleans()):
        full = (b, h, sq, skv)
        kw["bias"] = rng.standard_normal(tuple(n if draw(st.booleans()) else 1 for n in full))
    if draw(st.booleans()):
        kw["seq_len_q"] = rng.integers(0, sq + 1, size=b)
        kw["seq_len_kv"] = rng.integers(0, skv + 1, size=b)
    if draw(st.booleans()):
        kw["dropout_mask"] = rng.random((b, h if draw(st.booleans()) else 1, sq, skv)) > 0.25
        kw["dropout_scale"] = 1 / 0.75
    return x, draw(st.sampled_from(CTS)), kw


@settings(max_examples=150, deadline=None)
@given(_problems())
def test_random_problems(problem: tuple[dict[str, Any], Any, dict[str, Any]]) -> None:
    x, ct, kw = problem
    check(x, ct, **kw)


# --------------------------------------------------------------------------------------------
# The untiled path (problems that fit in one tile) against the tiled path, feature by feature
# --------------------------------------------------------------------------------------------

PATH_RTOL = {np.float64: 1e-12, np.float32: 2e-6}

PATH_CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "plain": ({}, {}),
    "gqa": ({"h": 6, "hk": 2, "hv": 3}, {}),
    "mqa": ({"h": 4, "hk": 1, "hv": 1}, {"right_bound": 0}),
    "dv_differs": ({"d": 8, "dv": 5}, {}),
    "seq_q_lt_kv": ({"sq": 5, "skv": 13}, {"right_bound": 0, "bottom_right": True}),
    "seq_q_gt_kv": ({"sq": 13, "skv": 5}, {"right_bound": 0, "bottom_right": True}),
    "single_row": ({"sq": 1, "skv": 7}, {}),
    "single_key": ({"sq": 7, "skv": 1}, {"right_bound": 0}),
    "causal": ({}, {"right_bound": 0}),
    "causal_bottom_right": ({}, {"right_bound": 0, "bottom_right": True}),
    "band": ({"sq": 10, "skv": 13}, {"left_bound": 2, "right_bound": 1}),
    "band_bottom_right": ({"sq": 10, "skv": 13}, {"left_bound": 1, "right_bound": -1,
                                                  "bottom_right": True}),
    "no_key_at_all": ({}, {"right_bound": -20}),
    "alibi": ({"sq": 7, "skv": 10}, {"alibi": True, "right_bound": 0, "bottom_right": True}),
    "alibi_no_mask": ({}, {"alibi": True}),
    "padding": ({"b": 3}, {"seq_len_q": np.array([9, 4, 6]), "seq_len_kv": np.array([5, 11, 0])}),
    "padding_causal_br": ({"b": 3, "sq": 8, "skv": 10},
                          {"seq_len_q": np.array([8, 3, 6]), "seq_len_kv": np.array([10, 7, 2]),
                           "right_bound": 0, "bottom_right": True}),
    "padding_alibi_band": ({"b": 2}, {"seq_len_q": np.array([7, 9]),
                                      "seq_len_kv": np.array([11, 6]), "alibi": True,
                                      "left_bound": 3, "right_bound": 0}),
    "padding_full_lengths": ({}, {"seq_len_q": np.array([9, 9]),
                                  "seq_len_kv": np.array([11, 11])}),
}  # fmt: skip


def _run_both(x: dict[str, Any], ct: Any, kw: dict[str, Any]) -> list[tuple[Any, ...]]:
    """(o, stats, dq, dk, dv, dbias) from the untiled path, then from the tiled path."""
    fkw = {n: a for n, a in kw.items() if n not in ("dbias_shape", "compute_dbias")}
    runs = []
    for small in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(sdpa_problem, "SMALL_PATH", small)
            calls: list[str] = []
            for name in ("forward", "backward"):
                mp.setattr(
                    sdpa_small, name, _spy(getattr(sdpa_small, name), f"small.{name}", calls)
                )
                mp.setattr(
                    sdpa_tiled, name, _spy(getattr(sdpa_tiled, name), f"tiled.{name}", calls)
                )
            o, stats = sdpa_forward(x["q"], x["k"], x["v"], compute_dtype=ct, **fkw)
            grads = sdpa_backward(x["q"], x["k"], x["v"], o, x["do"], stats, compute_dtype=ct, **kw)
            path = "small" if small else "tiled"
            assert calls == [f"{path}.forward", f"{path}.backward"], calls
        for arr in (o, stats, *grads):
            assert arr is None or (arr.dtype == ct and not np.isnan(arr).any())
        runs.append((o, stats, *grads))
    return runs


def _spy(fn: Any, name: str, calls: list[str]) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return fn(*args, **kwargs)

    return wrapper


def _same(small: tuple[Any, ...], tiled: tuple[Any, ...], ct: Any) -> None:
    names = ("O", "Stats", "dQ", "dK", "dV", "dBias")
    for name, got, want in zip(names, small, tiled, strict=True):
        if want is None:
            assert got is None, f"{name} should be None"
            continue
        assert got.shape == want.shape and np.array_equal(np.isinf(got), np.isinf(want)), name
        compare(name, got, want.astype(np.float64), PATH_RTOL[ct])
    keyless = np.isposinf(small[1][..., 0])  # rows that see no key: exactly zero O and dQ
    assert not small[0][keyless].any() and not small[2][keyless].any()


@pytest.mark.parametrize("case", list(PATH_CASES))
@pytest.mark.parametrize("ct", CTS)
def test_untiled_path_matches_tiled_path(case: str, ct: Any) -> None:
    shape_kw, kw = PATH_CASES[case]
    x = _inputs(40, **shape_kw)
    small, tiled = _run_both(x, ct, {"scale": 0.37, **kw})
    _same(small, tiled, ct)


@pytest.mark.parametrize(
    ("bias_shape", "dbias_shape"),
    [((1, 1, 9, 11), None), ((2, 1, 1, 11), None), ((9, 11), None), ((2, 4, 9, 11), None),
     ((11,), None), ((2, 4, 9, 11), (1, 4, 1, 11)), ((9, 11), (2, 1, 9, 1)), (None, (1, 4, 9, 1))],
)  # fmt: skip
@pytest.mark.parametrize("ct", CTS)
def test_untiled_path_matches_tiled_path_bias(bias_shape: Any, dbias_shape: Any, ct: Any) -> None:
    x = _inputs(41)
    kw: dict[str, Any] = {"scale": 0.37, "dbias_shape": dbias_shape, "right_bound": 2}
    if bias_shape is not None:
        bias = np.random.default_rng(41).standard_normal(bias_shape)
        bias[np.random.default_rng(42).random(bias_shape) < 0.2] = -np.inf  # an additive mask
        kw["bias"] = bias
    small, tiled = _run_both(x, ct, kw)
    _same(small, tiled, ct)
    assert small[-1] is not None and small[-1].shape == (dbias_shape or bias_shape)


@pytest.mark.parametrize(
    ("mask_shape", "mask_dtype"),
    [((2, 4, 9, 11), np.uint8), ((1, 4, 9, 11), np.bool_), ((2, 1, 9, 11), np.float32),
     ((1, 1, 9, 11), np.int64), ((2, 4, 9, 11), ml_dtypes.bfloat16)],
)  # fmt: skip
@pytest.mark.parametrize("ct", CTS)
def test_untiled_path_matches_tiled_path_dropout(mask_shape: Any, mask_dtype: Any, ct: Any) -> None:
    keep = np.random.default_rng(43).random(mask_shape) > 0.3
    kw: dict[str, Any] = {"scale": 0.37, "dropout_mask": keep.astype(mask_dtype),
                          "dropout_scale": 1 / 0.7, "seq_len_kv": np.array([11, 7])}  # fmt: skip
    small, tiled = _run_both(_inputs(43), ct, kw)
    _same(small, tiled, ct)


@pytest.mark.parametrize("ct", CTS)
def test_untiled_path_in_batch_chunks(ct: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tile holding one batch element's scores: the untiled path runs B calls of one element."""
    x = _inputs(44, b=3, h=4, hk=2, hv=1, sq=9, skv=11)
    rng = np.random.default_rng(44)
    kw: dict[str, Any] = {
        "scale": 0.37,
        "bias": rng.standard_normal((1, 4, 9, 11)),  # dbias sums over the batch chunks
        "dropout_mask": rng.random((3, 1, 9, 11)) > 0.2,
        "dropout_scale": 1.25,
        "seq_len_q": np.array([9, 2, 7]),
        "seq_len_kv": np.array([3, 11, 8]),
        "alibi": True,
        "right_bound": 1,
    }
    monkeypatch.setattr(sdpa_problem, "TILE_BYTES", 4 * 9 * 11 * np.dtype(ct).itemsize)
    p = sdpa_problem.prepare(x["q"], x["k"], x["v"], 0.37, None, False, False, None, None,
                             None, None, None, 1.0, ct, None)  # fmt: skip
    assert p.per_call == 1
    small, tiled = _run_both(x, ct, kw)
    _same(small, tiled, ct)
    check(x, ct, **kw)  # and both against the autograd reference


@pytest.mark.parametrize("ct", CTS)
def test_untiled_path_reads_minus_infinite_stats_as_plus(ct: Any) -> None:
    x = _inputs(45, sq=6, skv=3)
    kw: dict[str, Any] = {"scale": 0.5, "right_bound": 0, "bottom_right": True}
    o, stats = sdpa_forward(x["q"], x["k"], x["v"], compute_dtype=ct, **kw)
    assert np.isposinf(stats[:, :, :3]).all()
    neg = np.where(np.isinf(stats), -np.inf, stats)
    before = neg.copy()
    a = sdpa_backward(x["q"], x["k"], x["v"], o, x["do"], stats, compute_dtype=ct, **kw)
    b = sdpa_backward(x["q"], x["k"], x["v"], o, x["do"], neg, compute_dtype=ct, **kw)
    assert np.array_equal(neg, before)  # the rewrite happens on a private copy
    for ga, gb in zip(a[:3], b[:3], strict=True):
        assert np.array_equal(ga, gb) and not np.isnan(gb).any()


def test_untiled_path_is_used_for_small_problems_only() -> None:
    def per_call(b: int, h: int, sq: int, skv: int, block_q: int | None = None) -> int:
        return sdpa_problem.small_batch((b, h, sq, skv), 4, block_q)

    assert per_call(1, 1, 16, 16) == 1 and per_call(8, 2, 16, 16) == 8
    assert per_call(1, 4, 2048, 2048) == 0  # the benchmark's shape is tiled
    assert per_call(4, 4, 512, 512) == 2  # two batch elements per call (4 MiB each)
    assert per_call(2, 2, 16, 16, block_q=4) == 0  # explicit smaller blocks ask for tiles
    assert per_call(2, 2, 16, 16, block_q=16) == 2
    assert per_call(2, 2, 0, 16) == 0  # empty problems: the tiled path writes zeros / +inf


@pytest.mark.parametrize("small_path", [True, False])
def test_compute_dbias(small_path: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdpa_problem, "SMALL_PATH", small_path)
    x = _inputs(46)
    bias = np.random.default_rng(46).standard_normal((9, 11))
    o, stats = sdpa_forward(x["q"], x["k"], x["v"], scale=0.3, bias=bias)
    args = (x["q"], x["k"], x["v"], o, x["do"], stats)
    default = sdpa_backward(*args, scale=0.3, bias=bias)
    skipped = sdpa_backward(*args, scale=0.3, bias=bias, compute_dbias=False)
    forced = sdpa_backward(*args, scale=0.3, bias=bias, compute_dbias=True)
    assert default[3] is not None and skipped[3] is None and forced[3] is not None
    assert np.array_equal(default[3], forced[3])
    for a, b in zip(default[:3], skipped[:3], strict=True):
        assert np.array_equal(a, b)
    shaped = sdpa_backward(*args, scale=0.3, compute_dbias=True, dbias_shape=(1, 4, 1, 1))
    assert shaped[3] is not None and shaped[3].shape == (1, 4, 1, 1)
    assert sdpa_backward(*args, scale=0.3, dbias_shape=(9, 11), compute_dbias=False)[3] is None
    with pytest.raises(ValueError, match="compute_dbias"):
        sdpa_backward(*args, scale=0.3, compute_dbias=True)


def test_untiled_path_does_not_modify_inputs() -> None:
    x = _inputs(47, dtype=np.float64)
    extra: dict[str, Any] = {
        "bias": np.random.default_rng(1).standard_normal((9, 11)),
        "dropout_mask": np.random.default_rng(2).random((2, 4, 9, 11)) > 0.5,
        "seq_len_q": np.array([7, 9]),
        "seq_len_kv": np.array([11, 5]),
        "alibi": True,
        "right_bound": 0,
    }
    o, stats = sdpa_forward(x["q"], x["k"], x["v"], scale=0.3, compute_dtype=np.float64, **extra)
    arrays = {n: a for n, a in {**x, **extra, "o": o, "stats": stats}.items() if hasattr(a, "copy")}
    before = {n: a.copy() for n, a in arrays.items()}
    sdpa_backward(x["q"], x["k"], x["v"], o, x["do"], stats, scale=0.3, compute_dtype=np.float64,
                  **extra)  # fmt: skip
    for name, arr in arrays.items():
        assert np.array_equal(arr, before[name]), f"{name} was modified"


@pytest.mark.parametrize(
    "kw",
    [{}, {"right_bound": 0}, {"right_bound": 0, "bottom_right": True},
     {"left_bound": 2, "right_bound": 1, "alibi": True}],
)  # fmt: skip
@pytest.mark.parametrize("ct", CTS)
def test_presized_backward_matches_sdpa_backward(
    kw: dict[str, Any], ct: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = _inputs(48, b=3, h=4, hk=2, hv=1, sq=9, skv=11, dtype=ct)
    args = (x["q"], x["k"], x["v"])
    o, stats = sdpa_forward(*args, scale=0.37, compute_dtype=ct, **kw)
    stats[0, 0, 0, 0] = -np.inf  # read as +inf on both sides
    want = sdpa_backward(*args, o, x["do"], stats, scale=0.37, compute_dtype=ct, **kw)
    shapes = (x["q"].shape, x["k"].shape, x["v"].shape)
    for tile_bytes in (sdpa_problem.TILE_BYTES, 4 * 9 * 11 * np.dtype(ct).itemsize):
        monkeypatch.setattr(sdpa_problem, "TILE_BYTES", tile_bytes)  # whole, then B chunks
        run = sdpa_math.presized_backward(*shapes, scale=0.37, compute_dtype=ct, **kw)
        assert run is not None
        before = stats.copy()
        got = run(*args, o, x["do"], stats)
        assert np.array_equal(stats, before, equal_nan=True) and got[3] is None
        for a, b in zip(got[:3], want[:3], strict=True):
            assert a.dtype == ct and np.array_equal(a, b)
    monkeypatch.setattr(sdpa_problem, "TILE_BYTES", 64)
    assert sdpa_math.presized_backward(*shapes, scale=0.37, compute_dtype=ct, **kw) is None
    with pytest.raises(ValueError, match="divisible"):
        sdpa_math.presized_backward((1, 4, 9, 8), (1, 3, 11, 8), (1, 1, 11, 8), scale=1.0)


@pytest.mark.parametrize(("io", "causal"), [("FLOAT", False), ("FLOAT", True), ("HALF", True)])
def test_engine_uses_presized_backward_when_it_can(io: str, causal: bool) -> None:
    import hipdnn_graph as hg

    dt = getattr(hg.DataType, io)
    g = hg.Graph(io_data_type=dt, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    t = {n: g.tensor(name=n, dim=[1, 2, 8, 16]) for n in ("Q", "K", "V", "O", "dO")}
    t["Stats"] = g.tensor(name="Stats", dim=[1, 2, 8, 1], data_type=hg.DataType.FLOAT)
    grads = g.sdpa_backward(*t.values(), name="bwd", attn_scale=0.3, use_causal_mask=causal)
    for grad in grads:
        grad.set_output(True)
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    plan = g._state.active.plan  # internals: which path the plan took
    assert (plan.steps[0].presized is not None) == (io == "FLOAT")
    x = _inputs(49, b=1, h=2, sq=8, skv=8, d=16, dtype=np.float32)
    kw: dict[str, Any] = {"scale": 0.3, "right_bound": 0 if causal else None}
    o, stats = sdpa_forward(x["q"], x["k"], x["v"], **kw)
    stats[0, 1, 3, 0] = -np.inf
    np_io = np.float32 if io == "FLOAT" else np.float16
    arrays = {"Q": x["q"], "K": x["k"], "V": x["v"], "O": o, "dO": x["do"]}
    pack: dict[Any, Any] = {t[n]: a.astype(np_io) for n, a in arrays.items()}
    pack[t["Stats"]] = stats
    outs = [np.full((1, 2, 8, 16), np.nan, dtype=np_io) for _ in grads]
    pack.update(zip(grads, outs, strict=True))
    g.execute(pack)
    want = sdpa_backward(*(pack[t[n]] for n in t), **kw)
    for got, ref in zip(outs, want[:3], strict=True):
        assert np.array_equal(got, ref.astype(np_io))
