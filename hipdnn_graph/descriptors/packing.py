"""Packing nodes into backend descriptors and unpacking them again (spec §7), from their spec.

What is always written: the required tensor slots, the scalars the spec marks ``always`` (flags,
enums that always hold a value) and the compute type. What is written only when set:
optional tensor slots, optional scalars and the node name. One pair of functions serves every
node family (:class:`~.node_spec.NodeSpec`).
"""

from __future__ import annotations

from collections.abc import MutableMapping, MutableSequence
from typing import Any

from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import DataType, ErrorCode
from .backend_descriptor import BackendDescriptor
from .enums import AttributeName as A
from .enums import AttributeType as T
from .node_spec import LIST_KINDS, Kind, NodeSpec
from .tensors import tensor_descriptor, tensor_from_descriptor

__all__ = ["pack_node", "unpack_node"]


def pack_node(
    attributes: Any,
    spec: NodeSpec,
    tensor_descs: MutableMapping[int, BackendDescriptor],
    operations: MutableSequence[BackendDescriptor],
) -> BackendDescriptor:
    """Append the finalized operation descriptor of a node to ``operations``.

    Tensor descriptors are created once per uid in ``tensor_descs`` and shared.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a tensor without uid or an unset compute type.
    """
    op = BackendDescriptor(spec.descriptor_type)

    def described(tensor: TensorAttributes) -> BackendDescriptor:
        if tensor.uid is None:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"Tensor {tensor.name} has no uid; call build_operation_graph() to assign uids",
            )
        desc = tensor_descs.get(tensor.uid)
        if desc is None:
            desc = tensor_descs[tensor.uid] = tensor_descriptor(tensor)
        return desc

    slots = attributes.tensors_by_slot()
    for slot in spec.slots:
        tensor = slots.get(slot.name)
        if tensor is not None:
            op.set_attribute(slot.attribute, T.BACKEND_DESCRIPTOR, [described(tensor)])
    for held in spec.tensor_lists:  # an array attribute, set when the list is not empty
        tensors = attributes.outputs if held.output else attributes.inputs
        if tensors:
            descs = [described(tensors[key]) for key in sorted(tensors)]
            op.set_attribute(held.attribute, T.BACKEND_DESCRIPTOR, descs)
    for scalar in spec.scalars:
        if scalar.attribute is None:
            continue
        value = getattr(attributes, scalar.name)
        if scalar.kind in LIST_KINDS:  # a list attribute: all its values, when it has any
            if value:
                op.set_attribute(scalar.attribute[0], scalar.attribute[1], list(value))
            continue
        if scalar.kind is Kind.U8_VEC:  # a byte payload: one CHAR value, when not empty
            if value:
                op.set_attribute(scalar.attribute[0], scalar.attribute[1], [bytes(value)])
            continue
        if value is not None or scalar.always:
            op.set_attribute(scalar.attribute[0], scalar.attribute[1], [value])
    if attributes.compute_data_type == DataType.NOT_SET:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Unsupported data type for {spec.label} compute type: {DataType.NOT_SET.name}",
        )
    op.set_attribute(spec.compute_type, T.DATA_TYPE, [attributes.compute_data_type])
    if attributes.name:
        op.set_attribute(A.OPERATION_NAME_EXT, T.CHAR, [attributes.name])
    op.finalize()
    operations.append(op)
    return op


def unpack_node(
    op: BackendDescriptor,
    spec: NodeSpec,
    attributes: Any,
    tensor_map: MutableMapping[int, TensorAttributes],
) -> Any:
    """Fill ``attributes`` from an operation descriptor; tensors are shared through ``tensor_map``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` when the descriptor is of another operation type.
    """
    if op.descriptor_type != spec.descriptor_type:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Expected a {spec.descriptor_type.name} descriptor, got {op.descriptor_type.name}",
        )
    for slot in spec.slots:
        if not op.has_attribute(slot.attribute):
            continue
        desc = op.get_attribute(slot.attribute, T.BACKEND_DESCRIPTOR)[0]
        uid = desc.get_attribute(A.TENSOR_UNIQUE_ID, T.INT64)[0]
        tensor = tensor_map.get(uid)
        if tensor is None:
            tensor = tensor_map[uid] = tensor_from_descriptor(desc)
        (attributes.outputs if slot.output else attributes.inputs)[slot.member] = tensor
    for held in spec.tensor_lists:
        if not op.has_attribute(held.attribute):
            continue
        descs = op.get_attribute(held.attribute, T.BACKEND_DESCRIPTOR)
        for index, desc in enumerate(descs):
            uid = desc.get_attribute(A.TENSOR_UNIQUE_ID, T.INT64)[0]
            tensor = tensor_map.get(uid)
            if tensor is None:
                tensor = tensor_map[uid] = tensor_from_descriptor(desc)
            (attributes.outputs if held.output else attributes.inputs)[held.key(index)] = tensor
    for scalar in spec.scalars:
        if scalar.attribute is None or not op.has_attribute(scalar.attribute[0]):
            continue
        values = op.get_attribute(scalar.attribute[0], scalar.attribute[1])
        if scalar.kind in LIST_KINDS:
            setattr(attributes, scalar.name, list(values))
            continue
        if scalar.kind is Kind.U8_VEC:
            raw = values[0]
            setattr(attributes, scalar.name, raw.encode() if isinstance(raw, str) else bytes(raw))
            continue
        value = values[0]
        if scalar.attribute[1] is T.BOOLEAN:
            value = bool(value)
        elif scalar.enum is not None:
            value = scalar.enum.cls(value)
        setattr(attributes, scalar.name, value)
    attributes.compute_data_type = DataType(op.get_attribute(spec.compute_type, T.DATA_TYPE)[0])
    if op.has_attribute(A.OPERATION_NAME_EXT):
        attributes.name = str(op.get_attribute(A.OPERATION_NAME_EXT, T.CHAR)[0])
    return attributes
