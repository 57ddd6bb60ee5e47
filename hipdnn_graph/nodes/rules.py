"""The rule helpers every node family shares: hipDNN's two error kinds, its first rule (each
required tensor set, in order), its dims-and-strides positivity checks and the "an output
without a shape takes its input's" inference.

Example:
    >>> import hipdnn_graph as hg
    >>> a = hg.BatchnormInferenceAttributes().set_x(hg.TensorAttributes(dim=[1, 2]))
    >>> try:
    ...     required(a, "BatchnormInferenceNode", ("x", "scale"))
    ... except hg.HipdnnError as err:
    ...     print(err.code.name, err.message)
    ATTRIBUTE_NOT_SET BatchnormInferenceNode missing scale for pre-validation
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import ErrorCode

__all__ = [
    "PRE_VALIDATION",
    "SETTING_PROPERTIES",
    "check_dims_and_strides",
    "check_min_dims",
    "dims_and_strides_positive",
    "dims_positive",
    "invalid",
    "missing",
    "named",
    "required",
    "take_shape",
]

#: what hipDNN's "missing <slot> for <purpose>" messages name, before and during inference
PRE_VALIDATION = "pre-validation"
SETTING_PROPERTIES = "setting properties"


def invalid(message: str) -> HipdnnError:
    """hipDNN's ``INVALID_VALUE`` error with ``message``."""
    return HipdnnError(ErrorCode.INVALID_VALUE, message)


def missing(message: str) -> HipdnnError:
    """hipDNN's ``ATTRIBUTE_NOT_SET`` error with ``message``."""
    return HipdnnError(ErrorCode.ATTRIBUTE_NOT_SET, message)


def required(
    attributes: Any, label: str, slots: Sequence[str], purpose: str = PRE_VALIDATION
) -> list[TensorAttributes]:
    """The tensors of ``slots`` (read with the attributes' ``get_<slot>()``), each checked set
    in the order given, which is hipDNN's check order. A slot may carry what hipDNN's
    pre-validation message calls it, ``"dy (input)"``; its inference message names the slot
    only.

    Raises:
        HipdnnError: ``ATTRIBUTE_NOT_SET`` ``"<label> missing <slot> for <purpose>"`` for the
            first one not set.
    """
    found = []
    for entry in slots:
        slot = entry.split(" ", 1)[0]
        tensor = getattr(attributes, f"get_{slot}")()
        if tensor is None:
            what = entry if purpose == PRE_VALIDATION else slot
            raise missing(f"{label} missing {what} for {purpose}")
        found.append(tensor)
    return found


def named(tensor: TensorAttributes | None, fallback: str) -> str:
    """How hipDNN's messages name a tensor: by its name, or by ``fallback`` when it has none."""
    return tensor.name if tensor is not None and tensor.name else fallback


def check_min_dims(tensor: TensorAttributes, min_dims: int, fallback: str) -> None:
    """hipDNN's ``validateMinimumTensorDimensions``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` ``"<name> must have at least <n> dimensions, but has <r>"``.
    """
    if len(tensor.dim) < min_dims:
        raise invalid(
            f"{named(tensor, fallback)} must have at least {min_dims} dimensions, "
            f"but has {len(tensor.dim)}"
        )


def dims_positive(t: TensorAttributes) -> bool:
    """hipDNN's ``validate_dims_set_and_positive``."""
    return bool(t.dim) and all(d > 0 for d in t.dim)


def dims_and_strides_positive(t: TensorAttributes) -> bool:
    """hipDNN's ``validate_dims_and_strides_set_and_positive``: dims set and positive, as many
    strides as dims, all positive."""
    return dims_positive(t) and len(t.stride) == len(t.dim) and all(s > 0 for s in t.stride)


def check_dims_and_strides(t: TensorAttributes, what: str, label: str) -> None:
    """hipDNN's ``<what> dimensions and strides must be set and positive``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` when they are not.
    """
    if not dims_and_strides_positive(t):
        raise invalid(f"{label}: {what} dimensions and strides must be set and positive")


def take_shape(out: TensorAttributes, source: TensorAttributes) -> None:
    """Give ``out`` what it lacks of ``source``'s dims and strides (hipDNN's inference of an
    output shaped as its input)."""
    if not out.dim and source.dim:
        out.dim = list(source.dim)
    if not out.stride and source.stride:
        out.stride = list(source.stride)
