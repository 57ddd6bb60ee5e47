"""Engine knobs: what an engine lets a caller tune, and the settings a caller picks.

An engine declares its knobs as data (a ``knobs`` attribute holding :class:`Knob` records) and
receives the chosen values when it builds a plan; nothing else in an engine changes. The model
is hipDNN's (``Knob.hpp`` and ``knob_value.fbs``): a knob has a string id (namespaced by the
plugin, ``"flex.block_m"``), a description, a default value whose Python type is the knob's
:class:`KnobValueType` (``int`` → ``INT64``, ``float`` → ``FLOAT64``, ``str`` → ``STRING``), an
optional constraint (:class:`IntConstraint`, :class:`FloatConstraint`,
:class:`StringConstraint`) and a deprecated flag. A :class:`KnobSetting` is a knob id and a
value. Checks raise :class:`~hipdnn_graph.errors.HipdnnError` ``INVALID_VALUE`` with hipDNN's
messages (``"Value 7 is out of range [1, 4]"``).

The whole space an autotuner may sweep is :func:`knob_space`: the Cartesian product of each
knob's :meth:`Knob.candidates` (its listed values, its stepped range when small, else its
default), so engines × knob settings are enumerable without knowing any engine.

Example:
    >>> block = Knob("flex.block_m", 64, "query rows per program",
    ...              IntConstraint(16, 128, valid_values=(16, 32, 64, 128)))
    >>> block.value_type.name, block.candidates()
    ('INT64', (16, 32, 64, 128))
    >>> resolve_knob_settings((block,), [KnobSetting("flex.block_m", 32)], engine="FLEX")
    {'flex.block_m': 32}
    >>> resolve_knob_settings((block,), {"flex.block_m": 48}, engine="FLEX")
    Traceback (most recent call last):
    ...
    hipdnn_graph.errors.HipdnnError: Value 48 is not in the list of valid values: [16, 32, 64, 128]
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import HipdnnError
from ..types import ErrorCode, HipdnnEnum

__all__ = [
    "MAX_SWEEP_VALUES",
    "BehaviorNote",
    "Constraint",
    "FloatConstraint",
    "IntConstraint",
    "Knob",
    "KnobSetting",
    "KnobValue",
    "KnobValueType",
    "StringConstraint",
    "engine_behavior_notes",
    "engine_knobs",
    "knob_defaults",
    "knob_space",
    "knob_value_type",
    "resolve_knob_settings",
    "settings_list",
]

#: a knob's value: hipDNN's ``std::variant<int64_t, double, std::string>``
KnobValue = int | float | str

#: a stepped integer range with more values than this is swept at its default only
MAX_SWEEP_VALUES = 64

_INT64 = (-(2**63), 2**63 - 1)


class KnobValueType(HipdnnEnum):
    """The type of a knob's value (hipDNN's ``KnobValueType``)."""

    NOT_SET = 0
    INT64 = 1
    FLOAT64 = 2
    STRING = 3


class BehaviorNote(HipdnnEnum):
    """What an engine tells a caller about how it runs (hipDNN's ``BehaviorNote``)."""

    RUNTIME_COMPILATION = 0
    REQUIRES_LAYOUT_TRANSFORM = 1
    SUPPORTS_GRAPH_CAPTURE = 2
    EXTERNAL_LIBRARY_DEPENDENCY = 3
    SUPPORTS_EXECUTION_PLAN_SERIALIZATION = 4


def knob_value_type(value: Any) -> KnobValueType:
    """The :class:`KnobValueType` of a Python value, ``NOT_SET`` for anything else (a bool too:
    hipDNN's variant has no boolean alternative).

    Example:
        >>> knob_value_type(0.5).name, knob_value_type(True).name
        ('FLOAT64', 'NOT_SET')
    """
    if isinstance(value, bool):
        return KnobValueType.NOT_SET
    if isinstance(value, int):
        return KnobValueType.INT64 if _INT64[0] <= value <= _INT64[1] else KnobValueType.NOT_SET
    if isinstance(value, float):
        return KnobValueType.FLOAT64
    if isinstance(value, str):
        return KnobValueType.STRING
    return KnobValueType.NOT_SET


def _invalid(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, message)


def _number(value: float) -> str:
    """A float as C++'s ``ostream`` prints a double (6 significant digits, ``%g``)."""
    return f"{value:g}"


@dataclass(frozen=True)
class KnobSetting:
    """One knob's chosen value (hipDNN's ``KnobSetting``); equal when id and value are equal.

    Example:
        >>> KnobSetting("tile.size", 64)
        KnobSetting{knobIdStr=tile.size, value=64}
    """

    knob_id: str
    value: KnobValue

    def __post_init__(self) -> None:
        if not isinstance(self.knob_id, str):
            raise _invalid(f"A knob id must be a string; got {self.knob_id!r}")
        if knob_value_type(self.value) is KnobValueType.NOT_SET:
            raise _invalid(
                f"Knob '{self.knob_id}': a knob value must be an int (int64), a float or a "
                f"str; got {self.value!r}"
            )

    @property
    def value_type(self) -> KnobValueType:
        return knob_value_type(self.value)

    def __repr__(self) -> str:
        shown = f'"{self.value}"' if isinstance(self.value, str) else _shown(self.value)
        return f"KnobSetting{{knobIdStr={self.knob_id}, value={shown}}}"


def _shown(value: KnobValue) -> str:
    return _number(value) if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class IntConstraint:
    """Integers in ``[min_value, max_value]`` on a ``step`` grid from ``min_value``, or exactly
    one of ``valid_values`` when those are listed (hipDNN's ``IntConstraint``)."""

    min_value: int
    max_value: int
    step: int = 1
    valid_values: tuple[int, ...] = ()

    def check(self, value: KnobValue) -> None:
        """Raises: HipdnnError: ``INVALID_VALUE`` with hipDNN's message."""
        if knob_value_type(value) is not KnobValueType.INT64:
            raise _invalid("KnobSetting does not contain an integer value")
        assert isinstance(value, int)
        if self.valid_values:
            if value not in self.valid_values:
                listed = ", ".join(str(v) for v in sorted(set(self.valid_values)))
                raise _invalid(f"Value {value} is not in the list of valid values: [{listed}]")
            return
        if not self.min_value <= value <= self.max_value:
            raise _invalid(f"Value {value} is out of range [{self.min_value}, {self.max_value}]")
        if self.step > 1 and (value - self.min_value) % self.step:
            raise _invalid(
                f"Value {value} does not satisfy step constraint (step={self.step}, "
                f"min={self.min_value})"
            )

    def values(self) -> tuple[int, ...] | None:
        """Every allowed value, in order, or ``None`` when there are more than
        :data:`MAX_SWEEP_VALUES`."""
        if self.valid_values:
            return tuple(sorted(set(self.valid_values)))
        step = max(self.step, 1)
        count = (self.max_value - self.min_value) // step + 1
        if count > MAX_SWEEP_VALUES or count < 1:
            return None
        return tuple(range(self.min_value, self.max_value + 1, step))

    def __str__(self) -> str:
        text = f"IntConstraint{{min={self.min_value}, max={self.max_value}, step={self.step}"
        if self.valid_values:
            text += ", validValues=[" + ", ".join(map(str, sorted(set(self.valid_values)))) + "]"
        return text + "}"


@dataclass(frozen=True)
class FloatConstraint:
    """Floats in ``[min_value, max_value]`` (hipDNN's ``FloatConstraint``)."""

    min_value: float
    max_value: float

    def check(self, value: KnobValue) -> None:
        """Raises: HipdnnError: ``INVALID_VALUE`` with hipDNN's message."""
        if not isinstance(value, float):
            raise _invalid("KnobSetting does not contain a float value")
        if not self.min_value <= value <= self.max_value:  # NaN is never in range
            raise _invalid(
                f"Value {_number(value)} is out of range [{_number(self.min_value)}, "
                f"{_number(self.max_value)}]"
            )

    def values(self) -> tuple[float, ...] | None:
        """A float range is not enumerable: ``None``."""
        return None

    def __str__(self) -> str:
        return f"FloatConstraint{{min={_number(self.min_value)}, max={_number(self.max_value)}}}"


@dataclass(frozen=True)
class StringConstraint:
    """Strings of at most ``max_length`` characters, or exactly one of ``valid_values`` when
    those are listed (hipDNN's ``StringConstraint``)."""

    max_length: int
    valid_values: tuple[str, ...] = ()

    def check(self, value: KnobValue) -> None:
        """Raises: HipdnnError: ``INVALID_VALUE`` with hipDNN's message."""
        if not isinstance(value, str):
            raise _invalid("KnobSetting does not contain a string value")
        if self.valid_values:
            if value not in self.valid_values:
                listed = ", ".join(f'"{v}"' for v in sorted(set(self.valid_values)))
                raise _invalid(f'Value "{value}" is not in the list of valid values: [{listed}]')
            return
        if len(value) > self.max_length:
            raise _invalid(f"String length {len(value)} exceeds maximum length {self.max_length}")

    def values(self) -> tuple[str, ...] | None:
        """The listed values, sorted, or ``None`` for a free string."""
        return tuple(sorted(set(self.valid_values))) if self.valid_values else None

    def __str__(self) -> str:
        text = f"StringConstraint{{maxLength={self.max_length}"
        if self.valid_values:
            listed = ", ".join(f'"{v}"' for v in sorted(set(self.valid_values)))
            text += f", validValues=[{listed}]"
        return text + "}"


Constraint = IntConstraint | FloatConstraint | StringConstraint
_CONSTRAINT_TYPE = {
    IntConstraint: KnobValueType.INT64,
    FloatConstraint: KnobValueType.FLOAT64,
    StringConstraint: KnobValueType.STRING,
}


@dataclass(frozen=True)
class Knob:
    """One tunable parameter of an engine (hipDNN's ``Knob``).

    Attributes:
        knob_id: unique within the engine; namespaced by convention (``"replay.cuda_graph"``).
        default_value: what the engine uses when the caller says nothing; its type is the
            knob's :attr:`value_type`.
        description: help text, one sentence on what changes.
        constraint: the values allowed, or ``None`` (any value of the knob's type).
        deprecated: still accepted, with a warning in hipDNN; listed for callers to avoid.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a default of no knob type, a constraint of another
            type, or a default the constraint refuses (an engine author's mistake, caught when
            the engine module is imported).
    """

    knob_id: str
    default_value: KnobValue
    description: str = ""
    constraint: Constraint | None = None
    deprecated: bool = field(default=False, kw_only=True)

    def __post_init__(self) -> None:
        kind = knob_value_type(self.default_value)
        if not self.knob_id or kind is KnobValueType.NOT_SET:
            raise _invalid(
                f"Knob '{self.knob_id}' needs a non-empty id and an int, float or str default; "
                f"got {self.default_value!r}"
            )
        if self.constraint is not None:
            expected = _CONSTRAINT_TYPE.get(type(self.constraint))
            if expected is not kind:
                raise _invalid(
                    f"Knob '{self.knob_id}': a {type(self.constraint).__name__} does not "
                    f"constrain a {kind.name} default"
                )
            try:
                self.constraint.check(self.default_value)
            except HipdnnError as err:
                raise _invalid(f"Knob '{self.knob_id}': its default is refused: {err}") from None

    @property
    def value_type(self) -> KnobValueType:
        return knob_value_type(self.default_value)

    @property
    def is_deprecated(self) -> bool:
        return self.deprecated

    def validate(self, setting: KnobSetting) -> None:
        """Check ``setting`` against this knob: its constraint when it has one, else its type.

        Raises:
            HipdnnError: ``INVALID_VALUE`` with hipDNN's message.
        """
        if self.constraint is not None:
            self.constraint.check(setting.value)
        elif setting.value_type is not self.value_type:
            raise _invalid(
                f"KnobSetting value type does not match Knob value type for knob '{self.knob_id}'"
            )

    def candidates(self) -> tuple[KnobValue, ...]:
        """The values an autotuner sweeps: the constraint's values when enumerable (a listed
        set, a stepped range of at most :data:`MAX_SWEEP_VALUES`), else the default alone."""
        values = None if self.constraint is None else self.constraint.values()
        return tuple(values) if values else (self.default_value,)

    def to_setting(self) -> KnobSetting:
        """The default as a :class:`KnobSetting`."""
        return KnobSetting(self.knob_id, self.default_value)


def engine_knobs(engine: Any) -> tuple[Knob, ...]:
    """The knobs ``engine`` declares (its ``knobs`` attribute), ``()`` when it declares none.

    Raises:
        HipdnnError: ``INVALID_VALUE`` when ``knobs`` holds something else than :class:`Knob`
            records or repeats an id.
    """
    declared = tuple(getattr(engine, "knobs", None) or ())
    seen: set[str] = set()
    for knob in declared:
        if not isinstance(knob, Knob):
            raise _invalid(
                f"Engine {getattr(engine, 'name', engine)!r} declares a knob that is not a "
                f"hipdnn_graph.backend.Knob: {knob!r}"
            )
        if knob.knob_id in seen:
            raise _invalid(
                f"Engine {getattr(engine, 'name', engine)!r} declares knob '{knob.knob_id}' twice"
            )
        seen.add(knob.knob_id)
    return declared


def knob_defaults(engine: Any) -> dict[str, KnobValue]:
    """``{knob_id: default}`` of every knob ``engine`` declares."""
    return {k.knob_id: k.default_value for k in engine_knobs(engine)}


def engine_behavior_notes(engine: Any) -> tuple[BehaviorNote, ...]:
    """The behavior notes ``engine`` declares (its ``behavior_notes``), ``()`` when none."""
    return tuple(BehaviorNote(n) for n in getattr(engine, "behavior_notes", None) or ())


def settings_list(
    settings: Iterable[KnobSetting] | Mapping[str, KnobValue] | None,
) -> list[KnobSetting]:
    """``settings`` as :class:`KnobSetting` records: a list of them, or ``{knob_id: value}``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for an entry that is neither, or a bad value type.
    """
    if settings is None:
        return []
    if isinstance(settings, Mapping):
        return [KnobSetting(k, v) for k, v in settings.items()]
    if isinstance(settings, str | bytes):
        raise _invalid(f"Knob settings must be KnobSetting records or a mapping; got {settings!r}")
    out: list[KnobSetting] = []
    for item in settings:
        if not isinstance(item, KnobSetting):
            raise _invalid(f"Knob settings must be KnobSetting records; got {item!r}")
        out.append(item)
    return out


def resolve_knob_settings(
    knobs: Sequence[Knob],
    settings: Iterable[KnobSetting] | Mapping[str, KnobValue] | None,
    *,
    engine: str,
    strict: bool = True,
) -> dict[str, KnobValue]:
    """Every declared knob's value for one plan: the defaults, overridden by ``settings``.

    ``strict`` (``add_engine``'s rule in hipDNN) refuses a knob the engine does not declare;
    otherwise (``create_execution_plan_ext``'s rule) such a setting is ignored, with a warning
    logged. A setting of a declared knob is checked by :meth:`Knob.validate` either way; of
    two settings of one knob the last wins.

    Raises:
        HipdnnError: ``INVALID_VALUE``: ``"Knob '<id>' is not available for engine <engine>"``
            (strict), or the knob's own message.
    """
    lookup = {k.knob_id: k for k in knobs}
    chosen: dict[str, KnobValue] = {k.knob_id: k.default_value for k in knobs}
    for setting in settings_list(settings):
        knob = lookup.get(setting.knob_id)
        if knob is None:
            if strict:
                raise _invalid(f"Knob '{setting.knob_id}' is not available for engine {engine}")
            _warn(f"Ignoring knob {setting.knob_id} for engine {engine}: "
                  "the engine doesn't support chosen knob.")  # fmt: skip
            continue
        if knob.deprecated:
            _warn(f"Knob {knob.knob_id} has been marked as deprecated.")
        knob.validate(setting)
        chosen[knob.knob_id] = setting.value
    return chosen


def _warn(message: str) -> None:
    import logging

    logging.getLogger("hipdnn_graph.engines").warning(message)


def knob_space(knobs: Sequence[Knob]) -> Iterator[dict[str, KnobValue]]:
    """Every combination of the knobs' :meth:`~Knob.candidates`, defaults first.

    Example:
        >>> tile = Knob("tile", 2, constraint=IntConstraint(1, 3))
        >>> mode = Knob("mode", "a", constraint=StringConstraint(8, ("a", "b")))
        >>> [tuple(s.values()) for s in knob_space((tile, mode))][:3]
        [(2, 'a'), (2, 'b'), (1, 'a')]
        >>> len(list(knob_space((tile, mode))))
        6
    """
    axes = []
    for knob in knobs:
        rest = [v for v in knob.candidates() if v != knob.default_value]
        axes.append([knob.default_value, *rest])
    ids = [k.knob_id for k in knobs]
    for combo in itertools.product(*axes):
        yield dict(zip(ids, combo, strict=True))
