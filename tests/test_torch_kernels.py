"""CPU tests of the torch backend's kernels (backends/hipdnn_graph_torch_rocm/kernels).

The chunked math kernel is checked against the independent float64 autograd reference
(tests/sdpa_autograd_reference.py) for every feature of spec §6; the fused-op wrappers must
report themselves unavailable on CPU with a reason, never crash.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sdpa_autograd_reference import reference_backward, reference_forward  # noqa: E402

from hipdnn_graph_torch_rocm.kernels import fused  # noqa: E402
from hipdnn_graph_torch_rocm.kernels import math as tm  # noqa: E402
from hipdnn_graph_torch_rocm.kernels.call import SdpaCall  # noqa: E402

F64 = torch.float64

# name, (B, H, Hk, Hv, Sq, Skv, D, Dv), features
CASES: list[tuple[str, tuple[int, ...], dict[str, Any]]] = [
    ("plain", (2, 4, 4, 4, 9, 11, 8, 8), {}),
    ("causal_tl", (2, 4, 4, 4, 9, 13, 8, 8), {"right_bound": 0}),
    ("causal_br_sq_lt_skv", (2, 4, 4, 4, 7, 13, 8, 8), {"right_bound": 0, "bottom_right": True}),
    ("causal_br_sq_gt_skv", (1, 2, 2, 2, 13, 6, 8, 8), {"right_bound": 0, "bottom_right": True}),
    ("band", (1, 2, 2, 2, 17, 15, 8, 8), {"left_bound": 3, "right_bound": 2}),
    (
        "window_br",
        (1, 2, 2, 2, 12, 20, 8, 8),
        {"left_bound": 4, "right_bound": 0, "bottom_right": True},
    ),
    ("negative_right", (1, 2, 2, 2, 10, 10, 8, 8), {"right_bound": -1}),
    ("left_only", (1, 2, 2, 2, 10, 12, 8, 8), {"left_bound": 2}),
    ("gqa_4to1", (2, 8, 2, 2, 9, 9, 8, 8), {"right_bound": 0}),
    ("mqa", (2, 4, 1, 1, 9, 10, 8, 8), {}),
    ("hk_ne_hv", (1, 8, 2, 4, 9, 10, 8, 6), {"right_bound": 0, "bottom_right": True}),
    ("dv_ne_d", (2, 2, 2, 2, 6, 7, 8, 12), {}),
    ("bias_full", (2, 3, 3, 3, 6, 7, 8, 8), {"bias": (2, 3, 6, 7)}),
    ("bias_bcast", (2, 3, 3, 3, 6, 7, 8, 8), {"bias": (3, 1, 7)}),
    ("bias_dbias_shape", (2, 3, 3, 3, 6, 7, 8, 8), {"bias": (6, 7), "dbias_shape": (1, 3, 6, 7)}),
    ("dbias_only", (2, 3, 3, 3, 6, 7, 8, 8), {"dbias_shape": (2, 1, 1, 7)}),
    ("alibi", (1, 4, 4, 4, 8, 8, 8, 8), {"alibi": True, "right_bound": 0}),
    ("alibi_br", (1, 4, 2, 2, 6, 9, 8, 8), {"alibi": True, "right_bound": 0, "bottom_right": True}),
    ("padding", (3, 2, 2, 2, 8, 9, 8, 8), {"seq_len_q": [8, 5, 0], "seq_len_kv": [9, 3, 4]}),
    (
        "padding_causal_br",
        (3, 2, 1, 1, 8, 9, 8, 8),
        {"seq_len_q": [8, 5, 6], "seq_len_kv": [9, 3, 0], "right_bound": 0, "bottom_right": True},
    ),
    (
        "padding_causal_tl",
        (2, 2, 2, 2, 8, 9, 8, 8),
        {"seq_len_q": [7, 5], "seq_len_kv": [4, 9], "right_bound": 0},
    ),
    ("padding_kv_only", (2, 2, 2, 2, 5, 9, 8, 8), {"seq_len_kv": [4, 9]}),
    ("dropout", (2, 2, 2, 2, 7, 9, 8, 8), {"dropout": (2, 2), "dropout_scale": 1.25}),
    ("dropout_bcast", (2, 4, 2, 2, 7, 9, 8, 8), {"dropout": (1, 4), "dropout_scale": 2.0}),
    (
        "everything",
        (2, 4, 2, 1, 9, 12, 8, 8),
        {
            "bias": (4, 9, 12),
            "alibi": True,
            "right_bound": 1,
            "left_bound": 5,
            "bottom_right": True,
            "seq_len_q": [9, 6],
            "seq_len_kv": [12, 7],
            "dropout": (2, 4),
            "dropout_scale": 1.5,
        },
    ),
]


def _make(
    shape: tuple[int, ...], feats: dict[str, Any], seed: int = 0, dtype: Any = F64
) -> dict[str, Any]:
    b, h, hk, hv, sq, skv, d, dv = shape
    g = torch.Generator().manual_seed(seed)

    def rn(*s: int) -> Any:
        return torch.randn(*s, generator=g, dtype=F64).to(dtype)

    t: dict[str, Any] = {
        "q": rn(b, h, sq, d),
        "k": rn(b, hk, skv, d),
        "v": rn(b, hv, skv, dv),
        "do": rn(b, h, sq, dv),
    }
    kw: dict[str, Any] = {"scale": 1.0 / np.sqrt(d)}
    for key in (
        "alibi",
        "bottom_right",
        "left_bound",
        "right_bound",
        "dropout_scale",
        "dbias_shape",
    ):
        if key in feats:
            kw[key] = feats[key]
    if "bias" in feats:
        kw["bias"] = rn(*feats["bias"])
    for key in ("seq_len_q", "seq_len_kv"):
        if key in feats:
            kw[key] = torch.tensor(feats[key], dtype=torch.int32).view(-1, 1, 1, 1)
    if "dropout" in feats:
        mb, mh = feats["dropout"]
        kw["dropout_mask"] = (torch.rand(mb, mh, sq, skv, generator=g) > 0.3).to(torch.uint8)
    return {"t": t, "kw": kw}


def _ref_kw(kw: dict[str, Any]) -> dict[str, Any]:
    out = dict(kw)
    for key in ("bias", "seq_len_q", "seq_len_kv", "dropout_mask"):
        if key in out:
            out[key] = out[key].to(F64).numpy() if key != "dropout_mask" else out[key].numpy()
    return out


def _fwd_kw(kw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kw.items() if k != "dbias_shape"}


_CALL_FIELDS = frozenset(f.name for f in dataclasses.fields(SdpaCall))


def _split(kw: dict[str, Any]) -> tuple[SdpaCall, dict[str, Any]]:
    """A case's flat keywords as the kernels take them: the call, and the per-call inputs."""
    fixed = {k: tuple(v) if k == "dbias_shape" else v for k, v in kw.items() if k in _CALL_FIELDS}
    return SdpaCall(**fixed), {k: v for k, v in kw.items() if k not in _CALL_FIELDS}


