"""Graph parts ↔ OPERATIONGRAPH descriptor: lowering a validated graph's parts and lifting
them back. Like :mod:`hipdnn_graph.wire`, this module hands parts over and never imports the
Graph core; the Graph side calls :meth:`~hipdnn_graph.Graph.from_parts`.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(name="fwd", io_data_type=hg.DataType.HALF,
    ...              intermediate_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 2, 8, 16])
    >>> o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
    >>> _ = o.set_output(True)
    >>> desc = g.build_operation_graph().get_operation_graph_descriptor()
    >>> parts = lift_graph(desc)
    >>> [n.name for n in parts.nodes], [t.name for t in parts.tensors]
    (['SdpaFwd_0'], ['Q', 'K', 'V', 'SdpaFwd_0::O'])
    >>> lower_graph(parts).get_attribute(A.OPERATIONGRAPH_IO_DATA_TYPE_EXT, T.DATA_TYPE)
    [<DataType.HALF: 2>]
"""

from __future__ import annotations

from typing import Any

from .attributes.graph_attributes import GraphAttributes
from .descriptors.backend_descriptor import BackendDescriptor
from .descriptors.enums import AttributeName as A
from .descriptors.enums import AttributeType as T
from .descriptors.enums import DescriptorType
from .descriptors.node_spec import node_specs
from .descriptors.wire_model import WireMetadata
from .errors import HipdnnError
from .nodes.custom_family import lift_custom_op
from .tensor import TensorAttributes
from .types import ErrorCode
from .wire import GraphParts, signed64, unsigned64

__all__ = ["lift_graph", "lower_graph"]


def lower_graph(parts: GraphParts) -> BackendDescriptor:
    """Pack every node (in topological order) into one finalized OPERATIONGRAPH descriptor.

    The graph the parts come from must be validated and every tensor must have a uid.
    """
    tensor_descs: dict[int, BackendDescriptor] = {}
    operations: list[BackendDescriptor] = []
    for node in parts.nodes:
        node.create_operation(tensor_descs, operations)
    desc = BackendDescriptor(DescriptorType.OPERATIONGRAPH)
    desc.set_attribute(A.OPERATIONGRAPH_OPS, T.BACKEND_DESCRIPTOR, operations)
    attrs, preferred = parts.attributes, parts.preferred_engine_id
    desc.set_attribute(
        A.OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, T.DATA_TYPE, [attrs.compute_data_type]
    )
    desc.set_attribute(
        A.OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT, T.DATA_TYPE, [attrs.intermediate_data_type]
    )
    desc.set_attribute(A.OPERATIONGRAPH_IO_DATA_TYPE_EXT, T.DATA_TYPE, [attrs.io_data_type])
    if preferred is not None:
        desc.set_attribute(A.OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT, T.INT64, [signed64(preferred)])
    if attrs.name:
        desc.set_attribute(A.OPERATIONGRAPH_NAME_EXT, T.CHAR, [attrs.name])
    if parts.wire_metadata is not None and parts.wire_metadata.is_override_shape_enabled:
        desc.set_attribute(A.OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT, T.BOOLEAN, [True])
    desc.finalize()
    return desc


def lift_graph(desc: BackendDescriptor) -> GraphParts:
    """The parts of the graph a finalized OPERATIONGRAPH descriptor describes (tensors by uid:
    descriptors carry no declaration order).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for another descriptor type (or a custom op of a
            registered family whose payload is not its family's: such a custom op becomes that
            family's node), ``GRAPH_NOT_SUPPORTED`` for an operation this frontend has no node
            for.
    """
    if desc.descriptor_type != DescriptorType.OPERATIONGRAPH:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Expected an OPERATIONGRAPH descriptor, got {desc.descriptor_type.name}",
        )
    get = desc.get_attribute
    attrs = GraphAttributes(
        compute_data_type=get(A.OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, T.DATA_TYPE)[0],
        intermediate_data_type=get(A.OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT, T.DATA_TYPE)[0],
        io_data_type=get(A.OPERATIONGRAPH_IO_DATA_TYPE_EXT, T.DATA_TYPE)[0],
    )
    if desc.has_attribute(A.OPERATIONGRAPH_NAME_EXT):
        attrs.name = str(get(A.OPERATIONGRAPH_NAME_EXT, T.CHAR)[0])
    preferred = None
    if desc.has_attribute(A.OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT):
        preferred = unsigned64(get(A.OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT, T.INT64)[0])
    specs = {spec.descriptor_type: spec for spec in node_specs().values()}
    tensor_map: dict[int, TensorAttributes] = {}
    nodes: list[Any] = []
    for op in get(A.OPERATIONGRAPH_OPS, T.BACKEND_DESCRIPTOR):
        spec = specs.get(op.descriptor_type)
        if spec is None:
            raise HipdnnError(
                ErrorCode.GRAPH_NOT_SUPPORTED,
                f"No frontend node for {op.descriptor_type.name} descriptors",
            )
        node = spec.make_node(spec.attributes_cls(), attrs)
        nodes.append(lift_custom_op(node.unpack_from_descriptor(op, tensor_map)))
    tensors = [tensor_map[uid] for uid in sorted(tensor_map)]
    metadata = None
    if desc.has_attribute(A.OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT):
        flag = get(A.OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT, T.BOOLEAN)[0]
        metadata = WireMetadata(is_override_shape_enabled=bool(flag))
    return GraphParts(attrs, tensors, nodes, preferred_engine_id=preferred, wire_metadata=metadata)
