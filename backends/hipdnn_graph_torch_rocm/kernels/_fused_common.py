"""Helpers shared by the fused-op wrappers (:mod:`.fused`), their per-op calls
(:mod:`._fused_ops`) and the capability probe (:mod:`.probe`): aten op lookup, RNG-state
tensors, bias layout, GQA head expansion and reduction, rows without a visible key, varlen
packing, and the per-signature plan cache.

Imports only :mod:`._fused_rules` (the problem and capability records), so every module above
can import it without a cycle.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ._fused_rules import FusedOp, FusedSdpaCase, FusedUnsupportedError, OpCaps

Tensor = torch.Tensor

_INF = math.inf

# ------------------------------------------------------------------------------------------
# shared helpers


_OPS: dict[str, Any] = {}


def aten_op(name: str) -> Any:
    fn = _OPS.get(name)
    if fn is None:
        fn = getattr(torch.ops.aten, name).default
        _OPS[name] = fn
    return fn


#: per (op, device) tensors its own forward returned for the RNG state (dropout 0: never read)
RNG_STATE: dict[tuple[FusedOp, torch.device], tuple[Tensor, Tensor]] = {}


def rng_state(op: FusedOp, device: torch.device) -> tuple[Tensor, Tensor]:
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


def to4(x: Tensor) -> Tensor:
    if x.dim() > 4:
        raise ValueError(f"bias rank must be <= 4, got {x.dim()}")
    return x.reshape((1,) * (4 - x.dim()) + tuple(x.shape))


def aligned(b4: Tensor, skv: int, dtype: torch.dtype) -> Tensor:
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


def reduce_to(g: Tensor, shape: Sequence[int]) -> Tensor:
    """Sum a [B,H,Sq,Skv] gradient down to a right-aligned broadcast shape, in fp32 (a gradient
    that needs no sum keeps its type: the engine converts it once, into the declared output)."""
    shape4 = (1,) * (4 - len(shape)) + tuple(int(x) for x in shape)
    r = g
    for dim in range(4):
        if shape4[dim] == 1 and r.shape[dim] != 1:
            r = r.sum(dim, keepdim=True, dtype=torch.float32)
    return r.reshape(tuple(int(x) for x in shape))


def expand_heads(x: Tensor, h: int) -> Tensor:
    return x if x.shape[1] == h else x.repeat_interleave(h // x.shape[1], dim=1)


def reduce_heads(g: Tensor, heads: int) -> Tensor:
    b, h, s, d = g.shape
    return g if h == heads else g.view(b, heads, h // heads, s, d).sum(2)


def empty_rows(
    p: FusedSdpaCase,
    device: torch.device,
    seq_len_q: Tensor | None = None,
    seq_len_kv: Tensor | None = None,
) -> Tensor | None:
    """Bool ``[B|1,1,Sq,1]``: query rows that see no key (None when there can be none)."""
    w = p.call
    if not (w.masked or p.padding):
        return None
    if not p.padding:
        o0 = p.skv - p.sq if w.bottom_right else 0
        lo_any = w.right_bound is not None and -o0 - w.right_bound > 0
        hi_any = w.left_bound is not None and p.sq - 1 + o0 - w.left_bound > p.skv - 1
        band_empty = (
            w.left_bound is not None
            and w.right_bound is not None
            and w.left_bound + w.right_bound < 0
        )
        if not (lo_any or hi_any or band_empty):
            return None
    i = torch.arange(p.sq, device=device, dtype=torch.int64).view(1, 1, -1, 1)
    lq = seq_lens(seq_len_q, p.b, p.sq, device)
    lkv = seq_lens(seq_len_kv, p.b, p.skv, device)
    off: Tensor | int = (lkv - lq) if w.bottom_right else 0
    lo = torch.zeros_like(i) if w.left_bound is None else (i + off - w.left_bound).clamp(min=0)
    hi = (lkv - 1) if w.right_bound is None else torch.minimum(i + off + w.right_bound, lkv - 1)
    return (lo > hi) | (i >= lq)


def clear_empty_rows(rows: Tensor | None, o: Tensor, stats: Tensor) -> tuple[Tensor, Tensor]:
    """O = 0 and Stats = +inf on the query ``rows`` that see no key (from :func:`empty_rows`)."""
    if rows is None:
        return o, stats
    return o.masked_fill(rows, 0.0), stats.masked_fill(rows, _INF)


def seq_lens(t: Tensor | None, b: int, full: int, device: torch.device) -> Tensor:
    if t is None:
        return torch.full((1, 1, 1, 1), full, dtype=torch.int64, device=device)
    return t.reshape(-1).to(device=device, dtype=torch.int64).clamp(0, full).view(b, 1, 1, 1)


@dataclass
class Pack:
    """Varlen packing of a padded [B,S,...] batch into [B·S, ...] rows (no host sync)."""

    cu: Tensor  # [B+1] int32
    b_idx: Tensor  # [P] source batch of packed row p
    s_idx: Tensor  # [P] source position
    gather: Tensor  # [B,S] packed row of (b, s) (clamped)
    valid: Tensor  # [B,S] bool

    @classmethod
    def make(cls, lens: Tensor | None, b: int, s: int, device: torch.device) -> Pack:
        ln = seq_lens(lens, b, s, device).view(b)
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


def masking(op: FusedOp, c: OpCaps, p: FusedSdpaCase) -> tuple[bool, int | None, int | None, int]:
    """(is_causal, window_left, window_right, custom_mask_type) for the op."""
    w = p.call
    if not w.masked:
        return False, None, None, 0
    if op is FusedOp.FLASH:
        if w.causal:
            return True, None, None, 0
        return False, w.left_bound, w.right_bound, 0
    align = "bottom_right" if w.bottom_right else "top_left"
    if op is FusedOp.EFFICIENT:
        if p.sq == p.skv and not p.padding:
            mt = c.mask_type("top_left") or c.mask_type("bottom_right")
        else:
            mt = c.mask_type(align)
        if mt is None:
            raise FusedUnsupportedError(op, f"no {align} causal mask type")
        return False, None, None, mt
    return True, None, None, 0


def remember_rng(op: FusedOp, device: torch.device, a: Tensor, b: Tensor) -> None:
    """Keep the RNG-state tensors an op's own forward returned (read by its backward)."""
    RNG_STATE.setdefault((op, device), (a, b))


#: per call signature: (problem, caps, check verdict, rows without keys); cleared with the
#: probe's cache (:func:`.probe.clear_cache`) since the verdicts depend on it
PLANS: dict[tuple[Any, ...], tuple[FusedSdpaCase, OpCaps, str | None, Tensor | None]] = {}

#: the generation of :data:`PLANS`' verdicts: bumped by :func:`.probe.clear_cache`, so that a
#: plan's memo of a verdict (:meth:`.fused.Kernel.bind`) made before is not used after
PLAN_GENERATION: list[int] = [0]
