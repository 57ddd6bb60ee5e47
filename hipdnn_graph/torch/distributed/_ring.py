"""Ring attention: the forward and backward passes over a :class:`~._group.Ring`, with autograd.

Forward: at step ``t`` rank ``r`` holds the K/V slice of rank ``(r − t) mod W``; it starts
sending that slice on while it runs an SdpaFwd graph on the block's visible part
(:func:`~._layout.block`), which returns the block's O and Stats (natural-log LSE). Blocks merge
through the LSE into float accumulators (float64 for float64 inputs)::

    lse = logaddexp(lse_a, lse_b);  O = O_a·exp(lse_a − lse) + O_b·exp(lse_b − lse)

Backward: the K/V slices travel the ring again; each step runs an SdpaBwd graph fed the
*global* O and Stats of the forward (the exact softmax of the whole row, so its dQ, dK, dV are
exact partial sums); dQ accumulates locally, and each slice's dK/dV accumulators travel with it
(one step behind, overlapped with the next block) and arrive at their owner after ``W`` hops.
The last hop has no block left to hide behind, so it carries the finished sums already rounded
to K's and V's dtype (the rounding the owner would do; half the bytes for 16-bit inputs).

Every graph is the torch op's cached graph (:func:`~hipdnn_graph.torch.sdpa_forward`,
:func:`~hipdnn_graph.torch.sdpa_backward`), so any engine that runs the op runs this.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from .._args import strides_like
from .._graphs import sdpa_backward, sdpa_forward
from ._group import Pending, Ring
from ._layout import Block, block

__all__ = ["RingAttention", "ring_backward", "ring_forward"]

Tensor = torch.Tensor

_KV_TAG = 0  # K, V
_GRAD_TAG = 2  # dK, dV accumulators


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _view(t: Tensor, start: int, length: int) -> Tensor:
    """Rows ``[start, start + length)`` of dim 2, as a view (for in-place accumulation)."""
    return t if start == 0 and length == t.shape[2] else t.narrow(2, start, length)


def _rows(t: Tensor, start: int, length: int) -> Tensor:
    """Rows ``[start, start + length)`` of dim 2 as a graph input: the tensor itself when whole,
    else a packed copy of the half block (cheap next to the block's attention, and every engine
    takes packed tensors)."""
    return t if start == 0 and length == t.shape[2] else t.narrow(2, start, length).contiguous()


def _blocks(ring: Ring, local_len: int, causal: bool, layout: str) -> list[Block | None]:
    """The visible block of each ring step (step ``t`` brings rank ``r − t``'s keys)."""
    r, w = ring.rank, ring.world
    return [block(layout, w, r, (r - t) % w, local_len, causal) for t in range(w)]


def _restrided(t: Tensor, strides: tuple[int, ...], dtype: torch.dtype | None = None) -> Tensor:
    """A copy of ``t`` with these strides (and dtype)."""
    out = torch.empty_strided(t.shape, strides, dtype=dtype or t.dtype, device=t.device)
    return out.copy_(t)


def _like(acc: Tensor, like: Tensor) -> Tensor:
    """The accumulator in ``like``'s dtype and dimension order (the op's convention: O like Q,
    dQ/dK/dV like Q/K/V, so ``[B, S, H, D]`` activations stay that way)."""
    return _restrided(acc, strides_like(like, acc.shape), like.dtype)


def _merge(o: Tensor, lse: Tensor, o_b: Tensor, lse_b: Tensor) -> None:
    """Fold a block's (O, LSE) into the accumulators ``o``, ``lse`` (views, in place)."""
    new = torch.logaddexp(lse, lse_b)
    o.mul_(torch.exp(lse - new)).add_(o_b * torch.exp(lse_b - new))
    lse.copy_(new)


def _kv_steps(ring: Ring, k: Tensor, v: Tensor) -> Iterator[tuple[int, tuple[Tensor, ...]]]:
    """Each ring step's K/V buffers, ``(step, (K, V))`` (step ``t`` holds rank ``r − t``'s);
    the next step's are already on their way while the caller works on these."""
    kv: tuple[Tensor, ...] = (k, v)
    for step in range(ring.world):
        pending = ring.exchange(kv, _KV_TAG) if step < ring.world - 1 else None
        yield step, kv
        if pending is not None:
            kv = pending.wait()


class _KvGrads:
    """The dK/dV accumulators of the K/V buffers travelling the ring: each pair starts at the
    buffers' owner, travels one step behind them and is back home after ``W`` hops."""

    def __init__(self, ring: Ring, dtype: torch.dtype) -> None:
        self._ring = ring
        self._dtype = dtype
        self._pending: Pending | None = None

    def take(self, kv: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """The accumulators of the buffers ``kv`` held now: zeros at their owner (the first
        step), else the ones that travelled with them."""
        if self._pending is None:
            return tuple(torch.zeros(t.shape, dtype=self._dtype, device=t.device) for t in kv)
        return self._pending.wait()

    def send(self, dk: Tensor, dv: Tensor) -> None:
        """Start passing this step's accumulators on to the next rank."""
        self._pending = self._ring.exchange((dk, dv), _GRAD_TAG)

    def home(self) -> tuple[Tensor, ...]:
        """The owner's own accumulators, back after the last hop."""
        assert self._pending is not None
        return self._pending.wait()


def ring_forward(
    q: Tensor, k: Tensor, v: Tensor, ring: Ring, causal: bool, scale: float, layout: str
) -> tuple[Tensor, Tensor]:
    """Exact attention of the local queries over every rank's K/V: ``(O, Stats)``.

    O is in q's dtype and dimension order, Stats (``[B, H, L, 1]``) is the global natural-log
    LSE, float32 (float64 for float64 inputs). ``k`` and ``v`` must be contiguous (they are
    sent as they are).
    """
    acc = _acc_dtype(q.dtype)
    o_acc: Tensor | None = None
    lse_acc: Tensor | None = None
    plan = _blocks(ring, q.shape[2], causal, layout)
    for (_, kv), blk in zip(_kv_steps(ring, k, v), plan, strict=True):
        if blk is not None:
            o_b, lse_b = sdpa_forward(
                _rows(q, blk.q_start, blk.q_len),
                _rows(kv[0], blk.kv_start, blk.kv_len),
                _rows(kv[1], blk.kv_start, blk.kv_len),
                scale=scale,
                is_causal=blk.causal,
            )
            if o_acc is None or lse_acc is None:  # step 0: the diagonal covers every row
                o_acc = o_b.to(acc, copy=True)
                lse_acc = lse_b.to(acc, copy=True)
            else:
                _merge(
                    _view(o_acc, blk.q_start, blk.q_len),
                    _view(lse_acc, blk.q_start, blk.q_len),
                    o_b,
                    lse_b,
                )
    assert o_acc is not None and lse_acc is not None
    return _like(o_acc, q), lse_acc


def ring_backward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    stats: Tensor,
    do: Tensor,
    ring: Ring,
    causal: bool,
    scale: float,
    layout: str,
) -> tuple[Tensor, Tensor, Tensor]:
    """dQ, dK, dV of the local slices (their dtypes and dimension orders), from the forward's
    global O and Stats."""
    acc = _acc_dtype(q.dtype)
    if 0 in do.stride():  # a broadcast gradient (``out.sum()``): packed once, not per block
        do = do.contiguous()
    dq = torch.zeros(q.shape, dtype=acc, device=q.device)
    grads = _KvGrads(ring, acc)
    plan = _blocks(ring, q.shape[2], causal, layout)
    for (step, kv), blk in zip(_kv_steps(ring, k, v), plan, strict=True):
        parts: tuple[Tensor, Tensor] | None = None
        if blk is not None:
            rows = (blk.q_start, blk.q_len)
            dq_b, dk_b, dv_b, _ = sdpa_backward(
                _rows(q, *rows),
                _rows(kv[0], blk.kv_start, blk.kv_len),
                _rows(kv[1], blk.kv_start, blk.kv_len),
                _rows(o, *rows),
                _rows(do, *rows),
                _rows(stats, *rows),
                scale=scale,
                is_causal=blk.causal,
            )
            _view(dq, *rows).add_(dq_b)
            parts = (dk_b, dv_b)
        dk_acc, dv_acc = grads.take(kv)
        if parts is not None and blk is not None:
            _view(dk_acc, blk.kv_start, blk.kv_len).add_(parts[0])
            _view(dv_acc, blk.kv_start, blk.kv_len).add_(parts[1])
        if step == ring.world - 1:  # the sums are complete: home in K's and V's dtype and order
            dk_acc, dv_acc = _like(dk_acc, k), _like(dv_acc, v)
        grads.send(dk_acc, dv_acc)
    dq_out = _like(dq, q)  # queued while the last hop is in flight
    dk, dv = grads.home()  # after W hops each slice's dK and dV are back at their owner
    return dq_out, dk, dv


class RingAttention(torch.autograd.Function):
    """Autograd for :func:`ring_forward` / :func:`ring_backward` (O is the one output)."""

    @staticmethod
    def forward(
        ctx: Any,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        ring: Ring,
        causal: bool,
        scale: float,
        layout: str,
    ) -> Tensor:
        ctx.kv_strides = (strides_like(k, k.shape), strides_like(v, v.shape))
        k, v = k.contiguous(), v.contiguous()  # sent around the ring as they are
        o, stats = ring_forward(q, k, v, ring, causal, scale, layout)
        ctx.save_for_backward(q, k, v, o, stats)
        ctx.options = (ring, causal, scale, layout)
        return o

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, do: Tensor) -> tuple[Any, ...]:
        q, k, v, o, stats = ctx.saved_tensors
        dq, dk, dv = ring_backward(q, k, v, o, stats, do, *ctx.options)
        dk, dv = (  # in the dimension order of the caller's K and V
            g if g.stride() == strides else _restrided(g, strides)
            for g, strides in zip((dk, dv), ctx.kv_strides, strict=True)
        )
        return dq, dk, dv, None, None, None, None
