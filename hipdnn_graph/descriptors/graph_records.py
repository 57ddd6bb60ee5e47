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

from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ..attributes.base import SdpaCommonAttributes
from ..attributes.graph_attributes import GraphAttributes
from ..attributes.sdpa import SdpaAttributes
from ..attributes.sdpa_backward import SdpaBackwardAttributes
from ..errors import HipdnnError
from ..nodes.sdpa_bwd import SdpaBwdNode
from ..nodes.sdpa_fwd import SdpaFwdNode
from ..tensor import TensorAttributes, trusted_tensor
from ..types import ErrorCode
from .record_checks import (
    _object_new,
    _set_dict,
    _set_extra,
    _set_fields,
    _set_private,
    construct_record,
)
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
_TENSOR_FIELDS = frozenset(TensorRecord.model_fields)
assert tuple(TensorRecord.model_fields) == (
    "uid", "name", "data_type", "dims", "strides", "is_virtual", "is_pass_by_value", "value",
    "alignment",
), "keep _tensor_record in field order"  # fmt: skip
# (slot member, record field, is output) per attributes class
_SLOT_FIELDS: dict[type[SdpaCommonAttributes], tuple[tuple[Any, str, bool], ...]] = {
    cls: tuple((s, s.name.lower(), False) for s in cls.InputNames)
    + tuple((s, s.name.lower(), True) for s in cls.OutputNames)
    for cls in (SdpaAttributes, SdpaBackwardAttributes)
}


_uid = attrgetter("uid")


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _tensor_record(t: TensorAttributes) -> TensorRecord:
    # every field, in field order, from an already validated tensor (no pydantic validation)
    record: TensorRecord = _object_new(TensorRecord)
    _set_dict(
        record,
        {
            "uid": t.get_uid(),
            "name": t.name,
            "data_type": t.data_type,
            "dims": list(t.dim),
            "strides": list(t.stride),
            "is_virtual": t.is_virtual,
            "is_pass_by_value": t.is_pass_by_value,
            "value": t.value,
            "alignment": t.alignment,
        },
    )
    _set_fields(record, _TENSOR_FIELDS)
    _set_extra(record, None)
    _set_private(record, None)
    return record


def _node_record(attributes: SdpaCommonAttributes) -> NodeRecord:
    fields: dict[str, Any] = {name: getattr(attributes, name) for name in _SCALARS}
    for slot, tensor in (*attributes.inputs.items(), *attributes.outputs.items()):
        fields[slot.name.lower()] = tensor.get_uid()
    record: SdpaBwdRecord | SdpaFwdRecord
    if isinstance(attributes, SdpaBackwardAttributes):
        record = construct_record(SdpaBwdRecord, **fields)
    else:
        assert isinstance(attributes, SdpaAttributes)
        record = construct_record(SdpaFwdRecord, generate_stats=attributes.generate_stats, **fields)
    return construct_record(
        NodeRecord,
        name=attributes.name,
        compute_data_type=attributes.compute_data_type,
        attributes=record,
    )


def graph_to_record(graph: Graph) -> GraphRecord:
    """The record of a graph, validating it and assigning uids first when needed.

    Tensors are listed by uid (so the record does not depend on the order in which equal graphs
    were declared or lifted), nodes in topological order.
    """
    if not graph.is_validated:
        graph.validate()
    from ..lifecycle import assign_uids

    assign_uids(graph)
    attrs = graph.attributes
    preferred = graph.get_preferred_engine_id_ext()
    return construct_record(
        GraphRecord,
        name=attrs.name,
        compute_data_type=attrs.compute_data_type,
        intermediate_data_type=attrs.intermediate_data_type,
        io_data_type=attrs.io_data_type,
        preferred_engine_id=None if preferred is None else _signed64(preferred),
        tensors=[_tensor_record(t) for t in sorted(graph.graph_tensors(), key=_uid)],
        nodes=[_node_record(node.attributes) for node in graph.nodes],
    )


def _tensor(rec: TensorRecord) -> TensorAttributes:
    return trusted_tensor(
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
    tensors = {rec.uid: _tensor(rec) for rec in record.tensors}
    for tensor in tensors.values():
        graph._track(tensor)
    for node_record in record.nodes:
        body = node_record.attributes
        attributes: SdpaCommonAttributes
        if isinstance(body, SdpaBwdRecord):
            attributes = SdpaBackwardAttributes()
        else:
            attributes = SdpaAttributes(generate_stats=body.generate_stats)
        fields = {name: getattr(body, name) for name in _SCALARS}
        fields["name"] = node_record.name
        fields["compute_data_type"] = node_record.compute_data_type
        attributes.__dict__.update(fields)  # values come from a checked record
        inputs, outputs = attributes.inputs, attributes.outputs
        for slot, field, is_output in _SLOT_FIELDS[type(attributes)]:
            uid = getattr(body, field, None)
            if uid is None:
                continue
            found = tensors.get(uid)
            if found is None:
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"Node {node_record.name} refers to tensor uid {uid}, which the graph "
                    "does not hold",
                )
            (outputs if is_output else inputs)[slot] = found
        node_cls = SdpaBwdNode if isinstance(body, SdpaBwdRecord) else SdpaFwdNode
        graph.add_node(node_cls(attributes, graph.attributes))  # type: ignore[arg-type]
    return graph
