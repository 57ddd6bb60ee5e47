"""The pointwise node: rules, inference and wire declaration (hipDNN's ``PointwiseNode``).

hipDNN's rules (``hipdnn_frontend/node/PointwiseNode.hpp``), in its order; see
``docs/spec-families.md`` for the table of checks and messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import ClassVar

from ..attributes.pointwise import PointwiseAttributes
from ..descriptors.enums import AttributeType as T
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import (
    Kind,
    ScalarSpec,
    SlotSpec,
    WireEnum,
)
from ..types import NodeType, PointwiseMode
from .base import Node, declare_spec
from .input_memo import InputRuleMemo
from .rules import invalid, missing

__all__ = [
    "BINARY_MODES",
    "POINTWISE_SPEC",
    "TERNARY_MODES",
    "UNARY_MODES",
    "PointwiseAttributeName",
    "PointwiseNode",
    "broadcast_compatible",
    "common_shape",
]

_M = PointwiseMode
#: hipDNN's unary modes (one input)
UNARY_MODES = frozenset(
    {
        _M.ABS, _M.CEIL, _M.ELU_FWD, _M.ERF, _M.EXP, _M.FLOOR, _M.GELU_APPROX_TANH_FWD,
        _M.GELU_FWD, _M.GEN_INDEX, _M.IDENTITY, _M.LOG, _M.LOGICAL_NOT, _M.NEG, _M.RECIPROCAL,
        _M.RELU_FWD, _M.RSQRT, _M.SIGMOID_FWD, _M.SIN, _M.SOFTPLUS_FWD, _M.SQRT, _M.SWISH_FWD,
        _M.TAN, _M.TANH_FWD,
    }
)  # fmt: skip
#: hipDNN's binary modes (two inputs)
BINARY_MODES = frozenset(
    {
        _M.ADD, _M.ADD_SQUARE, _M.CMP_EQ, _M.CMP_GE, _M.CMP_GT, _M.CMP_LE, _M.CMP_LT,
        _M.CMP_NEQ, _M.DIV, _M.ELU_BWD, _M.GELU_APPROX_TANH_BWD, _M.GELU_BWD, _M.LOGICAL_AND,
        _M.LOGICAL_OR, _M.MAX, _M.MIN, _M.MUL, _M.RELU_BWD, _M.SIGMOID_BWD, _M.SOFTPLUS_BWD,
        _M.SUB, _M.SWISH_BWD, _M.TANH_BWD,
    }
)  # fmt: skip
#: hipDNN's ternary modes (three inputs)
TERNARY_MODES = frozenset({_M.BINARY_SELECT})

_ARITY = {
    1: (UNARY_MODES, "PointwiseNode with one input must have a unary operation"),
    2: (BINARY_MODES, "PointwiseNode with two inputs must have a binary operation"),
    3: (TERNARY_MODES, "PointwiseNode with three inputs must have a ternary operation"),
}


def broadcast_compatible(input_dims: Sequence[int], output_dims: Sequence[int]) -> bool:
    """hipDNN's broadcast test: dims compared from the right, each equal or 1 in the input; the
    input may have fewer dims, never more.

    Example:
        >>> broadcast_compatible([4], [2, 3, 4]), broadcast_compatible([3, 1], [2, 4])
        (True, False)
    """
    if list(input_dims) == list(output_dims):
        return True
    if len(input_dims) > len(output_dims):
        return False
    return all(
        i in (o, 1) for i, o in zip(reversed(input_dims), reversed(output_dims), strict=False)
    )


def common_shape(shapes: Sequence[Sequence[int]]) -> list[int]:
    """hipDNN's ``findCommonShape``: the largest rank, each dim the max of the inputs' dims at the
    same index **counted from the left**; two dims that differ and are both not 1 are
    incompatible.

    Raises:
        HipdnnError: ``INVALID_VALUE`` ``"Incompatible shapes"``.

    Example:
        >>> common_shape([[1, 2], [1, 2, 5]])
        [1, 2, 5]
    """
    if not shapes:
        raise invalid("Input shapes cannot be empty")
    result = [1] * max(len(s) for s in shapes)
    for shape in shapes:
        for j in reversed(range(len(shape))):
            if result[j] != shape[j] and result[j] != 1 and shape[j] != 1:
                raise invalid("Incompatible shapes")
            result[j] = max(result[j], shape[j])
    return result


class PointwiseNode(Node[PointwiseAttributes]):
    """Applies one element-wise operation to one, two or three inputs.

    Example:
        >>> import hipdnn_graph as hg
        >>> x = hg.TensorAttributes(name="x", dim=[2, 8], stride=[8, 1])
        >>> b = hg.TensorAttributes(name="b", dim=[1, 8], stride=[8, 1])
        >>> a = (hg.PointwiseAttributes().set_name("add").set_mode(hg.PointwiseMode.ADD)
        ...      .set_input_0(x).set_input_1(b).set_output_0(hg.TensorAttributes()))
        >>> node = hg.PointwiseNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_output_0().get_dim(), a.get_output_0().get_stride()
        ([2, 8], [8, 1])
    """

    node_type: ClassVar[NodeType] = NodeType.POINTWISE
    constants_anywhere: ClassVar[bool] = True

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: the output, the mode, one output, the number of inputs
        against the mode's arity, then each input broadcastable to an output that has dims.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` without OUT_0 or a mode; ``INVALID_VALUE`` for the
                others.
        """
        a = self.attributes
        out = a.get_output_0()
        if out is None:
            raise missing("PointwiseNode missing OUT_0 for pre-validation")
        if a.mode == PointwiseMode.NOT_SET:
            raise missing("PointwiseNode missing operation for pre-validation")
        if len(a.outputs) != 1:
            raise invalid("PointwiseNode must have exactly one output")
        count = len(a.inputs)
        if count == 0:
            raise invalid("PointwiseNode must have at least one input")
        if count not in _ARITY:
            raise invalid("PointwiseNode can only have one, two, or three inputs")
        modes, message = _ARITY[count]
        if a.mode not in modes:
            raise invalid(message)
        if out.dim:
            for tensor in a.input_tensors():
                if not broadcast_compatible(tensor.dim, out.dim):
                    raise invalid(
                        f"PointwiseNode input '{tensor.name}' has dimensions incompatible with "
                        "output. All inputs must be broadcastable to output dimensions.",
                    )

    def infer_properties_node(self) -> None:
        """Fill data types; an output without dims gets the inputs' common shape
        (:func:`common_shape`), one without strides those of the first input (in slot order)
        whose dims equal the output's.

        Raises:
            HipdnnError: ``INVALID_VALUE`` ``"Incompatible shapes"``; ``ATTRIBUTE_NOT_SET``
                ``"PointwiseNode output missing stride"`` when no input has the output's dims.
        """
        a = self.attributes
        out = a.get_output_0()
        if out is None:
            raise missing("PointwiseNode missing output for setting properties")
        a.fill_from_context(self.graph_attributes)
        inputs = a.input_tensors()
        if not out.dim:
            out.dim = common_shape([t.dim for t in inputs])
        if not out.stride:
            same = next((t for t in inputs if t.dim == out.dim), None)
            if same is None:
                raise missing("PointwiseNode output missing stride")
            out.stride = list(same.stride)

    def post_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """The base checks, then the project's rules after hipDNN's (which has none for them):
        some input is a tensor in memory (not a constant), and ``GEN_INDEX`` numbers the
        elements along ``axis``, one of OUT_0's dims.

        Raises:
            HipdnnError: as :meth:`Node.post_validate_node`; ``ATTRIBUTE_NOT_SET`` for a
                ``GEN_INDEX`` without an axis, ``INVALID_VALUE`` for one outside
                ``[0, rank)`` or for constants alone.
        """
        super().post_validate_node(memo)
        a = self.attributes
        if all(t.value is not None for t in a.inputs.values()):
            raise invalid(
                "PointwiseNode: every input holds a constant value; at least one must be a "
                "tensor in memory",
            )
        if a.mode != PointwiseMode.GEN_INDEX:
            return
        out = a.get_output_0()
        assert out is not None  # pre-validation checked it
        if a.axis is None:
            raise missing("PointwiseNode: GEN_INDEX needs an axis")
        if not 0 <= a.axis < len(out.dim):
            raise invalid(
                f"PointwiseNode: GEN_INDEX axis {a.axis} must be in [0, {len(out.dim)}) "
                "(OUT_0's rank)",
            )


class PointwiseAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the pointwise operation descriptor
    (``HipdnnBackendAttributeName.h``, 2200-2308)."""

    OPERATION_POINTWISE_IN_0_EXT = 2200
    OPERATION_POINTWISE_OUT_0_EXT = 2201
    OPERATION_POINTWISE_IN_1_EXT = 2202
    OPERATION_POINTWISE_IN_2_EXT = 2203
    POINTWISE_MODE = 2300
    POINTWISE_RELU_LOWER_CLIP = 2301
    POINTWISE_RELU_UPPER_CLIP = 2302
    POINTWISE_RELU_LOWER_CLIP_SLOPE = 2303
    POINTWISE_SWISH_BETA = 2304
    POINTWISE_ELU_ALPHA = 2305
    POINTWISE_SOFTPLUS_BETA = 2306
    POINTWISE_MATH_PREC = 2307
    POINTWISE_AXIS = 2308


_A = PointwiseAttributeName
_In, _Out = PointwiseAttributes.InputNames, PointwiseAttributes.OutputNames

#: hipDNN's ``PointwiseMode`` schema enum: same numbers as the frontend's; its JSON writes the
#: lower-case names, ``MAX``/``MIN`` as ``"max_op"``/``"min_op"`` and NOT_SET as ``"unset"``.
POINTWISE_MODE = WireEnum(
    "PointwiseMode",
    PointwiseMode,
    {
        m.value: {"NOT_SET": "unset", "MAX": "max_op", "MIN": "min_op"}.get(m.name, m.name.lower())
        for m in PointwiseMode
    },
)


def _float(name: str, fb_slot: int, attribute: _A) -> ScalarSpec:
    return ScalarSpec(name, Kind.F32_OPT, fb_slot, (attribute, T.FLOAT))


#: Where every slot and scalar of a pointwise node lives on each wire (hipDNN's
#: ``PointwiseAttributes`` table, 12 fields; its JSON writes the scalars among the inputs).
POINTWISE_SPEC = declare_spec(
    PointwiseNode,
    table="PointwiseAttributes",
    union_tag=2,
    descriptor_type=DescriptorType.OPERATION_POINTWISE,
    descriptor_class="PointwiseOperationDescriptor",
    compute_type=_A.POINTWISE_MATH_PREC,
    scalar_group="inputs",
    slots=(
        SlotSpec(_In.IN_0, False, True, 5, _A.OPERATION_POINTWISE_IN_0_EXT, "in_0_tensor_uid"),
        SlotSpec(_In.IN_1, False, False, 6, _A.OPERATION_POINTWISE_IN_1_EXT, "in_1_tensor_uid"),
        SlotSpec(_In.IN_2, False, False, 7, _A.OPERATION_POINTWISE_IN_2_EXT, "in_2_tensor_uid"),
        SlotSpec(_Out.OUT_0, True, True, 8, _A.OPERATION_POINTWISE_OUT_0_EXT, "out_0_tensor_uid"),
    ),
    scalars=(
        ScalarSpec(
            "mode",
            Kind.ENUM,
            0,
            (_A.POINTWISE_MODE, T.POINTWISE_MODE),
            always=True,
            wire="operation",
            enum=POINTWISE_MODE,
        ),
        _float("relu_lower_clip", 1, _A.POINTWISE_RELU_LOWER_CLIP),
        _float("relu_upper_clip", 2, _A.POINTWISE_RELU_UPPER_CLIP),
        _float("relu_lower_clip_slope", 3, _A.POINTWISE_RELU_LOWER_CLIP_SLOPE),
        ScalarSpec("axis", Kind.I64_OPT, 4, (_A.POINTWISE_AXIS, T.INT64), wire="axis_tensor_uid"),
        _float("swish_beta", 9, _A.POINTWISE_SWISH_BETA),
        _float("elu_alpha", 10, _A.POINTWISE_ELU_ALPHA),
        _float("softplus_beta", 11, _A.POINTWISE_SOFTPLUS_BETA),
    ),
    field_count=12,
)