def _fwd(*tensors: Any, kw: dict[str, Any], **options: Any) -> Any:
    call, inputs = _split(kw)
    return tm.sdpa_forward(*tensors, call, **inputs, **options)


def _bwd(*tensors: Any, kw: dict[str, Any], **options: Any) -> Any:
    call, inputs = _split(kw)
    return tm.sdpa_backward(*tensors, call, **inputs, **options)


def _rel(a: Any, b: Any) -> float:
    a = torch.as_tensor(np.asarray(a, dtype=np.float64)) if not isinstance(a, torch.Tensor) else a
    b = torch.as_tensor(np.asarray(b, dtype=np.float64)) if not isinstance(b, torch.Tensor) else b
    a, b = a.double(), b.double()
    assert torch.isfinite(a).all(), "result has NaN/inf"
    den = max(float(b.abs().max()), 1e-30) if b.numel() else 1.0
    return float((a - b).abs().max()) / den if b.numel() else 0.0


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def case(request: Any) -> dict[str, Any]:
    name, shape, feats = request.param
    m = _make(shape, feats)
    t, kw = m["t"], m["kw"]
    rkw = _ref_kw(kw)
    o, st = reference_forward(t["q"].numpy(), t["k"].numpy(), t["v"].numpy(), **_fwd_kw(rkw))
    grads = reference_backward(
        t["q"].numpy(), t["k"].numpy(), t["v"].numpy(), o, t["do"].numpy(), st, **rkw
    )
    return {"name": name, "t": t, "kw": kw, "o": o, "stats": st, "grads": grads}


