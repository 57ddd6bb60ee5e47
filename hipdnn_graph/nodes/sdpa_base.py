"""What SDPA forward and backward nodes share: rules as a table."""

from __future__ import annotations

from typing import ClassVar, TypeVar

from ..attributes.base import SdpaCommonAttributes
from . import sdpa_rules as r
from .base import Node

__all__ = ["SdpaNode"]

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
