"""Rules the three convolution nodes share, as hipDNN's node headers state them.

hipDNN computes in C++ ``int64_t``: ``%`` and ``/`` truncate toward zero. :func:`c_mod` and
:func:`c_div` do the same, so a negative dim gives hipDNN's remainder, not Python's.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..attributes.convolution import ConvolutionAttributes
from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import ErrorCode
from .norm_rules import ordered_strides, stride_order

__all__ = [
    "MIN_RANK",
    "PARAMETERS",
    "c_div",
    "c_mod",
    "check_parameter_counts",
    "check_parameter_values",
    "check_parameters_set",
    "dims_and_strides_positive",
    "dims_positive",
    "invalid",
    "missing",
    "spatial_parameters",
    "strides_like",
]

#: N, C and at least one spatial dim
MIN_RANK = 3
#: the four per-spatial-dim members, in hipDNN's check order
PARAMETERS = ("pre_padding", "post_padding", "stride", "dilation")


def invalid(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, message)


def missing(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.ATTRIBUTE_NOT_SET, message)


def c_mod(a: int, b: int) -> int:
    """C++'s ``a % b`` (sign of ``a``; ``b`` not 0).

    Example:
        >>> c_mod(-7, 2), c_mod(7, -2), -7 % 2
        (-1, 1, 1)
    """
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def c_div(a: int, b: int) -> int:
    """C++'s ``a / b`` on integers (truncated toward zero; ``b`` not 0).

    Example:
        >>> c_div(-7, 2), -7 // 2
        (-3, -4)
    """
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def dims_positive(t: TensorAttributes) -> bool:
    """hipDNN's ``validate_dims_set_and_positive``."""
    return bool(t.dim) and all(d > 0 for d in t.dim)


def dims_and_strides_positive(t: TensorAttributes) -> bool:
    """hipDNN's ``validate_dims_and_strides_set_and_positive``: dims set and positive, as many
    strides as dims, all positive."""
    return dims_positive(t) and len(t.stride) == len(t.dim) and all(s > 0 for s in t.stride)


def check_parameters_set(a: ConvolutionAttributes, label: str) -> None:
    """Each of the four members set (non-empty), in hipDNN's order.

    Raises:
        HipdnnError: ``ATTRIBUTE_NOT_SET`` naming the first empty one.
    """
    for name in PARAMETERS:
        if not getattr(a, name):
            raise missing(f"{label} missing {name} for pre-validation")


def check_parameter_counts(a: ConvolutionAttributes, spatial: int, label: str) -> None:
    """Each member holds one value per spatial dim, in hipDNN's order.

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the first that does not.
    """
    for name in PARAMETERS:
        if len(getattr(a, name)) != spatial:
            raise invalid(f"{label}: {name} parameter count must match spatial dimension count")


def check_parameter_values(pre: int, post: int, stride: int, dilation: int, label: str) -> None:
    """One spatial dim's stride and dilation at least 1, paddings not negative (the
    pre-validation wording).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for the first that is not.
    """
    if stride < 1:
        raise invalid(f"{label}: Stride must be > 0")
    if dilation < 1:
        raise invalid(f"{label}: Dilation must > 0")
    if pre < 0:
        raise invalid(f"{label}: Pre-padding must be non-negative")
    if post < 0:
        raise invalid(f"{label}: Post-padding must be non-negative")


def spatial_parameters(
    a: ConvolutionAttributes, index: int, label: str
) -> tuple[int, int, int, int]:
    """``(pre_padding, post_padding, stride, dilation)`` of spatial dim ``index`` during
    inference, checked with the inference wording.

    Raises:
        HipdnnError: ``INVALID_VALUE`` when a member has no value there, or a value is out of
            range.
    """
    if any(index >= len(getattr(a, name)) for name in PARAMETERS):
        raise invalid(
            f"{label}: Insufficient padding/stride/dilation parameters for spatial dimensions"
        )
    pre, post = a.pre_padding[index], a.post_padding[index]
    stride, dilation = a.stride[index], a.dilation[index]
    if stride < 1:
        raise invalid(f"{label}: Stride must be positive")
    if dilation < 1:
        raise invalid(f"{label}: Dilation must be positive")
    if pre < 0:
        raise invalid(f"{label}: Pre-padding must be non-negative")
    if post < 0:
        raise invalid(f"{label}: Post-padding must be non-negative")
    return pre, post, stride, dilation


def strides_like(dims: Sequence[int], reference: Sequence[int]) -> list[int]:
    """hipDNN's ``generateStrides(dims, extractStrideOrder(reference))``: packed strides for
    ``dims`` in the memory order of ``reference``.

    Example:
        >>> strides_like([2, 4, 3, 3], [256, 1, 64, 8])
        [36, 1, 12, 4]
    """
    return ordered_strides(dims, stride_order(reference))
