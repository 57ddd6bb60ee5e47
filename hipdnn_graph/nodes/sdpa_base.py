"""What SDPA forward and backward nodes share: rules as a table."""

from __future__ import annotations

from typing import ClassVar, TypeVar

from ..attributes.base import SdpaCommonAttributes
from ..descriptors.enums import AttributeName
from ..descriptors.enums import AttributeType as T
from ..descriptors.node_spec import Kind, ScalarSpec
from . import sdpa_rules as r
from .base import Node

__all__ = ["SdpaNode", "sdpa_scalars"]

#: the plain members both SDPA tables hold in this order: (name, kind, descriptor type, always)
_SDPA_SCALARS = (
    ("alibi_mask", Kind.BOOL, T.BOOLEAN, True),
    ("padding_mask", Kind.BOOL, T.BOOLEAN, True),
    ("causal_mask", Kind.BOOL, T.BOOLEAN, True),
    ("causal_mask_bottom_right", Kind.BOOL, T.BOOLEAN, True),
    ("dropout_probability", Kind.F32_OPT, T.FLOAT, False),
    ("attn_scale_value", Kind.F32_OPT, T.FLOAT, False),
    ("left_bound", Kind.I64_OPT, T.INT64, False),
    ("right_bound", Kind.I64_OPT, T.INT64, False),
)


def sdpa_scalars(prefix: str, first: int, alignment_field: int) -> tuple[ScalarSpec, ...]:
    """The mask flags, optional scalars and diagonal alignment of an SDPA table.

    hipDNN's tables hold them at consecutive fields from ``first`` (the alignment at
    ``alignment_field``); their descriptor attributes are ``SDPA_<prefix>_<NAME>_EXT``.

    Example:
        >>> [(s.name, s.fb_slot) for s in sdpa_scalars("BWD", 19, 27)][::4]
        [('alibi_mask', 19), ('dropout_probability', 23), ('diagonal_alignment', 27)]
    """
    scalars = []
    for i, (name, kind, attr_type, always) in enumerate(_SDPA_SCALARS):
        attribute = AttributeName[f"SDPA_{prefix}_{name.upper()}_EXT"]
        scalars.append(ScalarSpec(name, kind, first + i, (attribute, attr_type), always))
    alignment = AttributeName[f"SDPA_{prefix}_DIAGONAL_ALIGNMENT_EXT"]
    scalars.append(
        ScalarSpec(
            "diagonal_alignment",
            Kind.ALIGN,
            alignment_field,
            (alignment, T.DIAGONAL_ALIGNMENT),
            True,
        )
    )
    return tuple(scalars)


A = TypeVar("A", bound=SdpaCommonAttributes)


class SdpaNode(Node[A]):
    """Base of the SDPA nodes: subclasses give their ``rules``, ``label`` and ``spec``."""

    label: ClassVar[str]
    #: the node's pre-validation rules, in hipDNN's order; the first failure raises
    rules: ClassVar[tuple[r.Rule, ...]]
    #: this project's checks, run at the end of post-validation (after all of hipDNN's rules)
    checks: ClassVar[tuple[r.Rule, ...]]

    def pre_validate_node(self) -> None:
        """Check every rule of :attr:`rules` in order.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing slot (or seq-len tensor),
                ``INVALID_VALUE`` for a shape, type or unsupported-usage rule.
        """
        for rule in self.rules:
            rule(self.attributes, self.label)

    def run_checks(self) -> None:
        """Check every rule of :attr:`checks` in order (the last step of post-validation).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for the first failing check.
        """
        for rule in self.checks:
            rule(self.attributes, self.label)
