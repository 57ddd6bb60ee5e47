"""Philox dropout keep masks with torch integer ops, for the math kernel (any device, any build).

The same stream as :mod:`hipdnn_graph.philox` (the NumPy definition; the memory-efficient CUDA
kernel's stream), bit for bit: element ``(b, h, i, j)`` of a ``[B, H, Sq, Skv]`` matrix takes
word ``L mod 4`` of Philox4x32-10 at counter ``L // 4`` under key ``seed``, where
``L = offset + ((b·H + h)·Sq + i)·Skv + j``, and is kept iff that word is at least
:func:`keep_words` (the integer form of ``uniform > p``). Kernel modules run where only torch is
installed, so they cannot import ``hipdnn_graph``: the round constants and the uniform conversion
are restated here, and ``tests/test_philox_dropout.py`` checks them against the definition.

On a GPU everything is int64 torch arithmetic that never overflows (32×32-bit products are
split into 16-bit halves), so it runs on CUDA and ROCm alike without unsigned or CUDA-only ops.
On the CPU (where NumPy is installed) the same rounds run in NumPy's uint64 (one exact product
per multiplication and a third of the operations, each far cheaper than a torch op on small
arrays): the two give the same words, and the CPU tests check both against the definition.
A seed or offset may be a Python int or a one-element integer tensor; a tensor on the compute
device is used there (no host synchronization), one on the CPU is read as a host number.
"""

from __future__ import annotations

import functools
import struct
from typing import Any

import torch

try:
    import numpy as np

    HAVE_NUMPY = True
except ImportError:  # kernels import with torch alone: the CPU then takes the torch route
    HAVE_NUMPY = False

__all__ = [
    "PHILOX_M0",
    "PHILOX_M1",
    "PHILOX_ROUNDS",
    "PHILOX_W0",
    "PHILOX_W1",
    "Scalar",
    "keep_words",
    "philox_keep",
]

#: Philox4x32 round multipliers and Weyl key increments (hipdnn_graph.philox's constants)
PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
PHILOX_ROUNDS = 10

Tensor = torch.Tensor
#: a seed or offset: a Python int (any sign, read mod 2**64) or a one-element integer tensor
Scalar = int | Tensor

_M32 = 0xFFFFFFFF
_M16 = 0xFFFF
#: Philox blocks per chunk on the CPU (bounds the temporaries: about 7 NumPy uint64 arrays of
#: this many elements live, about 10 torch int64 ones where torch computes the mask)
_CHUNK_CPU = 1 << 16
_CHUNK_GPU = 1 << 21


def _fl32(x: float) -> float:
    """``x`` rounded to float32 (to nearest, ties to even)."""
    value: float = struct.unpack("f", struct.pack("f", x))[0]
    return value


def _uniform(x: int) -> float:
    """curand's uniform of the 32-bit word ``x``: ``fl32(fl32(x)·2**-32 + 2**-33)``.

    The sum is exact in float64 (at most 24 significant bits apart), so rounding it once to
    float32 is the float32 addition.
    """
    return _fl32(_fl32(float(x)) * 2.0**-32 + 2.0**-33)


