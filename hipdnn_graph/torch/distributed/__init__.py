"""Context parallelism: attention over a sequence sharded across the ranks of a process group.

Long sequences outgrow one GPU; each rank holds a slice of the sequence, K/V slices travel
around a ring of ranks (torch.distributed: NCCL on GPUs, gloo on CPUs), and the partial
results merge through their log-sum-exp. Every block is the torch op's SdpaFwd or SdpaBwd
graph, so any engine that runs the op runs this, the CPU ones included.

Packed batches (sequences concatenated along one token axis, ``[T, H, D]`` with
``cu_seqlens``) shard by whole sequences or by a zigzag of every sequence:
:func:`context_parallel_packed_attention`, :func:`shard_packed`, :func:`gather_packed`.

Example:
    >>> import torch
    >>> from hipdnn_graph.torch.distributed import (
    ...     context_parallel_attention, gather_sequence, shard_sequence)
    >>> x = torch.randn(1, 2, 16, 8)  # without torch.distributed: a group of one
    >>> q = shard_sequence(x)
    >>> out = gather_sequence(context_parallel_attention(q, q, q, is_causal=True))
    >>> out.shape
    torch.Size([1, 2, 16, 8])
"""

from __future__ import annotations

from ._attention import context_parallel_attention
from ._packed_attention import context_parallel_packed_attention
from ._packed_layout import PackedShard, balance_sequences
from ._packed_sequence import gather_packed, packed_shard, shard_packed
from ._sequence import gather_sequence, shard_sequence

__all__ = [
    "PackedShard",
    "balance_sequences",
    "context_parallel_attention",
    "context_parallel_packed_attention",
    "gather_packed",
    "gather_sequence",
    "packed_shard",
    "shard_packed",
    "shard_sequence",
]
