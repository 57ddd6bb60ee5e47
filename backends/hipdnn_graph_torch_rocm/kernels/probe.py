"""Capability probing of torch's fused SDPA ops by tiny runs (cached per device and dtype).

No version tables: for every op the probe runs its own forward once (to learn the LSE layout and
the RNG-state tensors it returns), then each feature through the wrappers on tiny shapes, and
keeps a feature only if forward (O, Stats) and backward (dQ, dK, dV, dBias, fed with the
reference O and Stats) agree with the fp32 math kernel. Causal alignment for Sq ≠ Skv is
*measured* (compared with both a top-left and a bottom-right reference), as is efficient's
``custom_mask_type`` meaning and its ``window_size`` offset. On CPU (or without a GPU) every op
is reported unavailable with a reason, without running anything.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from . import _fused_ops as impl
from . import math as tmath
from ._fused_common import (
    PLAN_GENERATION,
    PLANS,
    aten_op,
    clear_empty_rows,
    empty_rows,
    remember_rng,
)
from ._fused_rules import FusedOp, FusedSdpaCase, OpCaps, dtype_reason
from .call import SdpaCall, SdpaInputs

__all__ = ["capabilities", "clear_cache", "verify"]

Tensor = torch.Tensor
_CACHE: dict[tuple[str, torch.dtype], dict[FusedOp, OpCaps]] = {}
#: the largest error relative to the fp32 math reference a feature may show, by input dtype
_TOL = {torch.bfloat16: 3e-2, torch.float16: 1e-2, torch.float32: 1e-3}


def _norm_device(device: torch.device | str) -> torch.device:
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None and torch.cuda.is_available():
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def clear_cache() -> None:
    """Forget measured capabilities (and the per-signature checks built on them)."""
    _CACHE.clear()
    PLANS.clear()
    PLAN_GENERATION[0] += 1


def capabilities(device: torch.device | str, dtype: torch.dtype) -> dict[FusedOp, OpCaps]:
    """What each fused op runs exactly on (device, dtype). Tiny GPU runs, once per key."""
    dev = _norm_device(device)
    key = (str(dev), dtype)
    hit = _CACHE.get(key)
    if hit is None:
        hit = {op: _probe(op, dev, dtype) for op in FusedOp}
        _CACHE[key] = hit
    return hit


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200] if text else ''}"


def _unavailable(op: FusedOp, reason: str) -> OpCaps:
    return OpCaps(op=op, available=False, reason=reason)


def _rel(a: Tensor, b: Tensor) -> float:
    a, b = a.double(), b.double()
    if not bool(torch.isfinite(a).all()):
        return math.inf
    den = float(b.abs().max()) if b.numel() else 1.0
    return float((a - b).abs().max()) / max(den, 1e-30)


def verify(
    op: FusedOp,
    caps: OpCaps,
    dims: tuple[int, ...],
    dtype: torch.dtype,
    device: torch.device | str,
    feats: dict[str, Any],
    ref_feats: dict[str, Any] | None = None,
    seed: int = 0,
) -> dict[str, float]:
    """Run op forward+backward with ``caps`` and compare with the math kernel.

    ``ref_feats`` (default ``feats``) describes the mask the reference uses, so the same run can
    be compared with several interpretations (alignment probes). Returns relative errors
    (``inf`` for NaN/inf in finite places); raises whatever the op raises.
    """
    dev = _norm_device(device)
    b, h, hk, hv, sq, skv, d, dv = dims
    g = torch.Generator(device="cpu").manual_seed(seed)

    def rn(*s: int) -> Tensor:
        return torch.randn(*s, generator=g).to(device=dev, dtype=dtype)

    q, k, v, do = rn(b, h, sq, d), rn(b, hk, skv, d), rn(b, hv, skv, dv), rn(b, h, sq, dv)
    scale = 1.0 / math.sqrt(d)
    bias = rn(*feats["bias"]) if "bias" in feats else None
    lens: dict[str, Tensor] = {
        x: torch.tensor(feats[x], dtype=torch.int32, device=dev).view(-1, 1, 1, 1)
        for x in ("seq_len_q", "seq_len_kv")
        if x in feats
    }
    lq, lkv = lens.get("seq_len_q"), lens.get("seq_len_kv")
    inputs: SdpaInputs = {"bias": bias, "seq_len_q": lq, "seq_len_kv": lkv}
    ref = _call(ref_feats if ref_feats is not None else feats, scale)
    o_ref, st_ref = tmath.sdpa_forward(q, k, v, ref, **inputs)
    o_in = o_ref.to(dtype)
    g_ref = tmath.sdpa_backward(q, k, v, o_in, do, st_ref, ref, **inputs)
    p = FusedSdpaCase.from_tensors(q, k, v, _call(feats, scale), **inputs)
    er = empty_rows(p, dev, lq, lkv)
    o, st = clear_empty_rows(er, *impl.FORWARD[op](p, caps, q, k, v, scale, bias, lq, lkv))
    fin = torch.isfinite(st_ref)
    out = {
        "o": _rel(o, o_ref),
        "stats": (_rel(st[fin], st_ref[fin]) if bool(fin.any()) else 0.0)
        + (0.0 if torch.equal(torch.isinf(st), ~fin) else math.inf),
    }
    grads = impl.BACKWARD[op](p, caps, q, k, v, o_in, do, st_ref, scale, bias, lq, lkv, None)
    dq = grads[0] if er is None else grads[0].masked_fill(er, 0.0)
    for name, got, want in zip(("dq", "dk", "dv", "dbias"), (dq, *grads[1:]), g_ref, strict=True):
        if name == "dbias" and "dbias_shape" not in feats:
            continue
        if want is not None and got is not None:
            out[name] = _rel(got, want)
        elif want is not None:
            out[name] = math.inf
    return out


def _call(feats: dict[str, Any], scale: float) -> SdpaCall:
    """The call of a probe's features (``bottom_right``, the bounds, ``dbias_shape``)."""
    dbias = feats.get("dbias_shape")
    return SdpaCall(
        scale, bottom_right=bool(feats.get("bottom_right", False)),
        left_bound=feats.get("left_bound"), right_bound=feats.get("right_bound"),
        dbias_shape=None if dbias is None else tuple(dbias),
    )  # fmt: skip


