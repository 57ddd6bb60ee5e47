"""What a plan knows of each non-virtual tensor before binding a variant pack: its
:class:`TensorSpec` (uid, name, shape, strides, dtypes, direction), whether it is bound as a
Python number (:func:`is_runtime_scalar`, :func:`scalar_value`), and the error every
variant-pack check raises (:func:`pack_error`).

Example:
    >>> import hipdnn_graph as hg
    >>> spec = TensorSpec(uid=1, name="Q", shape=(2, 3), strides=(3, 1),
    ...                   data_type=hg.DataType.FLOAT, is_output=False)
    >>> spec.label, spec.span_bytes, spec.byte_strides
    ("'Q' (uid 1)", 24, (12, 4))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import DataType, ErrorCode
from .buffers import is_torch_tensor
from .dtypes import numpy_dtype, torch_dtype
from .layout import same_layout

if TYPE_CHECKING:
    from .ragged import RaggedLayout

__all__ = ["TensorSpec", "is_runtime_scalar", "pack_error", "scalar_value"]


def is_runtime_scalar(tensor: TensorAttributes) -> bool:
    """Whether the engines receive ``tensor`` as a Python number: a pass-by-value tensor of
    one element (no dims, or dims whose product is 1).

    A pass-by-value tensor of more elements (hipDNN's ``Graph.tensor_like`` of any host array
    makes one) is a host buffer: it is bound and read as an array, like any input.

    Example:
        >>> import hipdnn_graph as hg
        >>> from hipdnn_graph.backend import is_runtime_scalar
        >>> t = hg.TensorAttributes(dim=[1, 1], is_pass_by_value=True)
        >>> is_runtime_scalar(t), is_runtime_scalar(t.set_dim([2, 3]))
        (True, False)
    """
    return tensor.is_pass_by_value and tensor.get_volume() == 1


def pack_error(message: str) -> HipdnnError:
    """The ``INVALID_VARIANT_PACK`` error every variant-pack check raises."""
    return HipdnnError(ErrorCode.INVALID_VARIANT_PACK, message)


@dataclass
class TensorSpec:
    """What the graph declares for one non-virtual tensor."""

    uid: int
    name: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    data_type: DataType
    is_output: bool
    #: a runtime scalar, bound as a Python number (:func:`is_runtime_scalar`); a pass-by-value
    #: tensor of more elements is bound as an array, like any input
    pass_by_value: bool = False
    #: the graph's own tensor object; a variant-pack key must be this object (or its uid)
    tensor: TensorAttributes | None = field(default=None, repr=False, compare=False)
    #: a packed (ragged) tensor: where its sequences lie (:class:`~.ragged.RaggedLayout`); its
    #: buffer is a packed token buffer, not one of the declared dims
    ragged: RaggedLayout | None = field(default=None, repr=False, compare=False)
    label: str = field(init=False)
    span_bytes: int = field(init=False)
    #: NumPy dtype and byte strides a buffer matches on the fast path (``None``: no NumPy type)
    np_dtype: np.dtype[Any] | None = field(init=False, repr=False)
    byte_strides: tuple[int, ...] = field(init=False, repr=False)
    _torch_dtype: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.label = f"'{self.name}' (uid {self.uid})"
        try:
            self.np_dtype = numpy_dtype(self.data_type)
            itemsize = self.np_dtype.itemsize
        except HipdnnError:
            self.np_dtype, itemsize = None, 1
        self.byte_strides = tuple(s * itemsize for s in self.strides)
        extent = sum((d - 1) * abs(s) for d, s in zip(self.shape, self.strides, strict=False))
        self.span_bytes = (extent + 1) * itemsize

    @classmethod
    def of(cls, tensor: TensorAttributes, is_output: bool) -> TensorSpec:
        """The spec of one of the graph's tensors; a ragged one carries its layout (the engine
        that accepted the graph has checked that it has one)."""
        from .ragged import RaggedLayout, is_ragged

        return cls(
            uid=tensor.get_uid(),
            name=tensor.name,
            shape=tuple(tensor.dim),
            strides=tuple(tensor.stride),
            data_type=tensor.data_type,
            is_output=is_output,
            pass_by_value=is_runtime_scalar(tensor),
            tensor=tensor,
            ragged=RaggedLayout.of(tensor) if is_ragged(tensor) else None,
        )

    def strides_match(self, strides: Sequence[int]) -> bool:
        """Equal strides, ignoring dims of size 1 (their stride never matters)."""
        return same_layout(self.shape, tuple(strides), self.strides)

    def torch_dtype(self) -> Any:
        if self._torch_dtype is None:
            self._torch_dtype = torch_dtype(self.data_type)
        return self._torch_dtype


def scalar_value(value: Any, spec: TensorSpec) -> int | float | bool:
    """The Python number a pass-by-value tensor is bound as (a number, a NumPy scalar, or a
    one-element array or tensor).

    Raises:
        HipdnnError: ``INVALID_VARIANT_PACK`` for anything else.
    """
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, np.generic):
        return value.item()  # type: ignore[no-any-return]
    numel = value.numel() if is_torch_tensor(value) else getattr(value, "size", None)
    if numel == 1:
        item = value.reshape(-1)[0]
        return item.item() if hasattr(item, "item") else item  # type: ignore[no-any-return]
    raise pack_error(f"Variant pack tensor {spec.label} is pass-by-value and needs a single number")
