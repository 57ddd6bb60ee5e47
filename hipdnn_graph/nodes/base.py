"""The node lifecycle shared by every node: pre-validate → infer → post-validate."""

from __future__ import annotations

from collections.abc import MutableMapping, MutableSequence
from typing import ClassVar, Generic, Self, TypeVar

from ..attributes.base import NodeAttributes
from ..attributes.graph_attributes import GraphAttributes
from ..descriptors.backend_descriptor import BackendDescriptor
from ..descriptors.node_spec import NodeSpec
from ..descriptors.packing import pack_node, unpack_node
from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import DataType, ErrorCode, NodeType

__all__ = ["Node"]

A = TypeVar("A", bound=NodeAttributes)


class Node(Generic[A]):
    """Base of all nodes (hipDNN's ``BaseNode``).

    A node owns its attributes object and reads the graph's attributes for defaults. Its three
    lifecycle steps raise :class:`~hipdnn_graph.HipdnnError` on the first broken rule.
    """

    node_type: ClassVar[NodeType] = NodeType.UNKNOWN
    #: prefix of the default name ``<prefix>_<index>`` given to unnamed nodes
    name_prefix: ClassVar[str] = "Node"
    #: where the node's slots and scalars live on every wire (set by each node module)
    spec: ClassVar[NodeSpec]

    def __init__(self, attributes: A, graph_attributes: GraphAttributes | None = None) -> None:
        self.attributes: A = attributes
        self.graph_attributes = (
            graph_attributes if graph_attributes is not None else GraphAttributes()
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    @property
    def name(self) -> str:
        """The node's name (from its attributes)."""
        return self.attributes.name

    def get_node_type(self) -> NodeType:
        """hipDNN's :class:`NodeType` of this node."""
        return self.node_type

    def inputs(self) -> list[TensorAttributes]:
        """Input tensors in slot order."""
        return self.attributes.input_tensors()

    def outputs(self) -> list[TensorAttributes]:
        """Output tensors in slot order."""
        return self.attributes.output_tensors()

    def pre_validate_node(self) -> None:
        """Check the node's rules before inference (hipDNN's order; first failure raises)."""

    def infer_properties_node(self) -> None:
        """Fill data types from the graph and infer output shapes."""
        self.attributes.fill_from_context(self.graph_attributes)

    def post_validate_node(self) -> None:
        """Check the compute type, then validate every output tensor.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` when no compute type is set, or the first output
                tensor's validation error.
        """
        if self.attributes.compute_data_type == DataType.NOT_SET:
            raise HipdnnError(
                ErrorCode.ATTRIBUTE_NOT_SET,
                f"Node {self.name} does not have a compute_data_type set",
            )
        for tensor in self.outputs():
            tensor.check()

    def validate_node(self) -> None:
        """Run the whole lifecycle: pre-validate, infer, post-validate."""
        self.pre_validate_node()
        self.infer_properties_node()
        self.post_validate_node()

    # ----- descriptors (spec §7) -----
    def create_operation(
        self,
        tensor_descs: MutableMapping[int, BackendDescriptor],
        operations: MutableSequence[BackendDescriptor],
    ) -> BackendDescriptor:
        """Pack this node into a finalized operation descriptor appended to ``operations``.

        Tensor descriptors are created once per uid in ``tensor_descs`` and shared by uid.
        """
        return pack_node(self.attributes, self.spec, tensor_descs, operations)

    def unpack_from_descriptor(
        self, op_desc: BackendDescriptor, tensor_map: MutableMapping[int, TensorAttributes]
    ) -> Self:
        """Replace this node's attributes with those packed in ``op_desc``.

        Tensors are looked up in (or added to) ``tensor_map`` by uid, so nodes that share a
        tensor share the rebuilt handle.
        """
        attributes = self.spec.attributes_cls()
        unpack_node(op_desc, self.spec, attributes, tensor_map)
        self.attributes = attributes
        return self
