"""Rules the three convolution nodes share, as hipDNN's node headers state them.

hipDNN computes in C++ ``int64_t``: ``%`` and ``/`` truncate toward zero. :func:`c_mod` and
:func:`c_div` do the same, so a negative dim gives hipDNN's remainder, not Python's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, NamedTuple, TypeVar

from ..attributes.convolution import ConvolutionAttributes
from ..tensor import TensorAttributes
from .base import Node
from .input_memo import InputRuleMemo
from .norm_rules import ordered_strides, stride_order
from .rules import (
    PRE_VALIDATION,
    SETTING_PROPERTIES,
    check_dims_and_strides,
    invalid,
    missing,
    required,
)

__all__ = [
    "MIN_RANK",
    "PARAMETERS",
    "ConvolutionNode",
    "ForwardShapes",
    "c_div",
    "c_mod",
    "check_forward_size",
    "check_operands",
    "check_parameter_counts",
    "check_parameter_values",
    "check_parameters",
    "check_parameters_set",
    "check_ranks",
    "check_set_and_positive",
    "infer_strides",
    "spatial_parameters",
    "strides_like",
]

#: N, C and at least one spatial dim
MIN_RANK = 3
#: the four per-spatial-dim members, in hipDNN's check order
PARAMETERS = ("pre_padding", "post_padding", "stride", "dilation")


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


def _lower(name: str) -> str:
    """A tensor's name inside a sentence (``Input`` -> ``input``; ``dy`` stays)."""
    return name[:1].lower() + name[1:]


def check_set_and_positive(t: TensorAttributes, name: str, label: str) -> None:
    """hipDNN's ``<name> tensor dimensions and strides must be set and positive``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` when they are not.
    """
    check_dims_and_strides(t, f"{name} tensor", label)


def _check_rank(dims: Sequence[int], name: str, label: str) -> None:
    if len(dims) < MIN_RANK:
        raise invalid(f"{label}: {name} tensor must have at least 3 dimensions (N, C, spatial)")


def _check_rank_match(
    dims: Sequence[int], name: str, first: Sequence[int], first_name: str, label: str
) -> None:
    if len(dims) != len(first):
        raise invalid(
            f"{label}: {name} tensor dimension count must match {_lower(first_name)} tensor "
            "dimension count"
        )


def check_operands(
    first: TensorAttributes,
    first_name: str,
    second: TensorAttributes,
    second_name: str,
    label: str,
) -> None:
    """hipDNN's checks of the two input tensors, in its order: the first's dims and strides set
    and positive, its rank at least 3; the second's too, of the first's rank.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for the first check that fails.
    """
    check_set_and_positive(first, first_name, label)
    _check_rank(first.dim, first_name, label)
    check_set_and_positive(second, second_name, label)
    _check_rank_match(second.dim, second_name, first.dim, first_name, label)


def check_ranks(
    first: Sequence[int], first_name: str, second: Sequence[int], second_name: str, label: str
) -> None:
    """The rank checks of :func:`check_operands` (inference makes them where hipDNN would index
    past the dims when called without pre-validation).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for the first check that fails.
    """
    _check_rank(first, first_name, label)
    _check_rank_match(second, second_name, first, first_name, label)


class ForwardShapes(NamedTuple):
    """The dims of a convolution's forward problem, for checking the forward output's spatial
    dims: the input (X, or DX for the data gradient), the filter and the output (Y, or DY), with
    the names hipDNN's messages give the output tensor and the input dims."""

    input: Sequence[int]
    kernel: Sequence[int]
    output: Sequence[int]
    output_name: str
    input_name: str


