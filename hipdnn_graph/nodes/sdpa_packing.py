"""Packing SDPA nodes into backend descriptors and unpacking them again (spec §7).

One table per node lists which descriptor attribute carries each slot, flag and scalar; the same
two functions pack and unpack both nodes from their table. What is always written: the required
tensor slots, the four mask flags, the diagonal alignment and the compute type. What is written
only when set: optional tensor slots, optional scalars and the node name.
"""

from __future__ import annotations

from collections.abc import MutableMapping, MutableSequence
from dataclasses import dataclass
from typing import Any

from ..attributes.base import SdpaCommonAttributes
from ..descriptors.backend_descriptor import BackendDescriptor
from ..descriptors.enums import AttributeName as A
from ..descriptors.enums import AttributeType as T
from ..descriptors.enums import DescriptorType
from ..descriptors.tensors import tensor_descriptor, tensor_from_descriptor
from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import DataType, DiagonalAlignment, ErrorCode

__all__ = ["BWD_TABLE", "FWD_TABLE", "PackingTable", "pack_sdpa", "unpack_sdpa"]


@dataclass(frozen=True)
class PackingTable:
    """Where each part of an SDPA node lives in its operation descriptor."""

    #: the node's class name, as hipDNN's messages spell it
    node_label: str
    descriptor_type: DescriptorType
    #: (slot name, is output slot, attribute) in slot order; required slots first
    tensors: tuple[tuple[str, bool, A], ...]
    required: frozenset[str]
    #: field name → BOOLEAN attribute, always written
    flags: tuple[tuple[str, A], ...]
    #: field name → (attribute type, attribute), written only when set
    scalars: tuple[tuple[str, T, A], ...]
    alignment: A
    compute_type: A


BWD_TABLE = PackingTable(
    node_label="SdpaBwdNode",
    descriptor_type=DescriptorType.OPERATION_SDPA_BWD_DESCRIPTOR_EXT,
    tensors=(
        ("Q", False, A.OPERATION_SDPA_BWD_Q_EXT),
        ("K", False, A.OPERATION_SDPA_BWD_K_EXT),
        ("V", False, A.OPERATION_SDPA_BWD_V_EXT),
        ("O", False, A.OPERATION_SDPA_BWD_O_EXT),
        ("dO", False, A.OPERATION_SDPA_BWD_DO_EXT),
        ("Stats", False, A.OPERATION_SDPA_BWD_STATS_EXT),
        ("dQ", True, A.OPERATION_SDPA_BWD_DQ_EXT),
        ("dK", True, A.OPERATION_SDPA_BWD_DK_EXT),
        ("dV", True, A.OPERATION_SDPA_BWD_DV_EXT),
        ("Attn_scale", False, A.OPERATION_SDPA_BWD_SCALE_EXT),
        ("Bias", False, A.OPERATION_SDPA_BWD_ATTN_MASK_EXT),
        ("SEQ_LEN_Q", False, A.OPERATION_SDPA_BWD_SEQ_LEN_Q_EXT),
        ("SEQ_LEN_KV", False, A.OPERATION_SDPA_BWD_SEQ_LEN_KV_EXT),
        ("Seed", False, A.OPERATION_SDPA_BWD_SEED_EXT),
        ("Offset", False, A.OPERATION_SDPA_BWD_OFFSET_EXT),
        ("Dropout_mask", False, A.OPERATION_SDPA_BWD_DROPOUT_MASK_EXT),
        ("Dropout_scale", False, A.OPERATION_SDPA_BWD_DROPOUT_SCALE_EXT),
        ("Dropout_scale_inv", False, A.OPERATION_SDPA_BWD_DROPOUT_SCALE_INV_EXT),
        ("dBias", True, A.OPERATION_SDPA_BWD_DBIAS_EXT),
    ),
    required=frozenset({"Q", "K", "V", "O", "dO", "Stats", "dQ", "dK", "dV"}),
    flags=(
        ("alibi_mask", A.SDPA_BWD_ALIBI_MASK_EXT),
        ("padding_mask", A.SDPA_BWD_PADDING_MASK_EXT),
        ("causal_mask", A.SDPA_BWD_CAUSAL_MASK_EXT),
        ("causal_mask_bottom_right", A.SDPA_BWD_CAUSAL_MASK_BOTTOM_RIGHT_EXT),
    ),
    scalars=(
        ("dropout_probability", T.FLOAT, A.SDPA_BWD_DROPOUT_PROBABILITY_EXT),
        ("attn_scale_value", T.FLOAT, A.SDPA_BWD_ATTN_SCALE_VALUE_EXT),
        ("left_bound", T.INT64, A.SDPA_BWD_LEFT_BOUND_EXT),
        ("right_bound", T.INT64, A.SDPA_BWD_RIGHT_BOUND_EXT),
    ),
    alignment=A.SDPA_BWD_DIAGONAL_ALIGNMENT_EXT,
    compute_type=A.SDPA_BWD_COMP_TYPE_EXT,
)

