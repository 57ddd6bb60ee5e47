"""Packed (ragged) tensors in a variant pack: where each sequence of a ragged tensor lies in its
buffer, and the checks the variant-pack binder makes of that buffer and of its offsets.

A ragged tensor (``set_ragged_offset``) declares the padded dims ``[B, H, S_max, D]`` of a
batch, but its buffer is the packed token buffer, as in hipDNN (RFC 0014,
``samples/sdpa/SdpaRaggedFprop.cpp``, whose ``RaggedTensor`` holds ``offset[B]`` elements):
the offsets tensor holds ``B + 1`` stored offsets; times the multiplier they are element offsets,
sequence ``b`` being elements ``[offset[b], offset[b + 1])``, and its length in tokens that span
divided by the sequence dim's stride. Only token-major layouts pack (hipDNN's BSHD): a token's
``H × D`` elements lie within one sequence stride.

The buffer may be any dense block of the tensor's data type (a flat array, a ``[T, H, D]``
array, or one of the declared dims and strides); the binder checks its type, that it is one
block, that the offsets are whole tokens, never decrease and no sequence is longer than
``S_max``, and that the block holds every element the offsets reach (:meth:`RaggedLayout.
elements_needed`). Engines read it through :meth:`RaggedLayout.token_view`.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> off = hg.TensorAttributes(name="off", dim=[3, 1, 1, 1], data_type=hg.DataType.INT32)
    >>> q = hg.TensorAttributes(name="Q", dim=[2, 2, 4, 8], stride=[64, 8, 16, 1], uid=1)
    >>> _ = off.set_uid(2); _ = q.set_ragged_offset(off).set_ragged_offset_multiplier(16)
    >>> layout = RaggedLayout.of(q)
    >>> bounds = layout.token_bounds(np.array([0, 3, 5]))
    >>> bounds.tolist(), layout.elements_needed(bounds)
    ([0, 3, 5], 80)
    >>> try:
    ...     layout.token_bounds(np.array([0, 5, 6]))
    ... except hg.HipdnnError as err:
    ...     print(err.code.name); print(err)
    INVALID_VARIANT_PACK
    Ragged offsets 'off' of tensor 'Q': sequence 0 holds 5 tokens, more than S_max (4)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import ErrorCode
from .buffers import is_torch_tensor
from .tensor_spec import pack_error

__all__ = ["RaggedLayout", "host_integers", "is_ragged", "one_block"]


def is_ragged(tensor: TensorAttributes) -> bool:
    """Whether ``tensor`` is packed: it has ragged offsets."""
    return tensor.get_ragged_offset() is not None


def host_integers(buffer: Any) -> list[int]:
    """The integers of an offsets or sequence-length buffer (NumPy, torch on any device: a
    device tensor is copied to the host, a synchronisation) as a flat Python list."""
    if is_torch_tensor(buffer):
        return [int(x) for x in buffer.detach().reshape(-1).cpu().tolist()]
    return [int(x) for x in np.asarray(buffer).reshape(-1).tolist()]


def one_block(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether an array of ``shape`` and element ``strides`` fills one block of memory without
    gaps or overlaps, in any dim order (C-contiguous, a transposed view of it, the declared
    layout of a packed tensor). An array without elements is an empty block, whatever its
    strides (torch gives a zero-token gradient strides of 0).

    Example:
        >>> one_block((2, 3), (1, 2)), one_block((2, 3), (4, 1)), one_block((4,), (0,))
        (True, False, False)
        >>> one_block((0, 2, 8), (0, 0, 0))
        True
    """
    if 0 in shape:
        return True
    expected = 1
    for stride, size in sorted((s, d) for d, s in zip(shape, strides, strict=True) if d != 1):
        if stride != expected:
            return False
        expected *= size
    return True