def _ok(errs: dict[str, float], dtype: torch.dtype) -> bool:
    return all(e <= _TOL[dtype] for e in errs.values())


def _try(
    op: FusedOp,
    caps: OpCaps,
    dims: tuple[int, ...],
    dtype: torch.dtype,
    dev: torch.device,
    feats: dict[str, Any],
    errors: dict[str, str],
    name: str,
    ref_feats: dict[str, Any] | None = None,
) -> bool:
    try:
        errs = verify(op, caps, dims, dtype, dev, feats, ref_feats)
    except Exception as e:  # the op refused: record why
        errors[name] = _short(e)
        return False
    if not _ok(errs, dtype):
        errors[name] = "mismatch " + ", ".join(f"{k}={v:.2g}" for k, v in errs.items())
        return False
    return True


BASE = (2, 4, 4, 4, 128, 128, 64, 64)
RECT = (2, 4, 4, 4, 64, 192, 64, 64)  # Sq < Skv: alignments differ by 128 keys


def _own_forward(op: FusedOp, dev: torch.device, dtype: torch.dtype) -> tuple[int, int]:
    """Run the op's own forward once; return (LSE rank, LSE padding multiple)."""
    sq = 72  # not a multiple of 32: shows the efficient kernel's LSE padding
    q = torch.randn(1, 2, sq, 64, device=dev, dtype=dtype)
    if op is FusedOp.CUDNN:
        res = aten_op("_scaled_dot_product_cudnn_attention")(
            q, q, q, None, True, 0.0, False, False, scale=0.125
        )
        remember_rng(op, dev, res[6], res[7])
        return int(res[1].dim()), 1
    qt = q.transpose(1, 2)
    if op is FusedOp.FLASH:
        res = aten_op("_flash_attention_forward")(
            qt, qt, qt, None, None, sq, sq, 0.0, False, False, scale=0.125
        )
        remember_rng(op, dev, res[2], res[3])
        return int(res[1].dim()), 1
    res = aten_op("_efficient_attention_forward")(
        qt, qt, qt, None, None, None, sq, sq, 0.0, 0, True, scale=0.125
    )
    remember_rng(op, dev, res[2], res[3])
    last = int(res[1].shape[-1])
    return int(res[1].dim()), (32 if last != sq and last % 32 == 0 else 1)


def _probe(op: FusedOp, dev: torch.device, dtype: torch.dtype) -> OpCaps:
    if dev.type != "cuda":
        return _unavailable(op, f"{op.value} needs a CUDA or ROCm device; device is {dev.type}")
    if not torch.cuda.is_available():
        return _unavailable(op, f"{op.value}: torch sees no GPU")
    reason = dtype_reason(op, dtype)
    if reason is not None:
        return _unavailable(op, reason)
    if op is FusedOp.CUDNN and torch.version.hip:
        return _unavailable(op, "cudnn attention does not exist in ROCm builds of torch")
    errors: dict[str, str] = {}
    try:
        with torch.no_grad():
            rank, pad = _own_forward(op, dev, dtype)
    except Exception as e:
        return _unavailable(op, f"{op.value} forward does not run on {dev}: {_short(e)}")
    c = OpCaps(op=op, available=True, lse_rank=rank, lse_pad=pad)
    with torch.no_grad():
        if not _try(op, c, BASE, dtype, dev, {}, errors, "base"):
            return _unavailable(op, f"{op.value} failed its basic check: {errors['base']}")
        c = _probe_features(op, c, dtype, dev, errors)
    return dataclasses.replace(c, errors=tuple(sorted(errors.items())))