@pytest.mark.parametrize("block_q", [None, 3])
def test_forward_fp64_matches_reference(case: dict[str, Any], block_q: int | None) -> None:
    t, kw = case["t"], case["kw"]
    o, st = _fwd(t["q"], t["k"], t["v"], kw=kw, compute_dtype=F64, block_q=block_q)
    assert o.dtype == F64 and st.shape == case["stats"].shape
    assert _rel(o, case["o"]) < 1e-12
    ref_st = torch.from_numpy(case["stats"])
    assert torch.equal(torch.isinf(st), torch.isinf(ref_st))
    fin = torch.isfinite(ref_st)
    assert torch.allclose(st[fin], ref_st[fin], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("block_q", [None, 2, 5])
def test_backward_fp64_matches_autograd(case: dict[str, Any], block_q: int | None) -> None:
    t, kw = case["t"], case["kw"]
    o = torch.from_numpy(case["o"])
    st = torch.from_numpy(case["stats"])
    dq, dk, dv, db = _bwd(
        t["q"], t["k"], t["v"], o, t["do"], st, kw=kw, compute_dtype=F64, block_q=block_q
    )
    rdq, rdk, rdv, rdb = case["grads"]
    for got, want in ((dq, rdq), (dk, rdk), (dv, rdv)):
        assert got.shape == want.shape
        assert _rel(got, want) < 1e-10
    if rdb is None:
        assert db is None
    else:
        assert db is not None and tuple(db.shape) == rdb.shape
        assert _rel(db, rdb) < 1e-10


def test_backward_fp32_from_low_precision_inputs(case: dict[str, Any]) -> None:
    """bf16/fp16 inputs, fp32 accumulation: close to the float64 truth of the same inputs."""
    t, kw = case["t"], case["kw"]
    for dt in (torch.bfloat16, torch.float16):
        q, k, v, do = (t[x].to(dt) for x in ("q", "k", "v", "do"))
        kw64 = dict(kw)
        qq, kk, vv = (x.to(F64) for x in (q, k, v))
        o64, st64 = _fwd(qq, kk, vv, kw=kw64, compute_dtype=F64)
        g64 = _bwd(qq, kk, vv, o64, do.to(F64), st64, kw=kw64, compute_dtype=F64)
        o32, st32 = _fwd(q, k, v, kw=kw)
        assert o32.dtype == torch.float32 and st32.dtype == torch.float32
        assert _rel(o32, o64) < 1e-5
        g32 = _bwd(q, k, v, o32.to(dt), do, st32, kw=kw)
        for a, b in zip(g32, g64, strict=True):
            if b is None:
                assert a is None
                continue
            assert a is not None
            assert _rel(a, b) < 2e-2


def test_lowp_matmul_path_is_close(case: dict[str, Any]) -> None:
    """matmul_dtype=bf16 (tensor-core path; emulated on CPU) stays within bf16 rounding of fp64."""
    t, kw = case["t"], case["kw"]
    dt = torch.bfloat16
    q, k, v, do = (t[x].to(dt) for x in ("q", "k", "v", "do"))
    qq, kk, vv = (x.to(F64) for x in (q, k, v))
    o64, st64 = _fwd(qq, kk, vv, kw=kw, compute_dtype=F64)
    o, _ = _fwd(q, k, v, kw=kw, matmul_dtype=dt)
    assert _rel(o, o64) < 2e-2
    g = _bwd(q, k, v, o64.to(dt), do, st64.float(), kw=kw, matmul_dtype=dt)
    g64 = _bwd(qq, kk, vv, o64.to(dt).to(F64), do.to(F64), st64, kw=kw, compute_dtype=F64)
    for a, b in zip(g, g64, strict=True):
        if b is not None:
            assert a is not None and _rel(a, b) < 3e-2


def test_inputs_not_modified() -> None:
    m = _make((2, 4, 2, 2, 9, 12, 8, 8), CASES[-1][2])
    t, kw = m["t"], m["kw"]
    snap = {k: v.clone() for k, v in t.items()}
    bias = kw["bias"].clone()
    o, st = _fwd(t["q"], t["k"], t["v"], kw=kw, compute_dtype=F64)
    o_snap, st_snap = o.clone(), st.clone()
    _bwd(t["q"], t["k"], t["v"], o, t["do"], st, kw=kw, compute_dtype=F64)
    for k, v in t.items():
        assert torch.equal(v, snap[k])
    assert torch.equal(kw["bias"], bias)
    assert torch.equal(o, o_snap) and torch.equal(
        st,
        st_snap,
    )


def test_fully_masked_rows_zero_and_inf() -> None:
    m = _make((1, 2, 2, 2, 10, 4, 8, 8), {"right_bound": 0, "bottom_right": True})
    t, kw = m["t"], m["kw"]
    o, st = _fwd(t["q"], t["k"], t["v"], kw=kw)
    # bottom-right, Sq=10, Skv=4: rows 0..5 see no key
    assert torch.isinf(st[:, :, :6]).all() and (st[:, :, :6] > 0).all()
    assert (o[:, :, :6] == 0).all()
    dq, dk, dv, _ = _bwd(t["q"], t["k"], t["v"], o, t["do"], st, kw=kw)
    assert (dq[:, :, :6] == 0).all()
    assert all(torch.isfinite(x).all() for x in (dq, dk, dv))
    # a given Stats of -inf reads as +inf: still no NaN
    st2 = st.clone()
    st2[torch.isinf(st2)] = -torch.inf
    dq2, _, _, _ = _bwd(t["q"], t["k"], t["v"], o, t["do"], st2, kw=kw)
    assert torch.equal(dq2, dq)


def test_padding_gradients_exactly_zero() -> None:
    m = _make((2, 2, 2, 2, 8, 9, 8, 8), {"seq_len_q": [5, 8], "seq_len_kv": [3, 9]})
    t, kw = m["t"], m["kw"]
    o, st = _fwd(t["q"], t["k"], t["v"], kw=kw)
    dq, dk, dv, _ = _bwd(t["q"], t["k"], t["v"], o, t["do"], st, kw=kw)
    assert (dq[0, :, 5:] == 0).all() and (dk[0, :, 3:] == 0).all() and (dv[0, :, 3:] == 0).all()
    assert (o[0, :, 5:] == 0).all() and torch.isinf(st[0, :, 5:]).all()


def test_shape_errors_are_clear() -> None:
    q = torch.zeros(1, 4, 3, 8)
    with pytest.raises(ValueError, match="divisible"):
        tm.sdpa_forward(q, torch.zeros(1, 3, 3, 8), torch.zeros(1, 3, 3, 8), scale=1.0)
    with pytest.raises(ValueError, match="head_dim"):
        tm.sdpa_forward(q, torch.zeros(1, 4, 3, 4), torch.zeros(1, 4, 3, 8), scale=1.0)
    with pytest.raises(ValueError, match="broadcast"):
        tm.sdpa_forward(q, q, q, scale=1.0, bias=torch.zeros(2, 3, 3))
    with pytest.raises(ValueError, match="compute_dtype"):
        tm.sdpa_forward(q, q, q, scale=1.0, compute_dtype=torch.float16)


def test_alibi_slopes() -> None:
    s = tm.alibi_slopes(8, dtype=F64)
    assert torch.allclose(s, 2.0 ** (-torch.arange(1, 9, dtype=F64)))


# ---------------------------------------------------------------------------------------------
# fused wrappers on CPU: unavailable, with reasons, no crash


def _problem(**kw: Any) -> Any:
    base: dict[str, Any] = {
        "b": 1,
        "h": 2,
        "hk": 2,
        "hv": 2,
        "sq": 16,
        "skv": 16,
        "d": 64,
        "dv": 64,
        "dtype": torch.bfloat16,
        "device": "cpu",
    }
    fixed = {key: kw.pop(key) for key in ("alibi", "bottom_right", "left_bound", "right_bound")
             if key in kw}  # fmt: skip
    if kw.pop("dbias", False):
        fixed["dbias_shape"] = (1, 1, 1, 1)
    base.update(kw)
    return fused.FusedSdpaCase(**base, call=SdpaCall(**fixed))


@pytest.mark.parametrize("op", list(fused.FusedOp))
def test_fused_ops_unavailable_on_cpu(op: Any) -> None:
    caps = fused.capabilities("cpu", torch.bfloat16)
    c = caps[op]
    assert not c.available and c.reason
    reason = fused.check(op, _problem())
    assert reason is not None and "cpu" in reason.lower()
    q = torch.zeros(1, 2, 16, 64, dtype=torch.bfloat16)
    st = torch.zeros(1, 2, 16, 1)
    with pytest.raises(fused.FusedUnsupportedError, match=op.value):
        fused.backward(op, q, q, q, q, q, st, scale=0.125)
    with pytest.raises(fused.FusedUnsupportedError):
        fused.forward(op, q, q, q, scale=0.125)


@pytest.mark.parametrize(
    ("feature", "kw", "words"),
    [
        ("dropout", {"dropout_mask": True}, "dropout mask"),
        ("alibi", {"alibi": True}, "ALiBi"),
        ("fp64", {"dtype": torch.float64}, "float64"),
    ],
)
def test_static_refusals_name_the_feature(feature: str, kw: dict[str, Any], words: str) -> None:
    for op in fused.FusedOp:
        reason = fused.static_reason(op, _problem(device="cuda", **kw))
        assert reason is not None and words in reason, (feature, op, reason)


def test_float32_runs_on_the_efficient_op_only_as_in_torch() -> None:
    fp32 = _problem(device="cuda", dtype=torch.float32)
    assert fused.static_reason(fused.FusedOp.EFFICIENT, fp32) is None
    for op in (fused.FusedOp.CUDNN, fused.FusedOp.FLASH):
        want = f"{op.value} runs float16/bfloat16 only, not float32"
        assert fused.static_reason(op, fp32) == want


def test_static_rules_per_op() -> None:
    cuda = {"device": "cuda"}
    assert "bias" in (
        fused.static_reason(fused.FusedOp.FLASH, _problem(bias_shape=(1, 2, 16, 16), **cuda)) or ""
    )
    r = fused.static_reason(
        fused.FusedOp.CUDNN, _problem(bias_shape=(1, 2, 16, 16), dbias=True, **cuda)
    )
    assert r is not None and "dBias" in r
    assert (
        fused.static_reason(
            fused.FusedOp.EFFICIENT, _problem(bias_shape=(1, 2, 16, 16), dbias=True, **cuda)
        )
        is None
    )
    r = fused.static_reason(fused.FusedOp.FLASH, _problem(dv=32, **cuda))
    assert r is not None and "Dv" in r
    r = fused.static_reason(fused.FusedOp.CUDNN, _problem(padding=True, **cuda))
    assert r is not None and "padding" in r
    r = fused.static_reason(
        fused.FusedOp.EFFICIENT, _problem(padding=True, bias_shape=(16, 16), **cuda)
    )
    assert r is not None and "padding" in r and "bias" in r
    r = fused.static_reason(fused.FusedOp.FLASH, _problem(right_bound=-1, **cuda))
    assert r is not None and "bound" in r
    r = fused.static_reason(fused.FusedOp.CUDNN, _problem(left_bound=4, right_bound=0, **cuda))
    assert r is not None and "window" in r


def test_flash_window_clamp_rule() -> None:
    # flash clamps a bound >= Skv to "no bound"; only exact when that changes nothing
    p = _problem(device="cuda", sq=40, skv=8, right_bound=9, bottom_right=True)
    r = fused.static_reason(fused.FusedOp.FLASH, p)
    assert r is not None and "right_bound" in r
    p = _problem(device="cuda", sq=8, skv=40, right_bound=50, bottom_right=True)
    assert fused.static_reason(fused.FusedOp.FLASH, p) is None


def test_empty_rows_helper() -> None:
    p = _problem(sq=10, skv=4, right_bound=0, bottom_right=True)
    rows = fused.empty_rows(p, torch.device("cpu"))
    assert rows is not None and rows.view(-1).tolist() == [True] * 6 + [False] * 4
    assert fused.empty_rows(_problem(right_bound=0), torch.device("cpu")) is None


# ---------------------------------------------------------------------------------------------
# check() with the capabilities the H200 probe measured (CUDA torch 2.11), injected


@pytest.fixture
def h200_caps(monkeypatch: Any) -> None:
    if torch.cuda.is_available():
        pytest.skip("a real GPU is present: its own probe decides")
    from hipdnn_graph_torch_rocm.kernels import probe

    op = fused.FusedOp
    caps = {
        op.CUDNN: fused.OpCaps(op=op.CUDNN, available=True, lse_rank=4, gqa_native=True,
                               causal_alignment="top_left", bias=True, bias_broadcast=True,
                               dv_ne_d=True),
        op.FLASH: fused.OpCaps(op=op.FLASH, available=True, gqa_native=True,
                               causal_alignment="bottom_right", window=True, varlen=True,
                               varlen_lse="tokens", varlen_causal=True),
        op.EFFICIENT: fused.OpCaps(op=op.EFFICIENT, available=True, lse_pad=32,
                                   mask_types=(("top_left", 1), ("bottom_right", 2)),
                                   window=True, window_offset=1, bias=True, bias_broadcast=True,
                                   dbias=True, varlen=True, varlen_lse="tokens",
                                   varlen_causal=True, dv_ne_d=True),
    }  # fmt: skip
    monkeypatch.setitem(probe._CACHE, ("cuda", torch.bfloat16), caps)


def _cuda(**kw: Any) -> Any:
    return _problem(device="cuda", **kw)


@pytest.mark.usefixtures("h200_caps")
def test_check_alignment_follows_measurement() -> None:
    op = fused.FusedOp
    tl = {"sq": 16, "skv": 48, "right_bound": 0}
    br = {**tl, "bottom_right": True}
    assert fused.check(op.FLASH, _cuda(**br)) is None
    r = fused.check(op.FLASH, _cuda(**tl))
    assert r is not None and "bottom-right" in r and "top-left" in r
    assert fused.check(op.CUDNN, _cuda(**tl)) is None
    r = fused.check(op.CUDNN, _cuda(**br))
    assert r is not None and "top-left" in r
    for o in op:  # Sq == Skv: both alignments are the same mask
        assert fused.check(o, _cuda(right_bound=0, bottom_right=True)) is None
        assert fused.check(o, _cuda(right_bound=0)) is None
    assert fused.check(op.EFFICIENT, _cuda(**tl)) is None
    assert fused.check(op.EFFICIENT, _cuda(**br)) is None


@pytest.mark.usefixtures("h200_caps")
def test_check_efficient_measured_limits() -> None:
    eff = fused.FusedOp.EFFICIENT
    br_tall = {"sq": 48, "skv": 16, "right_bound": 0, "bottom_right": True}
    assert fused.check(eff, _cuda(**br_tall)) is None  # backward: verified right
    r = fused.check(eff, _cuda(forward=True, **br_tall))
    assert r is not None and "forward" in r
    pad_br = {"padding": True, "right_bound": 0, "bottom_right": True}
    assert fused.check(eff, _cuda(**pad_br)) is None
    assert fused.check(eff, _cuda(forward=True, **pad_br)) is not None
    win_tl = {"sq": 16, "skv": 48, "left_bound": 4, "right_bound": 0}
    assert fused.check(eff, _cuda(**win_tl)) is None
    r = fused.check(eff, _cuda(**{**win_tl, "bottom_right": True}))
    assert r is not None and "window" in r
    assert fused.check(eff, _cuda(sq=48, skv=16, left_bound=4, right_bound=0)) is not None


@pytest.mark.usefixtures("h200_caps")
def test_check_features_per_op() -> None:
    op = fused.FusedOp
    gqa = {"h": 8, "hk": 2, "hv": 2}
    for o in op:
        assert fused.check(o, _cuda(**gqa)) is None
    assert fused.check(op.CUDNN, _cuda(bias_shape=(2, 16, 16))) is None
    assert fused.check(op.EFFICIENT, _cuda(bias_shape=(2, 1, 16), dbias=True)) is None
    assert fused.check(op.FLASH, _cuda(padding=True)) is None
    assert fused.check(op.EFFICIENT, _cuda(padding=True)) is None
    r = fused.check(op.FLASH, _cuda(padding=True, right_bound=0))  # top-left with padding
    assert r is not None and "top-left" in r
    assert fused.check(op.FLASH, _cuda(sq=16, skv=48, left_bound=4, right_bound=2,
                                       bottom_right=True)) is None  # fmt: skip
    assert fused.check(op.CUDNN, _cuda(dv=32)) is None
    assert fused.check(op.FLASH, _cuda(dv=32)) is not None


def test_cudnn_refuses_single_query_single_key() -> None:
    """cuDNN rejects s_q = s_kv = 1 when it runs (seen on the H200); check() refuses it first."""
    from hipdnn_graph_torch_rocm.kernels import fused

    p = fused.FusedSdpaCase(b=1, h=2, hk=2, hv=2, sq=1, skv=1, d=64, dv=64,
                            dtype=torch.bfloat16, device="cuda:0")  # fmt: skip
    assert (
        fused.static_reason(fused.FusedOp.CUDNN, p) == "cudnn does not support seq_q = seq_kv = 1"
    )
