"""Agreement before a collective: every rank's verdict on its own arguments and its signature.

A distributed call must not leave a rank waiting in a collective that another rank has left by
raising. So before any communication of its own, each call checks its arguments locally, and
:func:`agree` exchanges one fixed-size float64 vector per rank with one ``all_gather``:

* the rank's verdict: ``0`` (accepted) or ``1`` (refused), the :class:`~hipdnn_graph.ErrorCode`
  and the UTF-8 bytes of the message (at most :data:`MESSAGE_BYTES`);
* its signature: every shape, dtype, device type, option and gradient flag the call depends on,
  as numbers (zeros where the rank refused its arguments).

Every rank then sees every row and raises the same :class:`~hipdnn_graph.HipdnnError` (the same
code and message): the first refusing rank's error, or the first rank whose signature differs
from rank 0's, with the differing entries named. So all ranks raise together or none does.

Example:
    >>> decode(encode("key heads (1) differ 🙂", 12))  # cut at a character boundary
    'key heads (1'
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from ...errors import HipdnnError
from ...types import ErrorCode

if TYPE_CHECKING:
    from ._group import Group

__all__ = [
    "DEVICE_TYPES",
    "DTYPES",
    "DTYPE_NAMES",
    "MESSAGE_BYTES",
    "agree",
    "code_labels",
    "decode",
    "device_code",
    "dtype_code",
    "encode",
]

#: dtypes by code in signatures (any other dtype is ``len(DTYPES)``)
DTYPES: tuple[torch.dtype, ...] = (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.uint8, torch.int8,
    torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128,
)  # fmt: skip

#: the names of :data:`DTYPES` (labels of a signature's dtype entry)
DTYPE_NAMES: tuple[str, ...] = tuple(str(d).removeprefix("torch.") for d in DTYPES)

#: device types by code in signatures (any other is ``len(DEVICE_TYPES)``); the index differs
#: between ranks (each rank its own GPU), so only the type is compared
DEVICE_TYPES: tuple[str, ...] = ("cpu", "cuda", "meta")

#: the longest message a refusing rank sends to the others (longer ones are cut)
MESSAGE_BYTES = 512


def code_labels(layouts: Iterable[str], *flags: str) -> dict[str, tuple[str, ...]]:
    """The ``labels`` of :func:`agree` for a signature's coded entries: ``dtype``, ``layout``
    (by ``layouts``), ``device``, ``autograd`` and the bool options ``flags``.

    Example:
        >>> code_labels(("zigzag",), "is_causal")["is_causal"]
        ('False', 'True')
    """
    labels = {"dtype": DTYPE_NAMES, "layout": tuple(layouts), "device": DEVICE_TYPES}
    return labels | dict.fromkeys(("autograd", *flags), ("False", "True"))


def dtype_code(dtype: torch.dtype) -> float:
    """A dtype as a signature entry."""
    return float(DTYPES.index(dtype)) if dtype in DTYPES else float(len(DTYPES))


def device_code(device: torch.device) -> float:
    """A device's type as a signature entry."""
    kind = device.type
    return float(DEVICE_TYPES.index(kind)) if kind in DEVICE_TYPES else float(len(DEVICE_TYPES))


def encode(message: str, size: int = MESSAGE_BYTES) -> list[float]:
    """``message`` as ``size`` numbers: its UTF-8 bytes (cut at a character boundary), then
    zeros."""
    raw = message.encode("utf-8", "replace")[:size].decode("utf-8", "ignore").encode()
    return [float(b) for b in raw] + [0.0] * (size - len(raw))


def decode(numbers: Sequence[float]) -> str:
    """The message :func:`encode` wrote."""
    raw = bytes(int(x) for x in numbers if 0 < x < 256)
    return raw.decode("utf-8", "replace")


def _device(group: Group, like: Any) -> torch.device:
    """Where the group's collectives take their tensors."""
    backend = str(dist.get_backend(group.handle))
    if backend == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    if backend == "gloo" or not isinstance(like, torch.Tensor) or like.device.type == "meta":
        return torch.device("cpu")
    return like.device


def agree(
    group: Group,
    what: str,
    error: HipdnnError | None,
    signature: Sequence[float],
    names: Sequence[str],
    like: Any = None,
    labels: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Check collectively that every rank accepted its arguments and that their signatures match.

    Each rank passes its own verdict (``error``: why its arguments are bad, or ``None``) and a
    signature of the same length on every rank (``names`` label its entries for the message,
    ``labels`` name the codes of coded entries, such as dtypes). One ``all_gather`` of these
    vectors; then every rank raises the same error when any rank refused or any signature
    differs, so that all ranks leave together. ``like``: a tensor of the call (where a backend
    other than NCCL and gloo takes its collectives).

    Raises:
        HipdnnError: the first refusing rank's code, with
            ``"{what}: rank R refused its arguments: …"``; or ``INVALID_VALUE``,
            ``"{what}: arguments differ across ranks (rank 0 vs rank R: …)"``.
    """
    verdict = [0.0, 0.0, *encode("")]
    if error is not None:
        verdict = [1.0, float(error.code), *encode(error.message)]
    mine = torch.tensor([*verdict, *signature], dtype=torch.float64)
    device = _device(group, like)
    parts = [torch.empty_like(mine, device=device) for _ in range(group.world)]
    dist.all_gather(parts, mine.to(device), group=group.handle)
    rows = torch.stack(parts).cpu().tolist()
    refused = [r for r, row in enumerate(rows) if row[0]]
    if refused:
        first = rows[refused[0]]
        others = "" if len(refused) == 1 else f" (ranks {', '.join(map(str, refused))} refused)"
        raise HipdnnError(
            _code(first[1]),
            f"{what}: rank {refused[0]} refused its arguments{others}: {decode(first[2:])}",
        )
    start = 2 + MESSAGE_BYTES
    base = rows[0][start:]
    for rank, row in enumerate(rows[1:], 1):
        diff = [i for i, (a, b) in enumerate(zip(base, row[start:], strict=True)) if a != b]
        if diff:
            show = functools.partial(_show, labels or {})
            detail = ", ".join(
                f"{names[i]} {show(names[i], base[i])} vs {show(names[i], row[start + i])}"
                for i in diff
            )
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"{what}: arguments differ across ranks (rank 0 vs rank {rank}: {detail}); "
                "every rank must pass the same shapes and options",
            )


def _code(x: float) -> ErrorCode:
    try:
        return ErrorCode(int(x))
    except ValueError:
        return ErrorCode.INVALID_VALUE


def _show(labels: Mapping[str, Sequence[str]], name: str, x: float) -> str:
    if name in labels:
        names = labels[name]
        return names[int(x)] if 0 <= x < len(names) and float(x).is_integer() else "other"
    return str(int(x)) if float(x).is_integer() else repr(x)
