"""``shard_sequence`` and ``gather_sequence``: a whole sequence to this rank's slice and back."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ...errors import HipdnnError
from ...types import ErrorCode
from ._agree import agree, code_labels, device_code, dtype_code
from ._group import Group, resolve
from ._layout import LAYOUTS, check_layout, chunks_per_rank, local_positions

__all__ = ["gather_sequence", "shard_sequence"]

Tensor = torch.Tensor
_MAX_RANK = 8


def _fail(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, message)


def _dim(x: Any, dim: Any, what: str) -> int:
    if not isinstance(x, Tensor):
        raise _fail(f"{what} must be a torch.Tensor, got {type(x).__name__}")
    if isinstance(dim, bool) or not isinstance(dim, int) or not -x.dim() <= dim < x.dim():
        raise _fail(f"dim {dim!r} is out of range for a tensor of rank {x.dim()}")
    return dim % x.dim()


def _index(layout: str, world: int, rank: int, local_len: int, device: torch.device) -> Tensor:
    positions = local_positions(layout, world, rank, local_len)
    return torch.tensor(positions, dtype=torch.long, device=device)


def shard_sequence(x: Tensor, group: Any = None, layout: str = "zigzag", *, dim: int = 2) -> Tensor:
    """This rank's slice of the whole sequence ``x`` (along ``dim``), as ``layout`` assigns it.

    ``"contiguous"``: rank ``r`` of ``W`` gets positions ``[r·S/W, (r+1)·S/W)``; ``"zigzag"``:
    the sequence is cut into ``2W`` chunks and rank ``r`` gets chunk ``r`` followed by chunk
    ``2W−1−r``. No communication: every rank slices its own copy of ``x``. The result is a new
    tensor (differentiable); with a group of one it is a copy of ``x``.

    Args:
        x: the whole sequence (e.g. ``[B, H, S, D]``), the same on every rank.
        group: the process group (``None``: the world, or one process without torch.distributed).
        layout: ``"zigzag"`` or ``"contiguous"``.
        dim: the sequence dimension (2 for ``[B, H, S, D]``).

    Returns:
        ``x`` restricted to this rank's ``S / W`` positions along ``dim``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` when ``S`` is not a positive multiple of the layout's
            chunk count (``W`` or ``2W``), for an unknown layout, or a bad ``dim``.

    Example:
        >>> import torch
        >>> shard_sequence(torch.arange(8).view(1, 1, 8, 1)).flatten().tolist()  # one process
        [0, 1, 2, 3, 4, 5, 6, 7]
    """
    layout = check_layout(layout)
    d = _dim(x, dim, "x")
    grp = resolve(group)
    if grp.error is not None:  # no communication here: this rank alone raises
        raise grp.error
    if grp.world == 1:
        return x.clone()
    chunks = chunks_per_rank(layout) * grp.world
    s = x.shape[d]
    if s == 0 or s % chunks:
        raise _fail(
            f"the {layout} layout cuts the sequence into {chunks} equal chunks over "
            f"{grp.world} ranks: a sequence of length {s} is not divisible by {chunks}"
        )
    index = _index(layout, grp.world, grp.rank, s // grp.world, x.device)
    return x.index_select(d, index)


def gather_sequence(
    x_local: Tensor, group: Any = None, layout: str = "zigzag", *, dim: int = 2
) -> Tensor:
    """The whole sequence from every rank's slice (the inverse of :func:`shard_sequence`).

    A collective (``all_gather``): every rank calls it with a slice of the same shape and
    gets the whole sequence. Differentiable: the gradient of each rank's slice is the sum over
    ranks of their gradients at its positions (an ``all_reduce`` in the backward, which every
    rank must run too). With a group of one it is a copy of ``x_local``.

    Args:
        x_local: this rank's slice, e.g. ``[B, H, L, D]``.
        group: the process group (``None``: the world, or one process without torch.distributed).
        layout: the layout the slices were cut with.
        dim: the sequence dimension.

    Returns:
        The ``W·L`` positions along ``dim`` in sequence order.

    Raises:
        HipdnnError: the same code and message on every rank when any rank's arguments are
            bad (a local length that is not a multiple of the layout's chunks per rank, an
            unknown layout, a bad ``dim``, a meta tensor, a ``group`` that is not a process
            group) or the slices' shapes, dtypes, device types, layouts or autograd differ
            across ranks.

    Example:
        >>> import torch
        >>> gather_sequence(torch.arange(4).view(1, 1, 4, 1)).flatten().tolist()  # one process
        [0, 1, 2, 3]
    """
    grp = resolve(group)
    if grp.world == 1:
        if grp.error is not None:
            raise grp.error
        check_layout(layout)
        _dim(x_local, dim, "x_local")
        return x_local.clone()
    error = grp.error
    signature = [0.0] * len(_GATHER_NAMES)
    d = 0
    if error is None:
        try:
            d, signature = _gather_signature(x_local, layout, dim)
        except HipdnnError as err:
            error = err
        except Exception as err:  # anything unforeseen: refused together, never raised alone
            error = _fail(f"bad arguments ({type(err).__name__}: {err})"[:400])
    agree(grp, "gather_sequence", error, signature, _GATHER_NAMES, x_local, code_labels(LAYOUTS))
    out: Tensor = _Gather.apply(  # type: ignore[no-untyped-call]
        x_local, grp, layout, d
    )
    return out


_GATHER_NAMES = ("rank", "dim", "dtype", "layout", "device", "autograd",
                 *(f"size[{i}]" for i in range(_MAX_RANK)))  # fmt: skip


def _gather_signature(x: Any, layout: Any, dim: Any) -> tuple[int, list[float]]:
    """The sequence dim and the signature of a ``gather_sequence`` call.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for this rank's bad arguments.
    """
    check_layout(layout)
    d = _dim(x, dim, "x_local")
    if x.device.type == "meta" or x.layout != torch.strided:
        kind = "meta" if x.device.type == "meta" else str(x.layout).removeprefix("torch.")
        raise _fail(
            f"x_local has no data to exchange (a {kind} tensor): gather_sequence needs a "
            "dense tensor on a CPU or GPU"
        )
    chunks = chunks_per_rank(layout)
    if x.shape[d] % chunks or x.shape[d] == 0:
        raise _fail(
            f"the {layout} layout needs a local sequence length that is a positive "
            f"multiple of {chunks}, got {x.shape[d]}"
        )
    if x.dim() > _MAX_RANK:
        raise _fail(f"gather_sequence takes tensors of rank ≤ {_MAX_RANK}, got {x.dim()}")
    sizes = [*map(float, x.shape)] + [-1.0] * (_MAX_RANK - x.dim())
    grad = torch.is_grad_enabled() and x.requires_grad
    head = (x.dim(), d, dtype_code(x.dtype), list(LAYOUTS).index(layout), device_code(x.device))
    return d, [*map(float, head), float(grad), *sizes]


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, grp: Group, layout: str, dim: int) -> Tensor:
        ctx.options = (grp, layout, dim)
        parts = [
            torch.empty_like(x, memory_format=torch.contiguous_format) for _ in range(grp.world)
        ]
        dist.all_gather(parts, x.contiguous(), group=grp.handle)
        local = x.shape[dim]
        order = torch.cat([_index(layout, grp.world, r, local, x.device) for r in range(grp.world)])
        inverse = torch.argsort(order)  # position p of the sequence sits at inverse[p]
        return torch.cat(parts, dim=dim).index_select(dim, inverse)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Any, ...]:
        grp, layout, dim = ctx.options
        total = grad.contiguous().clone()
        dist.all_reduce(total, group=grp.handle)
        local = grad.shape[dim] // grp.world
        return (
            total.index_select(dim, _index(layout, grp.world, grp.rank, local, grad.device)),
            None,
            None,
            None,
        )
