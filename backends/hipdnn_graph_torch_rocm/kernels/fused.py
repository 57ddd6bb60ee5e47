"""Wrappers over torch's fused SDPA ops, fed with the user's O and Stats.

Three op families, each with a forward (O and Stats ``[B,H,Sq,1]`` natural-log LSE fp32) and a
backward that reads the GIVEN O and Stats (the forward is never recomputed):

* cudnn: ``aten._scaled_dot_product_cudnn_attention_backward``; BHSD; LSE of the rank its own
  forward returns (``[B,H,Sq,1]`` or ``[B,H,Sq]``, torch versions differ).
* flash: ``aten._flash_attention_backward`` (dense or varlen); BSHD views; LSE ``[B,H,Sq]``,
  varlen ``[H, total_q]``; windows through ``window_size_left/right`` (bottom-right aligned).
* efficient: ``aten._efficient_attention_backward`` (dense or varlen, ``custom_mask_type``,
  bias + dBias, ``window_size``); BMHK views; LSE ``[B,H,ceil(Sq/32)·32]`` +inf-padded on CUDA,
  unpadded on ROCm (the padding is measured from its own forward, not assumed).

What each op cannot do is stated by :func:`static_reason` (API facts, no device needed) and by
:func:`check` (adds what :func:`capabilities` measured on the device: causal alignment, native
GQA, bias broadcasting, varlen, windows). Every reason names the feature, so an engine can refuse
with it and let ranking fall through to the math engine.

Never supported by a fused op here: a dropout mask (no fused op takes an explicit mask), ALiBi
(flash's backward has no slopes; torch exposes ALiBi nowhere else), float32/float64 inputs,
negative band bounds. cuDNN additionally: dBias, padding, band/window masks. flash: bias,
``Dv ≠ D``. efficient: band masks other than causal(+window), bias together with padding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .fused_rules import (
    FusedOp,
    FusedUnsupportedError,
    OpCaps,
    SdpaProblem,
    capabilities,
    check,
    static_reason,
)

__all__ = [
    "FusedOp",
    "FusedUnsupportedError",
    "OpCaps",
    "SdpaProblem",
    "backward",
    "capabilities",
    "check",
    "clear_empty_rows",
    "empty_rows",
    "forward",
    "static_reason",
]

Tensor = torch.Tensor

_INF = math.inf

# ------------------------------------------------------------------------------------------
# helpers


_OPS: dict[str, Any] = {}


def _op(name: str) -> Any:
    fn = _OPS.get(name)
    if fn is None:
        fn = getattr(torch.ops.aten, name).default
        _OPS[name] = fn
    return fn


#: per (op, device) tensors its own forward returned for the RNG state (dropout 0: never read)
RNG_STATE: dict[tuple[FusedOp, torch.device], tuple[Tensor, Tensor]] = {}


def _rng(op: FusedOp, device: torch.device) -> tuple[Tensor, Tensor]:
    key = (op, device)
    r = RNG_STATE.get(key)
    if r is None:
        if op is FusedOp.FLASH:
            r = (
                torch.zeros(2, dtype=torch.int64, device=device),
                torch.zeros((), dtype=torch.int64, device=device),
            )
        else:
            r = (torch.empty((), dtype=torch.int64), torch.empty((), dtype=torch.int64))
        RNG_STATE[key] = r
    return r


def _to4(x: Tensor) -> Tensor:
    if x.dim() > 4:
        raise ValueError(f"bias rank must be <= 4, got {x.dim()}")
    return x.reshape((1,) * (4 - x.dim()) + tuple(x.shape))


def _aligned(b4: Tensor, skv: int, dtype: torch.dtype) -> Tensor:
    """bias as dtype, last dim materialised and contiguous, row strides 16-element aligned."""
    b4 = b4.to(dtype)
    if b4.shape[-1] != skv:
        b4 = b4.expand(*b4.shape[:-1], skv)
    strides_ok = b4.stride(-1) == 1 and all(
        s % 16 == 0 for s, n in zip(b4.stride()[:-1], b4.shape[:-1], strict=True) if n > 1
    )
    if strides_ok:
        return b4
    store = torch.empty(*b4.shape[:-1], skv + (-skv) % 16, dtype=dtype, device=b4.device)
    out = store[..., :skv]
    out.copy_(b4)
    return out


def _reduce_to(g: Tensor, shape: Sequence[int]) -> Tensor:
    """Sum a [B,H,Sq,Skv] gradient down to a right-aligned broadcast shape (fp32)."""
    shape4 = (1,) * (4 - len(shape)) + tuple(int(x) for x in shape)
    r = g.float()
    for dim in range(4):
        if shape4[dim] == 1 and r.shape[dim] != 1:
            r = r.sum(dim, keepdim=True)
    return r.reshape(tuple(int(x) for x in shape))


def _expand_heads(x: Tensor, h: int) -> Tensor:
    return x if x.shape[1] == h else x.repeat_interleave(h // x.shape[1], dim=1)


def _reduce_heads(g: Tensor, heads: int) -> Tensor:
    b, h, s, d = g.shape
    return g if h == heads else g.view(b, heads, h // heads, s, d).sum(2)


def empty_rows(
    p: SdpaProblem,
    device: torch.device,
    seq_len_q: Tensor | None = None,
    seq_len_kv: Tensor | None = None,
) -> Tensor | None:
    """Bool ``[B|1,1,Sq,1]``: query rows that see no key (None when there can be none)."""
    if p.left_bound is None and p.right_bound is None and not p.padding:
        return None
    if not p.padding:
        o0 = p.skv - p.sq if p.bottom_right else 0
        lo_any = p.right_bound is not None and -o0 - p.right_bound > 0
        hi_any = p.left_bound is not None and p.sq - 1 + o0 - p.left_bound > p.skv - 1
        band_empty = (
            p.left_bound is not None
            and p.right_bound is not None
            and p.left_bound + p.right_bound < 0
        )
        if not (lo_any or hi_any or band_empty):
            return None
    i = torch.arange(p.sq, device=device, dtype=torch.int64).view(1, 1, -1, 1)
    lq = _lens(seq_len_q, p.b, p.sq, device)
    lkv = _lens(seq_len_kv, p.b, p.skv, device)
    off: Tensor | int = (lkv - lq) if p.bottom_right else 0
    lo = torch.zeros_like(i) if p.left_bound is None else (i + off - p.left_bound).clamp(min=0)
    hi = (lkv - 1) if p.right_bound is None else torch.minimum(i + off + p.right_bound, lkv - 1)
    return (lo > hi) | (i >= lq)


def clear_empty_rows(rows: Tensor | None, o: Tensor, stats: Tensor) -> tuple[Tensor, Tensor]:
    """O = 0 and Stats = +inf on the query ``rows`` that see no key (from :func:`empty_rows`)."""
    if rows is None:
        return o, stats
    return o.masked_fill(rows, 0.0), stats.masked_fill(rows, _INF)


def _lens(t: Tensor | None, b: int, full: int, device: torch.device) -> Tensor:
    if t is None:
        return torch.full((1, 1, 1, 1), full, dtype=torch.int64, device=device)
    return t.reshape(-1).to(device=device, dtype=torch.int64).clamp(0, full).view(b, 1, 1, 1)


@dataclass
class _Pack:
    """Varlen packing of a padded [B,S,...] batch into [B·S, ...] rows (no host sync)."""

    cu: Tensor  # [B+1] int32
    b_idx: Tensor  # [P] source batch of packed row p
    s_idx: Tensor  # [P] source position
    gather: Tensor  # [B,S] packed row of (b, s) (clamped)
    valid: Tensor  # [B,S] bool

    @classmethod
    def make(cls, lens: Tensor | None, b: int, s: int, device: torch.device) -> _Pack:
        ln = _lens(lens, b, s, device).view(b)
        cu = torch.zeros(b + 1, dtype=torch.int64, device=device)
        cu[1:] = torch.cumsum(ln, 0)
        pos = torch.arange(b * s, device=device, dtype=torch.int64)
        bi = (torch.searchsorted(cu[1:], pos, right=True)).clamp(max=b - 1)
        si = (pos - cu[bi]).clamp(0, s - 1)
        ss = torch.arange(s, device=device, dtype=torch.int64).view(1, s)
        gather = (cu[:-1].view(b, 1) + ss).clamp(max=b * s - 1)
        valid = ss < ln.view(b, 1)
        return cls(cu.to(torch.int32), bi, si, gather, valid)

    def pack(self, x: Tensor) -> Tensor:
        """[B,H,S,D] -> [P,H,D]."""
        return x.transpose(1, 2)[self.b_idx, self.s_idx]

    def unpack(self, y: Tensor, fill: float = 0.0) -> Tensor:
        """[P,H,D] -> [B,H,S,D] with ``fill`` past each length (unwritten rows never read)."""
        r = y[self.gather]  # [B,S,H,D]
        r = r.masked_fill(~self.valid.view(*self.valid.shape, 1, 1), fill)
        return r.transpose(1, 2)


def _masking(
    op: FusedOp,
    c: OpCaps,
    sq: int,
    skv: int,
    bottom_right: bool,
    left: int | None,
    right: int | None,
    padding: bool,
) -> tuple[bool, int | None, int | None, int]:
    """(is_causal, window_left, window_right, custom_mask_type) for the op."""
    if left is None and right is None:
        return False, None, None, 0
    if op is FusedOp.FLASH:
        if right == 0 and left is None:
            return True, None, None, 0
        return False, left, right, 0
    align = "bottom_right" if bottom_right else "top_left"
    if op is FusedOp.EFFICIENT:
        if sq == skv and not padding:
            mt = c.mask_type("top_left") or c.mask_type("bottom_right")
        else:
            mt = c.mask_type(align)
        if mt is None:
            raise FusedUnsupportedError(op, f"no {align} causal mask type")
        return False, None, None, mt
    return True, None, None, 0


# ------------------------------------------------------------------------------------------
# public entry points


_PLANS: dict[tuple[Any, ...], tuple[SdpaProblem, OpCaps, str | None, Tensor | None]] = {}


def _guard(
    op: FusedOp,
    check_it: bool,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    bias: Tensor | None,
    dbias: bool,
    alibi: bool,
    bottom_right: bool,
    left_bound: int | None,
    right_bound: int | None,
    seq_len_q: Tensor | None,
    seq_len_kv: Tensor | None,
    dropout_mask: Tensor | None,
    forward: bool,
) -> tuple[SdpaProblem, OpCaps, Tensor | None]:
    """(problem, caps, rows-without-keys) for this call; cached per call signature.

    The problem, its :func:`check` verdict and (without padding) the rows to zero are computed
    once per signature, so the per-call cost is one tuple hash and a dict lookup.
    """
    key = (
        op,
        q.shape,
        k.shape,
        v.shape,
        q.dtype,
        q.device,
        None if bias is None else bias.shape,
        dbias,
        alibi,
        bottom_right,
        left_bound,
        right_bound,
        seq_len_q is not None,
        seq_len_kv is not None,
        dropout_mask is not None,
        forward,
    )
    hit = _PLANS.get(key)
    if hit is None:
        p = SdpaProblem.from_tensors(
            q,
            k,
            v,
            bias=bias,
            dbias=dbias,
            alibi=alibi,
            bottom_right=bottom_right,
            left_bound=left_bound,
            right_bound=right_bound,
            seq_len_q=seq_len_q,
            seq_len_kv=seq_len_kv,
            dropout_mask=dropout_mask,
            forward=forward,
        )
        reason = check(op, p)
        er = None if p.padding else empty_rows(p, q.device)
        if len(_PLANS) > 4096:
            _PLANS.clear()
        hit = (p, capabilities(q.device, q.dtype)[op], reason, er)
        _PLANS[key] = hit
    p, c, reason, er = hit
    if reason is not None and (check_it or dropout_mask is not None or alibi or not c.available):
        raise FusedUnsupportedError(op, reason)
    if p.padding:
        er = empty_rows(p, q.device, seq_len_q, seq_len_kv)
    return p, c, er


def forward(
    op: FusedOp,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    scale: float,
    bias: Tensor | None = None,
    alibi: bool = False,
    bottom_right: bool = False,
    left_bound: int | None = None,
    right_bound: int | None = None,
    seq_len_q: Tensor | None = None,
    seq_len_kv: Tensor | None = None,
    dropout_mask: Tensor | None = None,
    dropout_scale: float = 1.0,
    check: bool = True,
) -> tuple[Tensor, Tensor]:
    """O ``[B,H,Sq,Dv]`` (input dtype) and Stats ``[B,H,Sq,1]`` fp32 from the fused op.

    Keywords as in :func:`hipdnn_graph_torch_rocm.kernels.math.sdpa_forward`. :func:`check` runs
    once per call signature (cached); with ``check=False`` a failed check raises only for what
    can never run (dropout mask, ALiBi, op unavailable) and otherwise the caller's plan-time
    check is trusted.

    Raises:
        FusedUnsupportedError: the op cannot run this exactly (the message names the feature).
    """
    del dropout_scale
    p, c, er = _guard(
        op,
        check,
        q,
        k,
        v,
        bias=bias,
        dbias=False,
        alibi=alibi,
        bottom_right=bottom_right,
        left_bound=left_bound,
        right_bound=right_bound,
        seq_len_q=seq_len_q,
        seq_len_kv=seq_len_kv,
        dropout_mask=dropout_mask,
        forward=True,
    )
    from . import _fused_impl as impl

    o, st = impl.FORWARD[op](
        p, c, q, k, v, scale=scale, bias=bias, seq_len_q=seq_len_q, seq_len_kv=seq_len_kv
    )
    return clear_empty_rows(er, o, st)


def backward(
    op: FusedOp,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    do: Tensor,
    stats: Tensor,
    *,
    scale: float,
    bias: Tensor | None = None,
    dbias_shape: Sequence[int] | None = None,
    alibi: bool = False,
    bottom_right: bool = False,
    left_bound: int | None = None,
    right_bound: int | None = None,
    seq_len_q: Tensor | None = None,
    seq_len_kv: Tensor | None = None,
    dropout_mask: Tensor | None = None,
    dropout_scale: float = 1.0,
    check: bool = True,
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """dQ, dK, dV (input dtype) and dBias (fp32, or None) from the fused backward op.

    The op reads the GIVEN ``o`` and ``stats`` (``[B,H,Sq,1]`` natural-log LSE); nothing is
    recomputed. dBias is produced when ``dbias_shape`` is given (efficient only). ``check`` as
    in :func:`forward`.

    Raises:
        FusedUnsupportedError: the op cannot run this exactly (the message names the feature).
    """
    del dropout_scale
    p, c, er = _guard(
        op,
        check,
        q,
        k,
        v,
        bias=bias,
        dbias=dbias_shape is not None,
        alibi=alibi,
        bottom_right=bottom_right,
        left_bound=left_bound,
        right_bound=right_bound,
        seq_len_q=seq_len_q,
        seq_len_kv=seq_len_kv,
        dropout_mask=dropout_mask,
        forward=False,
    )
    from . import _fused_impl as impl

    dq, dk, dv, db = impl.BACKWARD[op](
        p,
        c,
        q,
        k,
        v,
        o,
        do,
        stats,
        scale=scale,
        bias=bias,
        dbias_shape=dbias_shape,
        seq_len_q=seq_len_q,
        seq_len_kv=seq_len_kv,
    )
    if er is not None:
        dq = dq.masked_fill(er, 0.0)
    return dq, dk, dv, db
