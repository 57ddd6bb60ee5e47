"""The set-up of the torch math kernel: geometry, masks and block plans, and the block-level
helpers that :mod:`.math`'s ``sdpa_forward`` / ``sdpa_backward`` loop over."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from ._math_philox import Scalar, keep_words, philox_keep
from .call import OPEN_SCALE, SdpaCall, SdpaDims, SdpaInputs

Tensor = torch.Tensor

#: Elements of one [B, H, block, Skv] temporary (several live at once).
_BUDGET_GPU = 1 << 27
_BUDGET_CPU = 1 << 22
_LOWP = (torch.float16, torch.bfloat16)


def alibi_slopes(
    num_heads: int, *, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
) -> Tensor:
    """Standard ALiBi slopes ``2^(-8(h+1)/H)`` for ``h = 0..H-1``."""
    h = torch.arange(num_heads, device=device, dtype=torch.float64)
    return torch.pow(2.0, -8.0 * (h + 1.0) / num_heads).to(dtype)


@functools.cache
def _lowp_supported(device_type: str, dtype: torch.dtype) -> bool:
    try:
        a = torch.ones(1, 2, 8, device=device_type, dtype=dtype)
        b = torch.ones(1, 8, 2, device=device_type, dtype=dtype)
        r = torch.ops.aten.bmm.dtype(a, b, torch.float32)
        return bool(r.dtype == torch.float32 and float(r[0, 0, 0]) == 8.0)
    except Exception:  # any failure means "not supported here"
        return False


def lowp_matmul_supported(device: torch.device | str, dtype: torch.dtype) -> bool:
    """Whether ``bmm`` with fp16/bf16 operands and an fp32 result runs on this device."""
    if dtype not in _LOWP:
        return False
    return _lowp_supported(torch.device(device).type, dtype)


def _geometry(q: Tensor, k: Tensor, v: Tensor) -> SdpaDims:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"sdpa math: {name} must be rank-4, got shape {tuple(t.shape)}")
        if not t.is_floating_point():
            raise ValueError(f"sdpa math: {name} must be a floating-point tensor, got {t.dtype}")
    b, h, sq, d = q.shape
    bk, hk, skv, dk = k.shape
    bv, hv, skv_v, dv = v.shape
    if bk != b or bv != b:
        raise ValueError(f"sdpa math: batch mismatch q={b} k={bk} v={bv}")
    if dk != d:
        raise ValueError(f"sdpa math: head_dim mismatch between q ({d}) and k ({dk})")
    if skv_v != skv:
        raise ValueError(f"sdpa math: seq_kv mismatch between k ({skv}) and v ({skv_v})")
    if hk <= 0 or hv <= 0 or h % hk or h % hv:
        raise ValueError(f"sdpa math: num_heads {h} must be divisible by Hk={hk} and Hv={hv}")
    return SdpaDims(b, h, hk, hv, sq, skv, d, dv)


def _to4(shape: tuple[int, ...], what: str) -> tuple[int, int, int, int]:
    if len(shape) > 4:
        raise ValueError(f"sdpa math: {what} rank must be <= 4, got shape {shape}")
    s = (1,) * (4 - len(shape)) + tuple(int(x) for x in shape)
    return (s[0], s[1], s[2], s[3])


def _check_broadcast(
    shape4: tuple[int, int, int, int], full: tuple[int, int, int, int], what: str
) -> None:
    for got, want in zip(shape4, full, strict=True):
        if got not in (1, want):
            raise ValueError(f"sdpa math: {what} shape {shape4} does not broadcast to {full}")


def _lengths(
    t: Tensor | None, b: int, full: int, what: str, device: torch.device
) -> tuple[Tensor | None, list[int] | None]:
    """Per-batch lengths clipped to [0, full] (as the NumPy twin does), on device and host."""
    if t is None:
        return None, None
    flat = t.reshape(-1)
    if flat.numel() != b:
        raise ValueError(f"sdpa math: {what} must have B={b} elements, got {flat.numel()}")
    host = [min(max(int(x), 0), full) for x in flat.tolist()]
    return torch.tensor(host, dtype=torch.int64, device=device).view(b, 1, 1, 1), host


@dataclass(frozen=True)
class _Philox:
    """Philox dropout of a call: the keep mask of a block is drawn when the block is reached."""

    seed: Scalar
    offset: Scalar
    keep_words: int


def _philox(call: SdpaCall, inputs: SdpaInputs, has_mask: bool) -> _Philox | None:
    if not call.dropout_p:
        return None
    if has_mask:
        raise ValueError("sdpa math: give dropout_mask or dropout_p (philox), not both")
    seed, offset = inputs.get("dropout_seed"), inputs.get("dropout_offset")
    seed = call.dropout_seed if seed is None else seed  # a per-call value, else the call's
    offset = call.dropout_offset if offset is None else offset
    if seed is None or offset is None:
        raise ValueError("sdpa math: philox dropout (dropout_p) needs dropout_seed and offset")
    return _Philox(seed, offset, keep_words(float(call.dropout_p)))


@dataclass
class _Plan:
    g: SdpaDims
    scale: float
    cdt: torch.dtype
    mmdt: torch.dtype  # dtype of matmul operands (cdt in exact mode)
    lowp: bool
    bias4: Tensor | None
    slopes: Tensor | None  # [1,H,1,1] in cdt
    left: int | None
    right: int | None
    offset: int | Tensor  # int, or [B,1,1,1] int64 (bottom-right with padding)
    off_min: int
    off_max: int
    len_q: Tensor | None  # [B,1,1,1] int64
    len_kv: Tensor | None
    q_limit: int
    kv_limit: int
    mask4: Tensor | None
    philox: _Philox | None
    dropout_scale: float
    block: int
    q_device: torch.device


def _plan(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    call: SdpaCall,
    compute_dtype: torch.dtype,
    block_q: int | None,
    matmul_dtype: torch.dtype | None,
    inputs: SdpaInputs,
) -> _Plan:
    bias = inputs.get("bias")
    dropout_mask = inputs.get("dropout_mask")
    bottom_right = call.bottom_right
    scale = inputs.get("scale")  # a per-call value (a runtime scalar), else the call's
    if scale is None:
        scale = call.scale
        if scale is None:
            raise ValueError(OPEN_SCALE)
    dropout_scale = inputs.get("dropout_scale")
    if dropout_scale is None:
        dropout_scale = 1.0 if call.dropout_scale is None else call.dropout_scale
    g = _geometry(q, k, v)
    if compute_dtype not in (torch.float32, torch.float64):
        raise ValueError(
            f"sdpa math: compute_dtype must be float32 or float64, got {compute_dtype}"
        )
    full = (g.b, g.h, g.sq, g.skv)
    bias4 = None
    if bias is not None:
        b4 = _to4(tuple(bias.shape), "bias")
        _check_broadcast(b4, full, "bias")
        bias4 = bias.reshape(b4)
    mask4 = None
    if dropout_mask is not None:
        m4 = tuple(dropout_mask.shape)
        if (
            len(m4) != 4
            or m4[2] != g.sq
            or m4[3] != g.skv
            or m4[0] not in (1, g.b)
            or m4[1] not in (1, g.h)
        ):
            raise ValueError(
                f"sdpa math: dropout mask shape {m4} must be [B|1,H|1,Sq,Skv] "
                f"with Sq={g.sq}, Skv={g.skv}"
            )
        mask4 = dropout_mask
    len_q, lq = _lengths(inputs.get("seq_len_q"), g.b, g.sq, "seq_len_q", q.device)
    len_kv, lkv = _lengths(inputs.get("seq_len_kv"), g.b, g.skv, "seq_len_kv", q.device)
    offset: int | Tensor = 0
    off_min = off_max = 0
    if bottom_right:
        if lq is None and lkv is None:
            offset = off_min = off_max = g.skv - g.sq
        else:
            lq_l = lq if lq is not None else [g.sq] * g.b
            lkv_l = lkv if lkv is not None else [g.skv] * g.b
            offs = [a - c for a, c in zip(lkv_l, lq_l, strict=True)]
            off_min, off_max = min(offs), max(offs)
            offset = torch.tensor(offs, dtype=torch.int64, device=q.device).view(g.b, 1, 1, 1)
    q_limit = g.sq if lq is None else max(0, min(g.sq, max(lq)))
    kv_limit = g.skv if lkv is None else max(0, min(g.skv, max(lkv)))
    lowp = matmul_dtype is not None and matmul_dtype in _LOWP and compute_dtype == torch.float32
    mmdt = matmul_dtype if (lowp and matmul_dtype is not None) else compute_dtype
    if block_q is None:
        budget = _BUDGET_CPU if q.device.type == "cpu" else _BUDGET_GPU
        block = budget // max(1, g.b * g.h * max(1, g.skv))
        block = max(16, block - block % 16) if block >= 16 else max(1, block)
    else:
        block = int(block_q)
        if block < 1:
            raise ValueError(f"sdpa math: block_q must be >= 1, got {block_q}")
    block = min(block, max(1, g.sq))
    slopes = None
    if call.alibi:
        slopes = alibi_slopes(g.h, device=q.device, dtype=compute_dtype).view(1, g.h, 1, 1)
    return _Plan(
        g=g,
        scale=float(scale),
        cdt=compute_dtype,
        mmdt=mmdt,
        lowp=lowp,
        bias4=bias4,
        slopes=slopes,
        left=call.left_bound,
        right=call.right_bound,
        offset=offset,
        off_min=off_min,
        off_max=off_max,
        len_q=len_q,
        len_kv=len_kv,
        q_limit=q_limit,
        kv_limit=kv_limit,
        mask4=mask4,
        philox=_philox(call, inputs, mask4 is not None),
        dropout_scale=float(dropout_scale),
        block=block,
        q_device=q.device,
    )


def _key_range(p: _Plan, i0: int, i1: int) -> tuple[int, int]:
    lo, hi = 0, p.kv_limit
    if p.right is not None:
        hi = min(hi, i1 - 1 + p.off_max + p.right + 1)
    if p.left is not None:
        lo = max(lo, i0 + p.off_min - p.left)
    return lo, hi


def _visible(p: _Plan, i0: int, i1: int, j0: int, j1: int, device: torch.device) -> Tensor | None:
    """Boolean visibility of the block, broadcastable to [B, H, i1-i0, j1-j0]; None = all."""
    if p.left is None and p.right is None and p.len_q is None and p.len_kv is None:
        return None
    i = torch.arange(i0, i1, device=device, dtype=torch.int64).view(1, 1, -1, 1)
    j = torch.arange(j0, j1, device=device, dtype=torch.int64).view(1, 1, 1, -1)
    vis: Tensor | None = None
    if p.right is not None:
        vis = j <= i + (p.offset + p.right)
    if p.left is not None:
        c = j >= i + (p.offset - p.left)
        vis = c if vis is None else vis & c
    if p.len_q is not None:
        c = i < p.len_q
        vis = c if vis is None else vis & c
    if p.len_kv is not None:
        c = j < p.len_kv
        vis = c if vis is None else vis & c
    return vis


def _mm(a: Tensor, b: Tensor, lowp: bool) -> Tensor:
    """Batched a @ b; with lowp, fp16/bf16 operands give an fp32 result (fp32 accumulation)."""
    if not lowp:
        r: Tensor = torch.matmul(a, b)
        return r
    if not _lowp_supported(a.device.type, a.dtype):
        # Same numbers without tensor cores: the operands are already rounded, accumulate fp32.
        return torch.matmul(a.float(), b.float())
    lead = a.shape[:-2]
    r = torch.ops.aten.bmm.dtype(
        a.reshape(-1, a.shape[-2], a.shape[-1]),
        b.reshape(-1, b.shape[-2], b.shape[-1]),
        torch.float32,
    )
    return r.view(*lead, a.shape[-2], b.shape[-1])


def _buf(like: Tensor, dtype: torch.dtype) -> Tensor:
    return torch.empty(like.shape, dtype=dtype, device=like.device)


def _group(x: Tensor, heads: int) -> Tensor:
    """[B, H, n, c] -> [B, heads, (H/heads)·n, c] (query head h goes to group h // (H/heads))."""
    b, h, n, c = x.shape
    return x.reshape(b, heads, (h // heads) * n, c)


def _scores(
    p: _Plan,
    q: Tensor,
    kmat: Tensor,
    i0: int,
    i1: int,
    j0: int,
    j1: int,
    sub: Tensor | None = None,
) -> tuple[Tensor, bool]:
    """Scores of the block, [B,H,n,kv] in compute dtype, masked with -inf.

    Returns ``(s, scaled)``. The scale, bias, ALiBi and ``-sub`` are folded into one pass
    (``add(terms, raw, alpha=scale)``). With no additive term and a positive scale the raw
    product is returned unscaled (``scaled`` False) so that the caller folds the scale into its
    own pass (masking with -inf commutes with a positive scale).
    """
    g = p.g
    n = i1 - i0
    qg = _group(q[:, :, i0:i1].to(p.mmdt), g.hk)
    s = _mm(qg, kmat[:, :, j0:j1].transpose(-1, -2), p.lowp).view(g.b, g.h, n, j1 - j0)
    terms: list[Tensor] = []
    if p.bias4 is not None:
        bb = p.bias4
        if bb.shape[2] != 1:
            bb = bb[:, :, i0:i1]
        if bb.shape[3] != 1:
            bb = bb[:, :, :, j0:j1]
        terms.append(bb.to(p.cdt))
    if p.slopes is not None:
        ii = torch.arange(i0, i1, device=s.device, dtype=p.cdt).view(1, 1, -1, 1)
        jj = torch.arange(j0, j1, device=s.device, dtype=p.cdt).view(1, 1, 1, -1)
        terms.append(p.slopes * (jj - ii))
    if sub is not None:
        terms.append(-sub)
    scaled = True
    if terms:
        torch.add(terms[0], s, alpha=p.scale, out=s)
        for t in terms[1:]:
            s.add_(t)
    elif p.scale > 0:
        scaled = False
    else:
        s.mul_(p.scale)
    vis = _visible(p, i0, i1, j0, j1, s.device)
    if vis is not None:
        s.masked_fill_(~vis, -math.inf)
    return s, scaled


def _mask_block(p: _Plan, i0: int, i1: int, j0: int, j1: int) -> Tensor | None:
    """The block's dropout factor ``M·s`` (explicit mask or philox draw), or None."""
    if p.philox is not None:
        g, d = p.g, p.philox
        keep = philox_keep(d.seed, d.offset, d.keep_words, (g.b, g.h, g.sq, g.skv), (i0, i1),
                           (j0, j1), p.q_device)  # fmt: skip
        return keep.to(p.cdt) * p.dropout_scale
    if p.mask4 is None:
        return None
    return p.mask4[:, :, i0:i1, j0:j1].to(p.cdt) * p.dropout_scale
