"""Where each rank's tokens sit in the sequence, and which part of a ring step's block is seen.

Two layouts cut a sequence of ``S`` tokens over the ``W`` ranks of a group:

* ``"contiguous"``: rank ``r`` holds tokens ``[r·S/W, (r+1)·S/W)``;
* ``"zigzag"``: the sequence is cut into ``2W`` equal chunks and rank ``r`` holds chunk ``r``
  followed by chunk ``2W−1−r``, so that under a causal mask every rank has the same work.

A ring step pairs this rank's queries with the keys of a source rank. :func:`block` says which
rectangle of that ``L × L`` block (``L`` = local length) a causal mask leaves visible, and
whether it is the diagonal's triangle: every visible rectangle is either fully visible or
top-left causal, so each step is one plain SdpaFwd/SdpaBwd graph (or none). This module knows
no torch.distributed and no graphs: it is index arithmetic.

Example:
    >>> local_positions("zigzag", world=2, rank=0, local_len=4)
    [0, 1, 6, 7]
    >>> block("zigzag", world=2, rank=1, src=0, local_len=4, causal=True)
    Block(q_start=0, q_len=4, kv_start=0, kv_len=2, causal=False)
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import HipdnnError
from ...types import ErrorCode

__all__ = ["LAYOUTS", "Block", "block", "check_layout", "chunks_per_rank", "local_positions"]

#: the layouts by name, each with its number of chunks per rank
LAYOUTS: dict[str, int] = {"contiguous": 1, "zigzag": 2}


def check_layout(layout: object) -> str:
    """``layout`` itself when it names a layout.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for anything else.
    """
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"layout must be 'contiguous' or 'zigzag', got {layout!r}",
        )
    return layout


def chunks_per_rank(layout: str) -> int:
    """How many equal chunks of the sequence each rank holds (1 or 2)."""
    return LAYOUTS[check_layout(layout)]


def local_positions(layout: str, world: int, rank: int, local_len: int) -> list[int]:
    """The sequence positions of ``rank``'s ``local_len`` tokens, in local order.

    ``local_len`` must be a multiple of :func:`chunks_per_rank`.

    Example:
        >>> local_positions("contiguous", world=2, rank=1, local_len=3)
        [3, 4, 5]
    """
    if chunks_per_rank(layout) == 1:
        return list(range(rank * local_len, (rank + 1) * local_len))
    c = local_len // 2
    second = 2 * world - 1 - rank
    return list(range(rank * c, (rank + 1) * c)) + list(range(second * c, (second + 1) * c))


@dataclass(frozen=True)
class Block:
    """The visible rectangle of one ring step: local query rows ``[q_start, q_start + q_len)``
    against the visiting keys ``[kv_start, kv_start + kv_len)``; ``causal`` when it is the
    diagonal's top-left triangle (then ``q_len == kv_len`` and both starts are 0)."""

    q_start: int
    q_len: int
    kv_start: int
    kv_len: int
    causal: bool


def block(
    layout: str, world: int, rank: int, src: int, local_len: int, causal: bool
) -> Block | None:
    """The part of ``rank``'s queries × ``src``'s keys that attention sees (``None``: nothing).

    Without a causal mask every block is full. With one (query ``i`` sees key ``j ≤ i``):

    * the diagonal (``src == rank``) is top-left causal in both layouts: the local order of
      a rank's tokens follows their sequence order, so the local mask is the triangle;
    * contiguous: an earlier rank's block is full, a later rank's is skipped;
    * zigzag (chunk size ``c = L/2``): from an earlier rank (``src < rank``) all local queries
      see its first chunk only; from a later rank only the second local chunk sees anything,
      and it sees both of its chunks. Every off-diagonal step is half a block.

    Example:
        >>> block("contiguous", world=4, rank=1, src=2, local_len=8, causal=True) is None
        True
    """
    full = Block(0, local_len, 0, local_len, False)
    if not causal:
        return full
    if src == rank:
        return Block(0, local_len, 0, local_len, True)
    if chunks_per_rank(layout) == 1:
        return full if src < rank else None
    c = local_len // 2
    if src < rank:
        return Block(0, local_len, 0, c, False)
    return Block(c, c, 0, local_len, False)
