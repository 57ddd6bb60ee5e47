"""What the three convolution families declare alike for the wire: hipDNN's backend attribute
ids, the ``ConvMode`` enum, the members and unmodelled strings of their tables (slots 3-9 of
``ConvolutionFwdAttributes``, ``ConvolutionBwdAttributes`` and ``ConvolutionWrwAttributes``) and
:func:`convolution_spec`, which declares a family's whole table from what differs."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from ..descriptors.enums import AttributeType as T
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import (
    Kind,
    NodeSpec,
    ScalarSpec,
    SlotSpec,
    UnmodelledSpec,
    WireEnum,
)
from ..types import ConvolutionMode
from .base import Node, declare_spec

__all__ = [
    "CONV_MODE",
    "ConvolutionAttributeName",
    "convolution_scalars",
    "convolution_spec",
    "convolution_unmodelled",
]


class ConvolutionAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the convolution operation descriptors
    (``HipdnnBackendAttributeName.h``: forward 1400-1402, the shared 1500-1505, filter gradient
    1600-1602, data gradient 1700-1702)."""

    OPERATION_CONVOLUTION_FORWARD_W = 1400
    OPERATION_CONVOLUTION_FORWARD_X = 1401
    OPERATION_CONVOLUTION_FORWARD_Y = 1402
    CONVOLUTION_COMP_TYPE = 1500
    CONVOLUTION_CONV_MODE = 1501
    CONVOLUTION_DILATIONS = 1502
    CONVOLUTION_FILTER_STRIDES = 1503
    CONVOLUTION_POST_PADDINGS = 1504
    CONVOLUTION_PRE_PADDINGS = 1505
    OPERATION_CONVOLUTION_BACKWARD_FILTER_X = 1600
    OPERATION_CONVOLUTION_BACKWARD_FILTER_DY = 1601
    OPERATION_CONVOLUTION_BACKWARD_FILTER_DW = 1602
    OPERATION_CONVOLUTION_BACKWARD_DATA_DY = 1700
    OPERATION_CONVOLUTION_BACKWARD_DATA_W = 1701
    OPERATION_CONVOLUTION_BACKWARD_DATA_DX = 1702


#: hipDNN's ``ConvMode`` schema enum (``convolution_common.fbs``, reconstructed): its JSON writes
#: the schema's upper-case names, ``UNSET`` for NOT_SET.
CONV_MODE = WireEnum(
    "ConvMode",
    ConvolutionMode,
    {
        ConvolutionMode.NOT_SET: "UNSET",
        ConvolutionMode.CONVOLUTION: "CONVOLUTION",
        ConvolutionMode.CROSS_CORRELATION: "CROSS_CORRELATION",
    },
)


_A = ConvolutionAttributeName


def convolution_scalars() -> tuple[ScalarSpec, ...]:
    """The four vectors (slots 3-6, JSON arrays under ``"parameters"``) and ``conv_mode``
    (slot 7) every convolution table has, with the shared descriptor attributes (1501-1505)
    that carry them."""
    return (
        ScalarSpec(
            "pre_padding",
            Kind.I64_VEC,
            3,
            (_A.CONVOLUTION_PRE_PADDINGS, T.INT64),
        ),
        ScalarSpec(
            "post_padding",
            Kind.I64_VEC,
            4,
            (_A.CONVOLUTION_POST_PADDINGS, T.INT64),
        ),
        ScalarSpec(
            "stride",
            Kind.I64_VEC,
            5,
            (_A.CONVOLUTION_FILTER_STRIDES, T.INT64),
        ),
        ScalarSpec("dilation", Kind.I64_VEC, 6, (_A.CONVOLUTION_DILATIONS, T.INT64)),
        ScalarSpec(
            "convolution_mode",
            Kind.ENUM,
            7,
            (_A.CONVOLUTION_CONV_MODE, T.INT64),
            always=True,
            wire="conv_mode",
            enum=CONV_MODE,
        ),
    )


def convolution_unmodelled() -> tuple[UnmodelledSpec, ...]:
    """``umd_flops``/``umd_bytes`` (slots 8, 9): not modelled, must stay empty."""
    return (
        UnmodelledSpec("umd_flops", Kind.STRING, 8, "extra"),
        UnmodelledSpec("umd_bytes", Kind.STRING, 9, "extra"),
    )


def convolution_spec(
    node: type[Node[Any]],
    table: str,
    union_tag: int,
    operation: str,
    descriptor_class: str,
    slots: tuple[IntEnum, IntEnum, IntEnum],
) -> NodeSpec:
    """Declare a convolution family's 10-field table (see
    :func:`~hipdnn_graph.nodes.base.declare_spec`): ``slots`` are its two inputs and its output
    in field order (fields 0-2, wire names ``<slot>_tensor_uid``), carried by the attributes
    ``OPERATION_CONVOLUTION_<operation>_<slot>`` of a descriptor of type
    ``OPERATION_CONVOLUTION_<operation>``; the members and unmodelled strings are the shared
    ones, under ``"parameters"`` in the JSON.

    Example:
        >>> from hipdnn_graph.nodes.conv_fprop import CONVOLUTION_FWD_SPEC
        >>> [(s.name, s.fb_slot, s.attribute.name, s.wire) for s in CONVOLUTION_FWD_SPEC.slots][2]
        ('Y', 2, 'OPERATION_CONVOLUTION_FORWARD_Y', 'y_tensor_uid')
    """
    return declare_spec(
        node,
        table=table,
        union_tag=union_tag,
        descriptor_type=DescriptorType[f"OPERATION_CONVOLUTION_{operation}"],
        descriptor_class=descriptor_class,
        compute_type=_A.CONVOLUTION_COMP_TYPE,
        scalar_group="parameters",
        slots=tuple(
            SlotSpec.named(
                member,
                field == 2,
                True,
                field,
                ConvolutionAttributeName[f"OPERATION_CONVOLUTION_{operation}_{member.name}"],
            )
            for field, member in enumerate(slots)
        ),
        scalars=convolution_scalars(),
        unmodelled=convolution_unmodelled(),
        field_count=10,
    )
