"""What SDPA forward and backward nodes share: rules as a table."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from ..attributes.base import SdpaCommonAttributes
from ..descriptors.enums import AttributeName
from ..descriptors.enums import AttributeType as T
from ..descriptors.node_spec import Kind, ScalarSpec, SlotSpec, WireEnum
from ..types import DiagonalAlignment
from . import sdpa_rules as r
from .base import Node
from .input_memo import InputRuleMemo

__all__ = ["DIAGONAL_ALIGNMENT", "SdpaNode", "sdpa_scalars"]

#: hipDNN's ``DiagonalAlignment`` schema enum (JSON spells the members' names)
DIAGONAL_ALIGNMENT = WireEnum(
    "DiagonalAlignment", DiagonalAlignment, {m.value: m.name for m in DiagonalAlignment}
)

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


def sdpa_slot(
    member: Any,
    fb_slot: int,
    attribute: AttributeName,
    *,
    output: bool,
    required: bool,
    wire: str = "",
) -> SlotSpec:
    """One SDPA slot's wire facts: its uid field is ``<wire>_tensor_uid`` (``wire`` defaults to
    the slot's name in lower case) and it is passed by value when
    :data:`~.sdpa_rules.SCALAR_SLOTS` names it; each family says which slots are outputs and
    which are required.
    """
    wire = wire or member.name.lower()
    scalar = member.name in r.SCALAR_SLOTS
    return SlotSpec(member, output, required, fb_slot, attribute, f"{wire}_tensor_uid", scalar)


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
            Kind.ENUM,
            alignment_field,
            (alignment, T.DIAGONAL_ALIGNMENT),
            True,
            enum=DIAGONAL_ALIGNMENT,
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
    #: ``rules`` and ``checks`` without the input-only ones (:data:`~.sdpa_rules.INPUT_RULES`):
    #: what a node runs when another node already passed those with the same input tensors
    _rules_per_node: ClassVar[tuple[r.Rule, ...]]
    _checks_per_node: ClassVar[tuple[r.Rule, ...]]
    #: the SDPA checks refuse constants and pass-by-value tensors outside the scalar slots
    #: themselves (:func:`~.sdpa_rules.scalar_slots`, with their own message)
    constants_anywhere: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "rules" in cls.__dict__:
            cls._rules_per_node = _per_node(cls.rules)
        if "checks" in cls.__dict__:
            cls._checks_per_node = _per_node(cls.checks)

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """Check every rule of :attr:`rules` in order.

        Args:
            memo: the rules passed so far in this ``Graph.validate()`` (see
                :mod:`~hipdnn_graph.nodes.input_memo`); without one every rule runs.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing slot (or seq-len tensor),
                ``INVALID_VALUE`` for a shape, type or unsupported-usage rule.
        """
        self._check(self.rules, self._rules_per_node, memo)

    def run_checks(self, memo: InputRuleMemo | None = None) -> None:
        """Check every rule of :attr:`checks` in order (the last step of post-validation).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for the first failing check.
        """
        self._check(self.checks, self._checks_per_node, memo)

    def _check(
        self,
        rules: tuple[r.Rule, ...],
        per_node: tuple[r.Rule, ...],
        memo: InputRuleMemo | None,
    ) -> None:
        """Run ``rules`` in order, or only ``per_node`` when ``memo`` shows that the input-only
        ones already passed with these input tensors: a rule skipped that way would pass, so
        the first failing rule is the same either way."""
        a, label = self.attributes, self.label
        if memo is None:
            for rule in rules:
                rule(a, label)
            return
        passed = memo.passed(rules, a)
        for rule in per_node if passed else rules:
            rule(a, label)
        if not passed:
            memo.record(rules, a)


def _per_node(rules: tuple[r.Rule, ...]) -> tuple[r.Rule, ...]:
    return tuple(rule for rule in rules if rule not in r.INPUT_RULES)
