"""The per-op calls behind :mod:`.fused` (layouts, Stats mapping, GQA, bias, varlen).

Each function takes the case (:class:`~._fused_rules.FusedSdpaCase`: shapes, mask, dBias and
dropout probability through its call), the op's measured capabilities, the tensors and the
call's scale, and calls the aten op directly; :func:`.fused.forward` / :func:`.fused.backward`
add the checks and the fix-up of rows with no visible key. Layouts (:class:`_Rows`): our
tensors are ``[B,H,S,D]``; flash and efficient take ``[B,S,H,D]`` views (``transpose(1, 2)``,
no copy), varlen takes packed ``[total,H,D]`` rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ._fused_common import (
    Pack,
    aligned,
    aten_op,
    expand_heads,
    masking,
    reduce_heads,
    reduce_to,
    remember_rng,
    rng_state,
    to4,
)
from ._fused_rules import FusedOp, FusedSdpaCase, OpCaps

Tensor = torch.Tensor
_INF = math.inf


def _lse_dense(stats: Tensor, p: FusedSdpaCase, pad: int) -> Tensor:
    """User Stats [B,H,Sq,1] -> fp32 contiguous [B,H,Sq] (+inf padded to a multiple of pad)."""
    s = stats.reshape(p.b, p.h, p.sq)
    if s.dtype != torch.float32:
        s = s.float()
    if not s.is_contiguous():
        s = s.contiguous()
    if pad > 1 and p.sq % pad:
        s = torch.nn.functional.pad(s, (0, (-p.sq) % pad), value=_INF)
    return s


def _same(x: Tensor, like: Tensor) -> Tensor:
    """x in like's dtype (no call when it already is: the hot path counts microseconds)."""
    return x if x.dtype == like.dtype else x.to(like.dtype)


def _stats_out(lse: Tensor, p: FusedSdpaCase) -> Tensor:
    """Any [B,H,>=Sq(,1)] LSE -> [B,H,Sq,1] fp32."""
    if lse.dtype is torch.float32 and lse.shape == (p.b, p.h, p.sq, 1):
        return lse  # cuDNN's own layout: nothing to reshape (the hot path counts microseconds)
    lse = lse.reshape(p.b, p.h, -1)[:, :, : p.sq]
    return lse.float().reshape(p.b, p.h, p.sq, 1)


def _window_kw(wl: int | None, wr: int | None) -> dict[str, Any]:
    if wl is None and wr is None:
        return {}
    return {"window_size_left": wl, "window_size_right": wr}


def _kv_for(p: FusedSdpaCase, c: OpCaps, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor, bool]:
    """K/V as the op takes them: native GQA when measured and Hk == Hv, else expanded to H."""
    if p.hk == p.h and p.hv == p.h:
        return k, v, False
    if c.gqa_native and p.hk == p.hv:
        return k, v, False
    return expand_heads(k, p.h), expand_heads(v, p.h), True


@dataclass
class _Rows:
    """How a call's ``[B,H,S,D]`` tensors reach an op: ``[B,S,H,D]`` views (no padding), or
    packed ``[total,H,D]`` rows (varlen; ``lead``: with a leading batch dim of one)."""

    pq: Pack | None
    pk: Pack | None
    lead: bool

    @classmethod
    def of(
        cls, p: FusedSdpaCase, device: torch.device, lq: Tensor | None, lkv: Tensor | None,
        lead: bool,
    ) -> _Rows:  # fmt: skip
        if not p.padding:
            return cls(None, None, lead)
        return cls(Pack.make(lq, p.b, p.sq, device), Pack.make(lkv, p.b, p.skv, device), lead)

    @property
    def cu(self) -> tuple[Tensor | None, Tensor | None]:
        """The op's cumulative sequence lengths of Q and K/V (None without padding)."""
        if self.pq is None or self.pk is None:
            return None, None
        return self.pq.cu, self.pk.cu

    def to(self, x: Tensor, pack: Pack | None) -> Tensor:
        if pack is None:
            return x.transpose(1, 2)
        r = pack.pack(x)
        return r[None] if self.lead else r

    def back(self, y: Tensor, pack: Pack | None) -> Tensor:
        if pack is None:
            return y.transpose(1, 2)
        return pack.unpack(y[0] if self.lead else y)


# ------------------------------------------------------------------------------------------ flash