def _probe_features(
    op: FusedOp, c: OpCaps, dtype: torch.dtype, dev: torch.device, errors: dict[str, str]
) -> OpCaps:
    rep = dataclasses.replace
    gqa = (2, 8, 2, 2, 128, 128, 64, 64)
    if op is not FusedOp.EFFICIENT and _try(
        op, rep(c, gqa_native=True), gqa, dtype, dev, {}, errors, "gqa_native"
    ):
        c = rep(c, gqa_native=True)
    causal = {"right_bound": 0}
    tl, br = dict(causal), {**causal, "bottom_right": True}
    if op is FusedOp.EFFICIENT:
        types: list[tuple[str, int]] = []
        for mt in (1, 2):
            trial = rep(c, mask_types=(("top_left", mt),))
            for name, ref in (("top_left", tl), ("bottom_right", br)):
                if all(n != name for n, _ in types) and _try(
                    op, trial, RECT, dtype, dev, tl, errors, f"mask_type_{mt}_{name}", ref
                ):
                    types.append((name, mt))
        c = rep(c, mask_types=tuple(types))
    else:
        for name, ref in (("top_left", tl), ("bottom_right", br)):
            if _try(op, c, RECT, dtype, dev, ref, errors, f"causal_{name}", ref):
                c = rep(c, causal_alignment=name)
                break
    if op is not FusedOp.FLASH and _try(
        op, c, (2, 4, 4, 4, 128, 128, 64, 32), dtype, dev, {}, errors, "dv_ne_d"
    ):
        c = rep(c, dv_ne_d=True)
    if op is FusedOp.CUDNN and _try(
        op, c, BASE, dtype, dev, {"bias": (2, 4, 128, 128)}, errors, "bias_full"
    ):
        c = rep(c, bias=True)
        if _try(
            op,
            rep(c, bias_broadcast=True),
            BASE,
            dtype,
            dev,
            {"bias": (1, 128, 128)},
            errors,
            "bias_broadcast",
        ):
            c = rep(c, bias_broadcast=True)
    if op is FusedOp.EFFICIENT and _try(
        op, c, BASE, dtype, dev, {"bias": (4, 1, 128)}, errors, "bias"
    ):
        c = rep(c, bias=True, bias_broadcast=True)
        if _try(
            op,
            c,
            BASE,
            dtype,
            dev,
            {"bias": (4, 1, 128), "dbias_shape": (4, 1, 128)},
            errors,
            "dbias",
        ):
            c = rep(c, dbias=True)
    if op is not FusedOp.CUDNN:
        pad = {"seq_len_q": [128, 70], "seq_len_kv": [100, 128]}
        trials = [rep(c, varlen=True, varlen_lse="tokens")]
        if op is FusedOp.FLASH:
            trials.append(rep(c, varlen=True, varlen_lse="batch"))
        for t in trials:
            if _try(op, t, BASE, dtype, dev, pad, errors, f"varlen_{t.varlen_lse}"):
                c = t
                break
        if c.varlen:
            names = (
                [n for n, _ in c.mask_types]
                if op is FusedOp.EFFICIENT
                else [c.causal_alignment or ""]
            )
            for name in names:
                f = {**pad, **(br if name == "bottom_right" else tl)}
                if name and _try(op, c, BASE, dtype, dev, f, errors, f"varlen_causal_{name}"):
                    c = rep(c, varlen_causal=True)
                    break
    if op is FusedOp.FLASH:
        if _try(
            op,
            rep(c, window=True),
            RECT,
            dtype,
            dev,
            {"left_bound": 16, "right_bound": 8, "bottom_right": True},
            errors,
            "window",
        ):
            c = rep(c, window=True)
    elif op is FusedOp.EFFICIENT and c.mask_types:
        align = c.mask_types[0][0]
        base = {"right_bound": 0, "bottom_right": align == "bottom_right"}
        for off in (1, 0):
            t = rep(c, window=True, window_offset=off)
            if _try(op, t, RECT, dtype, dev, {**base, "left_bound": 16}, errors, f"window_{off}"):
                c = t
                break
    return c
