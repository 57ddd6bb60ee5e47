"""Chunked SDPA forward and backward written with plain torch ops (TORCH_SDPA_MATH_ENGINE).

This is the torch twin of the NumPy reference math (HIPDNN_SPEC.md §6). It runs on any device
torch runs on (CPU, CUDA, ROCm), takes any float dtype, and accumulates in ``compute_dtype``
(float32 or float64). Inputs are never modified.

Work is split over blocks of query rows so that memory stays O(block × Skv); for every block
the key range that is fully masked (causal, sliding window, padding) is skipped, and the
matmuls are batched over (B, H) with GQA/MQA handled by grouping query heads onto their K or
V head (no K/V expansion).

Two matmul modes:

* exact (default): every matmul runs in ``compute_dtype``.
* ``matmul_dtype=torch.bfloat16`` / ``torch.float16``: the matmul operands are rounded to that
  dtype and multiplied with fp32 accumulation and an fp32 result (``aten::bmm.dtype``), exactly
  like FlashAttention rounds P and dS; the softmax, Δ and every elementwise step stay fp32.
  This uses tensor cores on the GPU. It applies only when ``compute_dtype`` is float32 (it is
  ignored for float64). Where ``bmm`` with ``out_dtype`` is missing (CPU builds, see
  :func:`lowp_matmul_supported`) the same rounded operands are multiplied in fp32 instead: the
  same numbers, without the speed.

Shapes: q ``[B,H,Sq,D]``, k ``[B,Hk,Skv,D]``, v ``[B,Hv,Skv,Dv]``, o/dO ``[B,H,Sq,Dv]``,
stats ``[B,H,Sq,1]`` (natural-log LSE). Results (Stats included) are returned in
``compute_dtype``, as the NumPy twin does. Padding lengths are clipped to ``[0, Sq]`` /
``[0, Skv]`` before the bottom-right offsets are formed (the twin's rule). A given Stats of
``−inf`` is read as ``+inf``.
"""

from __future__ import annotations

import math
from typing import Unpack

import torch

from ._math_plan import (
    _buf,
    _check_broadcast,
    _group,
    _key_range,
    _mask_block,
    _mm,
    _plan,
    _scores,
    _to4,
    alibi_slopes,
    lowp_matmul_supported,
)
from .call import PLAIN, SdpaCall, SdpaInputs

__all__ = [
    "alibi_slopes",
    "lowp_matmul_supported",
    "sdpa_backward",
    "sdpa_forward",
]

Tensor = torch.Tensor


