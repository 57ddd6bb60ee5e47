"""hipDNN's engine-side FlatBuffers: ``EngineConfig``, ``KnobSetting``, ``KnobValue``, ``Knob``
(with its constraints) and ``EngineDetails`` (``engine_config.fbs``, ``knob_value.fbs``,
``engine_details.fbs``), written as hipDNN's C++ writes them and read back checked.

Writing follows the rules of :mod:`.fb_write` (C++'s ``Finish(T::Pack(builder, t))``, no file
identifier): a table's children first, in field order (strings, vectors, sub-tables, a union's
table; empty optional strings and vectors are left out, required ones never), then the table's
fields by width (8, 4, 1 bytes), each group in reverse slot order, scalars at their schema
default left out. Reading checks what flatbuffers' Verifier checks (:mod:`.fb_verify`) and
refuses fields past the schema's with UNSUPPORTED_GRAPH_FORMAT. The records are the knob
model's (:mod:`hipdnn_graph.backend.knobs`) and the ones below.

Example:
    >>> from hipdnn_graph.backend.knobs import KnobSetting
    >>> blob = write_engine_config(EngineConfig(7, (KnobSetting("tile", 64),)))
    >>> read_engine_config(blob)
    EngineConfig(engine_id=7, knobs=(KnobSetting{knobIdStr=tile, value=64},), ranking_metric='')
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..backend.knobs import (
    Constraint,
    FloatConstraint,
    IntConstraint,
    Knob,
    KnobSetting,
    KnobValue,
    StringConstraint,
)
from ..errors import HipdnnError
from ..types import ErrorCode
from .fb_verify import (
    Table,
    field_numbers,
    field_scalar,
    field_string,
    field_tables,
    field_target,
    new_counter,
    u32,
    vector_at,
)
from .fb_write import Builder
from .node_spec import Kind

__all__ = [
    "EngineCandidate",
    "EngineCandidatePage",
    "EngineConfig",
    "EngineDetails",
    "read_engine_config",
    "read_engine_details",
    "read_knob",
    "write_engine_config",
    "write_engine_details",
    "write_knob",
]

#: the most entries a vector of these tables may hold when read (knobs, settings, candidates)
MAX_ENTRIES = 1 << 16
_T = TypeVar("_T")


@dataclass(frozen=True)
class EngineConfig:
    """An engine and the knob settings it runs with (``EngineConfig``)."""

    engine_id: int
    knobs: tuple[KnobSetting, ...] = ()
    #: the ranking metric the configuration was chosen by ("": the default, "tflops")
    ranking_metric: str = ""


@dataclass(frozen=True)
class EngineCandidate:
    """A catalog entry addressable by its knob tuple (``EngineCandidate``)."""

    id: str
    knob_settings: tuple[KnobSetting, ...]
    kernel_features: str


@dataclass(frozen=True)
class EngineCandidatePage:
    """A page of an engine's enumerated candidates (``EngineCandidatePage``)."""

    graph_id: str
    device_id: str
    device_arch: str
    problem_features: str
    device_features: str
    total_count: int = 0
    offset: int = 0
    candidates: tuple[EngineCandidate, ...] = ()
    engine_name: str = ""
    engine_descriptor_id: str = ""


@dataclass(frozen=True)
class EngineDetails:
    """What an engine reports about itself for a graph (``EngineDetails``)."""

    engine_id: int
    knobs: tuple[Knob, ...] = ()
    behavior_notes: tuple[int, ...] = ()
    name: str = ""
    candidate_page: EngineCandidatePage | None = None


# ----- writing -----------------------------------------------------------------------------------

_VALUE_TAGS = {int: 1, float: 2, str: 3}  # KnobValue: IntValue, FloatValue, StringValue
_CONSTRAINT_TAGS = {IntConstraint: 1, FloatConstraint: 2, StringConstraint: 3}


def _table(b: Builder, fields: list[tuple[int, str, int, Any]]) -> int:
    """A table from ``(slot, code, width, value)``, added widest first, reverse slot order."""
    ordered = sorted(fields, key=lambda f: (-f[2], -f[0]))
    return b.table([(slot, code, value) for slot, code, _, value in ordered])


def _string(b: Builder, text: str, required: bool = False) -> int | None:
    return b.string(text.encode()) if text or required else None


def _strings(b: Builder, texts: tuple[str, ...]) -> int | None:
    if not texts:
        return None
    return b.offsets([b.string(t.encode()) for t in texts])


def _opt(fields: list[tuple[int, str, int, Any]], slot: int, offset: int | None) -> None:
    if offset is not None:
        fields.append((slot, "O", 4, offset))