@dataclass(frozen=True)
class RaggedLayout:
    """Where the sequences of one packed ``[B, H, S_max, D]`` tensor lie in its buffer."""

    uid: int
    name: str
    offsets_uid: int
    offsets_name: str
    multiplier: int
    batch: int
    heads: int
    seq_max: int
    width: int
    #: element strides of the head, token (sequence) and dim axes
    head_stride: int
    token_stride: int
    dim_stride: int

    @classmethod
    def of(cls, tensor: TensorAttributes) -> RaggedLayout:
        """The layout of a ragged rank-4 tensor.

        Raises:
            HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a tensor that is not rank 4 or not token
                major (a packed buffer cannot hold it), naming it.
        """
        offsets = tensor.get_ragged_offset()
        if offsets is None:
            raise HipdnnError(ErrorCode.INVALID_VALUE, f"Tensor {tensor.name} is not ragged")
        dims, strides = list(tensor.get_dim()), list(tensor.get_stride())
        if len(dims) != 4 or len(strides) != 4:
            raise HipdnnError(
                ErrorCode.GRAPH_NOT_SUPPORTED,
                f"Ragged tensor {tensor.name} must be [B, H, S_max, D], got dims {dims}",
            )
        b, h, s, d = (int(x) for x in dims)
        _, hs, ts, ds = (int(x) for x in strides)
        reach = (h - 1) * hs + (d - 1) * ds + 1
        if min(hs, ts, ds) < 0 or ts <= 0 or reach > ts:
            raise HipdnnError(
                ErrorCode.GRAPH_NOT_SUPPORTED,
                f"Ragged tensor {tensor.name} has strides {strides}: a packed buffer needs "
                "each token's H x D elements within one sequence stride (token-major, BSHD)",
            )
        return cls(
            uid=int(tensor.get_uid()),
            name=tensor.name,
            offsets_uid=int(offsets.get_uid()),
            offsets_name=offsets.name,
            multiplier=int(tensor.get_ragged_offset_multiplier()),
            batch=b, heads=h, seq_max=s, width=d, head_stride=hs, token_stride=ts, dim_stride=ds,
        )  # fmt: skip

    def _error(self, what: str) -> HipdnnError:
        return pack_error(f"Ragged offsets '{self.offsets_name}' of tensor '{self.name}': {what}")

    def token_bounds(self, offsets: Any) -> npt.NDArray[np.int64]:
        """The ``B + 1`` token bounds the offsets buffer gives: sequence ``b`` is tokens
        ``[bounds[b], bounds[b + 1])`` of the buffer.

        Raises:
            HipdnnError: ``INVALID_VARIANT_PACK`` for a negative offset, decreasing offsets, an
                offset that is no whole number of tokens, or a sequence longer than ``S_max``.
        """
        stored = host_integers(offsets)
        if len(stored) != self.batch + 1:
            raise self._error(f"{len(stored)} offsets given, {self.batch + 1} needed (B + 1)")
        bounds = []
        for i, value in enumerate(stored):
            element = value * self.multiplier
            if value < 0:
                raise self._error(f"offset [{i}] is {value}, below 0")
            if element % self.token_stride:
                raise self._error(
                    f"offset [{i}] = {value} (x {self.multiplier}) is {element} elements, not a "
                    f"whole number of tokens of {self.token_stride} elements"
                )
            bounds.append(element // self.token_stride)
        for b in range(self.batch):
            length = bounds[b + 1] - bounds[b]
            if length < 0:
                raise self._error(
                    f"offsets must not decrease, but offset [{b}] = {stored[b]} > offset "
                    f"[{b + 1}] = {stored[b + 1]}"
                )
            if length > self.seq_max:
                raise self._error(
                    f"sequence {b} holds {length} tokens, more than S_max ({self.seq_max})"
                )
        return np.asarray(bounds, dtype=np.int64)

    def elements_needed(self, bounds: npt.NDArray[np.int64]) -> int:
        """How many elements from its start the buffer must hold for tokens ``[0, bounds[B])``
        (``offset[B] × multiplier`` for a token-major layout without gaps)."""
        tokens = int(bounds[-1])
        if tokens == 0:
            return 0
        reach = (self.heads - 1) * self.head_stride + (self.width - 1) * self.dim_stride + 1
        return (tokens - 1) * self.token_stride + reach

    def token_view(self, buffer: Any, tokens: int) -> Any:
        """The first ``tokens`` tokens of a bound buffer (NumPy or torch) as a ``[T, H, D]``
        view sharing its memory (writable when the buffer is). The binder checked that the
        buffer holds them."""
        shape = (tokens, self.heads, self.width)
        strides = (self.token_stride, self.head_stride, self.dim_stride)
        if is_torch_tensor(buffer):
            return buffer.as_strided(shape, strides)
        item = buffer.itemsize
        return np.lib.stride_tricks.as_strided(
            buffer, shape=shape, strides=tuple(s * item for s in strides)
        )
