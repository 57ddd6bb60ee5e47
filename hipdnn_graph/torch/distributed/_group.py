"""The process group side of context parallelism: who is in the ring, agreement, exchanges.

Everything here is torch.distributed (NCCL on GPUs, gloo on CPUs); nothing is home-made.

* :func:`resolve` turns ``group=None`` into the world (a single process when torch.distributed
  is not initialized) and finds this rank.
* :func:`agree` is the one collective that guards every distributed call: each rank contributes
  a small vector (its verdict on its own arguments and its shapes and options); all ranks see
  all vectors and raise the same kind of error together, so bad input never leaves a rank
  waiting in a ring that another rank has left.
* :class:`Ring` sends tensors to the next rank while receiving the previous rank's, with
  ``batch_isend_irecv``; the caller computes while the transfer runs and waits on the result
  when it needs it.

Example:
    >>> resolve(None)  # torch.distributed not initialized: one process
    Group(handle=None, rank=0, world=1)
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from ...errors import HipdnnError
from ...types import ErrorCode

__all__ = [
    "DTYPES",
    "DTYPE_NAMES",
    "Group",
    "Pending",
    "Ring",
    "agree",
    "dtype_code",
    "local_copies",
    "resolve",
]

Tensor = torch.Tensor

#: dtypes by code in signatures (any other dtype is ``len(DTYPES)``)
DTYPES: tuple[torch.dtype, ...] = (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.uint8, torch.int8,
    torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128,
)  # fmt: skip


#: the names of :data:`DTYPES` (labels of a signature's dtype entry)
DTYPE_NAMES: tuple[str, ...] = tuple(str(d).removeprefix("torch.") for d in DTYPES)


def dtype_code(dtype: torch.dtype) -> float:
    """A dtype as a signature entry."""
    return float(DTYPES.index(dtype)) if dtype in DTYPES else float(len(DTYPES))


def _fail(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, message)


@dataclass(frozen=True)
class Group:
    """A resolved process group: its handle (``None`` without torch.distributed), this
    process's rank in it and its size."""

    handle: Any
    rank: int
    world: int


def resolve(group: Any) -> Group:
    """``group`` (``None``: the world) with this process's rank and the group's size.

    Without an initialized torch.distributed, ``None`` is a group of one.

    Raises:
        HipdnnError: ``INVALID_VALUE`` when a group is given but torch.distributed is not
            initialized, or when this process is not a member of ``group``.
    """
    if not (dist.is_available() and dist.is_initialized()):
        if group is not None:
            raise _fail("a process group was given but torch.distributed is not initialized")
        return Group(None, 0, 1)
    handle = dist.group.WORLD if group is None else group
    rank = dist.get_rank(handle)
    if rank < 0:
        raise _fail("this process is not a member of the given process group")
    return Group(handle, rank, dist.get_world_size(handle))


def _device(group: Group, like: Any) -> torch.device:
    """Where the group's collectives take their tensors."""
    backend = str(dist.get_backend(group.handle))
    if backend == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    if backend == "gloo" or not isinstance(like, Tensor):
        return torch.device("cpu")
    return like.device


def agree(
    group: Group,
    what: str,
    error: str | None,
    signature: Sequence[float],
    names: Sequence[str],
    like: Any = None,
    labels: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Check collectively that every rank accepted its arguments and that their signatures match.

    Each rank passes its own verdict (``error``: why its arguments are bad, or ``None``) and a
    signature of equal length on every rank (shapes and options as numbers; ``names`` label its
    entries for the message, and ``labels`` names the codes of coded entries, such as dtypes).
    One ``all_gather`` of these vectors; then every rank raises when any rank failed or any
    signature differs, so all ranks leave together.

    Raises:
        HipdnnError: ``INVALID_VALUE``: this rank's own ``error``, or which rank refused its
            arguments, or which entries differ between which ranks.
    """
    device = _device(group, like)
    mine = torch.tensor([0.0 if error is None else 1.0, *signature], dtype=torch.float64)
    parts = [torch.empty_like(mine, device=device) for _ in range(group.world)]
    dist.all_gather(parts, mine.to(device), group=group.handle)
    if error is not None:
        raise _fail(error)
    rows = torch.stack(parts).cpu().tolist()
    for rank, row in enumerate(rows):
        if row[0]:
            raise _fail(f"{what}: rank {rank} of the group refused its arguments")
    ours = rows[group.rank]
    for rank, row in enumerate(rows):
        diff = [i for i, (a, b) in enumerate(zip(ours[1:], row[1:], strict=True)) if a != b]
        if diff:
            show = functools.partial(_show, labels or {})
            detail = ", ".join(
                f"{names[i]} {show(names[i], ours[i + 1])} vs {show(names[i], row[i + 1])}"
                for i in diff
            )
            raise _fail(
                f"{what}: arguments differ across ranks (rank {group.rank} vs rank {rank}: "
                f"{detail}); every rank must pass the same shapes and options"
            )


def _show(labels: Mapping[str, Sequence[str]], name: str, x: float) -> str:
    if name in labels:
        names = labels[name]
        return names[int(x)] if 0 <= x < len(names) and float(x).is_integer() else "other"
    return str(int(x)) if float(x).is_integer() else repr(x)


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