@functools.cache
def keep_words(p: float) -> int:
    """The smallest 32-bit word kept by ``uniform > fl32(p)`` (``2**32``: none).

    Raises:
        ValueError: unless ``0 <= p < 1``.

    Example:
        >>> keep_words(0.5)
        2147483777
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"sdpa math: dropout_p must be in [0, 1), got {p}")
    threshold = _fl32(p)
    lo, hi = 0, 1 << 32
    while lo < hi:  # the uniform never decreases as the word grows
        mid = (lo + hi) // 2
        if _uniform(mid) > threshold:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _words(x: Scalar, device: torch.device) -> tuple[int | Tensor, int | Tensor]:
    """(low, high) 32-bit words of a 64-bit value read as unsigned."""
    if isinstance(x, Tensor):
        if x.device.type == "cpu" and device.type != "cpu":
            x = int(x.reshape(-1)[0].item())  # a host number: no device synchronization
        else:
            t = x.reshape(()).to(device=device, dtype=torch.int64)
            return t & _M32, (t >> 32) & _M32
    u = int(x) % (1 << 64)
    return u & _M32, u >> 32


def _mulhilo(m: int, c: Tensor) -> tuple[Tensor, Tensor]:
    """``(hi, lo)`` 32-bit halves of ``m·c`` for ``m, c < 2**32``, without int64 overflow."""
    a = (c & _M16) * m  # < 2**48
    b = (c >> 16) * m  # < 2**48
    t = a + ((b & _M16) << 16)  # < 2**49
    return (b >> 16) + (t >> 32), t & _M32


def _philox(ctr: Tensor, k0: int | Tensor, k1: int | Tensor) -> list[Tensor]:
    """The four output words of Philox4x32-10 at 128-bit counters ``ctr`` (< 2**63; words 2 and
    3 zero) as int64 tensors holding 32-bit values."""
    c0, c1 = ctr & _M32, ctr >> 32
    c2 = c3 = torch.zeros_like(ctr)
    for _ in range(PHILOX_ROUNDS):
        hi0, lo0 = _mulhilo(PHILOX_M0, c0)
        hi1, lo1 = _mulhilo(PHILOX_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = (k0 + PHILOX_W0) & _M32
        k1 = (k1 + PHILOX_W1) & _M32
    return [c0, c1, c2, c3]


def _philox_numpy(ctr: Any, k0: int, k1: int) -> Any:
    """:func:`_philox` in NumPy uint64 (products of two 32-bit words are exact in 64 bits): the
    four output words stacked first, ``[4, *ctr.shape]``. Every operation writes a buffer made
    once, so the ten rounds allocate nothing: at a chunk of 65,536 blocks that took the rounds
    from 2.6-2.8 to 1.4-1.5 ms in the development container (a fresh temporary per operation
    cost about as much as the arithmetic)."""
    m32, shift = np.uint64(_M32), np.uint64(32)
    m0, m1 = np.uint64(PHILOX_M0), np.uint64(PHILOX_M1)
    words = np.empty((4, *ctr.shape), dtype=np.uint64)
    c0, c1, c2, c3 = words
    np.bitwise_and(ctr, m32, out=c0)
    np.right_shift(ctr, shift, out=c1)
    c2.fill(0)
    c3.fill(0)
    p0, p1 = np.empty_like(ctr), np.empty_like(ctr)
    for _ in range(PHILOX_ROUNDS):
        np.multiply(c0, m0, out=p0)
        np.multiply(c2, m1, out=p1)
        # (c0, c1, c2, c3) <- (hi(p1) ^ c1 ^ k0, lo(p1), hi(p0) ^ c3 ^ k1, lo(p0))
        np.right_shift(p1, shift, out=c0)
        c0 ^= c1
        c0 ^= np.uint64(k0)
        np.bitwise_and(p1, m32, out=c1)
        np.right_shift(p0, shift, out=c2)
        c2 ^= c3
        c2 ^= np.uint64(k1)
        np.bitwise_and(p0, m32, out=c3)
        k0 = (k0 + PHILOX_W0) & _M32
        k1 = (k1 + PHILOX_W1) & _M32
    return words


def _host_u64(x: Scalar) -> int:
    """A host value (a Python int or a CPU tensor) read as an unsigned 64-bit number."""
    return (int(x.reshape(-1)[0].item()) if isinstance(x, Tensor) else int(x)) % (1 << 64)


def _keep_numpy(
    seed: Scalar, offset: Scalar, threshold: int, shape: tuple[int, int, int, int],
    rows: tuple[int, int], cols: tuple[int, int],
) -> Tensor:  # fmt: skip
    """:func:`philox_keep` on the CPU, through :func:`_philox_numpy`."""
    b, h, sq, skv = shape
    (i0, i1), (j0, j1) = rows, cols
    n, width = i1 - i0, j1 - j0
    out = np.empty((b * h * n, width), dtype=np.bool_)
    if out.size:
        key, start = _host_u64(seed), _host_u64(offset)
        k0, k1 = key & _M32, key >> 32
        off_block, off_lane = np.uint64(start >> 2), np.uint64(start & 3)
        lead = np.arange(b * h, dtype=np.uint64).reshape(-1, 1) * np.uint64(sq)
        rows_first = (lead + np.arange(i0, i1, dtype=np.uint64)) * np.uint64(skv) + np.uint64(j0)
        rel: Any = rows_first.reshape(-1) + off_lane  # each row's first element, in its block
        lanes = (rel & np.uint64(3)).astype(np.intp)
        # rows that all start at one lane (Skv a multiple of 4, the usual case) read the same
        # columns of their blocks: a slice, and no block more than they need
        lane0 = int(lanes[0]) if (lanes == lanes[0]).all() else None
        nblocks = (width + 7) // 4 if lane0 is None else (lane0 + width + 3) // 4
        step = max(1, _CHUNK_CPU // nblocks)
        blocks = np.arange(nblocks, dtype=np.uint64)
        columns = np.arange(width, dtype=np.intp)
        for r0 in range(0, rel.size, step):
            part = rel[r0 : r0 + step]
            ctr = (off_block + (part >> np.uint64(2))).reshape(-1, 1) + blocks
            # compared first, then laid out as the stream runs (block by block, four words
            # each): the interleaving copy moves bools, not 64-bit words
            kept = _philox_numpy(ctr, k0, k1) >= np.uint64(threshold)
            stream = np.moveaxis(kept, 0, -1).reshape(ctr.shape[0], -1)
            if lane0 is not None:
                out[r0 : r0 + step] = stream[:, lane0 : lane0 + width]
            else:  # each row from its own lane on
                lane = lanes[r0 : r0 + step].reshape(-1, 1)
                out[r0 : r0 + step] = np.take_along_axis(stream, lane + columns, axis=1)
    return torch.from_numpy(out).view(b, h, n, width)


def philox_keep(
    seed: Scalar,
    offset: Scalar,
    threshold: int,
    shape: tuple[int, int, int, int],
    rows: tuple[int, int],
    cols: tuple[int, int],
    device: torch.device,
) -> Tensor:
    """The keep mask of the block ``[:, :, rows, cols]`` of a ``[B, H, Sq, Skv]`` matrix.

    Args:
        seed: The Philox key (64 bits, read as unsigned).
        offset: The stream offset (64 bits, read as unsigned).
        threshold: :func:`keep_words` of the probability.
        shape: ``(B, H, Sq, Skv)`` of the whole matrix (it fixes each element's position).
        rows: ``(i0, i1)``, the query rows of the block.
        cols: ``(j0, j1)``, the key columns of the block.
        device: Where the mask is computed and returned.

    Returns:
        A bool tensor ``[B, H, i1 − i0, j1 − j0]`` on ``device`` (True: kept), equal to
        ``hipdnn_graph.philox.dropout_keep_mask(seed, offset, p, shape, rows=rows, cols=cols)``.

    Example:
        >>> import torch
        >>> got = philox_keep(42, 0, keep_words(0.5), (1, 1, 5, 7), (0, 1), (0, 4),
        ...                   torch.device("cpu"))
        >>> got.flatten().tolist()  # hipdnn_graph.philox.dropout_keep_mask's first row
        [True, False, False, False]
    """
    if device.type == "cpu" and HAVE_NUMPY:
        return _keep_numpy(seed, offset, threshold, shape, rows, cols)
    return _keep_torch(seed, offset, threshold, shape, rows, cols, device)


def _keep_torch(
    seed: Scalar, offset: Scalar, threshold: int, shape: tuple[int, int, int, int],
    rows: tuple[int, int], cols: tuple[int, int], device: torch.device,
) -> Tensor:  # fmt: skip
    """:func:`philox_keep` with torch int64 ops on ``device`` (any device; the GPUs' route)."""
    b, h, sq, skv = shape
    (i0, i1), (j0, j1) = rows, cols
    n, width = i1 - i0, j1 - j0
    out = torch.empty(b * h * n, width, dtype=torch.bool, device=device)
    if out.numel() == 0:
        return out.view(b, h, n, width)
    k0, k1 = _words(seed, device)
    lo, hi = _words(offset, device)
    off_block = hi * (1 << 30) + (lo >> 2)  # offset // 4, < 2**62
    off_lane = lo & 3
    lead = torch.arange(b * h, device=device, dtype=torch.int64).view(-1, 1) * sq
    base = ((lead + torch.arange(i0, i1, device=device, dtype=torch.int64)) * skv + j0).view(-1)
    nblocks = (width + 7) // 4  # a row that starts at lane 3 spans one block more
    chunk = _CHUNK_CPU if device.type == "cpu" else _CHUNK_GPU
    step = max(1, chunk // nblocks)
    blocks = torch.arange(nblocks, device=device, dtype=torch.int64)
    for r0 in range(0, base.numel(), step):
        rel = base[r0 : r0 + step] + off_lane
        ctr = (off_block + (rel >> 2)).view(-1, 1) + blocks
        words = torch.stack(_philox(ctr, k0, k1), dim=-1).view(ctr.shape[0], 4 * nblocks)
        kept = words >= threshold
        lane = (rel & 3).view(-1, 1)
        sel = kept[:, 0:width]
        for first in (1, 2, 3):
            sel = torch.where(lane == first, kept[:, first : first + width], sel)
        out[r0 : r0 + step] = sel
    return out.view(b, h, n, width)