def flash_forward(
    p: FusedSdpaCase, c: OpCaps, q: Tensor, k: Tensor, v: Tensor, scale: float,
    bias: Tensor | None, seq_len_q: Tensor | None, seq_len_kv: Tensor | None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    del bias
    causal, wl, wr, _ = masking(FusedOp.FLASH, c, p)
    kx, vx, _ = _kv_for(p, c, k, v)
    r = _Rows.of(p, q.device, seq_len_q, seq_len_kv, lead=False)
    out, lse, rng, unused, _ = aten_op("_flash_attention_forward")(
        r.to(q, r.pq), r.to(kx, r.pk), r.to(vx, r.pk), *r.cu, p.sq, p.skv, p.call.dropout_p,
        causal, False, scale=scale, **_window_kw(wl, wr),
    )  # fmt: skip
    remember_rng(FusedOp.FLASH, q.device, rng, unused)
    o = r.back(out, r.pq)
    if r.pq is None:
        return o, _stats_out(lse, p)
    # [H, total] per token (CUDA flash), or [B, H, max_q] per sequence
    st = lse[:, r.pq.gather].permute(1, 0, 2) if lse.dim() == 2 else lse[:, :, : p.sq]
    st = st.masked_fill(~r.pq.valid.view(p.b, 1, p.sq), _INF)
    return o, _stats_out(st, p)


def flash_backward(
    p: FusedSdpaCase, c: OpCaps, q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor,
    stats: Tensor, scale: float, bias: Tensor | None, seq_len_q: Tensor | None,
    seq_len_kv: Tensor | None, philox_rng: tuple[Tensor, Tensor] | None,
) -> tuple[Tensor, Tensor, Tensor, None]:  # fmt: skip
    del bias
    causal, wl, wr, _ = masking(FusedOp.FLASH, c, p)
    kx, vx, expanded = _kv_for(p, c, k, v)
    o = _same(o, q)
    do = _same(do, q)
    rng, unused = philox_rng or rng_state(FusedOp.FLASH, q.device)
    r = _Rows.of(p, q.device, seq_len_q, seq_len_kv, lead=False)
    if r.pq is None or c.varlen_lse == "batch":
        lse = _lse_dense(stats, p, 1)
    else:
        lse = stats.reshape(p.b, p.h, p.sq).float().permute(1, 0, 2)[:, r.pq.b_idx, r.pq.s_idx]
        lse = lse.contiguous()
    dq, dk, dv = aten_op("_flash_attention_backward")(
        r.to(do, r.pq), r.to(q, r.pq), r.to(kx, r.pk), r.to(vx, r.pk), r.to(o, r.pq), lse,
        *r.cu, p.sq, p.skv, p.call.dropout_p, causal, rng, unused, scale=scale,
        **_window_kw(wl, wr),
    )  # fmt: skip
    dq, dk, dv = r.back(dq, r.pq), r.back(dk, r.pk), r.back(dv, r.pk)
    if expanded:
        dk, dv = reduce_heads(dk, p.hk), reduce_heads(dv, p.hv)
    return dq, dk, dv, None


# -------------------------------------------------------------------------------------- efficient


def _eff_bias(
    p: FusedSdpaCase, bias: Tensor | None, want_db: bool, dtype: torch.dtype, device: torch.device
) -> Tensor | None:
    if bias is None and not want_db:
        return None
    b4 = to4(bias) if bias is not None else torch.zeros(1, 1, 1, 1, dtype=dtype, device=device)
    return aligned(b4, p.skv, dtype).expand(p.b, p.h, p.sq, p.skv)


def _eff_mask(p: FusedSdpaCase, c: OpCaps) -> tuple[int, dict[str, Any]]:
    _, _, _, mt = masking(FusedOp.EFFICIENT, c, p)
    if p.call.left_bound is not None:
        return mt, {"window_size": p.call.left_bound + c.window_offset}
    return mt, {}


def efficient_forward(
    p: FusedSdpaCase, c: OpCaps, q: Tensor, k: Tensor, v: Tensor, scale: float,
    bias: Tensor | None, seq_len_q: Tensor | None, seq_len_kv: Tensor | None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    mt, wkw = _eff_mask(p, c)
    kx, vx, _ = _kv_for(p, c, k, v)
    r = _Rows.of(p, q.device, seq_len_q, seq_len_kv, lead=True)
    bt = _eff_bias(p, bias, False, q.dtype, q.device) if r.pq is None else None
    out, lse, seed, off, _, _ = aten_op("_efficient_attention_forward")(
        r.to(q, r.pq), r.to(kx, r.pk), r.to(vx, r.pk), bt, *r.cu, p.sq, p.skv,
        p.call.dropout_p, mt, True, scale=scale, **wkw,
    )  # fmt: skip
    remember_rng(FusedOp.EFFICIENT, q.device, seed, off)
    if r.pq is None:
        return r.back(out, None), _stats_out(lse, p)
    st = lse.reshape(p.b, p.h, -1)[:, :, : p.sq].masked_fill(~r.pq.valid.view(p.b, 1, p.sq), _INF)
    return r.back(out, r.pq), _stats_out(st, p)


def efficient_backward(
    p: FusedSdpaCase, c: OpCaps, q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor,
    stats: Tensor, scale: float, bias: Tensor | None, seq_len_q: Tensor | None,
    seq_len_kv: Tensor | None, philox_rng: tuple[Tensor, Tensor] | None,
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:  # fmt: skip
    mt, wkw = _eff_mask(p, c)
    kx, vx, expanded = _kv_for(p, c, k, v)
    dbias_shape = p.call.dbias_shape
    r = _Rows.of(p, q.device, seq_len_q, seq_len_kv, lead=True)
    want_db = dbias_shape is not None and r.pq is None  # padding with dBias: refused
    bt = _eff_bias(p, bias, want_db, q.dtype, q.device) if r.pq is None else None
    o = _same(o, q)
    do = _same(do, q)
    seed, off = philox_rng or rng_state(FusedOp.EFFICIENT, q.device)
    lse = _lse_dense(stats, p, c.lse_pad)
    # The kernel derives O's row stride as H·Dv (it reads only O's batch and head strides):
    # O must be BMHK-contiguous, which is what the op's own forward returns.
    dq, dk, dv, db = aten_op("_efficient_attention_backward")(
        r.to(do, r.pq), r.to(q, r.pq), r.to(kx, r.pk), r.to(vx, r.pk), bt,
        r.to(o, r.pq).contiguous(), *r.cu, p.sq, p.skv, lse, p.call.dropout_p, seed, off, mt,
        want_db, scale=scale, **wkw,
    )  # fmt: skip
    dq, dk, dv = r.back(dq, r.pq), r.back(dk, r.pk), r.back(dv, r.pk)
    if expanded:
        dk, dv = reduce_heads(dk, p.hk), reduce_heads(dv, p.hv)
    dbias = reduce_to(db, dbias_shape) if want_db and dbias_shape is not None else None
    return dq, dk, dv, dbias


# ------------------------------------------------------------------------------------------ cudnn


def _cudnn_bias(p: FusedSdpaCase, c: OpCaps, bias: Tensor | None, dtype: torch.dtype) -> Any:
    if bias is None:
        return None
    b4 = aligned(to4(bias), p.skv, dtype)
    b4 = b4.expand(p.b, b4.shape[1], p.sq, p.skv)
    return b4 if c.bias_broadcast else b4.contiguous()


def cudnn_forward(
    p: FusedSdpaCase, c: OpCaps, q: Tensor, k: Tensor, v: Tensor, scale: float,
    bias: Tensor | None, seq_len_q: Tensor | None, seq_len_kv: Tensor | None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    del seq_len_q, seq_len_kv
    causal = masking(FusedOp.CUDNN, c, p)[0]
    kx, vx, _ = _kv_for(p, c, k, v)
    res = aten_op("_scaled_dot_product_cudnn_attention")(
        q, kx, vx, _cudnn_bias(p, c, bias, q.dtype), True, p.call.dropout_p, causal, False,
        scale=scale,
    )  # fmt: skip
    remember_rng(FusedOp.CUDNN, q.device, res[6], res[7])
    return res[0], _stats_out(res[1], p)


def cudnn_backward(
    p: FusedSdpaCase, c: OpCaps, q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor,
    stats: Tensor, scale: float, bias: Tensor | None, seq_len_q: Tensor | None,
    seq_len_kv: Tensor | None, philox_rng: tuple[Tensor, Tensor] | None,
) -> tuple[Tensor, Tensor, Tensor, None]:  # fmt: skip
    del seq_len_q, seq_len_kv
    causal = masking(FusedOp.CUDNN, c, p)[0]
    kx, vx, expanded = _kv_for(p, c, k, v)
    if (
        c.lse_rank == 4
        and stats.dtype is torch.float32
        and stats.shape == (p.b, p.h, p.sq, 1)
        and stats.stride() == (p.h * p.sq, p.sq, 1, 1)
    ):
        lse = stats  # already the dense fp32 [B,H,Sq,1] the op takes (the forward's own Stats)
    else:
        lse = _lse_dense(stats, p, 1)
        if c.lse_rank == 4:
            lse = lse.unsqueeze(-1)
    seed, off = philox_rng or rng_state(FusedOp.CUDNN, q.device)
    dq, dk, dv = aten_op("_scaled_dot_product_cudnn_attention_backward")(
        _same(do, q), q, kx, vx, _same(o, q), lse, seed, off, _cudnn_bias(p, c, bias, q.dtype),
        None, None, p.sq, p.skv, p.call.dropout_p, causal, scale=scale,
    )  # fmt: skip
    if expanded:
        dk, dv = reduce_heads(dk, p.hk), reduce_heads(dv, p.hv)
    return dq, dk, dv, None


#: per op: ``(case, caps, q, k, v, scale, bias, seq_len_q, seq_len_kv) -> (O, Stats)``
FORWARD: dict[FusedOp, Callable[..., tuple[Tensor, Tensor]]] = {
    FusedOp.CUDNN: cudnn_forward,
    FusedOp.FLASH: flash_forward,
    FusedOp.EFFICIENT: efficient_forward,
}
#: per op: ``(case, caps, q, k, v, o, do, stats, scale, bias, seq_len_q, seq_len_kv,
#: philox_rng) -> (dQ, dK, dV, dBias)``
BACKWARD: dict[FusedOp, Callable[..., tuple[Tensor, Tensor, Tensor, Tensor | None]]] = {
    FusedOp.CUDNN: cudnn_backward,
    FusedOp.FLASH: flash_backward,
    FusedOp.EFFICIENT: efficient_backward,
}