def _value(b: Builder, value: KnobValue) -> tuple[int, int]:
    """``(union tag, table)`` of a knob value."""
    if isinstance(value, str):
        text = _string(b, value)
        fields: list[tuple[int, str, int, Any]] = []
        _opt(fields, 0, text)
        return 3, _table(b, fields)
    if isinstance(value, float):
        # C++ leaves out a value equal to the default 0.0 (-0.0 too: they compare equal)
        return 2, _table(b, [] if value == 0.0 else [(0, "d", 8, value)])
    return 1, _table(b, [(0, "q", 8, value)] if value else [])


def _setting(b: Builder, s: KnobSetting) -> int:
    knob_id = _string(b, s.knob_id)
    tag, value = _value(b, s.value)
    fields: list[tuple[int, str, int, Any]] = [(1, "B", 1, tag), (2, "O", 4, value)]
    _opt(fields, 0, knob_id)
    return _table(b, fields)


def _settings(b: Builder, settings: tuple[KnobSetting, ...]) -> int | None:
    return b.offsets([_setting(b, s) for s in settings]) if settings else None


def _constraint(b: Builder, c: Constraint) -> int:
    fields: list[tuple[int, str, int, Any]] = []
    if isinstance(c, IntConstraint):
        values = b.longs(list(c.valid_values)) if c.valid_values else None
        fields += [(0, "q", 8, c.min_value), (1, "q", 8, c.max_value), (2, "q", 8, c.step)]
        fields = [f for f in fields if f[3] != (1 if f[0] == 2 else 0)]
        _opt(fields, 3, values)
    elif isinstance(c, FloatConstraint):
        fields += [(s, "d", 8, v) for s, v in ((0, c.min_value), (1, c.max_value)) if v != 0.0]
    else:
        values = _strings(b, c.valid_values)
        if c.max_length:
            fields.append((0, "i", 4, c.max_length))
        _opt(fields, 1, values)
    return _table(b, fields)


def _knob(b: Builder, k: Knob) -> int:
    knob_id, description = _string(b, k.knob_id), _string(b, k.description)
    tag, default = _value(b, k.default_value)
    constraint = None if k.constraint is None else _constraint(b, k.constraint)
    fields: list[tuple[int, str, int, Any]] = [(2, "B", 1, tag), (3, "O", 4, default)]
    _opt(fields, 0, knob_id)
    _opt(fields, 1, description)
    if constraint is not None:
        assert k.constraint is not None
        fields += [(4, "B", 1, _CONSTRAINT_TAGS[type(k.constraint)]), (5, "O", 4, constraint)]
    if k.deprecated:
        fields.append((6, "?", 1, True))
    return _table(b, fields)


def _candidate(b: Builder, c: EngineCandidate) -> int:
    ident, settings = _string(b, c.id, True), _settings(b, c.knob_settings)
    features = _string(b, c.kernel_features, True)
    fields: list[tuple[int, str, int, Any]] = [(0, "O", 4, ident), (2, "O", 4, features)]
    _opt(fields, 1, settings)
    return _table(b, fields)


def _page(b: Builder, p: EngineCandidatePage) -> int:
    required = [_string(b, t, True) for t in (p.graph_id, p.device_id, p.device_arch,
                                              p.problem_features, p.device_features)]  # fmt: skip
    candidates = b.offsets([_candidate(b, c) for c in p.candidates]) if p.candidates else None
    name, descriptor = _string(b, p.engine_name), _string(b, p.engine_descriptor_id)
    fields: list[tuple[int, str, int, Any]] = [(i, "O", 4, o) for i, o in enumerate(required)]
    fields += [(s, "Q", 8, v) for s, v in ((5, p.total_count), (6, p.offset)) if v]
    _opt(fields, 7, candidates)
    _opt(fields, 8, name)
    _opt(fields, 9, descriptor)
    return _table(b, fields)


def _finish(write: Callable[[Builder], int]) -> bytes:
    b = Builder()
    return b.finish(write(b))


def write_engine_config(config: EngineConfig) -> bytes:
    """hipDNN's ``EngineConfig`` bytes."""

    def root(b: Builder) -> int:
        knobs, metric = _settings(b, config.knobs), _string(b, config.ranking_metric)
        fields: list[tuple[int, str, int, Any]] = []
        if config.engine_id:
            fields.append((0, "q", 8, config.engine_id))
        _opt(fields, 1, knobs)
        _opt(fields, 2, metric)
        return _table(b, fields)

    return _finish(root)


