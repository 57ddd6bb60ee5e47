"""Ring attention over a packed batch in the zigzag layout: forward, backward, autograd.

Every rank holds chunks ``r`` and ``2W−1−r`` of every sequence (:mod:`._packed_layout`), so
every rank holds the same number of tokens of each sequence, and a rank's packed K/V buffer
(``[T_local, Hk, D]``) has the same shape and sequence boundaries on every rank. The buffers
travel the ring as the dense slices do (:mod:`._ring`); at each step every sequence's block is
the dense zigzag block of that sequence (:func:`~._layout.block` with the sequence's local
length), one SdpaFwd/SdpaBwd graph of the torch op per sequence and step (its ``[1, H, n, D]``
views of the packed buffers), or none. Blocks merge through their LSE exactly as the dense
ring's; the backward runs the graphs on the merged O and Stats, dQ accumulates locally, and
the dK/dV accumulators of each buffer travel with it back to its owner.

Sequences never see each other: a block pairs the queries and keys of one sequence.
"""

from __future__ import annotations

from typing import Any

import torch

from .._graphs import sdpa_backward, sdpa_forward
from ._group import Ring
from ._layout import Block, block
from ._ring import _acc_dtype, _kv_steps, _KvGrads, _merge

__all__ = ["PackedRingAttention", "packed_ring_backward", "packed_ring_forward"]

Tensor = torch.Tensor
#: each sequence's local tokens: (start, length) in the rank's packed buffer
Spans = tuple[tuple[int, int], ...]


def _bhsd(t: Tensor, start: int, length: int) -> Tensor:
    """Tokens ``[start, start + length)`` of a ``[T, H, D]`` buffer as a ``[1, H, n, D]`` view
    (``[B, S, H, D]`` memory, which the op takes as it is)."""
    return t.narrow(0, start, length).unsqueeze(0).transpose(1, 2)


def _thd(t: Tensor) -> Tensor:
    """A ``[1, H, n, D]`` result as ``[n, H, D]``."""
    return t[0].transpose(0, 1)


def _plan(ring: Ring, spans: Spans, causal: bool) -> list[list[tuple[int, int, Block]]]:
    """Per ring step, each sequence's visible block: ``(start, length, block)``."""
    r, w = ring.rank, ring.world
    steps = []
    for t in range(w):
        blocks = ((a, n, block("zigzag", w, r, (r - t) % w, n, causal)) for a, n in spans if n)
        steps.append([(a, n, b) for a, n, b in blocks if b is not None])
    return steps


def packed_ring_forward(
    q: Tensor, k: Tensor, v: Tensor, spans: Spans, ring: Ring, causal: bool, scale: float
) -> tuple[Tensor, Tensor]:
    """Exact attention of the local queries of every sequence over its keys on every rank:
    ``(O, LSE)``, O ``[T, H, Dv]`` in q's dtype, LSE ``[T, H, 1]`` (float32; float64 for
    float64 inputs). ``k`` and ``v`` must be contiguous (they are sent as they are)."""
    acc = _acc_dtype(q.dtype)
    tokens, heads = q.shape[0], q.shape[1]
    o_acc = torch.zeros((tokens, heads, v.shape[2]), dtype=acc, device=q.device)
    lse_acc = torch.full((tokens, heads, 1), -torch.inf, dtype=acc, device=q.device)
    for (step, kv), blocks in zip(_kv_steps(ring, k, v), _plan(ring, spans, causal), strict=True):
        for a, _, blk in blocks:
            o_b, lse_b = sdpa_forward(
                _bhsd(q, a + blk.q_start, blk.q_len),
                _bhsd(kv[0], a + blk.kv_start, blk.kv_len),
                _bhsd(kv[1], a + blk.kv_start, blk.kv_len),
                scale=scale,
                is_causal=blk.causal,
            )
            o_view = o_acc.narrow(0, a + blk.q_start, blk.q_len)
            lse_view = lse_acc.narrow(0, a + blk.q_start, blk.q_len)
            if step == 0:  # the diagonal covers every row of the sequence
                o_view.copy_(_thd(o_b))
                lse_view.copy_(_thd(lse_b))
            else:
                _merge(o_view, lse_view, _thd(o_b), _thd(lse_b))
    return o_acc.to(q.dtype), lse_acc


def packed_ring_backward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    lse: Tensor,
    do: Tensor,
    spans: Spans,
    ring: Ring,
    causal: bool,
    scale: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """dQ, dK, dV of the local buffers (contiguous, in their dtypes), from the forward's
    merged O and LSE."""
    acc = _acc_dtype(q.dtype)
    do = do.contiguous()
    dq = torch.zeros(q.shape, dtype=acc, device=q.device)
    grads = _KvGrads(ring, acc)
    for (step, kv), blocks in zip(_kv_steps(ring, k, v), _plan(ring, spans, causal), strict=True):
        parts = []
        for a, _, blk in blocks:
            rows = (a + blk.q_start, blk.q_len)
            keys = (a + blk.kv_start, blk.kv_len)
            dq_b, dk_b, dv_b, _ = sdpa_backward(
                _bhsd(q, *rows),
                _bhsd(kv[0], *keys),
                _bhsd(kv[1], *keys),
                _bhsd(o, *rows),
                _bhsd(do, *rows),
                _bhsd(lse, *rows).contiguous(),
                scale=scale,
                is_causal=blk.causal,
            )
            dq.narrow(0, *rows).add_(_thd(dq_b))
            parts.append((keys, dk_b, dv_b))
        dk_acc, dv_acc = grads.take(kv)
        for keys, dk_b, dv_b in parts:
            dk_acc.narrow(0, *keys).add_(_thd(dk_b))
            dv_acc.narrow(0, *keys).add_(_thd(dv_b))
        if step == ring.world - 1:  # the sums are complete: home in K's and V's dtype
            dk_acc, dv_acc = dk_acc.to(k.dtype), dv_acc.to(v.dtype)
        grads.send(dk_acc, dv_acc)
    dq_out = dq.to(q.dtype)  # queued while the last hop is in flight
    dk, dv = grads.home()  # after W hops each buffer's dK and dV are back at their owner
    return dq_out, dk, dv


class PackedRingAttention(torch.autograd.Function):
    """Autograd for :func:`packed_ring_forward` / :func:`packed_ring_backward`."""

    @staticmethod
    def forward(
        ctx: Any,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        spans: Spans,
        ring: Ring,
        causal: bool,
        scale: float,
    ) -> Tensor:
        k, v = k.contiguous(), v.contiguous()  # sent around the ring as they are
        o, lse = packed_ring_forward(q, k, v, spans, ring, causal, scale)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.options = (spans, ring, causal, scale)
        return o

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, do: Tensor) -> tuple[Any, ...]:
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = packed_ring_backward(q, k, v, o, lse, do, *ctx.options)
        return dq, dk, dv, None, None, None, None
