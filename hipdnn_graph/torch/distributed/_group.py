"""The process group side of context parallelism: who is in the ring, and the exchanges.

Everything here is torch.distributed (NCCL on GPUs, gloo on CPUs); nothing is home-made.

* :func:`resolve` turns ``group=None`` into the world (a single process when torch.distributed
  is not initialized) and finds this rank.
* :class:`Ring` sends tensors to the next rank while receiving the previous rank's, with
  ``batch_isend_irecv``; the caller computes while the transfer runs and waits on the result
  when it needs it.

Agreement on the arguments before any of this is :mod:`._agree`'s.

Example:
    >>> resolve(None)  # torch.distributed not initialized: one process
    Group(handle=None, rank=0, world=1)
"""

from __future__ import annotations

import contextlib
import reprlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from ...errors import HipdnnError
from ...types import ErrorCode

__all__ = ["Group", "Pending", "Ring", "local_copies", "resolve"]

Tensor = torch.Tensor


def _fail(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, message)


@dataclass(frozen=True)
class Group:
    """A resolved process group: its handle (``None`` without torch.distributed), this
    process's rank in it and its size; ``error`` when ``group`` was not a process group (then
    the handle is the world's, so that the other ranks hear of it in the agreement)."""

    handle: Any
    rank: int
    world: int
    error: HipdnnError | None = field(default=None, repr=False, compare=False)


def resolve(group: Any) -> Group:
    """``group`` (``None``: the world) with this process's rank and the group's size.

    Without an initialized torch.distributed, ``None`` is a group of one. Something that is not
    a process group of torch.distributed is not raised here: the result is the world with an
    ``error``, for the caller to contribute to the agreement over the world (where the other
    ranks passed the world too, every rank then raises it; they cannot hear of it through a
    group they passed and this rank did not).

    Raises:
        HipdnnError: ``INVALID_VALUE`` when a group is given but torch.distributed is not
            initialized, or when this process is not a member of ``group`` (then it takes no
            part in the group's collectives).
    """
    if not (dist.is_available() and dist.is_initialized()):
        if group is not None:
            raise _fail("a process group was given but torch.distributed is not initialized")
        return Group(None, 0, 1)
    handle = dist.group.WORLD if group is None else group
    try:
        rank = dist.get_rank(handle)
        world = dist.get_world_size(handle)
    except (ValueError, RuntimeError, TypeError, AttributeError):
        world_handle = dist.group.WORLD
        plain = isinstance(group, str | int | float)
        got = reprlib.repr(group) if plain else f"an object of type {type(group).__name__}"
        bad = _fail(f"group must be a torch.distributed process group or None, got {got}")
        return Group(world_handle, dist.get_rank(), dist.get_world_size(), bad)
    if rank < 0:
        raise _fail("this process is not a member of the given process group")
    return Group(handle, rank, world)


# ----- the ring -----
#: set by :func:`local_copies` (measurement only): exchanges copy locally instead of sending
_LOCAL: list[bool] = [False]


@contextlib.contextmanager
def local_copies() -> Iterator[None]:
    """For measurement only: ring exchanges become local copies (same compute, wrong values).

    ``benchmarks/context_parallel.py`` times the op with and without communication to report
    the communication share; nothing else should use this.
    """
    _LOCAL[0] = True
    try:
        yield
    finally:
        _LOCAL[0] = False


class Pending:
    """Tensors on their way from the previous rank; :meth:`wait` returns them when arrived."""

    def __init__(self, works: list[Any], received: tuple[Tensor, ...], sent: tuple[Tensor, ...]):
        self._works = works
        self._received = received
        self._sent = sent  # kept alive until the sends complete

    def wait(self) -> tuple[Tensor, ...]:
        for work in self._works:
            work.wait()
        self._works = []
        self._sent = ()
        return self._received


class Ring:
    """The ring of a group: rank ``r`` sends to ``r + 1`` and receives from ``r − 1``."""

    def __init__(self, group: Group) -> None:
        self.group = group
        self.rank = group.rank
        self.world = group.world
        self._next = dist.get_global_rank(group.handle, (group.rank + 1) % group.world)
        self._prev = dist.get_global_rank(group.handle, (group.rank - 1) % group.world)

    def exchange(self, tensors: Sequence[Tensor], tag: int) -> Pending:
        """Start sending ``tensors`` (contiguous) to the next rank and receiving the previous
        rank's tensors of the same shapes; tags ``tag, tag + 1, …`` keep concurrent exchanges
        apart."""
        received = tuple(torch.empty_like(t) for t in tensors)
        if _LOCAL[0]:
            for r, t in zip(received, tensors, strict=True):
                r.copy_(t)
            return Pending([], received, ())
        ops = [
            dist.P2POp(dist.isend, t, self._next, self.group.handle, tag + i)
            for i, t in enumerate(tensors)
        ] + [
            dist.P2POp(dist.irecv, r, self._prev, self.group.handle, tag + i)
            for i, r in enumerate(received)
        ]
        return Pending(dist.batch_isend_irecv(ops), received, tuple(tensors))