FWD_TABLE = PackingTable(
    node_label="SdpaFwdNode",
    descriptor_type=DescriptorType.OPERATION_SDPA_FWD,
    tensors=(
        ("Q", False, A.OPERATION_SDPA_FWD_QDESC),
        ("K", False, A.OPERATION_SDPA_FWD_KDESC),
        ("V", False, A.OPERATION_SDPA_FWD_VDESC),
        ("O", True, A.OPERATION_SDPA_FWD_ODESC),
        ("Stats", True, A.OPERATION_SDPA_FWD_STATSDESC),
        ("Attn_scale", False, A.OPERATION_SDPA_FWD_SCALEDESC),
        ("Bias", False, A.OPERATION_SDPA_FWD_ATTN_MASK_EXT),
        ("SEQ_LEN_Q", False, A.OPERATION_SDPA_FWD_SEQ_LEN_QDESC),
        ("SEQ_LEN_KV", False, A.OPERATION_SDPA_FWD_SEQ_LEN_KVDESC),
        ("Seed", False, A.OPERATION_SDPA_FWD_SEED_EXT),
        ("Offset", False, A.OPERATION_SDPA_FWD_OFFSET_EXT),
        ("Dropout_mask", False, A.OPERATION_SDPA_FWD_DROPOUT_MASK_EXT),
        ("Dropout_scale", False, A.OPERATION_SDPA_FWD_DROPOUT_SCALE_EXT),
    ),
    required=frozenset({"Q", "K", "V", "O"}),
    flags=(
        ("alibi_mask", A.SDPA_FWD_ALIBI_MASK_EXT),
        ("padding_mask", A.SDPA_FWD_PADDING_MASK_EXT),
        ("causal_mask", A.SDPA_FWD_CAUSAL_MASK_EXT),
        ("causal_mask_bottom_right", A.SDPA_FWD_CAUSAL_MASK_BOTTOM_RIGHT_EXT),
    ),
    scalars=(
        ("generate_stats", T.BOOLEAN, A.SDPA_FWD_GENERATE_STATS_EXT),
        ("dropout_probability", T.FLOAT, A.SDPA_FWD_DROPOUT_PROBABILITY_EXT),
        ("attn_scale_value", T.FLOAT, A.SDPA_FWD_ATTN_SCALE_VALUE_EXT),
        ("left_bound", T.INT64, A.SDPA_FWD_LEFT_BOUND_EXT),
        ("right_bound", T.INT64, A.SDPA_FWD_RIGHT_BOUND_EXT),
    ),
    alignment=A.SDPA_FWD_DIAGONAL_ALIGNMENT_EXT,
    compute_type=A.SDPA_FWD_COMP_TYPE_EXT,
)


def pack_sdpa(
    attributes: SdpaCommonAttributes,
    table: PackingTable,
    tensor_descs: MutableMapping[int, BackendDescriptor],
    operations: MutableSequence[BackendDescriptor],
) -> BackendDescriptor:
    """Append the finalized operation descriptor of an SDPA node to ``operations``.

    Tensor descriptors are created once per uid in ``tensor_descs`` and shared.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a tensor without uid or an unset compute type.
    """
    op = BackendDescriptor(table.descriptor_type)
    slots = attributes.tensors_by_slot()
    for slot, _, attr in table.tensors:
        tensor = slots.get(slot)
        if tensor is None:
            continue
        if tensor.uid is None:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"Tensor {tensor.name} has no uid; call build_operation_graph() to assign uids",
            )
        desc = tensor_descs.get(tensor.uid)
        if desc is None:
            desc = tensor_descs[tensor.uid] = tensor_descriptor(tensor)
        op.set_attribute(attr, T.BACKEND_DESCRIPTOR, [desc])
    for field, attr in table.flags:
        op.set_attribute(attr, T.BOOLEAN, [bool(getattr(attributes, field))])
    for field, attr_type, attr in table.scalars:
        value = getattr(attributes, field)
        if value is not None:
            op.set_attribute(attr, attr_type, [value])
    op.set_attribute(table.alignment, T.DIAGONAL_ALIGNMENT, [attributes.diagonal_alignment])
    if attributes.compute_data_type == DataType.NOT_SET:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Unsupported data type for {table.node_label} compute type: {DataType.NOT_SET.name}",
        )
    op.set_attribute(table.compute_type, T.DATA_TYPE, [attributes.compute_data_type])
    if attributes.name:
        op.set_attribute(A.OPERATION_NAME_EXT, T.CHAR, [attributes.name])
    op.finalize()
    operations.append(op)
    return op


def unpack_sdpa(
    op: BackendDescriptor,
    table: PackingTable,
    attributes: SdpaCommonAttributes,
    tensor_map: MutableMapping[int, TensorAttributes],
) -> SdpaCommonAttributes:
    """Fill ``attributes`` from an operation descriptor; tensors are shared through ``tensor_map``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` when the descriptor is of another operation type.
    """
    if op.descriptor_type != table.descriptor_type:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Expected a {table.descriptor_type.name} descriptor, got {op.descriptor_type.name}",
        )
    for slot, is_output, attr in table.tensors:
        if not op.has_attribute(attr):
            continue
        desc = op.get_attribute(attr, T.BACKEND_DESCRIPTOR)[0]
        uid = desc.get_attribute(A.TENSOR_UNIQUE_ID, T.INT64)[0]
        tensor = tensor_map.get(uid)
        if tensor is None:
            tensor = tensor_map[uid] = tensor_from_descriptor(desc)
        names: Any = attributes.OutputNames if is_output else attributes.InputNames
        target = attributes.outputs if is_output else attributes.inputs
        target[names[slot]] = tensor
    for field, attr in table.flags:
        setattr(attributes, field, bool(op.get_attribute(attr, T.BOOLEAN)[0]))
    for field, attr_type, attr in table.scalars:
        if op.has_attribute(attr):
            setattr(attributes, field, op.get_attribute(attr, attr_type)[0])
    attributes.diagonal_alignment = DiagonalAlignment(
        op.get_attribute(table.alignment, T.DIAGONAL_ALIGNMENT)[0]
    )
    attributes.compute_data_type = DataType(op.get_attribute(table.compute_type, T.DATA_TYPE)[0])
    if op.has_attribute(A.OPERATION_NAME_EXT):
        attributes.name = str(op.get_attribute(A.OPERATION_NAME_EXT, T.CHAR)[0])
    return attributes
