"""The knob model (hipdnn_graph.backend.knobs) and the engine API version: hipDNN's messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hipdnn_graph import ErrorCode, HipdnnError
from hipdnn_graph.backend.api_version import (
    EngineApiVersion,
    api_version_refusal,
    engine_api_version,
    required_api_version,
)
from hipdnn_graph.backend.knobs import (
    MAX_SWEEP_VALUES,
    BehaviorNote,
    FloatConstraint,
    IntConstraint,
    Knob,
    KnobSetting,
    KnobValueType,
    StringConstraint,
    engine_behavior_notes,
    engine_knobs,
    knob_space,
    resolve_knob_settings,
)


def _refused(call: Callable[[], object], message: str) -> None:
    with pytest.raises(HipdnnError) as info:
        call()
    assert info.value.code == ErrorCode.INVALID_VALUE
    assert info.value.message == message


def test_value_types_follow_the_default() -> None:
    assert Knob("a", 3).value_type is KnobValueType.INT64
    assert Knob("b", 0.5).value_type is KnobValueType.FLOAT64
    assert Knob("c", "x").value_type is KnobValueType.STRING
    assert [m.value for m in KnobValueType] == [0, 1, 2, 3]


def test_knob_setting_compares_by_id_and_value() -> None:
    assert KnobSetting("tile", 64) == KnobSetting("tile", 64)
    assert KnobSetting("tile", 64) != KnobSetting("tile", 128)
    assert repr(KnobSetting("layout", "nhwc")) == 'KnobSetting{knobIdStr=layout, value="nhwc"}'
    _refused(
        lambda: KnobSetting("tile", True),
        "Knob 'tile': a knob value must be an int (int64), a float or a str; got True",
    )
    _refused(
        lambda: KnobSetting("tile", 2**63),
        f"Knob 'tile': a knob value must be an int (int64), a float or a str; got {2**63}",
    )


@pytest.mark.parametrize(
    ("constraint", "value", "message"),
    [
        (IntConstraint(1, 4), 7, "Value 7 is out of range [1, 4]"),
        (IntConstraint(1, 4), 0.5, "KnobSetting does not contain an integer value"),
        (IntConstraint(16, 128, 16), 40,
         "Value 40 does not satisfy step constraint (step=16, min=16)"),
        (IntConstraint(0, 0, valid_values=(64, 16, 32)), 48,
         "Value 48 is not in the list of valid values: [16, 32, 64]"),
        (FloatConstraint(0.0, 1.0), 1.5, "Value 1.5 is out of range [0, 1]"),
        (FloatConstraint(0.0, 1.0), float("nan"), "Value nan is out of range [0, 1]"),
        (FloatConstraint(0.0, 1.0), 1, "KnobSetting does not contain a float value"),
        (StringConstraint(3), "abcd", "String length 4 exceeds maximum length 3"),
        (StringConstraint(8, ("max", "default")), "fast",
         'Value "fast" is not in the list of valid values: ["default", "max"]'),
        (StringConstraint(8), 2, "KnobSetting does not contain a string value"),
    ],
)  # fmt: skip
def test_constraints_refuse_with_hipdnn_messages(constraint: Any, value: Any, message: str) -> None:
    _refused(lambda: constraint.check(value), message)


def test_unconstrained_knob_checks_the_type() -> None:
    knob = Knob("free", 1)
    knob.validate(KnobSetting("free", -5))
    _refused(
        lambda: knob.validate(KnobSetting("free", "x")),
        "KnobSetting value type does not match Knob value type for knob 'free'",
    )


def test_knob_declaration_mistakes_are_refused() -> None:
    _refused(
        lambda: Knob("k", 5, constraint=IntConstraint(1, 4)),
        "Knob 'k': its default is refused: Value 5 is out of range [1, 4]",
    )
    _refused(
        lambda: Knob("k", 5, constraint=StringConstraint(4)),
        "Knob 'k': a StringConstraint does not constrain a INT64 default",
    )
    _refused(
        lambda: Knob("", 5), "Knob '' needs a non-empty id and an int, float or str default; got 5"
    )


def test_candidates_enumerate_small_spaces_only() -> None:
    assert Knob("a", 3, constraint=IntConstraint(1, 7, 2)).candidates() == (1, 3, 5, 7)
    big = Knob("b", 1, constraint=IntConstraint(1, MAX_SWEEP_VALUES + 1))
    assert big.candidates() == (1,)
    assert Knob("c", 0.5, constraint=FloatConstraint(0.0, 1.0)).candidates() == (0.5,)
    assert Knob("d", "y", constraint=StringConstraint(1, ("y", "x"))).candidates() == ("x", "y")


def test_knob_space_is_the_cartesian_product_defaults_first() -> None:
    knobs = (
        Knob("m", 64, constraint=IntConstraint(0, 0, valid_values=(32, 64))),
        Knob("on", 1, constraint=IntConstraint(0, 1)),
    )
    space = list(knob_space(knobs))
    assert space == [{"m": 64, "on": 1}, {"m": 64, "on": 0}, {"m": 32, "on": 1},
                     {"m": 32, "on": 0}]  # fmt: skip
    assert list(knob_space(())) == [{}]


def test_resolve_fills_defaults_and_follows_hipdnn_rules() -> None:
    knobs = (Knob("m", 64, constraint=IntConstraint(16, 128, 16)), Knob("mode", "a"))
    assert resolve_knob_settings(knobs, None, engine="E") == {"m": 64, "mode": "a"}
    assert resolve_knob_settings(knobs, [KnobSetting("m", 32)], engine="E") == {
        "m": 32,
        "mode": "a",
    }
    _refused(
        lambda: resolve_knob_settings(knobs, {"nope": 1}, engine="E"),
        "Knob 'nope' is not available for engine E",
    )
    # create_execution_plan_ext's rule: unknown knobs are ignored, bad values still refused
    assert resolve_knob_settings(knobs, {"nope": 1}, engine="E", strict=False)["m"] == 64
    _refused(
        lambda: resolve_knob_settings(knobs, {"m": 200}, engine="E", strict=False),
        "Value 200 is out of range [16, 128]",
    )
    _refused(
        lambda: resolve_knob_settings(knobs, ["m"], engine="E"),  # type: ignore[list-item]
        "Knob settings must be KnobSetting records; got 'm'",
    )


def test_engine_declarations_are_optional() -> None:
    class Bare:
        name = "BARE"

    class Declared:
        name = "DECLARED"
        knobs = (Knob("x", 1),)
        behavior_notes = (2,)
        api_version = "1.2.0"

    assert engine_knobs(Bare()) == ()
    assert engine_behavior_notes(Bare()) == ()
    assert engine_behavior_notes(Declared()) == (BehaviorNote.SUPPORTS_GRAPH_CAPTURE,)
    assert engine_api_version(Bare()) == EngineApiVersion(1, 2, 0)  # what the contract gave
    assert engine_api_version(Declared()) == EngineApiVersion(1, 2, 0)

    class Twice:
        name = "TWICE"
        knobs = (Knob("x", 1), Knob("x", 2))

    _refused(lambda: engine_knobs(Twice()), "Engine 'TWICE' declares knob 'x' twice")


def test_api_version_floors_and_refusals() -> None:
    assert required_api_version(override_shape=False, runtime_pass_by_value=False) == (1, 0, 0)
    assert required_api_version(override_shape=True, runtime_pass_by_value=False) == (1, 1, 0)
    assert required_api_version(override_shape=True, runtime_pass_by_value=True) == (1, 2, 0)

    class Newer:
        api_version = (1, 3, 0)

    class Broken:
        api_version = "one"

    assert api_version_refusal(Newer(), EngineApiVersion(1, 2, 0)) is None
    assert api_version_refusal(Broken(), EngineApiVersion(1, 0, 0)) == (
        "declares no valid engine plugin API version: An engine plugin API version is "
        "'major.minor.patch'; got 'one'"
    )
    assert str(EngineApiVersion.parse("1.10.2")) == "1.10.2"
    _refused(
        lambda: EngineApiVersion.parse((1, -1, 0)),
        "An engine plugin API version holds three uint32 numbers; got (1, -1, 0)",
    )
