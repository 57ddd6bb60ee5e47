"""The per-op calls behind :mod:`.fused` (layouts, Stats mapping, GQA, bias, varlen).

Each function takes the problem and the op's measured capabilities and calls the aten op
directly; :func:`.fused.forward` / :func:`.fused.backward` add the checks and the fix-up of rows
with no visible key. Layouts: our tensors are ``[B,H,S,D]``; flash and efficient take
``[B,S,H,D]`` views (``transpose(1, 2)``, no copy), varlen takes packed ``[total,H,D]`` rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
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
from ._fused_rules import FusedOp, OpCaps, SdpaProblem

Tensor = torch.Tensor
_INF = math.inf


def _lse_dense(stats: Tensor, p: SdpaProblem, pad: int) -> Tensor:
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


def _stats_out(lse: Tensor, p: SdpaProblem) -> Tensor:
    """Any [B,H,>=Sq(,1)] LSE -> [B,H,Sq,1] fp32."""
    if lse.dtype is torch.float32 and lse.shape == (p.b, p.h, p.sq, 1):
        return lse  # cuDNN's own layout: nothing to reshape (the hot path counts microseconds)
    lse = lse.reshape(p.b, p.h, -1)[:, :, : p.sq]
    return lse.float().reshape(p.b, p.h, p.sq, 1)


def _window_kw(wl: int | None, wr: int | None) -> dict[str, Any]:
    if wl is None and wr is None:
        return {}
    return {"window_size_left": wl, "window_size_right": wr}


def _kv_for(p: SdpaProblem, c: OpCaps, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor, bool]:
    """K/V as the op takes them: native GQA when measured and Hk == Hv, else expanded to H."""
    if p.hk == p.h and p.hv == p.h:
        return k, v, False
    if c.gqa_native and p.hk == p.hv:
        return k, v, False
    return expand_heads(k, p.h), expand_heads(v, p.h), True


# ------------------------------------------------------------------------------------------ flash


def flash_forward(
    p: SdpaProblem,
    c: OpCaps,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    scale: float,
    bias: Tensor | None,
    seq_len_q: Tensor | None,
    seq_len_kv: Tensor | None,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor]:
    del bias
    causal, wl, wr, _ = masking(
        FusedOp.FLASH, c, p.sq, p.skv, p.bottom_right, p.left_bound, p.right_bound, p.padding
    )
    kx, vx, _ = _kv_for(p, c, k, v)
    fn = aten_op("_flash_attention_forward")
    kw = {"scale": scale, **_window_kw(wl, wr)}
    if not p.padding:
        out, lse, rng, unused, _ = fn(
            q.transpose(1, 2),
            kx.transpose(1, 2),
            vx.transpose(1, 2),
            None,
            None,
            p.sq,
            p.skv,
            dropout_p,
            causal,
            False,
            **kw,
        )
        remember_rng(FusedOp.FLASH, q.device, rng, unused)
        return out.transpose(1, 2), _stats_out(lse, p)
    pq = Pack.make(seq_len_q, p.b, p.sq, q.device)
    pk = Pack.make(seq_len_kv, p.b, p.skv, q.device)
    out, lse, rng, unused, _ = fn(
        pq.pack(q),
        pk.pack(kx),
        pk.pack(vx),
        pq.cu,
        pk.cu,
        p.sq,
        p.skv,
        dropout_p,
        causal,
        False,
        **kw,
    )
    remember_rng(FusedOp.FLASH, q.device, rng, unused)
    o = pq.unpack(out)
    # [H, total] per token (CUDA flash), or [B, H, max_q] per sequence
    st = lse[:, pq.gather].permute(1, 0, 2) if lse.dim() == 2 else lse[:, :, : p.sq]
    st = st.masked_fill(~pq.valid.view(p.b, 1, p.sq), _INF)
    return o, _stats_out(st, p)


def flash_backward(
    p: SdpaProblem,
    c: OpCaps,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    do: Tensor,
    stats: Tensor,
    *,
    scale: float,
    bias: Tensor | None,
    dbias_shape: Sequence[int] | None,
    seq_len_q: Tensor | None,
    seq_len_kv: Tensor | None,
    dropout_p: float = 0.0,
    philox_rng: tuple[Tensor, Tensor] | None = None,
) -> tuple[Tensor, Tensor, Tensor, None]:
    del bias, dbias_shape
    causal, wl, wr, _ = masking(
        FusedOp.FLASH, c, p.sq, p.skv, p.bottom_right, p.left_bound, p.right_bound, p.padding
    )
    kx, vx, expanded = _kv_for(p, c, k, v)
    o = _same(o, q)
    do = _same(do, q)
    rng, unused = philox_rng or rng_state(FusedOp.FLASH, q.device)
    fn = aten_op("_flash_attention_backward")
    kw = {"scale": scale, **_window_kw(wl, wr)}
    if not p.padding:
        lse = _lse_dense(stats, p, 1)
        dq, dk, dv = fn(
            do.transpose(1, 2),
            q.transpose(1, 2),
            kx.transpose(1, 2),
            vx.transpose(1, 2),
            o.transpose(1, 2),
            lse,
            None,
            None,
            p.sq,
            p.skv,
            dropout_p,
            causal,
            rng,
            unused,
            **kw,
        )
        dq, dk, dv = dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2)
    else:
        pq = Pack.make(seq_len_q, p.b, p.sq, q.device)
        pk = Pack.make(seq_len_kv, p.b, p.skv, q.device)
        if c.varlen_lse == "batch":
            lse = _lse_dense(stats, p, 1)
        else:
            lse = stats.reshape(p.b, p.h, p.sq).float().permute(1, 0, 2)[:, pq.b_idx, pq.s_idx]
            lse = lse.contiguous()
        dqp, dkp, dvp = fn(
            pq.pack(do),
            pq.pack(q),
            pk.pack(kx),
            pk.pack(vx),
            pq.pack(o),
            lse,
            pq.cu,
            pk.cu,
            p.sq,
            p.skv,
            dropout_p,
            causal,
            rng,
            unused,
            **kw,
        )
        dq, dk, dv = pq.unpack(dqp), pk.unpack(dkp), pk.unpack(dvp)
    if expanded:
        dk, dv = reduce_heads(dk, p.hk), reduce_heads(dv, p.hv)
    return dq, dk, dv, None


# -------------------------------------------------------------------------------------- efficient


def _eff_bias(
    p: SdpaProblem, bias: Tensor | None, want_db: bool, dtype: torch.dtype, device: torch.device
) -> Tensor | None:
    if bias is None and not want_db:
        return None
    b4 = to4(bias) if bias is not None else torch.zeros(1, 1, 1, 1, dtype=dtype, device=device)
    return aligned(b4, p.skv, dtype).expand(p.b, p.h, p.sq, p.skv)


def _eff_mask(p: SdpaProblem, c: OpCaps) -> tuple[int, dict[str, Any]]:
    _, _, _, mt = masking(
        FusedOp.EFFICIENT, c, p.sq, p.skv, p.bottom_right, p.left_bound, p.right_bound, p.padding
    )
    if p.left_bound is not None:
        return mt, {"window_size": p.left_bound + c.window_offset}
    return mt, {}


def efficient_forward(
    p: SdpaProblem,
    c: OpCaps,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    scale: float,
    bias: Tensor | None,
    seq_len_q: Tensor | None,
    seq_len_kv: Tensor | None,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor]:
    mt, wkw = _eff_mask(p, c)
    kx, vx, _ = _kv_for(p, c, k, v)
    bt = _eff_bias(p, bias, False, q.dtype, q.device)
    fn = aten_op("_efficient_attention_forward")
    if not p.padding:
        out, lse, seed, off, _, _ = fn(
            q.transpose(1, 2),
            kx.transpose(1, 2),
            vx.transpose(1, 2),
            bt,
            None,
            None,
            p.sq,
            p.skv,
            dropout_p,
            mt,
            True,
            scale=scale,
            **wkw,
        )
        remember_rng(FusedOp.EFFICIENT, q.device, seed, off)
        return out.transpose(1, 2), _stats_out(lse, p)
    pq = Pack.make(seq_len_q, p.b, p.sq, q.device)
    pk = Pack.make(seq_len_kv, p.b, p.skv, q.device)
    out, lse, seed, off, _, _ = fn(
        pq.pack(q)[None],
        pk.pack(kx)[None],
        pk.pack(vx)[None],
        None,
        pq.cu,
        pk.cu,
        p.sq,
        p.skv,
        dropout_p,
        mt,
        True,
        scale=scale,
        **wkw,
    )
    remember_rng(FusedOp.EFFICIENT, q.device, seed, off)
    st = lse.reshape(p.b, p.h, -1)[:, :, : p.sq].masked_fill(~pq.valid.view(p.b, 1, p.sq), _INF)
    return pq.unpack(out[0]), _stats_out(st, p)


def efficient_backward(
    p: SdpaProblem,
    c: OpCaps,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    do: Tensor,
    stats: Tensor,
    *,
    scale: float,
    bias: Tensor | None,
    dbias_shape: Sequence[int] | None,
    seq_len_q: Tensor | None,
    seq_len_kv: Tensor | None,
    dropout_p: float = 0.0,
    philox_rng: tuple[Tensor, Tensor] | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    mt, wkw = _eff_mask(p, c)
    kx, vx, expanded = _kv_for(p, c, k, v)
    want_db = dbias_shape is not None
    bt = _eff_bias(p, bias, want_db, q.dtype, q.device)
    o = _same(o, q)
    do = _same(do, q)
    seed, off = philox_rng or rng_state(FusedOp.EFFICIENT, q.device)
    lse = _lse_dense(stats, p, c.lse_pad)
    fn = aten_op("_efficient_attention_backward")
    if not p.padding:
        # The kernel derives O's row stride as H·Dv (it reads only O's batch and head strides):
        # O must be BMHK-contiguous, which is what the op's own forward returns.
        dq, dk, dv, db = fn(
            do.transpose(1, 2),
            q.transpose(1, 2),
            kx.transpose(1, 2),
            vx.transpose(1, 2),
            bt,
            o.transpose(1, 2).contiguous(),
            None,
            None,
            p.sq,
            p.skv,
            lse,
            dropout_p,
            seed,
            off,
            mt,
            want_db,
            scale=scale,
            **wkw,
        )
        dq, dk, dv = dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2)
    else:
        pq = Pack.make(seq_len_q, p.b, p.sq, q.device)
        pk = Pack.make(seq_len_kv, p.b, p.skv, q.device)
        dq, dk, dv, db = fn(
            pq.pack(do)[None],
            pq.pack(q)[None],
            pk.pack(kx)[None],
            pk.pack(vx)[None],
            None,
            pq.pack(o)[None],
            pq.cu,
            pk.cu,
            p.sq,
            p.skv,
            lse,
            dropout_p,
            seed,
            off,
            mt,
            False,
            scale=scale,
            **wkw,
        )
        dq, dk, dv = pq.unpack(dq[0]), pk.unpack(dk[0]), pk.unpack(dv[0])
    if expanded:
        dk, dv = reduce_heads(dk, p.hk), reduce_heads(dv, p.hv)
    dbias = reduce_to(db, dbias_shape) if want_db and dbias_shape is not None else None
    return dq, dk, dv, dbias


# ------------------------------------------------------------------------------------------ cudnn


def _cudnn_bias(p: SdpaProblem, c: OpCaps, bias: Tensor | None, dtype: torch.dtype) -> Any:
    if bias is None:
        return None
    b4 = aligned(to4(bias), p.skv, dtype)
    b4 = b4.expand(p.b, b4.shape[1], p.sq, p.skv)
    return b4 if c.bias_broadcast else b4.contiguous()


def cudnn_forward(
    p: SdpaProblem,
    c: OpCaps,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    scale: float,
    bias: Tensor | None,
    seq_len_q: Tensor | None,
    seq_len_kv: Tensor | None,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor]:
    del seq_len_q, seq_len_kv
    causal, _, _, _ = masking(
        FusedOp.CUDNN, c, p.sq, p.skv, p.bottom_right, p.left_bound, p.right_bound, p.padding
    )
    kx, vx, _ = _kv_for(p, c, k, v)
    res = aten_op("_scaled_dot_product_cudnn_attention")(
        q, kx, vx, _cudnn_bias(p, c, bias, q.dtype), True, dropout_p, causal, False, scale=scale
    )
    remember_rng(FusedOp.CUDNN, q.device, res[6], res[7])
    return res[0], _stats_out(res[1], p)


def cudnn_backward(
    p: SdpaProblem,
    c: OpCaps,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    do: Tensor,
    stats: Tensor,
    *,
    scale: float,
    bias: Tensor | None,
    dbias_shape: Sequence[int] | None,
    seq_len_q: Tensor | None,
    seq_len_kv: Tensor | None,
    dropout_p: float = 0.0,
    philox_rng: tuple[Tensor, Tensor] | None = None,
) -> tuple[Tensor, Tensor, Tensor, None]:
    del dbias_shape, seq_len_q, seq_len_kv
    causal, _, _, _ = masking(
        FusedOp.CUDNN, c, p.sq, p.skv, p.bottom_right, p.left_bound, p.right_bound, p.padding
    )
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
        _same(do, q),
        q,
        kx,
        vx,
        _same(o, q),
        lse,
        seed,
        off,
        _cudnn_bias(p, c, bias, q.dtype),
        None,
        None,
        p.sq,
        p.skv,
        dropout_p,
        causal,
        scale=scale,
    )
    if expanded:
        dk, dv = reduce_heads(dk, p.hk), reduce_heads(dv, p.hv)
    return dq, dk, dv, None


FORWARD: dict[FusedOp, Callable[..., tuple[Tensor, Tensor]]] = {
    FusedOp.CUDNN: cudnn_forward,
    FusedOp.FLASH: flash_forward,
    FusedOp.EFFICIENT: efficient_forward,
}
BACKWARD: dict[FusedOp, Callable[..., tuple[Tensor, Tensor, Tensor, Tensor | None]]] = {
    FusedOp.CUDNN: cudnn_backward,
    FusedOp.FLASH: flash_backward,
    FusedOp.EFFICIENT: efficient_backward,
}
