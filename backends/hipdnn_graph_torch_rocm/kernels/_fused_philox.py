"""Philox dropout on torch's fused SDPA ops, with a graph's own Seed and Offset (no mask tensor).

torch's fused forward ops draw their Philox ``(seed, offset)`` from the device's default CUDA
generator and advance it; they take no seed argument. :func:`generator_at` therefore sets the
generator to the graph's ``(seed, offset)`` around the forward op and puts the caller's state
back afterwards. Both are host-side fields of the generator (``manual_seed``, ``set_offset``):
no device work, no synchronization. The fused backward ops take the seed and offset as tensors,
each op in its own form (:func:`backward_rng`):

| op | backward's ``philox_seed`` / ``philox_offset`` |
|---|---|
| efficient | int64 0-dim tensors on the **CPU** (the CUDA kernel reads them on the host) |
| cudnn | int64 0-dim tensors on the device |
| flash | ``rng_state``: uint64 ``[2]`` = (seed, offset) on the device, and an unused uint64 0-dim |

Seed and offset given as Python ints (pass-by-value or constant) cost no synchronization at all.
Given as tensors on the device, the forward must read them (``.item()``, one host sync each),
since the generator lives on the host; the cuDNN and flash backward ops take them on the device
as they are (no sync), the efficient backward reads them on the host (a sync).

The generator keeps offsets that are multiples of 4 (``set_offset`` refuses others: Philox
draws four numbers per counter), so an Offset must be one; the fused ops advance the generator
by :func:`increment` (rounded up to 4), which is what the torch op adds after each call.

Each op draws its mask from its own stream (:data:`STREAMS`). The CUDA memory-efficient kernel
draws exactly the documented stream of :mod:`hipdnn_graph.philox` (measured bit for bit); flash
and cuDNN use streams of their own; ROCm builds run AOTriton for both efficient and flash, whose
stream is AOTriton's.

Imports only :mod:`._fused_rules` (and the stream's name from the pure :mod:`.._ranking`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .._ranking import DOCUMENTED_STREAM
from ._fused_rules import FusedOp, FusedUnsupportedError

__all__ = [
    "DOCUMENTED",
    "STREAMS",
    "Philox",
    "backward_rng",
    "generator_at",
    "host_int",
    "increment",
    "stream",
]

Tensor = torch.Tensor

#: the stream defined in :mod:`hipdnn_graph.philox` (the math engine draws it too)
DOCUMENTED = DOCUMENTED_STREAM

#: (op, ROCm build) -> the Philox stream its dropout mask comes from
STREAMS: dict[tuple[FusedOp, bool], str] = {
    (FusedOp.EFFICIENT, False): DOCUMENTED,
    (FusedOp.FLASH, False): "flash (FlashAttention-2's own Philox stream)",
    (FusedOp.CUDNN, False): "cudnn (cuDNN's own Philox stream)",
    (FusedOp.EFFICIENT, True): "aotriton (AOTriton's own Philox stream)",
    (FusedOp.FLASH, True): "aotriton (AOTriton's own Philox stream)",
    (FusedOp.CUDNN, True): "none (no cuDNN attention in ROCm builds)",
}

_U64 = 1 << 64


def stream(op: FusedOp, rocm: bool | None = None) -> str:
    """The Philox stream ``op``'s dropout mask comes from on this torch build (or ``rocm``).

    Example:
        >>> stream(FusedOp.EFFICIENT, rocm=False)
        'hipdnn_graph.philox'
        >>> stream(FusedOp.EFFICIENT, rocm=True)
        "aotriton (AOTriton's own Philox stream)"
    """
    if rocm is None:
        rocm = bool(torch.version.hip)
    return STREAMS[(op, rocm)]


def increment(op: FusedOp, b: int, h: int, sq: int, skv: int) -> int:
    """How far ``op``'s forward advances the generator's offset (rounded up to 4, as torch does).

    Example:
        >>> increment(FusedOp.EFFICIENT, 8, 12, 1024, 1024)
        100663296
        >>> increment(FusedOp.FLASH, 8, 12, 1024, 1024), increment(FusedOp.CUDNN, 1, 1, 3, 3)
        (3072, 12)
    """
    n = b * h * 32 if op is FusedOp.FLASH else b * h * sq * skv
    return (n + 3) // 4 * 4


@dataclass(frozen=True)
class Philox:
    """One call's Philox dropout: probability, seed and offset (ints, or one-element tensors)."""

    p: float
    seed: int | Tensor
    offset: int | Tensor


def host_int(value: int | Tensor, what: str) -> int:
    """``value`` as a Python int; a tensor on a device is read with one host sync.

    Raises:
        ValueError: ``value`` is a tensor that is not one integer (the engine turns it into an
            execution failure).
    """
    if isinstance(value, Tensor):
        if value.numel() != 1 or value.dtype.is_floating_point or value.dtype.is_complex:
            raise ValueError(f"{what} must be one integer, got a {value.dtype} of {value.numel()}")
        return int(value.reshape(()).item())
    return int(value)


