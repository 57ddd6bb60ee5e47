"""Graph ↔ :class:`GraphRecord`: the bridge between the frontend and both wire formats.

Record field names are the node slots' names in lower case (``dO`` → ``do``, ``SEQ_LEN_Q`` →
``seq_len_q``), so one table-free rule maps slots to fields.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(name="fwd", io_data_type=hg.DataType.HALF,
    ...              intermediate_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 2, 8, 16])
    >>> o, stats = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="attn")
    >>> rec = graph_to_record(g)
    >>> [t.name for t in rec.tensors], rec.nodes[0].attributes.o
    (['Q', 'K', 'V', 'attn::O', 'attn::Stats'], 4)
    >>> graph_from_record(rec).key() == g.key()
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..attributes.base import SdpaCommonAttributes
from ..attributes.graph_attributes import GraphAttributes
from ..attributes.sdpa import SdpaAttributes
from ..attributes.sdpa_backward import SdpaBackwardAttributes
from ..errors import HipdnnError
from ..nodes.sdpa_bwd import SdpaBwdNode
from ..nodes.sdpa_fwd import SdpaFwdNode
from ..tensor import TensorAttributes
from ..types import ErrorCode
from .records import GraphRecord, NodeRecord, SdpaBwdRecord, SdpaFwdRecord, TensorRecord

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = ["graph_from_record", "graph_to_record"]

_SCALARS = (
    "alibi_mask",
    "padding_mask",
    "causal_mask",
    "causal_mask_bottom_right",
    "dropout_probability",
    "attn_scale_value",
    "left_bound",
    "right_bound",
    "diagonal_alignment",
)
_MASK64 = (1 << 64) - 1


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _tensor_record(t: TensorAttributes) -> TensorRecord:
    return TensorRecord.model_construct(
        uid=t.get_uid(),
        name=t.name,
        data_type=t.data_type,
        dims=list(t.dim),
        strides=list(t.stride),
        is_virtual=t.is_virtual,
        is_pass_by_value=t.is_pass_by_value,
        value=t.value,
        alignment=t.alignment,
    )


def _node_record(attributes: SdpaCommonAttributes) -> NodeRecord:
    fields: dict[str, Any] = {name: getattr(attributes, name) for name in _SCALARS}
    for slot, tensor in (*attributes.inputs.items(), *attributes.outputs.items()):
        fields[slot.name.lower()] = tensor.get_uid()
    record: SdpaBwdRecord | SdpaFwdRecord
    if isinstance(attributes, SdpaBackwardAttributes):
        record = SdpaBwdRecord.model_construct(**fields)
    else:
        assert isinstance(attributes, SdpaAttributes)
        record = SdpaFwdRecord.model_construct(generate_stats=attributes.generate_stats, **fields)
    return NodeRecord.model_construct(
        name=attributes.name, compute_data_type=attributes.compute_data_type, attributes=record
    )


def graph_to_record(graph: Graph) -> GraphRecord:
    """The record of a graph, validating it and assigning uids first when needed.

    Tensors are listed in declaration order, nodes in topological order.
    """
    if not graph.is_validated:
        graph.validate()
    from ..lifecycle import assign_uids

    assign_uids(graph)
    attrs = graph.attributes
    preferred = graph.get_preferred_engine_id_ext()
    return GraphRecord.model_construct(
        name=attrs.name,
        compute_data_type=attrs.compute_data_type,
        intermediate_data_type=attrs.intermediate_data_type,
        io_data_type=attrs.io_data_type,
        preferred_engine_id=None if preferred is None else _signed64(preferred),
        tensors=[_tensor_record(t) for t in graph.graph_tensors()],
        nodes=[_node_record(node.attributes) for node in graph.nodes],
    )


def _tensor(rec: TensorRecord) -> TensorAttributes:
    return TensorAttributes(
        uid=rec.uid,
        name=rec.name,
        data_type=rec.data_type,
        dim=list(rec.dims),
        stride=list(rec.strides),
        is_virtual=rec.is_virtual,
        is_pass_by_value=rec.is_pass_by_value,
        value=rec.value,
        alignment=rec.alignment,
    )


def graph_from_record(record: GraphRecord) -> Graph:
    """Rebuild the graph a (checked) record describes; tensors are shared by uid.

    Raises:
        HipdnnError: ``INVALID_VALUE`` when a node names a tensor the record does not hold.
    """
    from ..graph import Graph

    graph = Graph(
        attributes=GraphAttributes(
            name=record.name,
            compute_data_type=record.compute_data_type,
            intermediate_data_type=record.intermediate_data_type,
            io_data_type=record.io_data_type,
        )
    )
    if record.preferred_engine_id is not None:
        graph.set_preferred_engine_id_ext(record.preferred_engine_id & _MASK64)
    tensors = {rec.uid: graph.tensor(_tensor(rec)) for rec in record.tensors}
    for node_record in record.nodes:
        body = node_record.attributes
        attributes: SdpaCommonAttributes
        if isinstance(body, SdpaBwdRecord):
            attributes = SdpaBackwardAttributes()
        else:
            attributes = SdpaAttributes(generate_stats=body.generate_stats)
        attributes.name = node_record.name
        attributes.compute_data_type = node_record.compute_data_type
        for name in _SCALARS:
            setattr(attributes, name, getattr(body, name))
        for slots, target in (
            (attributes.InputNames, attributes.inputs),
            (attributes.OutputNames, attributes.outputs),
        ):
            for slot in slots:
                uid = getattr(body, slot.name.lower(), None)
                if uid is None:
                    continue
                tensor = tensors.get(uid)
                if tensor is None:
                    raise HipdnnError(
                        ErrorCode.INVALID_VALUE,
                        f"Node {node_record.name} refers to tensor uid {uid}, which the graph "
                        "does not hold",
                    )
                target[slot] = tensor
        node_cls = SdpaBwdNode if isinstance(body, SdpaBwdRecord) else SdpaFwdNode
        graph.add_node(node_cls(attributes, graph.attributes))  # type: ignore[arg-type]
    return graph
