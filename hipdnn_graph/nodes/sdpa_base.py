"""What SDPA forward and backward nodes share: rules as a table, and descriptor packing."""

from __future__ import annotations

from collections.abc import MutableMapping, MutableSequence
from typing import Any, ClassVar, Self, TypeVar

from ..attributes.base import SdpaCommonAttributes
from ..descriptors.backend_descriptor import BackendDescriptor
from ..tensor import TensorAttributes
from . import sdpa_rules as r
from .base import Node
from .sdpa_packing import PackingTable, pack_sdpa, unpack_sdpa

__all__ = ["SdpaNode"]

A = TypeVar("A", bound=SdpaCommonAttributes)


class SdpaNode(Node[A]):
    """Base of the SDPA nodes: subclasses give their ``rules``, ``label`` and ``packing``."""

    label: ClassVar[str]
    #: the node's pre-validation rules, in hipDNN's order; the first failure raises
    rules: ClassVar[tuple[r.Rule, ...]]
    #: this project's checks, run at the end of post-validation (after all of hipDNN's rules)
    checks: ClassVar[tuple[r.Rule, ...]]
    #: where each slot, flag and scalar lives in the node's operation descriptor
    packing: ClassVar[PackingTable]
    attributes_class: ClassVar[type[Any]]

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

    # ----- descriptors (spec §7) -----
    def create_operation(
        self,
        tensor_descs: MutableMapping[int, BackendDescriptor],
        operations: MutableSequence[BackendDescriptor],
    ) -> BackendDescriptor:
        """Pack this node into a finalized operation descriptor appended to ``operations``.

        Tensor descriptors are created once per uid in ``tensor_descs`` and shared by uid.
        """
        return pack_sdpa(self.attributes, self.packing, tensor_descs, operations)

    def unpack_from_descriptor(
        self, op_desc: BackendDescriptor, tensor_map: MutableMapping[int, TensorAttributes]
    ) -> Self:
        """Replace this node's attributes with those packed in ``op_desc``.

        Tensors are looked up in (or added to) ``tensor_map`` by uid, so nodes that share a
        tensor share the rebuilt handle.
        """
        attributes = self.attributes_class()
        unpack_sdpa(op_desc, self.packing, attributes, tensor_map)
        self.attributes = attributes
        return self