def write_knob(knob: Knob) -> bytes:
    """One ``Knob`` as its own buffer (how hipDNN's plugins hand each knob over)."""
    return _finish(lambda b: _knob(b, knob))


def write_engine_details(details: EngineDetails) -> bytes:
    """hipDNN's ``EngineDetails`` bytes."""

    def root(b: Builder) -> int:
        knobs = b.offsets([_knob(b, k) for k in details.knobs]) if details.knobs else None
        notes = b.numbers(list(details.behavior_notes), "i", 4) if details.behavior_notes else None
        name = _string(b, details.name)
        page = None if details.candidate_page is None else _page(b, details.candidate_page)
        fields: list[tuple[int, str, int, Any]] = []
        if details.engine_id:
            fields.append((0, "q", 8, details.engine_id))
        for slot, offset in ((1, knobs), (2, notes), (3, name), (4, page)):
            _opt(fields, slot, offset)
        return _table(b, fields)

    return _finish(root)


# ----- reading -----------------------------------------------------------------------------------


class _Reader:
    """A checked decode of one buffer (see :mod:`.fb_verify`)."""

    def __init__(self, data: bytes | bytearray | memoryview, what: str) -> None:
        self.buf = bytes(data)
        self.n = len(self.buf)
        self.what = what
        self.counter = new_counter()
        if self.n < 12 or self.n >= 2**31:
            raise self.bad(f"the buffer is {self.n} bytes")
        self.root = u32(self.buf, 0)[0]

    def bad(self, message: str) -> HipdnnError:
        return HipdnnError(
            ErrorCode.UNSUPPORTED_GRAPH_FORMAT, f"Invalid hipDNN {self.what}: {message}"
        )

    def table(self, pos: int, name: str, known: int) -> Table:
        t = Table(self.buf, self.n, pos, name, self.counter)
        for slot in range(known, len(t.entries)):
            if t.entries[slot]:
                raise self.bad(f"{name} field {slot} is not in hipDNN's schema as known here")
        return t

    def sub(self, t: Table, slot: int, name: str, known: int) -> Table | None:
        pos = field_target(self.buf, self.n, t, slot, name)
        return None if pos is None else self.table(pos, name, known)

    def scalar(self, t: Table, slot: int, code: str, name: str, default: Any = 0) -> Any:
        value = field_scalar(self.buf, self.n, t, slot, code, name)
        return default if value is None else value

    def string(self, t: Table, slot: int, name: str, required: bool = False) -> str:
        if required and not t.offset(slot):
            raise self.bad(f"{name} is required and absent")
        return field_string(self.buf, self.n, t, slot, name)

    def tables(
        self, t: Table, slot: int, name: str, read: Callable[[Table], _T], known: int
    ) -> tuple[_T, ...]:
        positions = field_tables(self.buf, self.n, t, slot, name, MAX_ENTRIES)
        return tuple(read(self.table(p, name, known)) for p in positions)

    def strings(self, t: Table, slot: int, name: str) -> tuple[str, ...]:
        positions = field_tables(self.buf, self.n, t, slot, name, MAX_ENTRIES)
        out = []
        for pos in positions:
            length, start = vector_at(self.buf, self.n, pos, 1, name)
            end = start + length
            if end >= self.n or self.buf[end] != 0:
                raise self.bad(f"{name} does not end in a NUL byte")
            out.append(self.buf[start:end].decode())
        return tuple(out)

    def value(self, t: Table, tag_slot: int, name: str, required: bool) -> KnobValue | None:
        tag = self.scalar(t, tag_slot, "B", name + " type")
        v = self.sub(t, tag_slot + 1, name, 1)
        if tag == 0 or v is None:
            if required:
                raise self.bad(f"{name} is required and absent")
            return None
        if tag == 1:
            return int(self.scalar(v, 0, "q", name))
        if tag == 2:
            return float(self.scalar(v, 0, "d", name, 0.0))
        if tag == 3:
            return self.string(v, 0, name)
        raise self.bad(f"{name} has union type {tag}, not a KnobValue")

    def setting(self, t: Table) -> KnobSetting:
        value = self.value(t, 1, "a knob setting's value", True)
        assert value is not None
        return KnobSetting(self.string(t, 0, "a knob setting's id"), value)

    def constraint(self, t: Table) -> Constraint | None:
        tag = self.scalar(t, 4, "B", "a knob's constraint type")
        c = self.sub(t, 5, "a knob's constraint", 4)
        if tag == 0 or c is None:
            return None
        if tag == 1:
            values = field_numbers(
                self.buf, self.n, c, 3, "valid_values", Kind.I64_VEC, MAX_ENTRIES
            )
            lo, hi = self.scalar(c, 0, "q", "min_value"), self.scalar(c, 1, "q", "max_value")
            return IntConstraint(lo, hi, self.scalar(c, 2, "q", "step", 1), tuple(values))
        if tag == 2:
            lo, hi = (
                self.scalar(c, 0, "d", "min_value", 0.0),
                self.scalar(c, 1, "d", "max_value", 0.0),
            )
            return FloatConstraint(lo, hi)
        if tag == 3:
            length = self.scalar(c, 0, "i", "max_length")
            return StringConstraint(length, self.strings(c, 1, "valid_values"))
        raise self.bad(f"a knob's constraint has union type {tag}, not a KnobConstraint")

    def knob(self, t: Table) -> Knob:
        default = self.value(t, 2, "a knob's default_value", True)
        assert default is not None
        try:
            return Knob(
                self.string(t, 0, "a knob's id"),
                default,
                self.string(t, 1, "a knob's description"),
                self.constraint(t),
                deprecated=bool(self.scalar(t, 6, "?", "deprecated", False)),
            )
        except HipdnnError as err:
            if err.code is ErrorCode.UNSUPPORTED_GRAPH_FORMAT:
                raise
            raise self.bad(err.message) from None

    def candidate(self, t: Table) -> EngineCandidate:
        return EngineCandidate(
            self.string(t, 0, "a candidate's id", True),
            self.tables(t, 1, "knob_settings", self.setting, 3),
            self.string(t, 2, "a candidate's kernel_features", True),
        )

    def page(self, t: Table) -> EngineCandidatePage:
        names = ("graph_id", "device_id", "device_arch", "problem_features", "device_features")
        graph, device, arch, problem, device_features = (
            self.string(t, i, n, True) for i, n in enumerate(names)
        )
        return EngineCandidatePage(
            graph,
            device,
            arch,
            problem,
            device_features,
            total_count=self.scalar(t, 5, "Q", "total_count"),
            offset=self.scalar(t, 6, "Q", "offset"),
            candidates=self.tables(t, 7, "candidates", self.candidate, 3),
            engine_name=self.string(t, 8, "engine_name"),
            engine_descriptor_id=self.string(t, 9, "engine_descriptor_id"),
        )


