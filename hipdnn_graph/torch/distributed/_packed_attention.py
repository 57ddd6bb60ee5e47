"""``context_parallel_packed_attention``: exact attention over a packed batch sharded across
ranks, sequence by sequence."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import torch

from ...errors import HipdnnError
from ...types import ErrorCode
from .._args import check_qkv
from .._op import scaled_dot_product_attention
from .._varlen_args import check_token_tensors
from ._agree import agree, code_labels
from ._attention import (
    OPTION_LABELS,
    OPTION_NAMES,
    gqa_reason,
    kind_of,
    local_error,
    option_reason,
    option_signature,
    resolved_scale,
)
from ._group import Ring, resolve
from ._packed_layout import (
    PACKED_LAYOUTS,
    PackedShard,
    check_cu_seqlens,
    check_packed_layout,
    shard_of,
    share_tokens,
)
from ._packed_ring import PackedRingAttention
from ._packed_sequence import BATCH_NAMES, batch_signature

__all__ = ["context_parallel_packed_attention"]

Tensor = torch.Tensor

_NAMES = (
    "query heads", "query head dim", "key heads", "key head dim", "value heads",
    "value head dim", *BATCH_NAMES, *OPTION_NAMES,
)  # fmt: skip
_LABELS = OPTION_LABELS | code_labels(PACKED_LAYOUTS)


def context_parallel_packed_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    cu_seqlens: Any,
    *,
    group: Any = None,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    layout: str = "zigzag",
) -> Tensor:
    """Exact attention over a packed batch (sequences concatenated along the token axis)
    sharded across the ranks of ``group``: every sequence attends to itself only.

    Each rank passes its tokens of the batch (``[T_r, H, D]`` queries, ``[T_r, Hk, D]`` keys,
    ``[T_r, Hk, Dv]`` values, as :func:`shard_packed` cuts them under ``layout``) and the
    whole batch's ``cu_seqlens``; it gets its tokens of the output, equal to attention over
    each whole sequence (:func:`~hipdnn_graph.torch.scaled_dot_product_attention` of
    ``[1, H, n, D]``, sequence by sequence). Layouts (:func:`packed_shard`):

    * ``"sequences"``: each rank holds whole sequences (balanced by causal work); attention
      needs no communication: one graph of the op per local sequence.
    * ``"zigzag"``: each rank holds chunks ``r`` and ``2W−1−r`` of every sequence (lengths
      divisible by ``2W``); the packed K/V buffers travel the ring as in
      :func:`context_parallel_attention`, and every sequence's block of a step is one SdpaFwd
      (SdpaBwd in the backward) graph of the op, merged through its Stats.

    Under ``is_causal`` a query sees the keys of its sequence at positions up to its own (per
    sequence, query and key lengths are equal, so the top-left and bottom-right diagonals are
    the same). Autograd works as usual; the zigzag backward is a collective like its forward.

    This is a collective: every rank of the group calls it with the same batch, heads, dtype and
    options (checked with one small ``all_gather`` per call, both layouts). A group of one (or
    ``group=None`` without an initialized torch.distributed) holds the whole batch, any lengths.

    Args:
        query: this rank's ``[T_r, H, D]`` query tokens (float16, bfloat16, float32, float64).
        key: this rank's ``[T_r, Hk, D]`` key tokens.
        value: this rank's ``[T_r, Hk, Dv]`` value tokens.
        cu_seqlens: the ``N + 1`` cumulative sequence lengths of the whole batch (a 1-D integer
            tensor or a sequence of ints, from 0), the same on every rank.
        group: the process group (``None``: the default group, the world).
        is_causal: causal attention within each sequence.
        scale: the score scale; ``1/sqrt(D)`` when ``None``.
        enable_gqa: allow fewer key/value heads than query heads (dividing them).
        layout: ``"zigzag"`` or ``"sequences"``.

    Returns:
        This rank's ``[T_r, H, Dv]`` output tokens, in query's dtype.

    Raises:
        HipdnnError: the same code and message on every rank when any rank's arguments are
            bad (the first refusing rank's error, prefixed
            ``"context_parallel_packed_attention: rank R refused its arguments: "``): tensors
            that are not rank 3, token counts that are not this rank's share of the batch, bad
            ``cu_seqlens``, a sequence not divisible by ``2W`` (zigzag), heads that differ
            without ``enable_gqa``, an unknown layout, a scale that is not a finite number,
            flags that are not bools, meta tensors, a ``group`` that is not a process group;
            or ``INVALID_VALUE`` when batches, heads, dtypes, device types, options or autograd
            differ across ranks.
        NotSupportedError: when no engine runs a block's graph.

    Example:
        >>> import torch
        >>> from hipdnn_graph.torch.distributed import context_parallel_packed_attention
        >>> q = k = v = torch.randn(10, 2, 8, dtype=torch.float64)  # sequences of 6 and 4
        >>> out = context_parallel_packed_attention(q, k, v, [0, 6, 10], is_causal=True)
        >>> ref = torch.nn.functional.scaled_dot_product_attention(  # the second sequence
        ...     *(t[6:].transpose(0, 1) for t in (q, k, v)), is_causal=True)
        >>> torch.allclose(out[6:], ref.transpose(0, 1))
        True
    """
    grp = resolve(group)
    if grp.world == 1:
        if grp.error is not None:
            raise grp.error
        options = (is_causal, scale, enable_gqa, layout, 1, 0)
        _, shard = _checked(query, key, value, cu_seqlens, *options)
        return local_attention(query, key, value, shard, is_causal, scale)
    found: list[tuple[tuple[int, ...], PackedShard]] = []
    options = (is_causal, scale, enable_gqa, layout, grp.world, grp.rank)

    def check() -> str | None:
        found.append(_checked(query, key, value, cu_seqlens, *options))
        return None

    error = grp.error or local_error(check)
    signature = [0.0] * len(_NAMES)
    scale = resolved_scale(query, scale) if error is None else 0.0
    if error is None:
        cu, shard = found[0]
        heads = (query.shape[1:], key.shape[1:], value.shape[1:])
        flags = (is_causal, scale, enable_gqa, PACKED_LAYOUTS.index(shard.layout))
        signature = [
            *(float(n) for shape in heads for n in shape),
            *batch_signature(cu),
            *option_signature(query, key, value, *flags),
        ]
    agree(grp, "context_parallel_packed_attention", error, signature, _NAMES, query, _LABELS)
    shard = found[0][1]
    if shard.layout == "sequences":
        return local_attention(query, key, value, shard, is_causal, scale)
    spans = tuple((a, b - a) for a, b in pairwise(shard.cu_seqlens))
    out: Tensor = PackedRingAttention.apply(  # type: ignore[no-untyped-call]
        query, key, value, spans, Ring(grp), bool(is_causal), float(scale)
    )
    return out


def local_attention(
    q: Tensor, k: Tensor, v: Tensor, shard: PackedShard, causal: bool, scale: float | None
) -> Tensor:
    """Attention of every local whole sequence over itself, through the op (differentiable):
    ``[T_r, H, Dv]``."""
    pieces = []
    for a, b in pairwise(shard.cu_seqlens):
        if b == a:
            continue
        q_s, k_s, v_s = (t[a:b].unsqueeze(0).transpose(1, 2) for t in (q, k, v))
        o = scaled_dot_product_attention(q_s, k_s, v_s, is_causal=causal, scale=scale,
                                         enable_gqa=True)  # fmt: skip
        pieces.append(o[0].transpose(0, 1))
    if not pieces:  # no tokens here: an empty output, still connected to the inputs
        link = (q.sum() + k.sum() + v.sum()) * 0
        return q.new_zeros((0, q.shape[1], v.shape[2])) + link
    return torch.cat(pieces)


def _checked(
    q: Any,
    k: Any,
    v: Any,
    cu_seqlens: Any,
    causal: Any,
    scale: Any,
    gqa: Any,
    layout: Any,
    world: int,
    rank: int,
) -> tuple[tuple[int, ...], PackedShard]:
    """The checked ``cu_seqlens`` and this rank's share of the batch, after checking its
    arguments.

    Raises:
        HipdnnError: ``INVALID_VALUE`` (or the op's own code) for this rank's bad arguments.
    """
    check_packed_layout(layout)
    reason = option_reason(causal, scale, gqa)
    if reason is not None:
        raise _fail(reason)
    check_token_tensors(q, k, v)
    check_qkv(*(t.unsqueeze(0).transpose(1, 2) for t in (q, k, v)))
    for name, t in (("query", q), ("key", k), ("value", v)):
        if t.device.type == "meta" or t.layout != torch.strided:
            raise _fail(
                f"{name} has no data (a {kind_of(t)} tensor): context parallelism needs dense "
                "tensors on a CPU or GPU"
            )
    if not gqa and (k.shape[1] != q.shape[1] or v.shape[1] != q.shape[1]):
        raise _fail(gqa_reason(k.shape[1], v.shape[1], q.shape[1]))
    if k.shape[2] != q.shape[2]:
        raise _fail(f"key head dim ({k.shape[2]}) differs from query head dim ({q.shape[2]})")
    cu = check_cu_seqlens(cu_seqlens)
    tokens = share_tokens(cu, world, rank, layout)  # checked before the positions are listed
    counts = (q.shape[0], k.shape[0], v.shape[0])
    if set(counts) != {tokens}:
        raise _fail(
            f"query, key and value hold {', '.join(map(str, counts))} tokens, but rank {rank}'s "
            f"share of the packed batch ({layout} layout over {world} ranks) is {tokens} tokens"
        )
    return cu, shard_of(cu, world, rank, layout)


def _fail(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, message)