def sdpa_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    call: SdpaCall = PLAIN,
    *,
    compute_dtype: torch.dtype = torch.float32,
    block_q: int | None = None,
    matmul_dtype: torch.dtype | None = None,
    **inputs: Unpack[SdpaInputs],
) -> tuple[Tensor, Tensor]:
    """SDPA forward: ``O = softmax(S)∘M·s · V`` and ``Stats = logsumexp(S)``.

    Args:
        q, k, v: ``[B,H,Sq,D]``, ``[B,Hk,Skv,D]``, ``[B,Hv,Skv,Dv]`` on one device.
        call: the scale, mask window, ALiBi and dropout (:class:`~.call.SdpaCall`); philox
            dropout (``dropout_p``) draws ``M`` block by block from
            :mod:`hipdnn_graph.philox`'s stream (seed and offset: ints, or one-element int
            tensors read on the device).
        compute_dtype: float32 or float64 accumulation.
        block_q: query rows per block (default: sized from a memory budget).
        matmul_dtype: fp16/bf16 to run the matmuls on tensor cores (see module docstring).
        **inputs: :class:`~.call.SdpaInputs`: ``bias`` (rank ≤ 4, broadcast right-aligned to
            ``[B,H,Sq,Skv]``), ``seq_len_q``/``seq_len_kv`` (int tensors with B elements;
            rows/columns past them invisible), ``dropout_mask`` (``M`` of shape
            ``[B|1,H|1,Sq,Skv]``, scaled by the dropout scale), and the values of the scalars
            ``call`` leaves open.

    Returns:
        ``(o [B,H,Sq,Dv], stats [B,H,Sq,1])``, both in compute_dtype (float32 by default).
        A row with no visible key gets O = 0 and Stats = +inf.

    Raises:
        ValueError: shapes that do not fit together.
    """
    p = _plan(q, k, v, call, compute_dtype, block_q, matmul_dtype, inputs)
    g = p.g
    dev = q.device
    o = torch.zeros(g.b, g.h, g.sq, g.dv, dtype=p.cdt, device=dev)
    stats = torch.full((g.b, g.h, g.sq, 1), math.inf, dtype=p.cdt, device=dev)
    kmat = k.to(p.mmdt)
    vmat = v.to(p.mmdt)
    for i0 in range(0, p.q_limit, p.block):
        i1 = min(i0 + p.block, p.q_limit)
        j0, j1 = _key_range(p, i0, i1)
        if j1 <= j0:
            continue
        n = i1 - i0
        s, scaled = _scores(p, q, kmat, i0, i1, j0, j1)
        m = s.amax(-1, keepdim=True)
        if not scaled:
            m.mul_(p.scale)
        m.masked_fill_(torch.isneginf(m), 0.0)
        if scaled:
            s.sub_(m)
        else:
            torch.add(-m, s, alpha=p.scale, out=s)
        s.exp_()
        den = s.sum(-1, keepdim=True)
        empty = den == 0
        lse = (m + torch.log(den)).masked_fill_(empty, math.inf)
        stats[:, :, i0:i1] = lse
        mb = _mask_block(p, i0, i1, j0, j1)
        inv = (1.0 / den).masked_fill_(empty, 0.0)
        if p.lowp:
            ps = torch.mul(s, mb, out=_buf(s, p.mmdt)) if mb is not None else s.to(p.mmdt)
        else:
            ps = s.mul_(mb) if mb is not None else s
        ob = _mm(_group(ps, g.hv), vmat[:, :, j0:j1], p.lowp).view(g.b, g.h, n, g.dv)
        o[:, :, i0:i1] = ob * inv
    return o, stats