def check_forward_size(
    shapes: ForwardShapes, i: int, pre: int, post: int, stride: int, dilation: int, label: str
) -> None:
    """Spatial dim ``i`` of the forward output as the forward formula gives it from the input,
    the kernel and the members (C++ division; a zero stride fails as hipDNN's later check).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for an input too small for the kernel, or another output
            size.
    """
    size, kernel, out = shapes.input[i + 2], shapes.kernel[i + 2], shapes.output[i + 2]
    numerator = size + pre + post - (dilation * (kernel - 1) + 1)
    if numerator < 0:
        raise invalid(
            f"{label}: Input spatial dimension at index {i} ({size}) is too small for the "
            f"kernel size ({kernel}) and dilation ({dilation})"
        )
    if stride == 0:
        raise invalid(f"{label}: Stride must be > 0")
    expected = c_div(numerator, stride) + 1
    if out != expected:
        raise invalid(
            f"{label}: {shapes.output_name} tensor spatial dimension at index {i} ({out}) does "
            f"not match expected dimension ({expected}) given {shapes.input_name} dimensions, "
            "kernel size, padding, stride, and dilation"
        )


def check_parameters(
    a: ConvolutionAttributes, spatial: int, label: str, shapes: ForwardShapes | None = None
) -> None:
    """hipDNN's last pre-validation checks: one member value per spatial dim, then per spatial
    dim its values in range and (given ``shapes``) the forward output's size.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for the first check that fails.
    """
    check_parameter_counts(a, spatial, label)
    for i in range(spatial):
        pre, post = a.pre_padding[i], a.post_padding[i]
        stride, dilation = a.stride[i], a.dilation[i]
        check_parameter_values(pre, post, stride, dilation, label)
        if shapes is not None:
            check_forward_size(shapes, i, pre, post, stride, dilation, label)


def infer_strides(
    out: TensorAttributes,
    out_name: str,
    reference: TensorAttributes,
    reference_name: str,
    label: str,
    check_dims: bool = False,
) -> None:
    """Give ``out`` (with dims) packed strides in ``reference``'s memory order, when it has
    none; ``check_dims``: first refuse an ``out`` without dims, as the forward node does.

    Raises:
        HipdnnError: ``ATTRIBUTE_NOT_SET`` when ``reference`` has no strides, or as many as
            ``out`` has dims.
    """
    if out.stride:
        return
    if not reference.stride:
        raise missing(
            f"{label}: Cannot infer {out_name} strides - missing {reference_name} strides"
        )
    if check_dims and not out.dim:
        raise missing(f"{label}: Cannot infer {out_name} strides - missing {out_name} dimensions")
    if len(reference.stride) != len(out.dim):
        raise missing(
            f"{label}: Stride dimension mismatch between {reference_name} and {out_name} tensors"
        )
    out.stride = strides_like(out.dim, reference.stride)


def check_parameters_set(a: ConvolutionAttributes, label: str) -> None:
    """Each of the four members set (non-empty), in hipDNN's order.

    Raises:
        HipdnnError: ``ATTRIBUTE_NOT_SET`` naming the first empty one.
    """
    for name in PARAMETERS:
        if not getattr(a, name):
            raise missing(f"{label} missing {name} for {PRE_VALIDATION}")


def check_parameter_counts(a: ConvolutionAttributes, spatial: int, label: str) -> None:
    """Each member holds one value per spatial dim, in hipDNN's order.

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the first that does not.
    """
    for name in PARAMETERS:
        if len(getattr(a, name)) != spatial:
            raise invalid(f"{label}: {name} parameter count must match spatial dimension count")


#: hipDNN's words for a stride, then a dilation, below 1: pre-validation's and inference's
_BELOW_ONE = {
    PRE_VALIDATION: ("Stride must be > 0", "Dilation must > 0"),
    SETTING_PROPERTIES: ("Stride must be positive", "Dilation must be positive"),
}


def check_parameter_values(
    pre: int, post: int, stride: int, dilation: int, label: str, purpose: str = PRE_VALIDATION
) -> None:
    """One spatial dim's stride and dilation at least 1, paddings not negative, in hipDNN's
    words for ``purpose`` (pre-validation or inference).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for the first that is not.
    """
    stride_words, dilation_words = _BELOW_ONE[purpose]
    if stride < 1:
        raise invalid(f"{label}: {stride_words}")
    if dilation < 1:
        raise invalid(f"{label}: {dilation_words}")
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
    check_parameter_values(pre, post, stride, dilation, label, SETTING_PROPERTIES)
    return pre, post, stride, dilation