def _reading(what: str, data: bytes | bytearray | memoryview, read: Callable[[_Reader], _T]) -> _T:
    reader = _Reader(data, what)
    try:
        return read(reader)
    except HipdnnError as err:
        message = err.message.replace("Invalid hipDNN graph:", f"Invalid hipDNN {what}:", 1)
        if err.code is ErrorCode.UNSUPPORTED_GRAPH_FORMAT and not message.startswith("Invalid"):
            message = f"Invalid hipDNN {what}: {message}"
        raise HipdnnError(err.code, message) from None
    except (UnicodeDecodeError, struct.error) as err:
        raise reader.bad(str(err)) from None


def read_engine_config(data: bytes | bytearray | memoryview) -> EngineConfig:
    """Decode hipDNN's ``EngineConfig``.

    Raises:
        HipdnnError: ``UNSUPPORTED_GRAPH_FORMAT`` for bytes the Verifier refuses, a union tag
            or field the schema does not have; ``INVALID_VALUE`` for too many entries.
    """

    def read(r: _Reader) -> EngineConfig:
        t = r.table(r.root, "the engine config", 3)
        return EngineConfig(
            r.scalar(t, 0, "q", "engine_id"),
            r.tables(t, 1, "knobs", r.setting, 3),
            r.string(t, 2, "ranking_metric"),
        )

    return _reading("engine config", data, read)


def read_knob(data: bytes | bytearray | memoryview) -> Knob:
    """Decode one ``Knob`` buffer (see :func:`write_knob`); raises as :func:`read_engine_config`."""
    return _reading("knob", data, lambda r: r.knob(r.table(r.root, "the knob", 7)))


def read_engine_details(data: bytes | bytearray | memoryview) -> EngineDetails:
    """Decode hipDNN's ``EngineDetails``; raises as :func:`read_engine_config`."""

    def read(r: _Reader) -> EngineDetails:
        t = r.table(r.root, "the engine details", 5)
        page = r.sub(t, 4, "candidate_page", 10)
        notes = field_numbers(r.buf, r.n, t, 2, "behavior_notes", Kind.I32_VEC, MAX_ENTRIES)
        return EngineDetails(
            r.scalar(t, 0, "q", "engine_id"),
            r.tables(t, 1, "knobs", r.knob, 7),
            tuple(notes),
            r.string(t, 3, "name"),
            None if page is None else r.page(page),
        )

    return _reading("engine details", data, read)
