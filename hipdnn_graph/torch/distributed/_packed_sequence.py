"""``packed_shard``, ``shard_packed`` and ``gather_packed``: a packed batch to this rank's tokens
and back.

Example:
    >>> import torch
    >>> x = torch.arange(6.0).view(6, 1, 1)  # [T, H, D]: sequences of 4 and 2 tokens
    >>> packed_shard([0, 4, 6]).cu_seqlens  # one process: the whole batch
    (0, 4, 6)
    >>> torch.equal(gather_packed(shard_packed(x, [0, 4, 6]), [0, 4, 6]), x)
    True
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ...errors import HipdnnError
from ...types import ErrorCode
from ._agree import agree, code_labels, device_code, dtype_code
from ._attention import kind_of
from ._group import Group, resolve
from ._packed_layout import (
    PACKED_LAYOUTS,
    PackedShard,
    check_cu_seqlens,
    check_packed_layout,
    shard_of,
    share_tokens,
)
from ._sequence import _dim

__all__ = ["batch_signature", "gather_packed", "packed_shard", "shard_packed"]

Tensor = torch.Tensor
_MAX_RANK = 8
_HASH_MODULUS = 2**31 - 1  # a prime: the hash is exact in a float64 signature entry


def _fail(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, message)


def batch_signature(cu_seqlens: tuple[int, ...]) -> list[float]:
    """The packed batch as signature entries: its sequence count, token count and a hash of
    its cumulative lengths (ranks that pass different batches differ here)."""
    digest = 0
    for value in cu_seqlens:
        digest = (digest * 1_000_003 + value + 1) % _HASH_MODULUS
    return [float(len(cu_seqlens) - 1), float(cu_seqlens[-1]), float(digest)]


BATCH_NAMES = ("sequences", "tokens", "cu_seqlens hash")


def packed_shard(cu_seqlens: Any, group: Any = None, layout: str = "zigzag") -> PackedShard:
    """Which tokens of the packed batch ``cu_seqlens`` this rank holds under ``layout``.

    ``"sequences"``: whole sequences, balanced by causal work (``n·(n+1)/2`` per sequence of
    ``n`` tokens, greedily: the largest first, each to the least loaded rank); ``"zigzag"``:
    chunks ``r`` and ``2W−1−r`` of every sequence cut into ``2W``. No communication: every rank
    computes every rank's share alike. A group of one holds the whole batch.

    Args:
        cu_seqlens: the ``N + 1`` cumulative sequence lengths of the whole batch (a 1-D integer
            tensor or a sequence of ints, from 0), the same on every rank.
        group: the process group (``None``: the world, or one process without torch.distributed).
        layout: ``"sequences"`` or ``"zigzag"``.

    Returns:
        A :class:`PackedShard`: the sequences this rank holds tokens of, their tokens' batch
        positions, the local ``cu_seqlens`` and the sequences' whole lengths.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for bad ``cu_seqlens``, an unknown layout, or (zigzag) a
            sequence whose length is not divisible by ``2W``, naming it.

    Example:
        >>> packed_shard([0, 4, 10], layout="sequences").sequences  # one process
        (0, 1)
    """
    layout = check_packed_layout(layout)
    cu = check_cu_seqlens(cu_seqlens)
    grp = resolve(group)
    if grp.error is not None:  # no communication here: this rank alone raises
        raise grp.error
    return shard_of(cu, grp.world, grp.rank, layout)


def shard_packed(
    x: Tensor, cu_seqlens: Any, group: Any = None, layout: str = "zigzag", *, dim: int = 0
) -> Tensor:
    """This rank's tokens of the packed batch ``x`` (tokens along ``dim``), as
    :func:`packed_shard` assigns them, in local order.

    No communication: every rank selects from its own copy of ``x``. The result is a new,
    differentiable tensor.

    Args:
        x: the whole packed batch (e.g. ``[T, H, D]``), the same on every rank.
        cu_seqlens: its ``N + 1`` cumulative sequence lengths (``T`` last).
        group: the process group (``None``: the world, or one process without torch.distributed).
        layout: ``"sequences"`` or ``"zigzag"``.
        dim: the token dimension.

    Raises:
        HipdnnError: ``INVALID_VALUE`` as :func:`packed_shard`, for a bad ``dim``, or when
            ``x`` does not hold ``cu_seqlens[-1]`` tokens.

    Example:
        >>> shard_packed(torch.arange(5).view(5, 1), [0, 2, 5], dim=0).flatten().tolist()
        [0, 1, 2, 3, 4]
    """
    d = _dim(x, dim, "x")
    cu = check_cu_seqlens(cu_seqlens)
    if x.shape[d] != cu[-1]:  # before the share's positions are listed
        raise _fail(f"x holds {x.shape[d]} tokens along dim {d}, but cu_seqlens ends at {cu[-1]}")
    shard = packed_shard(cu, group, layout)
    index = torch.tensor(shard.positions, dtype=torch.long, device=x.device)
    return x.index_select(d, index)


def gather_packed(
    x_local: Tensor, cu_seqlens: Any, group: Any = None, layout: str = "zigzag", *, dim: int = 0
) -> Tensor:
    """The whole packed batch from every rank's tokens (the inverse of :func:`shard_packed`).

    A collective (``all_gather``, of each rank's tokens padded to the largest share):
    every rank calls it and gets the whole batch. Differentiable: the gradient of each rank's
    tokens is the sum over ranks of their gradients at those positions (an ``all_reduce`` in
    the backward, which every rank must run too).

    Args:
        x_local: this rank's tokens, e.g. ``[T_local, H, D]``.
        cu_seqlens: the whole batch's cumulative sequence lengths, the same on every rank.
        group: the process group (``None``: the world, or one process without torch.distributed).
        layout: the layout the tokens were sharded with.
        dim: the token dimension.

    Returns:
        The ``cu_seqlens[-1]`` tokens along ``dim`` in batch order.

    Raises:
        HipdnnError: the same code and message on every rank when any rank's arguments are
            bad (bad ``cu_seqlens``, a layout the batch does not fit, a token count that is not
            this rank's share, a bad ``dim``, a meta tensor, a ``group`` that is not a process
            group), or the batches, dtypes, other dims, layouts, device types or autograd
            differ across ranks.

    Example:
        >>> gather_packed(torch.ones(3, 2), [0, 1, 3], layout="sequences").shape  # one process
        torch.Size([3, 2])
    """
    grp = resolve(group)
    if grp.world == 1:
        if grp.error is not None:
            raise grp.error
        check_packed_layout(layout)
        cu = check_cu_seqlens(cu_seqlens)
        _check_tokens(x_local, _dim(x_local, dim, "x_local"), cu, 1, 0, layout)
        return x_local.clone()
    error = grp.error
    signature = [0.0] * len(_GATHER_NAMES)
    d, shards = 0, list[PackedShard]()
    if error is None:
        try:
            d, signature, shards = _gather_signature(x_local, cu_seqlens, layout, dim, grp)
        except HipdnnError as err:
            error = err
        except Exception as err:  # anything unforeseen: refused together, never raised alone
            error = _fail(f"bad arguments ({type(err).__name__}: {err})"[:400])
    agree(
        grp, "gather_packed", error, signature, _GATHER_NAMES, x_local, code_labels(PACKED_LAYOUTS)
    )
    out: Tensor = _GatherPacked.apply(x_local, grp, shards, d)  # type: ignore[no-untyped-call]
    return out


_GATHER_NAMES = ("rank", "dim", "dtype", "layout", "device", "autograd", *BATCH_NAMES,
                 *(f"size[{i}]" for i in range(_MAX_RANK)))  # fmt: skip


def _check_tokens(
    x: Tensor, d: int, cu: tuple[int, ...], world: int, rank: int, layout: str
) -> None:
    """``x`` holds the rank's share of tokens (counted before any position is listed)."""
    tokens = share_tokens(cu, world, rank, layout)
    if x.shape[d] != tokens:
        raise _fail(
            f"x_local holds {x.shape[d]} tokens along dim {d}, but rank {rank}'s share of "
            f"the packed batch ({layout} layout) is {tokens} tokens"
        )


def _gather_signature(
    x: Any, cu_seqlens: Any, layout: Any, dim: Any, grp: Group
) -> tuple[int, list[float], list[PackedShard]]:
    """The token dim, the signature of a ``gather_packed`` call and every rank's share.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for this rank's bad arguments.
    """
    layout = check_packed_layout(layout)
    d = _dim(x, dim, "x_local")
    if x.device.type == "meta" or x.layout != torch.strided:
        raise _fail(
            f"x_local has no data to exchange (a {kind_of(x)} tensor): gather_packed needs a "
            "dense tensor on a CPU or GPU"
        )
    if x.dim() > _MAX_RANK:
        raise _fail(f"gather_packed takes tensors of rank ≤ {_MAX_RANK}, got {x.dim()}")
    cu = check_cu_seqlens(cu_seqlens)
    _check_tokens(x, d, cu, grp.world, grp.rank, layout)
    shards = [shard_of(cu, grp.world, r, layout) for r in range(grp.world)]
    sizes = [float(n) if i != d else 0.0 for i, n in enumerate(x.shape)]
    sizes += [-1.0] * (_MAX_RANK - x.dim())
    grad = torch.is_grad_enabled() and x.requires_grad
    head = (x.dim(), d, dtype_code(x.dtype), PACKED_LAYOUTS.index(layout), device_code(x.device))
    return d, [*map(float, head), float(grad), *batch_signature(cu), *sizes], shards


class _GatherPacked(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, grp: Group, shards: list[PackedShard], dim: int) -> Tensor:
        mine = shards[grp.rank]
        ctx.options = (grp, mine, dim)
        tokens = x.movedim(dim, 0)
        most = max(s.tokens for s in shards)
        padded = tokens.new_zeros((most, *tokens.shape[1:]))
        padded[: mine.tokens] = tokens
        parts = [torch.empty_like(padded) for _ in shards]
        dist.all_gather(parts, padded, group=grp.handle)
        pieces = torch.cat([p[: s.tokens] for p, s in zip(parts, shards, strict=True)])
        order = torch.tensor(
            [i for s in shards for i in s.positions], dtype=torch.long, device=x.device
        )
        inverse = torch.argsort(order)  # batch position p sits at inverse[p]
        return pieces.index_select(0, inverse).movedim(0, dim)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Any, ...]:
        grp, mine, dim = ctx.options
        total = grad.contiguous().clone()
        dist.all_reduce(total, group=grp.handle)
        index = torch.tensor(mine.positions, dtype=torch.long, device=grad.device)
        return total.index_select(dim, index), None, None, None
