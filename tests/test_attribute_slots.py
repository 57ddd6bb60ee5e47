"""The slot accessors (``set_x, get_x = slot("X")``) and the setters' shared checks: every
family's slots are reachable by hipDNN's accessor names, in the right direction, and the
refusals keep their exact words."""

from __future__ import annotations

import inspect
from enum import IntEnum
from typing import Any

import pytest

import hipdnn_graph.attributes as attributes_package
import hipdnn_graph.frontend as frontend
from hipdnn_graph import DiagonalAlignment, ErrorCode, HipdnnError, PointwiseMode, TensorAttributes
from hipdnn_graph.attributes import (
    MoeGroupedMatmulAttributes,
    NodeAttributes,
    PointwiseAttributes,
)
from hipdnn_graph.attributes.accessors import slot

# hipDNN's accessor suffix where it is not the slot's name in lower case
SUFFIX = {"IN_0": "input_0", "IN_1": "input_1", "IN_2": "input_2", "OUT_0": "output_0"}
# slots whose getter is hand-written (MoE's get_output also takes a slot)
CUSTOM_GETTER = {(MoeGroupedMatmulAttributes, "OUTPUT")}

FAMILIES = sorted(
    (
        cls
        for cls in vars(attributes_package).values()
        if isinstance(cls, type) and issubclass(cls, NodeAttributes) and cls._SLOTS
    ),
    key=lambda cls: cls.__name__,
)
CASES = [(cls, name) for cls in FAMILIES for name in cls._SLOTS]


def test_the_families_with_slots_are_all_found() -> None:
    assert len(FAMILIES) == 22  # every family but custom op (positional lists)
    assert PointwiseAttributes in FAMILIES


@pytest.mark.parametrize(("cls", "name"), CASES, ids=[f"{c.__name__}.{n}" for c, n in CASES])
def test_every_slot_has_its_accessors_in_its_direction(cls: type[Any], name: str) -> None:
    suffix = SUFFIX.get(name, name.lower())
    tensor = TensorAttributes(name=f"t_{name}")
    attributes = getattr(cls(), f"set_{suffix}")(tensor)
    assert isinstance(attributes, cls)  # the setter chains
    output, member = cls._SLOTS[name]
    held = attributes.outputs if output else attributes.inputs
    other = attributes.inputs if output else attributes.outputs
    assert held == {member: tensor} and other == {}
    assert member.name == name and member in (cls.OutputNames if output else cls.InputNames)
    if (cls, name) not in CUSTOM_GETTER:
        assert getattr(attributes, f"get_{suffix}")() is tensor
    assert getattr(attributes, f"set_{suffix}")(None).get_input(member) is None
    assert attributes.outputs == {} and attributes.inputs == {}


def test_accessors_are_plain_methods_with_names_and_docs() -> None:
    setter, getter = PointwiseAttributes.set_input_1, PointwiseAttributes.get_input_1
    assert inspect.isfunction(setter) and inspect.isfunction(getter)
    assert setter.__qualname__ == "PointwiseAttributes.set_input_1"
    assert getter.__name__ == "get_input_1"
    assert setter.__doc__ == "Put ``tensor`` in slot ``IN_1`` (``None`` empties it)."
    assert getter.__doc__ == "The tensor in slot ``IN_1``, or ``None``."


def test_an_output_slot_refuses_a_number_with_the_slot_message() -> None:
    with pytest.raises(HipdnnError) as err:
        PointwiseAttributes().set_output_0(1.5)  # type: ignore[arg-type]
    assert err.value.code is ErrorCode.INVALID_VALUE
    assert err.value.message == "Slot OUT_0 expects a TensorAttributes, got float"


def test_a_slot_named_both_input_and_output_is_refused_at_class_creation() -> None:
    with pytest.raises(TypeError, match=r"Twice: slots \['A'\] are inputs and outputs"):

        class Twice(NodeAttributes):
            class InputNames(IntEnum):
                A = 0

            class OutputNames(IntEnum):
                A = 0

            set_a, get_a = slot("A")


