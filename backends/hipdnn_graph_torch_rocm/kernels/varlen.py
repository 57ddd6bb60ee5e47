"""Variable-length (packed, THD) SDPA in torch: every packed sequence through the math kernel
(any device, the definition's torch twin), and torch's fused variable-length FlashAttention
kernels (cumulative sequence lengths) on the GPU.

Layout, as the NumPy reference's :mod:`hipdnn_graph_numpy_reference.sdpa_packed`: Q, O, dO, dQ
``[Tq, H, D]``, K/dK ``[Tkv, Hk, D]``, V/dV ``[Tkv, Hv, Dv]``, Stats ``[Tq, H, 1]``;
``cu_q``/``cu_kv`` hold the ``B + 1`` token bounds (cumulative sequence lengths, int32 for the
fused kernels). The math engine runs packed graphs through :func:`varlen_math_forward` and
:func:`varlen_math_backward` (:mod:`.._packed_plan`); the flash and efficient engines through
the fused kernels below (:mod:`.._packed_fused`; see docs/sdpa-forward.md, "Packed batches").

The fused paths are one kernel launch for the whole packed batch:
:func:`flash_varlen_forward` / :func:`flash_varlen_backward` are
``aten::_flash_attention_forward`` / ``_backward`` with ``cum_seq_q``/``cum_seq_k`` (fp16/bf16;
on CUDA FlashAttention aligns its causal mask to each sequence's bottom-right corner), and
:func:`efficient_varlen_forward` / :func:`efficient_varlen_backward` are
``aten::_efficient_attention_forward`` / ``_backward`` with ``cu_seqlens_q/k`` over ``[1, T, H,
D]`` views (fp16/bf16/float32; ``custom_mask_type`` 0 none, 1 causal top-left, 2 causal
bottom-right, per sequence). Both need a CUDA or ROCm device; their log-sum-exp layouts are
described in :mod:`.varlen_lse`. Dropout is never drawn here (probability 0: the RNG state
arguments are not read).

Example:
    >>> import torch
    >>> from hipdnn_graph_torch_rocm.kernels.call import SdpaCall
    >>> cu = cu_seqlens([2, 3])
    >>> q = k = v = torch.ones(5, 2, 4)
    >>> o, stats = varlen_math_forward(q, k, v, cu, cu, SdpaCall(scale=0.5, right_bound=0))
    >>> o.shape, stats.shape, cu.tolist()
    (torch.Size([5, 2, 4]), torch.Size([5, 2, 1]), [0, 2, 5])
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import torch

from ._fused_common import rng_state
from ._fused_rules import FusedOp
from .call import SdpaCall
from .math import sdpa_backward, sdpa_forward
from .varlen_lse import TokenIndex, from_kernel_lse

__all__ = [
    "cu_seqlens",
    "efficient_varlen_backward",
    "efficient_varlen_forward",
    "flash_varlen_backward",
    "flash_varlen_forward",
    "lse_as_thd",
    "varlen_math_backward",
    "varlen_math_forward",
]

Tensor = torch.Tensor


def cu_seqlens(lengths: Sequence[int], device: Any = None) -> Tensor:
    """The ``B + 1`` int32 cumulative sequence lengths of ``lengths`` (token bounds)."""
    bounds = [0]
    for n in lengths:
        bounds.append(bounds[-1] + int(n))
    return torch.tensor(bounds, dtype=torch.int32, device=device)


def _bounds(cu: Tensor) -> list[int]:
    bounds = [int(x) for x in cu.reshape(-1).tolist()]
    if not bounds or bounds[0] < 0 or any(b < a for a, b in pairwise(bounds)):
        raise ValueError(f"cumulative sequence lengths must be >= 0 and non-decreasing: {bounds}")
    return bounds


def _dense(x: Tensor, lo: int, hi: int) -> Tensor:
    return x[lo:hi].transpose(0, 1).unsqueeze(0)


def _thd(x: Tensor) -> Tensor:
    return x[0].transpose(0, 1)


def _pairs(cu_q: Tensor, cu_kv: Tensor) -> list[tuple[int, int, int, int]]:
    bq, bkv = _bounds(cu_q), _bounds(cu_kv)
    if len(bq) != len(bkv):
        raise ValueError(f"Q packs {len(bq) - 1} sequences and K/V {len(bkv) - 1}")
    return [(bq[i], bq[i + 1], bkv[i], bkv[i + 1]) for i in range(len(bq) - 1)]


def varlen_math_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_q: Tensor,
    cu_kv: Tensor,
    call: SdpaCall,
    *,
    compute_dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """The math kernel on each packed sequence: ``(o [Tq, H, Dv], stats [Tq, H, 1])`` in
    ``compute_dtype``; a sequence with no key, and tokens past the last sequence, get ``O = 0``
    and ``Stats = +inf``. ``call`` holds the scale and mask window (no bias, no dropout)."""
    o = q.new_zeros((q.shape[0], q.shape[1], v.shape[2]), dtype=compute_dtype)
    stats = q.new_full((q.shape[0], q.shape[1], 1), float("inf"), dtype=compute_dtype)
    for q_lo, q_hi, kv_lo, kv_hi in _pairs(cu_q, cu_kv):
        if q_hi == q_lo or kv_hi == kv_lo:
            continue
        ob, sb = sdpa_forward(
            _dense(q, q_lo, q_hi), _dense(k, kv_lo, kv_hi), _dense(v, kv_lo, kv_hi), call,
            compute_dtype=compute_dtype,
        )  # fmt: skip
        o[q_lo:q_hi] = _thd(ob)
        stats[q_lo:q_hi] = _thd(sb)
    return o, stats


def varlen_math_backward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    do: Tensor,
    stats: Tensor,
    cu_q: Tensor,
    cu_kv: Tensor,
    call: SdpaCall,
    *,
    compute_dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor, Tensor]:
    """The math backward of each packed sequence from the given O and Stats:
    ``(dq, dk, dv)`` in ``compute_dtype``, zero where no sequence attends."""
    dq, dk, dv = (x.new_zeros(x.shape, dtype=compute_dtype) for x in (q, k, v))
    for q_lo, q_hi, kv_lo, kv_hi in _pairs(cu_q, cu_kv):
        if q_hi == q_lo or kv_hi == kv_lo:
            continue
        gq, gk, gv, _ = sdpa_backward(
            _dense(q, q_lo, q_hi), _dense(k, kv_lo, kv_hi), _dense(v, kv_lo, kv_hi),
            _dense(o, q_lo, q_hi), _dense(do, q_lo, q_hi), _dense(stats, q_lo, q_hi), call,
            compute_dtype=compute_dtype,
        )  # fmt: skip
        dq[q_lo:q_hi], dk[kv_lo:kv_hi], dv[kv_lo:kv_hi] = _thd(gq), _thd(gk), _thd(gv)
    return dq, dk, dv


def flash_varlen_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_q: Tensor,
    cu_kv: Tensor,
    max_q: int,
    max_kv: int,
    *,
    scale: float,
    causal: bool,
) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor]]:
    """FlashAttention's variable-length forward: ``(o, lse, rng)``, ``o`` in Q's dtype and
    layout, ``lse`` as the kernel returns it (turn it into ``[Tq, H, 1]`` with
    :func:`lse_as_thd`), ``rng`` what :func:`flash_varlen_backward` needs. ``causal`` is aligned
    bottom-right. GPU only."""
    out = torch.ops.aten._flash_attention_forward(
        q, k, v, cu_q, cu_kv, max_q, max_kv, 0.0, causal, False, scale=scale
    )
    return out[0], out[1], (out[2], out[3])


def flash_varlen_backward(
    do: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    lse: Tensor,
    rng: tuple[Tensor, Tensor],
    cu_q: Tensor,
    cu_kv: Tensor,
    max_q: int,
    max_kv: int,
    *,
    scale: float,
    causal: bool,
) -> tuple[Tensor, Tensor, Tensor]:
    """FlashAttention's variable-length backward from its own forward's ``o``, ``lse`` and
    ``rng``: ``(dq, dk, dv)`` (dK, dV summed over the query heads of a GQA group). GPU only."""
    dq, dk, dv = torch.ops.aten._flash_attention_backward(
        do, q, k, v, o, lse, cu_q, cu_kv, max_q, max_kv, 0.0, causal, rng[0], rng[1],
        scale=scale,
    )  # fmt: skip
    return dq, dk, dv


def efficient_varlen_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_q: Tensor,
    cu_kv: Tensor,
    max_q: int,
    max_kv: int,
    *,
    scale: float,
    mask_type: int,
) -> tuple[Tensor, Tensor]:
    """The memory-efficient kernel's variable-length forward over ``[T, H, D]`` tokens:
    ``(o [Tq, H, Dv], lse [B, H, W])`` (``lse`` padded as the kernel pads it). K and V must
    have Q's heads (expand a GQA group first). GPU only."""
    out = torch.ops.aten._efficient_attention_forward(
        q[None], k[None], v[None], None, cu_q, cu_kv, max_q, max_kv, 0.0, mask_type, True,
        scale=scale,
    )  # fmt: skip
    return out[0][0], out[1]