def strides_like(dims: Sequence[int], reference: Sequence[int]) -> list[int]:
    """hipDNN's ``generateStrides(dims, extractStrideOrder(reference))``: packed strides for
    ``dims`` in the memory order of ``reference``.

    Example:
        >>> strides_like([2, 4, 3, 3], [256, 1, 64, 8])
        [36, 1, 12, 4]
    """
    return ordered_strides(dims, stride_order(reference))


C = TypeVar("C", bound=ConvolutionAttributes)


class ConvolutionNode(Node[C]):
    """What the three convolution nodes do alike, in hipDNN's order: each takes two inputs and
    writes one output, named in messages by :attr:`names`; pre-validation checks the three
    tensors set, the four members set, the inputs (:func:`check_operands`), then the family's
    own checks (:meth:`check_shapes`), the output's strides when set and the members
    (:func:`check_parameters`); inference fills data types, gives an output without dims the
    family's shape (:meth:`output_dims`) and one without strides the first input's memory
    order."""

    #: the three tensors' slots in hipDNN's check order (two inputs, then the output), with
    #: what its missing-tensor messages call them (``"x (input)"``; see :func:`.rules.required`)
    roles: ClassVar[tuple[str, str, str]]
    #: what its other messages call them (``("Input", "Weight", "Output")``)
    names: ClassVar[tuple[str, str, str]]
    #: whether inference refuses an output without dims before giving it strides (the forward
    #: node's wording)
    stride_inference_checks_dims: ClassVar[bool] = False

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: the three tensors set; the four members set; the first
        input's dims and strides set and positive, rank >= 3; the second's too, of the first's
        rank; :meth:`check_shapes`; the output's strides when set; one member value per spatial
        dim, each in range (and the output's spatial dims as the forward formula gives them).

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for something missing, ``INVALID_VALUE`` for the
                others.
        """
        label, a = type(self).__name__, self.attributes
        first, second, out = required(a, label, self.roles)
        check_parameters_set(a, label)
        check_operands(first, self.names[0], second, self.names[1], label)
        shapes = self.check_shapes(first.dim, second.dim, out)
        if out.stride:
            check_set_and_positive(out, self.names[2], label)
        check_parameters(a, len(first.dim) - 2, label, shapes)

    def infer_properties_node(self) -> None:
        """Fill data types; an output without dims gets :meth:`output_dims` (where hipDNN would
        index past the inputs' dims, called without pre-validation, the pre-validation rank
        message is raised instead), one without strides the first input's memory order
        (packed).

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor or first-input strides,
                ``INVALID_VALUE`` for members that do not give a positive size.
        """
        label, a = type(self).__name__, self.attributes
        first, second, out = required(a, label, self.roles, SETTING_PROPERTIES)
        a.fill_from_context(self.graph_attributes)
        if not out.dim:
            check_ranks(first.dim, self.names[0], second.dim, self.names[1], label)
            out.dim = self.output_dims(first.dim, second.dim)
        out_name, first_name = _lower(self.names[2]), _lower(self.names[0])
        infer_strides(out, out_name, first, first_name, label, self.stride_inference_checks_dims)

    def check_shapes(
        self, first: list[int], second: list[int], out: TensorAttributes
    ) -> ForwardShapes | None:
        """The family's checks between the inputs and of an output with dims, in hipDNN's
        order; the forward problem's shapes when :func:`check_parameters` checks the output's
        spatial dims against them.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for the first check that fails.
        """
        raise NotImplementedError

    def output_dims(self, first: list[int], second: list[int]) -> list[int]:
        """The output's dims from the inputs' (of checked ranks) and the members.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for members that give no positive size.
        """
        raise NotImplementedError
