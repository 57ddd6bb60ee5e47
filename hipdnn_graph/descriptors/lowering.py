"""Graph ↔ OPERATIONGRAPH descriptor: lowering a validated graph and lifting it back.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(name="fwd", io_data_type=hg.DataType.HALF,
    ...              intermediate_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 2, 8, 16])
    >>> o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
    >>> _ = o.set_output(True)
    >>> desc = g.build_operation_graph().get_operation_graph_descriptor()
    >>> lifted = hg.Graph.from_operation_graph_descriptor(desc)
    >>> [n.name for n in lifted.nodes], [t.name for t in lifted.tensors]
    (['SdpaFwd_0'], ['Q', 'K', 'V', 'SdpaFwd_0::O'])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..attributes.graph_attributes import GraphAttributes
from ..errors import HipdnnError
from ..nodes.sdpa_base import SdpaNode
from ..nodes.sdpa_bwd import SdpaBwdNode
from ..nodes.sdpa_fwd import SdpaFwdNode
from ..tensor import TensorAttributes
from ..types import ErrorCode
from .backend_descriptor import BackendDescriptor
from .enums import AttributeName as A
from .enums import AttributeType as T
from .enums import DescriptorType
from .graph_records import signed64, unsigned64

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = ["lift_graph", "lower_graph"]


def lower_graph(graph: Graph) -> BackendDescriptor:
    """Pack every node (in topological order) into one finalized OPERATIONGRAPH descriptor.

    The graph must be validated and every tensor must have a uid.
    """
    tensor_descs: dict[int, BackendDescriptor] = {}
    operations: list[BackendDescriptor] = []
    for node in graph.nodes:
        create = getattr(node, "create_operation", None)
        if create is None:
            raise HipdnnError(
                ErrorCode.GRAPH_NOT_SUPPORTED, f"{type(node).__name__} cannot be lowered"
            )
        create(tensor_descs, operations)
    desc = BackendDescriptor(DescriptorType.OPERATIONGRAPH)
    desc.set_attribute(A.OPERATIONGRAPH_OPS, T.BACKEND_DESCRIPTOR, operations)
    attrs = graph.attributes
    desc.set_attribute(
        A.OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, T.DATA_TYPE, [attrs.compute_data_type]
    )
    desc.set_attribute(
        A.OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT, T.DATA_TYPE, [attrs.intermediate_data_type]
    )
    desc.set_attribute(A.OPERATIONGRAPH_IO_DATA_TYPE_EXT, T.DATA_TYPE, [attrs.io_data_type])
    preferred = graph.get_preferred_engine_id_ext()
    if preferred is not None:
        desc.set_attribute(A.OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT, T.INT64, [signed64(preferred)])
    if attrs.name:
        desc.set_attribute(A.OPERATIONGRAPH_NAME_EXT, T.CHAR, [attrs.name])
    desc.finalize()
    return desc


_NODES: dict[DescriptorType, type[SdpaNode[Any]]] = {
    node.packing.descriptor_type: node for node in (SdpaBwdNode, SdpaFwdNode)
}


def lift_graph(desc: BackendDescriptor) -> Graph:
    """Rebuild a :class:`Graph` from a finalized OPERATIONGRAPH descriptor.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for another descriptor type, ``GRAPH_NOT_SUPPORTED`` for
            an operation this frontend has no node for.
    """
    from ..graph import Graph

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
    graph = Graph(attributes=attrs)
    if desc.has_attribute(A.OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT):
        preferred = get(A.OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT, T.INT64)[0]
        graph.set_preferred_engine_id_ext(unsigned64(preferred))
    tensor_map: dict[int, TensorAttributes] = {}
    for op in get(A.OPERATIONGRAPH_OPS, T.BACKEND_DESCRIPTOR):
        node_cls = _NODES.get(op.descriptor_type)
        if node_cls is None:
            raise HipdnnError(
                ErrorCode.GRAPH_NOT_SUPPORTED,
                f"No frontend node for {op.descriptor_type.name} descriptors",
            )
        node = node_cls(node_cls.attributes_class(), graph.attributes)
        graph.add_node(node.unpack_from_descriptor(op, tensor_map))
    # list the tensors by uid, as a deserialized graph does (descriptors carry no declaration order)
    graph._tensors = dict(sorted(graph._tensors.items(), key=lambda item: item[1].get_uid()))
    return graph
