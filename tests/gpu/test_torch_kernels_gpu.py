"""GPU tests of the torch kernels: math kernel and fused wrappers against a float64 reference.

Run on the device machine: ``python3 -m pytest tests/gpu/test_torch_kernels_gpu.py``. Skipped
where torch or a GPU is missing. The reference is the math kernel in float64 on the same GPU
(itself checked against torch autograd in tests/test_torch_kernels.py).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]


from hipdnn_graph_torch_rocm.kernels import fused  # noqa: E402
from hipdnn_graph_torch_rocm.kernels import math as tm  # noqa: E402
from hipdnn_graph_torch_rocm.kernels.call import SdpaCall  # noqa: E402

F64 = torch.float64
DTYPES = [torch.bfloat16, torch.float16]
TOL = {torch.bfloat16: 2e-2, torch.float16: 1e-2}

HEADS = {"mha": (8, 8, 8), "gqa4": (8, 2, 2), "mqa": (8, 1, 1)}
MASKS: dict[str, tuple[int, int, dict[str, Any]]] = {
    "none": (96, 96, {}),
    "causal_tl": (64, 160, {"right_bound": 0}),
    "causal_br": (64, 160, {"right_bound": 0, "bottom_right": True}),
    "causal_br_sq_gt_skv": (160, 64, {"right_bound": 0, "bottom_right": True}),
    "bias": (96, 112, {"bias": (8, 96, 112)}),
    "bias_dbias": (96, 112, {"bias": (1, 8, 96, 112), "dbias_shape": (1, 8, 96, 112)}),
    "padding": (96, 112, {"seq_len_q": [96, 50], "seq_len_kv": [70, 112]}),
    "padding_causal_br": (
        96,
        112,
        {"seq_len_q": [96, 50], "seq_len_kv": [70, 112], "right_bound": 0, "bottom_right": True},
    ),
    "window_br": (64, 160, {"left_bound": 24, "right_bound": 0, "bottom_right": True}),
    "band_br": (64, 160, {"left_bound": 24, "right_bound": 8, "bottom_right": True}),
    "dropout": (64, 80, {"dropout": True}),
    "odd_sizes": (72, 100, {}),
    "odd_bias_dbias": (72, 100, {"bias": (1, 8, 72, 100), "dbias_shape": (1, 8, 72, 100)}),
    "odd_causal_br": (72, 100, {"right_bound": 0, "bottom_right": True}),
}


def _rel(a: Any, b: Any) -> float:
    a, b = a.double(), b.double()
    assert torch.isfinite(a).all(), "NaN/inf in result"
    return float((a - b).abs().max()) / max(float(b.abs().max()), 1e-30)


def _case(heads: str, mask: str, dtype: Any, seed: int = 0) -> dict[str, Any]:
    h, hk, hv = HEADS[heads]
    sq, skv, feats = MASKS[mask]
    b, d = 2, 64
    g = torch.Generator(device="cpu").manual_seed(seed)
    dev = torch.device("cuda")

    def rn(*s: int) -> Any:
        return torch.randn(*s, generator=g).to(dev, dtype)

    t = {
        "q": rn(b, h, sq, d),
        "k": rn(b, hk, skv, d),
        "v": rn(b, hv, skv, d),
        "do": rn(b, h, sq, d),
    }
    fixed = {key: feats[key] for key in ("bottom_right", "left_bound", "right_bound",
                                         "dbias_shape") if key in feats}  # fmt: skip
    kw: dict[str, Any] = {}
    if "bias" in feats:
        kw["bias"] = rn(*feats["bias"])
    for key in ("seq_len_q", "seq_len_kv"):
        if key in feats:
            kw[key] = torch.tensor(feats[key], dtype=torch.int32, device=dev).view(-1, 1, 1, 1)
    if feats.get("dropout"):
        kw["dropout_mask"] = (torch.rand(b, h, sq, skv, generator=g) > 0.2).to(dev, dtype)
        fixed["dropout_scale"] = 1.25
    call = SdpaCall(1.0 / math.sqrt(d), **fixed)
    return {"t": t, "call": call, "kw": kw}


def _reference(c: dict[str, Any]) -> dict[str, Any]:
    t, call, kw = c["t"], c["call"], c["kw"]
    q, k, v, do = (t[x].to(F64) for x in ("q", "k", "v", "do"))
    o, st = tm.sdpa_forward(q, k, v, call, **kw, compute_dtype=F64)
    o_in = o.to(t["q"].dtype)
    grads = tm.sdpa_backward(q, k, v, o_in.to(F64), do, st, call, **kw, compute_dtype=F64)
    return {"o": o, "stats": st, "o_in": o_in, "grads": grads}


@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "fp16"])
@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("heads", list(HEADS))
def test_math_kernel_gpu(heads: str, mask: str, dtype: Any) -> None:
    c = _case(heads, mask, dtype)
    ref = _reference(c)
    t, call, kw = c["t"], c["call"], c["kw"]
    for mm in (None, dtype):
        o, _st = tm.sdpa_forward(t["q"], t["k"], t["v"], call, **kw, matmul_dtype=mm)
        assert _rel(o, ref["o"]) < (1e-5 if mm is None else TOL[dtype])
        grads = tm.sdpa_backward(
            t["q"], t["k"], t["v"], ref["o_in"], t["do"], ref["stats"].float(), call, **kw,
            matmul_dtype=mm,
        )  # fmt: skip
        for got, want in zip(grads, ref["grads"], strict=True):
            if want is None:
                assert got is None
            else:
                assert got is not None
                assert _rel(got, want) < (1e-4 if mm is None else TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "fp16"])
@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("heads", list(HEADS))
@pytest.mark.parametrize("op", list(fused.FusedOp))
def test_fused_wrappers_gpu(op: Any, heads: str, mask: str, dtype: Any) -> None:
    """Forward and backward each run when check() allows them, and refuse cleanly otherwise."""
    c = _case(heads, mask, dtype)
    t, call, kw = c["t"], c["call"], c["kw"]
    reasons = {}
    for fwd in (True, False):
        case = fused.FusedSdpaCase.from_tensors(t["q"], t["k"], t["v"], call, forward=fwd, **kw)
        reasons[fwd] = fused.check(op, case)
    if reasons[True] is not None:
        with pytest.raises(fused.FusedUnsupportedError):
            fused.forward(op, t["q"], t["k"], t["v"], call, **kw)
    if reasons[False] is not None:
        st0 = torch.zeros(*t["q"].shape[:3], 1, device=t["q"].device)
        with pytest.raises(fused.FusedUnsupportedError):
            fused.backward(op, t["q"], t["k"], t["v"], t["do"], t["do"], st0, call, **kw)
    if reasons[True] is not None and reasons[False] is not None:
        pytest.skip(f"refused: {reasons[False]}")
    ref = _reference(c)
    fin = torch.isfinite(ref["stats"])
    if reasons[True] is None:
        o, st = fused.forward(op, t["q"], t["k"], t["v"], call, **kw)
        assert o.shape == ref["o"].shape and st.shape == ref["stats"].shape
        assert st.dtype == torch.float32
        assert _rel(o, ref["o"]) < TOL[dtype]
        assert torch.equal(torch.isinf(st), ~fin)
        if bool(fin.any()):
            assert _rel(st[fin], ref["stats"][fin]) < 1e-3
        if not bool(fin.all()):  # rows without keys: zero output
            assert (o.masked_select(~fin) == 0).all()
    if reasons[False] is None:
        grads = fused.backward(
            op, t["q"], t["k"], t["v"], ref["o_in"], t["do"], ref["stats"].float(), call, **kw
        )
        for name, got, want in zip(("dq", "dk", "dv", "dbias"), grads, ref["grads"], strict=True):
            if want is None or (name == "dbias" and call.dbias_shape is None):
                continue
            assert got is not None, name
            assert _rel(got, want) < TOL[dtype], name
        if not bool(fin.all()):  # rows without keys: zero dQ
            assert (grads[0].masked_select(~fin) == 0).all()


def test_capabilities_cuda_basics() -> None:
    caps = fused.capabilities("cuda", torch.bfloat16)
    assert caps[fused.FusedOp.FLASH].available, caps[fused.FusedOp.FLASH].reason
    assert caps[fused.FusedOp.EFFICIENT].available, caps[fused.FusedOp.EFFICIENT].reason
    assert caps[fused.FusedOp.FLASH].gqa_native
    assert not caps[fused.FusedOp.EFFICIENT].gqa_native
    # cached: the same object comes back
    assert fused.capabilities("cuda", torch.bfloat16) is caps
    assert not fused.capabilities("cuda", torch.float32)[fused.FusedOp.FLASH].available