def sdpa_backward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    do: Tensor,
    stats: Tensor,
    call: SdpaCall = PLAIN,
    *,
    compute_dtype: torch.dtype = torch.float32,
    block_q: int | None = None,
    matmul_dtype: torch.dtype | None = None,
    **inputs: Unpack[SdpaInputs],
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """SDPA backward from the GIVEN O and Stats (spec §6).

    ``P = exp(S − Stats)``, ``Δ = rowsum(dO∘O)``, ``dV = (P∘M·s)ᵀdO``, ``dP = (dO·Vᵀ)∘M·s``,
    ``dS = P∘(dP − Δ)``, ``dQ = scale·dS·K``, ``dK = scale·dSᵀ·Q``, dBias = dS summed to
    ``call.dbias_shape`` (default ``bias.shape``). Arguments as in :func:`sdpa_forward`.

    Returns:
        ``(dq, dk, dv, dbias)`` in compute_dtype; dbias is None unless a bias or
        ``call.dbias_shape`` is given. Rows with no visible key (and padded rows/columns) get
        exactly zero gradients.

    Raises:
        ValueError: shapes that do not fit together.
    """
    p = _plan(q, k, v, call, compute_dtype, block_q, matmul_dtype, inputs)
    g = p.g
    dev = q.device
    if tuple(o.shape) != (g.b, g.h, g.sq, g.dv) or tuple(do.shape) != (g.b, g.h, g.sq, g.dv):
        raise ValueError(
            f"sdpa math: o {tuple(o.shape)} and dO {tuple(do.shape)} must be "
            f"{(g.b, g.h, g.sq, g.dv)}"
        )
    if stats.numel() != g.b * g.h * g.sq:
        raise ValueError(f"sdpa math: stats {tuple(stats.shape)} must be {(g.b, g.h, g.sq, 1)}")
    st = stats.reshape(g.b, g.h, g.sq, 1).to(p.cdt)
    st = st.masked_fill(torch.isneginf(st), math.inf)
    full = (g.b, g.h, g.sq, g.skv)
    t4: tuple[int, int, int, int] | None = None
    dbias_out: tuple[int, ...] = ()  # dBias's own shape, t4 padded with leading ones
    bias = inputs.get("bias")
    if call.dbias_shape is not None:
        dbias_out = tuple(int(x) for x in call.dbias_shape)
        t4 = _to4(dbias_out, "dbias")
        _check_broadcast(t4, full, "dbias")
    elif bias is not None:
        dbias_out = tuple(bias.shape)
        t4 = _to4(dbias_out, "bias")
    dq = torch.zeros(g.b, g.h, g.sq, g.d, dtype=p.cdt, device=dev)
    dk = torch.zeros(g.b, g.hk, g.skv, g.d, dtype=p.cdt, device=dev)
    dv = torch.zeros(g.b, g.hv, g.skv, g.dv, dtype=p.cdt, device=dev)
    db4 = None if t4 is None else torch.zeros(t4, dtype=p.cdt, device=dev)
    kmat = k.to(p.mmdt)
    vmat = v.to(p.mmdt)
    for i0 in range(0, p.q_limit, p.block):
        i1 = min(i0 + p.block, p.q_limit)
        j0, j1 = _key_range(p, i0, i1)
        if j1 <= j0:
            continue
        n, kv = i1 - i0, j1 - j0
        s, _ = _scores(p, q, kmat, i0, i1, j0, j1, sub=st[:, :, i0:i1])
        s.exp_()  # P
        do_b = do[:, :, i0:i1]
        do_mm = do_b.to(p.mmdt)
        dp = _mm(_group(do_mm, g.hv), vmat[:, :, j0:j1].transpose(-1, -2), p.lowp)
        dp = dp.view(g.b, g.h, n, kv)
        mb = _mask_block(p, i0, i1, j0, j1)
        if mb is not None:
            dp.mul_(mb)
        if p.lowp:
            pd = torch.mul(s, mb, out=_buf(s, p.mmdt)) if mb is not None else s.to(p.mmdt)
        else:
            pd = s * mb if mb is not None else s
        dv[:, :, j0:j1] += _mm(_group(pd, g.hv).transpose(-1, -2), _group(do_mm, g.hv), p.lowp)
        del pd
        delta = (do_b.to(p.cdt) * o[:, :, i0:i1].to(p.cdt)).sum(-1, keepdim=True)
        dp.sub_(delta)
        # with lowp and no dBias, dS is rounded straight to the matmul dtype in the same pass
        ds = torch.mul(dp, s, out=_buf(s, p.mmdt)) if p.lowp and db4 is None else dp.mul_(s)
        del s
        if db4 is not None:
            r = ds
            for dim in range(4):
                if db4.shape[dim] == 1 and r.shape[dim] != 1:
                    r = r.sum(dim, keepdim=True)
            tgt = db4
            if db4.shape[2] != 1:
                tgt = tgt[:, :, i0:i1]
            if db4.shape[3] != 1:
                tgt = tgt[:, :, :, j0:j1]
            tgt += r
            if p.lowp:
                ds = ds.to(p.mmdt)
        dsg = _group(ds, g.hk)
        dqb = _mm(dsg, kmat[:, :, j0:j1], p.lowp).view(g.b, g.h, n, g.d)
        dq[:, :, i0:i1] = dqb * p.scale
        qg = _group(q[:, :, i0:i1].to(p.mmdt), g.hk)
        dk[:, :, j0:j1] += _mm(dsg.transpose(-1, -2), qg, p.lowp) * p.scale
    dbias = None if db4 is None else db4.reshape(dbias_out)
    return dq, dk, dv, dbias
