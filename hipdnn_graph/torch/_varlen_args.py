"""Arguments of :func:`hipdnn_graph.torch.varlen_attention`: the packed ``[T, H, D]`` tensors,
the cumulative sequence lengths and the graph-changing keywords, checked once per call.

Each problem raises ``HipdnnError(INVALID_VALUE)`` naming the argument. The offsets' values are
read on the host (one copy of each from a GPU; the engine reads them there too) and must be
what FlashAttention's variable-length kernels take: ``B + 1`` cumulative token counts starting
at 0, never decreasing, ending at the tensor's token count, with no sequence longer than its
side's ``max_seqlen``.

Example:
    >>> import torch
    >>> q = torch.zeros(7, 4, 8)
    >>> cu = torch.tensor([0, 3, 7], dtype=torch.int32)
    >>> call = normalise_varlen(q, q[:, :2], q[:, :2], cu, cu, 4, 4, True, None, None, True, None)
    >>> call.batch, call.seq_max, call.options.causal
    (2, (4, 4), True)
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any, NamedTuple

import torch

from ._args import IO_TYPES, check_tensor, checked_options, fail
from ._cached import Options

__all__ = [
    "VarlenCall",
    "check_cumulative",
    "check_token_tensors",
    "graph_seq_max",
    "normalise_varlen",
]

Tensor = torch.Tensor

_OFFSET_TYPES = (torch.int32, torch.int64)


class VarlenCall(NamedTuple):
    """One packed call, checked: dense ``[T, H, D]`` tensors, the offsets, the graph facts."""

    query: Tensor
    key: Tensor
    value: Tensor
    cu_seqlens_q: Tensor
    cu_seqlens_k: Tensor
    #: the number of sequences B
    batch: int
    #: (query side, key side) S_max the graph declares (:func:`graph_seq_max` of max_seqlen,
    #: or of the side's token count where that is smaller)
    seq_max: tuple[int, int]
    options: Options


def graph_seq_max(max_seqlen: int) -> int:
    """The ``S_max`` a packed graph declares for a side whose sequences are at most
    ``max_seqlen`` long: the next power of two, so that batches whose longest sequence differs
    a little share one cached graph (``S_max`` bounds the sequences; it sizes nothing but
    Stats, ``[B, H, S_max, 1]``).

    Example:
        >>> [graph_seq_max(n) for n in (1, 5, 64, 65)]
        [1, 8, 64, 128]
    """
    return 1 << (max_seqlen - 1).bit_length()


def check_token_tensors(q: Any, k: Any, v: Any) -> None:
    """Refuse a query, key or value that is not a rank-3 tensor of packed tokens ``[T, H, D]``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the first bad one.

    Example:
        >>> t = torch.ones(5, 2, 8)
        >>> check_token_tensors(t, t, t)
    """
    for name, t in (("query", q), ("key", k), ("value", v)):
        if not isinstance(t, torch.Tensor):
            raise fail(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 3:
            raise fail(f"{name} must be rank-3 [T, H, D] (packed tokens), got {list(t.shape)}")


def normalise_varlen(
    q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any, max_seqlen_q: Any,
    max_seqlen_k: Any, is_causal: Any, scale: Any, diagonal_alignment: Any, enable_gqa: Any,
    engine: Any,
) -> VarlenCall:  # fmt: skip
    """Every argument of one packed call checked, and the tensors made dense ``[T, H, D]``
    (``.contiguous()``: a no-op for the common layouts, differentiable otherwise).

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the first bad argument.
    """
    check_token_tensors(q, k, v)
    if q.dtype not in IO_TYPES:
        raise fail(f"query dtype {q.dtype} is not supported (float16, bfloat16, float32, float64)")
    for name, t in (("key", k), ("value", v)):
        check_tensor(name, t, q)
        if t.dtype != q.dtype:
            raise fail(f"{name} dtype {t.dtype} differs from query dtype {q.dtype}")
    if k.shape[0] != v.shape[0]:
        raise fail(f"key and value hold different token counts ({k.shape[0]}, {v.shape[0]})")
    if k.shape[2] != q.shape[2]:
        raise fail(f"key head dim ({k.shape[2]}) differs from query head dim ({q.shape[2]})")
    if not isinstance(enable_gqa, bool):
        raise fail(f"enable_gqa must be True or False, got {enable_gqa!r}")
    h = q.shape[1]
    for name, t in (("key", k), ("value", v)):
        if t.shape[1] == 0 or h % t.shape[1]:
            raise fail(f"{name} heads ({t.shape[1]}) must divide query heads ({h}) for GQA")
    if not enable_gqa and (k.shape[1] != h or v.shape[1] != h):
        raise fail(
            f"key/value heads ({k.shape[1]}, {v.shape[1]}) differ from query heads ({h}); "
            "pass enable_gqa=True for grouped-query attention"
        )
    if 0 in q.shape[1:] or 0 in v.shape[2:]:
        raise fail(f"query and value need heads and a head dim, got {list(q.shape)}, "
                   f"{list(v.shape)}")  # fmt: skip
    options = checked_options(q.shape[-1], scale, is_causal, diagonal_alignment, None, None,
                              False, engine)  # fmt: skip
    smax_q = _max_seqlen("max_seqlen_q", max_seqlen_q)
    smax_k = _max_seqlen("max_seqlen_k", max_seqlen_k)
    _check_offsets("cu_seqlens_q", cu_seqlens_q, q)
    _check_offsets("cu_seqlens_k", cu_seqlens_k, q)
    if cu_seqlens_q.shape[0] != cu_seqlens_k.shape[0]:
        raise fail(
            f"cu_seqlens_q and cu_seqlens_k describe different batches ({cu_seqlens_q.shape[0]}"
            f" and {cu_seqlens_k.shape[0]} offsets)"
        )
    _check_lengths("cu_seqlens_q", cu_seqlens_q, "query", q.shape[0], smax_q)
    _check_lengths("cu_seqlens_k", cu_seqlens_k, "key", k.shape[0], smax_k)
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    # no sequence is longer than its side's tokens: a max_seqlen past them sizes nothing
    seq_max = (graph_seq_max(min(smax_q, max(q.shape[0], 1))),
               graph_seq_max(min(smax_k, max(k.shape[0], 1))))  # fmt: skip
    return VarlenCall(q, k, v, cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous(),
                      cu_seqlens_q.shape[0] - 1, seq_max, options)  # fmt: skip


def check_cumulative(values: Sequence[int], name: str = "cu_seqlens") -> None:
    """The rule of every cumulative-lengths argument (FlashAttention's ``cu_seqlens``): it
    starts at 0 and never decreases.

    Example:
        >>> import hipdnn_graph as hg
        >>> check_cumulative([0, 3, 3, 7])
        >>> try:
        ...     check_cumulative([0, 4, 2], "cu_seqlens_k")
        ... except hg.HipdnnError as err:
        ...     print(err.message)
        cu_seqlens_k must not decrease, but [1] = 4 > [2] = 2

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming ``name`` and the first offending entry.
    """
    if values[0] != 0:
        raise fail(f"{name} must start at 0, got {values[0]}")
    for i, (a, b) in enumerate(pairwise(values)):
        if b < a:
            raise fail(f"{name} must not decrease, but [{i}] = {a} > [{i + 1}] = {b}")


def _max_seqlen(name: str, value: Any) -> int:
    """A ``max_seqlen`` as a positive int (an integer tensor of one element is read)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point():
        value = int(value.item()) if value.dtype != torch.bool else value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail(f"{name} must be a positive integer, got {value!r}")
    return value


def _check_offsets(name: str, cu: Any, q: Tensor) -> None:
    """Cumulative sequence lengths: a 1-D int32/int64 tensor of at least 2 on q's device."""
    if not isinstance(cu, torch.Tensor):
        raise fail(f"{name} must be a torch.Tensor, got {type(cu).__name__}")
    if cu.dtype not in _OFFSET_TYPES:
        raise fail(f"{name} must be int32 or int64, got {cu.dtype}")
    if cu.dim() != 1 or cu.shape[0] < 2:
        raise fail(f"{name} must be 1-D with B + 1 >= 2 offsets, got shape {list(cu.shape)}")
    if cu.device != q.device:
        raise fail(f"{name} is on {cu.device} but query is on {q.device}")
    if cu.is_meta:
        raise fail(f"{name} is on meta: its values are read on the host, and it has none")


def _check_lengths(name: str, cu: Tensor, side: str, tokens: int, max_seqlen: int) -> None:
    """The offsets' values (read on the host): from 0 to the side's token count, never
    decreasing, no step past ``max_seqlen``."""
    values = [int(x) for x in cu.tolist()]
    check_cumulative(values, name)
    for b in range(len(values) - 1):
        length = values[b + 1] - values[b]
        if length > max_seqlen:
            raise fail(f"{name}: sequence {b} holds {length} tokens, more than max_seqlen_"
                       f"{name[-1]} ({max_seqlen})")  # fmt: skip
    if values[-1] != tokens:
        raise fail(f"{name} must end at the {side}'s token count ({tokens}), got {values[-1]}")
