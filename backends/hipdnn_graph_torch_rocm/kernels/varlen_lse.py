"""Where each packed query token's log-sum-exp lies, in the graph's Stats and in the layouts
torch's variable-length kernels read and write, and the conversions between them: index
arithmetic on the device, one gather or scatter per tensor, no loop over sequences.

The graph's Stats is the natural-log log-sum-exp of each query row's scaled scores (+inf for a
row that sees no key), float32, as the NumPy reference defines it; a packed graph holds it
either dense ``[B, H, S_max, 1]`` (sequence ``b`` in rows ``[b, :, :len_b]``, +inf past them)
or packed like Q (``[Tq, H, 1]`` tokens). The kernels keep the same numbers in one of two
layouts (torch 2.11 sources: ``flash_api.cpp``'s ``mha_varlen_fwd``/``_bwd`` and ROCm's
``mha_all_aot.hip``; ``attention.cu``'s ``_efficient_attention_forward``):

* ``"tokens"``: ``[H, Tq]``, token ``t`` of every sequence at column ``t`` (CUDA FlashAttention);
* ``"batch"``: ``[B, H, W]``, token ``i`` of sequence ``b`` at ``[b, :, i]``, ``W`` the kernel's
  ``max_seqlen_q`` rounded up to its padding (1 for ROCm's flash; 32 for the memory-efficient
  kernel on CUDA: the probe measures it), +inf elsewhere.

Example:
    >>> import torch
    >>> idx = TokenIndex.of([2, 0, 1], device="cpu")
    >>> idx.batch.tolist(), idx.position.tolist()
    ([0, 0, 2], [0, 1, 0])
    >>> thd = torch.tensor([[1.0], [2.0], [3.0]])  # [Tq, H]
    >>> to_kernel_lse(thd, "batch", idx, width=2)[:, 0].tolist()
    [[1.0, 2.0], [inf, inf], [3.0, inf]]
    >>> from_kernel_lse(to_kernel_lse(thd, "tokens", idx, width=2), "tokens", idx).tolist()
    [[1.0], [2.0], [3.0]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "LSE_LAYOUTS",
    "TokenIndex",
    "dense_stats_read",
    "dense_stats_write",
    "from_kernel_lse",
    "to_kernel_lse",
]

Tensor = torch.Tensor
#: the layouts a variable-length kernel keeps its log-sum-exp in
LSE_LAYOUTS = ("tokens", "batch")


@dataclass(frozen=True)
class TokenIndex:
    """Each packed query token's sequence (``batch``) and position in it (``position``), as
    int64 device tensors of ``Tq`` entries, from the host lengths of one call."""

    lengths: tuple[int, ...]
    batch: Tensor
    position: Tensor

    @classmethod
    def of(cls, lengths: Sequence[int], device: Any) -> TokenIndex:
        counts = torch.tensor([int(n) for n in lengths], dtype=torch.int64, device=device)
        total = int(sum(int(n) for n in lengths))
        seq = torch.repeat_interleave(
            torch.arange(len(lengths), device=device), counts, output_size=total
        )
        starts = torch.cumsum(counts, 0) - counts
        position = torch.arange(total, device=device) - starts[seq]
        return cls(tuple(int(n) for n in lengths), seq, position)

    @property
    def max_length(self) -> int:
        return max(self.lengths, default=0)


def _check_layout(layout: str) -> None:
    if layout not in LSE_LAYOUTS:
        raise ValueError(f"unknown LSE layout {layout!r}; one of {', '.join(LSE_LAYOUTS)}")


def to_kernel_lse(stats: Tensor, layout: str, idx: TokenIndex, *, width: int) -> Tensor:
    """The graph's per-token Stats ``[Tq, H]`` as a kernel reads it: contiguous float32
    ``[H, Tq]`` (``"tokens"``) or ``[B, H, width]`` (``"batch"``, +inf where no token is)."""
    _check_layout(layout)
    s = stats.float()
    if layout == "tokens":
        return s.transpose(0, 1).contiguous()
    if width < idx.max_length:
        raise ValueError(f"LSE width {width} is below the longest sequence ({idx.max_length})")
    out = s.new_full((len(idx.lengths), s.shape[1], width), math.inf)
    out[idx.batch, :, idx.position] = s
    return out


def from_kernel_lse(lse: Tensor, layout: str, idx: TokenIndex) -> Tensor:
    """A kernel's log-sum-exp as the graph's per-token Stats: float32 ``[Tq, H]``."""
    _check_layout(layout)
    if layout == "tokens":
        return lse.float().transpose(0, 1)
    return lse[idx.batch, :, idx.position].float()


def dense_stats_read(buffer: Tensor, idx: TokenIndex) -> Tensor:
    """The per-token Stats ``[Tq, H]`` of a dense ``[B, H, S, 1]`` Stats buffer."""
    return buffer[idx.batch, :, idx.position, 0]


def dense_stats_write(buffer: Tensor, stats: Tensor, idx: TokenIndex) -> None:
    """Write per-token Stats ``[Tq, H]`` into a dense ``[B, H, S, 1]`` buffer, cast to its
    type; every row no token holds (past each sequence) gets +inf, as the definition's."""
    buffer.fill_(math.inf)
    buffer[idx.batch, :, idx.position, 0] = stats.to(buffer.dtype)
