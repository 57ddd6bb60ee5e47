"""Which tokens of a packed batch each rank holds: index arithmetic, no torch.distributed.

A packed batch concatenates ``N`` sequences along one token axis (``[T, H, D]``), described by
``cu_seqlens`` (``N + 1`` cumulative lengths, ``cu_seqlens[0] = 0``, ``cu_seqlens[N] = T``).
Two layouts cut it over the ``W`` ranks of a group:

* ``"sequences"``: each rank holds whole sequences, assigned by :func:`balance_sequences` so
  that the ranks' causal work (``n·(n+1)/2`` visible pairs for a sequence of ``n`` tokens) is
  as even as a greedy assignment makes it; attention needs no communication;
* ``"zigzag"``: every sequence is cut into ``2W`` equal chunks and rank ``r`` holds chunks
  ``r`` and ``2W−1−r`` of each (the dense zigzag layout, sequence by sequence), so every
  sequence length must be divisible by ``2W``; attention runs the ring per sequence.

A rank's local tokens keep the batch's order: its sequences one after another (in sequence
order), each sequence's tokens in sequence order.

Example:
    >>> shard = shard_of([0, 8, 12], world=2, rank=1, layout="zigzag")
    >>> shard.positions, shard.cu_seqlens
    ((2, 3, 4, 5, 9, 10), (0, 4, 6))
    >>> balance_sequences([5, 1, 4, 2], world=2)
    ((0,), (1, 2, 3))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise
from typing import Any

import torch

from ...errors import HipdnnError
from ...types import ErrorCode
from .._varlen_args import check_cumulative
from ._layout import local_positions

__all__ = [
    "PACKED_LAYOUTS",
    "PackedShard",
    "balance_sequences",
    "check_cu_seqlens",
    "check_packed_layout",
    "shard_of",
    "share_tokens",
]

#: the packed layouts by name
PACKED_LAYOUTS: tuple[str, ...] = ("sequences", "zigzag")


def _fail(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, message)


def check_packed_layout(layout: object) -> str:
    """``layout`` itself when it names a packed layout.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for anything else.
    """
    if not isinstance(layout, str) or layout not in PACKED_LAYOUTS:
        raise _fail(f"packed layout must be 'sequences' or 'zigzag', got {layout!r}")
    return layout


def check_cu_seqlens(cu_seqlens: Any) -> tuple[int, ...]:
    """The cumulative sequence lengths as Python ints (a device tensor is read on the host).

    Raises:
        HipdnnError: ``INVALID_VALUE`` unless ``cu_seqlens`` is a 1-D integer tensor or a
            sequence of ints, of at least two entries, starting at 0 and never decreasing.

    Example:
        >>> check_cu_seqlens(torch.tensor([0, 3, 3, 7], dtype=torch.int32))
        (0, 3, 3, 7)
    """
    if isinstance(cu_seqlens, torch.Tensor):
        integer = not (cu_seqlens.dtype.is_floating_point or cu_seqlens.is_complex())
        if cu_seqlens.dim() != 1 or not integer or cu_seqlens.dtype == torch.bool:
            raise _fail(
                "cu_seqlens must be a 1-D integer tensor, got "
                f"{cu_seqlens.dtype} of shape {list(cu_seqlens.shape)}"
            )
        if cu_seqlens.device.type == "meta":
            raise _fail("cu_seqlens has no data (a meta tensor)")
        values = tuple(int(x) for x in cu_seqlens.tolist())
    elif isinstance(cu_seqlens, Sequence) and not isinstance(cu_seqlens, str | bytes):
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in cu_seqlens):
            raise _fail("cu_seqlens must hold ints")
        values = tuple(cu_seqlens)
    else:
        raise _fail(
            "cu_seqlens must be a 1-D integer tensor or a sequence of ints, got "
            f"{type(cu_seqlens).__name__}"
        )
    if len(values) < 2:
        raise _fail(f"cu_seqlens needs at least 2 entries (one sequence), got {len(values)}")
    check_cumulative(values)
    return values


def causal_work(length: int) -> int:
    """The visible (query, key) pairs of a causal sequence of ``length`` tokens."""
    return length * (length + 1) // 2


def balance_sequences(lengths: Sequence[int], world: int) -> tuple[tuple[int, ...], ...]:
    """Whole sequences assigned to ``world`` ranks by causal work: the sequence indices of each
    rank, in sequence order.

    Greedy: the sequences in decreasing order of work (ties: the earlier sequence first), each to
    the rank with the least work so far (ties: the lower rank). Deterministic, so every rank
    computes the same assignment without communication. No rank gets more than the even share
    plus the largest sequence's work.

    Example:
        >>> balance_sequences([4096, 128, 1024, 1024, 2048], world=2)
        ((0,), (1, 2, 3, 4))
    """
    load = [0] * world
    ranks: list[list[int]] = [[] for _ in range(world)]
    order = sorted(range(len(lengths)), key=lambda i: (-causal_work(lengths[i]), i))
    for i in order:
        target = min(range(world), key=lambda r: (load[r], r))
        ranks[target].append(i)
        load[target] += causal_work(lengths[i])
    return tuple(tuple(sorted(r)) for r in ranks)


@dataclass(frozen=True)
class PackedShard:
    """The tokens of a packed batch that one rank holds.

    ``sequences``: the indices of the sequences it holds tokens of (every one in the zigzag
    layout); ``positions``: the batch positions of its tokens, in local order; ``cu_seqlens``:
    the local cumulative lengths (``len(sequences) + 1`` entries: the local tokens of
    ``sequences[i]`` are ``[cu_seqlens[i], cu_seqlens[i + 1])``); ``lengths``: the whole
    lengths of those sequences.
    """

    layout: str
    world: int
    rank: int
    sequences: tuple[int, ...]
    positions: tuple[int, ...]
    cu_seqlens: tuple[int, ...]
    lengths: tuple[int, ...]

    @property
    def tokens(self) -> int:
        """How many tokens the rank holds."""
        return len(self.positions)


def zigzag_refusal(lengths: Sequence[int], world: int) -> str | None:
    """Why the zigzag layout cannot cut these sequences over ``world`` ranks, or ``None``."""
    chunks = 2 * world
    for i, n in enumerate(lengths):
        if n % chunks:
            return (
                f"the packed zigzag layout cuts every sequence into {chunks} equal chunks over "
                f"{world} ranks: sequence {i} has {n} tokens, not divisible by {chunks}"
            )
    return None


def shard_of(cu_seqlens: Sequence[int], world: int, rank: int, layout: str) -> PackedShard:
    """Rank ``rank``'s share of the packed batch ``cu_seqlens`` (checked) under ``layout``; in
    a group of one, the whole batch (any lengths).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a bad layout, or (zigzag) a sequence whose length is
            not divisible by ``2W``.
    """
    mine, local = _share(cu_seqlens, world, rank, layout)
    lengths = [b - a for a, b in pairwise(cu_seqlens)]
    if world == 1:
        positions = list(range(cu_seqlens[-1]))
    elif layout == "sequences":
        positions = [p for i in mine for p in range(cu_seqlens[i], cu_seqlens[i + 1])]
    else:
        positions = []
        for i, n in zip(mine, local, strict=True):
            start = cu_seqlens[i]
            positions += [start + p for p in local_positions("zigzag", world, rank, n)]
    return PackedShard(
        layout=check_packed_layout(layout),
        world=world,
        rank=rank,
        sequences=tuple(mine),
        positions=tuple(positions),
        cu_seqlens=tuple(accumulate(local, initial=0)),
        lengths=tuple(lengths[i] for i in mine),
    )


def share_tokens(cu_seqlens: Sequence[int], world: int, rank: int, layout: str) -> int:
    """How many tokens rank ``rank``'s share (:func:`shard_of`) holds, without listing them:
    what a caller checks its tensor against before :func:`shard_of` lists that many positions.

    Raises:
        HipdnnError: as :func:`shard_of`.

    Example:
        >>> share_tokens([0, 8, 12], world=2, rank=1, layout="zigzag")
        6
    """
    return sum(_share(cu_seqlens, world, rank, layout)[1])


def _share(
    cu_seqlens: Sequence[int], world: int, rank: int, layout: str
) -> tuple[tuple[int, ...], list[int]]:
    """The sequences rank ``rank`` holds tokens of, and how many of each."""
    layout = check_packed_layout(layout)
    lengths = [b - a for a, b in pairwise(cu_seqlens)]
    if world == 1:
        return tuple(range(len(lengths))), lengths
    if layout == "sequences":
        mine = balance_sequences(lengths, world)[rank]
        return mine, [lengths[i] for i in mine]
    refusal = zigzag_refusal(lengths, world)
    if refusal is not None:
        raise _fail(refusal)
    return tuple(range(len(lengths))), [n // world for n in lengths]