def efficient_varlen_backward(
    do: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    lse: Tensor,
    cu_q: Tensor,
    cu_kv: Tensor,
    max_q: int,
    max_kv: int,
    *,
    scale: float,
    mask_type: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """The memory-efficient kernel's variable-length backward from the given ``o`` and ``lse``
    (its own ``[B, H, W]`` layout): ``(dq, dk, dv)`` over ``[T, H, D]`` tokens. The kernel
    derives O's token stride from its heads and width, so O is made contiguous. GPU only."""
    seed, offset = rng_state(FusedOp.EFFICIENT, q.device)  # dropout 0: neither is read
    dq, dk, dv, _ = torch.ops.aten._efficient_attention_backward(
        do[None], q[None], k[None], v[None], None, o[None].contiguous(), cu_q, cu_kv, max_q,
        max_kv, lse, 0.0, seed, offset, mask_type, False, scale=scale,
    )  # fmt: skip
    return dq[0], dk[0], dv[0]


def lse_as_thd(lse: Tensor, cu_q: Tensor) -> Tensor:
    """A variable-length kernel's log-sum-exp as ``[Tq, H, 1]`` float32: the per-token
    ``[H, Tq]`` form or the per-sequence ``[B, H, W]`` form (:mod:`.varlen_lse`).

    Example:
        >>> import torch
        >>> lse_as_thd(torch.arange(6.0).reshape(2, 3), cu_seqlens([1, 2]))[:, :, 0].tolist()
        [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    """
    idx = TokenIndex.of(torch.diff(cu_q.reshape(-1)).tolist(), device=lse.device)
    return from_kernel_lse(lse, "tokens" if lse.dim() == 2 else "batch", idx)[..., None]
