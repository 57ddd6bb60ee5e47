"""Philox dropout of an SDPA node, as engines see it: probability, and where Seed and Offset come
from (a constant, a runtime pass-by-value scalar, or a one-element tensor in the variant pack).

The stream itself is defined in :mod:`hipdnn_graph.philox`; :attr:`SdpaProblem.philox
<hipdnn_graph.backend.SdpaProblem.philox>` builds a :class:`PhiloxDropout` for a node.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 2, 8, 16])
    >>> seed = g.tensor(name="seed", dim=[1], data_type=hg.DataType.INT64)
    >>> offset = hg.TensorAttributes(name="offset").set_value(12)
    >>> o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"),
    ...               dropout=(0.25, seed, offset))
    >>> g.validate()
    >>> d = hg.backend.SdpaProblem.from_node(g.nodes[0]).philox
    >>> d.probability, d.seed.uid is not None, d.offset.value, d.scale
    (0.25, True, 12, 1.3333333333333333)
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import HipdnnError
from ..philox import dropout_scale
from ..tensor import TensorAttributes
from ..types import DataType, ErrorCode

__all__ = ["PHILOX_SCALAR_TYPES", "IntSource", "PhiloxDropout", "philox_refusal", "read_int"]

#: data types a Seed or Offset tensor may have (the value is read as a 64-bit integer)
PHILOX_SCALAR_TYPES = frozenset({DataType.INT64, DataType.INT32})


def read_int(value: Any, label: str) -> int:
    """The integer a Seed or Offset buffer holds: a Python or NumPy integer, or a one-element
    integer array or torch tensor (a device tensor is copied to the host, which synchronizes).

    Raises:
        HipdnnError: ``INVALID_VARIANT_PACK`` for anything else (a float, a bool, several
            elements).

    Example:
        >>> import numpy as np
        >>> from hipdnn_graph.backend.dropout import read_int
        >>> read_int(np.array([[-5]], dtype=np.int64), "seed"), read_int(7, "offset")
        (-5, 7)
    """
    item = value
    if not isinstance(value, int | np.integer) and hasattr(value, "dtype"):
        numel = value.numel() if hasattr(value, "numel") else getattr(value, "size", 0)
        dtype = str(value.dtype)
        if numel == 1 and "int" in dtype:
            item = value.reshape(-1)[0]
            item = item.item() if hasattr(item, "item") else item
    if isinstance(item, bool | np.bool_) or not isinstance(item, int | np.integer):
        raise HipdnnError(
            ErrorCode.INVALID_VARIANT_PACK,
            f"philox dropout: {label} must hold one integer (INT64 or INT32), got {value!r}",
        )
    return operator.index(item)


@dataclass(frozen=True)
class IntSource:
    """An integer scalar known when the plan is built (``value``) or read from the variant pack
    (``uid``; ``by_value``: a runtime pass-by-value scalar rather than a tensor buffer)."""

    value: int | None = None
    uid: int | None = None
    by_value: bool = False
    label: str = ""

    @classmethod
    def of(cls, tensor: TensorAttributes, label: str) -> IntSource:
        """Where the scalar of ``tensor`` comes from."""
        if tensor.value is not None and not tensor.is_pass_by_value:
            return cls(value=read_int(tensor.value, label), label=label)
        return cls(uid=tensor.get_uid(), by_value=tensor.is_pass_by_value, label=label)

    def resolve(self, variant_pack: Mapping[int, Any]) -> int:
        """The integer, read on the host (see :func:`read_int`).

        Raises:
            HipdnnError: ``INVALID_VARIANT_PACK`` when the buffer does not hold one integer.
        """
        if self.uid is None:
            assert self.value is not None
            return self.value
        return read_int(variant_pack[self.uid], self.label)


@dataclass(frozen=True)
class PhiloxDropout:
    """A node's philox dropout: ``probability`` and the sources of its seed and offset."""

    probability: float
    seed: IntSource
    offset: IntSource

    @property
    def scale(self) -> float:
        """``1 / (1 − p)``, the factor of the kept probabilities."""
        return dropout_scale(self.probability)


def philox_refusal(node: str, tensors: Mapping[str, TensorAttributes]) -> str | None:
    """Why a node's philox dropout cannot run on the documented stream, or ``None``.

    It needs a Seed and an Offset of an integer type; the scale is ``1/(1 − p)``, so a
    Dropout_scale tensor (the mask form's) is refused rather than ignored.
    """
    for slot in ("Seed", "Offset"):
        tensor = tensors.get(slot)
        if tensor is None:
            return f"node '{node}': philox dropout needs a Seed and an Offset; {slot} is not set"
        if tensor.data_type not in PHILOX_SCALAR_TYPES:
            return (
                f"node '{node}': philox dropout reads {slot} as an INT64 or INT32 integer, "
                f"got {tensor.data_type.name}"
            )
    if "Dropout_scale" in tensors or "Dropout_scale_inv" in tensors:
        return (
            f"node '{node}': philox dropout scales by 1/(1-p); Dropout_scale and "
            "Dropout_scale_inv belong to the explicit-mask form (set_dropout(mask, scale))"
        )
    return None