def test_a_slot_accessor_of_a_class_without_the_slot_says_which() -> None:
    class OnlyX(NodeAttributes):
        class InputNames(IntEnum):
            X = 0

        class OutputNames(IntEnum):
            Y = 0

        set_w, get_w = slot("W")

    with pytest.raises(KeyError, match="W"):
        OnlyX().set_w(None)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: attributes_package.LayernormAttributes().set_normalized_dim_count(2**63),
            "normalized_dim_count 9223372036854775808 is not a 64-bit integer",
        ),
        (
            lambda: attributes_package.MoeGroupedMatmulAttributes().set_top_k(2**31),
            "top_k must be a 32-bit integer (hipDNN's int32), got 2147483648",
        ),
        (
            lambda: attributes_package.BlockScaleQuantizeAttributes().set_block_size(-(2**31) - 1),
            "block_size must fit a 32-bit integer, got -2147483649",
        ),
        (
            lambda: attributes_package.BlockScaleQuantizeAttributes().set_axis(2**63),
            "axis must fit a 64-bit integer, got 9223372036854775808",
        ),
        (
            lambda: attributes_package.SdpaAttributes().set_diagonal_band_left_bound(2**63),
            "diagonal_band_left_bound must be a 64-bit integer (hipDNN's int64), got "
            "9223372036854775808",
        ),
        (
            lambda: attributes_package.PointwiseAttributes().set_mode(True),
            "Unknown pointwise mode True",
        ),
        (
            lambda: attributes_package.ReductionAttributes().set_mode(999),
            "Unknown reduction mode 999",
        ),
        (
            lambda: attributes_package.MoeGroupedMatmulAttributes().set_mode("GATHER"),
            "Unknown MoE grouped matmul mode 'GATHER'",
        ),
        (
            lambda: attributes_package.RMSNormAttributes().set_forward_phase(7),
            "Unknown forward phase 7",
        ),
        (
            lambda: attributes_package.ConvFpropAttributes().set_convolution_mode(9),
            "Unknown convolution mode 9",
        ),
        (
            lambda: attributes_package.SdpaAttributes().set_diagonal_alignment(5),
            "Unknown diagonal alignment 5",
        ),
        (
            lambda: frontend.SdpaAttributes().set_implementation("fast"),
            "Unknown attention implementation 'fast'",
        ),
    ],
)
def test_the_shared_checks_keep_each_message(call: Any, message: str) -> None:
    with pytest.raises(HipdnnError) as err:
        call()
    assert err.value.code is ErrorCode.INVALID_VALUE
    assert err.value.message == message


# ----- member accessors: set_mode, get_mode = member("mode", check, what) -----
# (the messages are those of the hand-written setters they replace)
def test_a_member_setter_stores_the_checked_value_and_chains() -> None:
    a = attributes_package.PointwiseAttributes().set_relu_lower_clip(0.1)
    assert a.get_relu_lower_clip() == pytest.approx(0.1, rel=1e-7)
    assert a.get_relu_lower_clip() != 0.1  # rounded to float32, as hipDNN stores it
    assert a.set_mode(2).get_mode() is PointwiseMode(2)


def test_a_list_member_getter_hands_back_a_copy() -> None:
    a = attributes_package.ConvFpropAttributes().set_stride((2, 3))
    got = a.get_stride()
    got.append(9)
    assert a.get_stride() == [2, 3] and a.stride == [2, 3]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: attributes_package.PointwiseAttributes().set_relu_lower_clip(None),
            "relu_lower_clip must be a float, got NoneType",
        ),
        (
            lambda: attributes_package.SdpaAttributes().set_alibi_mask(1),
            "alibi_mask must be a bool (True or False), got int 1",
        ),
        (
            lambda: attributes_package.ResampleFwdAttributes().set_window([1.5]),
            "window must be a sequence of integers, got [1.5]",
        ),
        (
            lambda: attributes_package.CustomOpAttributes().set_custom_op_id(3),
            "custom_op_id must be a string",
        ),
    ],
)
def test_a_member_setter_keeps_its_check_message(call: Any, message: str) -> None:
    with pytest.raises(HipdnnError) as err:
        call()
    assert err.value.code is ErrorCode.INVALID_VALUE
    assert err.value.message == message


def test_member_setters_document_what_they_raise() -> None:
    doc = attributes_package.SdpaAttributes.set_causal_mask.__doc__
    assert doc == (
        "Causal mask aligned top-left (key ``j`` visible to query ``i`` iff ``j <= i``).\n\n"
        "Raises:\n    HipdnnError: ``INVALID_VALUE`` for a value ``causal_mask`` cannot hold."
    )
    assert attributes_package.SdpaAttributes.get_causal_mask.__doc__ == (
        "The value of ``causal_mask``."
    )


def test_the_enum_setters_that_take_a_bool_still_do() -> None:
    # hipDNN's bindings take True for member 1 here (unlike the mode setters, which refuse bools)
    a = attributes_package.SdpaAttributes().set_diagonal_alignment(True)
    assert a.get_diagonal_alignment() is DiagonalAlignment.BOTTOM_RIGHT
    b = frontend.SdpaAttributes().set_implementation(True)
    assert b.implementation is frontend.AttentionImplementation.COMPOSITE