def _generator(device: torch.device) -> Any:
    if not torch.cuda.default_generators:
        torch.cuda.init()  # the generators exist once CUDA is initialized
    index = device.index if device.index is not None else torch.cuda.current_device()
    return torch.cuda.default_generators[index]


class generator_at:  # lower case: it reads as a function, ``with generator_at(...):``
    """The device's default generator at ``(seed, offset)`` inside the block; the caller's
    seed and offset are put back on the way out (host-side state only: no sync).

    Another thread drawing from the same generator inside the block would draw from the graph's
    state: the block holds only the one forward call. (A small class rather than a generator
    function: it runs around every philox forward, and costs a third as much.)

    Raises:
        FusedUnsupportedError: the offset is not a multiple of 4 (the generator refuses it).
    """

    __slots__ = ("_device", "_gen", "_offset", "_op", "_saved", "_seed")

    def __init__(self, op: FusedOp, device: torch.device, seed: int, offset: int) -> None:
        self._op, self._device, self._seed, self._offset = op, device, seed, offset

    def __enter__(self) -> None:
        offset = self._offset
        if offset % 4:
            raise FusedUnsupportedError(
                self._op, f"philox offset {offset} is not a multiple of 4 (torch's generator "
                "keeps offsets in steps of 4)"
            )  # fmt: skip
        gen = self._gen = _generator(self._device)
        self._saved = gen.initial_seed(), gen.get_offset()
        gen.manual_seed(self._seed % _U64)
        gen.set_offset(offset % _U64)

    def __exit__(self, *exc: object) -> None:
        gen = self._gen
        gen.manual_seed(self._saved[0])
        gen.set_offset(self._saved[1])


def _signed(x: int) -> int:
    """A 64-bit pattern as the int64 that holds it."""
    x %= _U64
    return x - _U64 if x >= 1 << 63 else x


def _device_i64(value: int | Tensor, device: torch.device) -> Tensor:
    """An int64 0-dim tensor on ``device``: a fill for an int, a view or cast for a tensor
    (no host sync either way)."""
    if isinstance(value, Tensor):
        return value.reshape(()).to(device=device, dtype=torch.int64)
    return torch.full((), _signed(value), dtype=torch.int64, device=device)


#: (device, stream, seed) -> the int64 device tensor holding that seed: a run's seed stays the
#: same call after call (only the offset moves on), so its fill is launched once per stream
_SEEDS: dict[tuple[Any, ...], Tensor] = {}


def _device_seed(seed: int | Tensor, device: torch.device) -> Tensor:
    """:func:`_device_i64` of ``seed``, kept per CUDA stream (a tensor filled on the stream that
    reads it is always ready; never kept while a CUDA graph is being captured, whose fill would
    only run at replay)."""
    if (
        isinstance(seed, Tensor)
        or device.type != "cuda"
        or torch.cuda.is_current_stream_capturing()
    ):
        return _device_i64(seed, device)
    key = (device, _current_stream(device), seed)
    t = _SEEDS.get(key)
    if t is None:
        if len(_SEEDS) >= 64:
            _SEEDS.clear()
        t = _SEEDS[key] = _device_i64(seed, device)
    return t


#: the raw handle of a device's current stream, without a ``torch.cuda.Stream`` object per call
#: (None on a torch without it: ``torch.cuda.current_stream`` is used)
_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _current_stream(device: torch.device) -> int:
    """The handle of ``device``'s current CUDA stream (``torch.cuda.current_stream(device)
    .cuda_stream``, read without making a Stream object: this runs on every philox backward)."""
    if _RAW_STREAM is None:
        return int(torch.cuda.current_stream(device).cuda_stream)
    index = device.index if device.index is not None else torch.cuda.current_device()
    return int(_RAW_STREAM(index))


def backward_rng(
    op: FusedOp, device: torch.device, seed: int | Tensor, offset: int | Tensor
) -> tuple[Tensor, Tensor]:
    """The backward op's ``(philox_seed, philox_offset)`` arguments in that op's form.

    Example:
        >>> s, o = backward_rng(FusedOp.EFFICIENT, torch.device("cpu"), 7, 8)
        >>> s.device.type, s.dtype, s.dim(), int(s), int(o)
        ('cpu', torch.int64, 0, 7, 8)
    """
    if op is FusedOp.EFFICIENT:
        s, o = host_int(seed, "Seed"), host_int(offset, "Offset")
        return (torch.tensor(_signed(s), dtype=torch.int64),
                torch.tensor(_signed(o), dtype=torch.int64))  # fmt: skip
    if op is FusedOp.CUDNN:
        return _device_seed(seed, device), _device_i64(offset, device)
    state = torch.stack([_device_seed(seed, device), _device_i64(offset, device)])
    return state.view(torch.uint64), torch.empty((), dtype=torch.uint64, device=device)
