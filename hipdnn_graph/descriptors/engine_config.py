"""hipDNN's ``EngineConfig`` FlatBuffer (``engine_config.fbs`` / ``knob_value.fbs``): an engine id
and its knob settings, written and read.

The tables, by slot (``../shared/reference/hipdnn_engine_schemas/``):

========================  ===================================================================
``EngineConfig``          0 ``engine_id: int64``, 1 ``knobs: [KnobSetting]``,
                          2 ``ranking_metric: string``
``KnobSetting``           0 ``knob_id: string``, 1 the ``KnobValue`` union's type (ubyte),
                          2 its table
``KnobValue`` members     1 ``IntValue {value: int64}``, 2 ``FloatValue {value: float64}``,
                          3 ``StringValue {value: string}``
========================  ===================================================================

Knob values stay plain Python values here (``int``, ``float``, ``str``): this module is a leaf of
:mod:`hipdnn_graph.descriptors` and knows nothing of the knob model
(:mod:`hipdnn_graph.backend.knobs` checks values against an engine's knobs). Reading checks what
the flatbuffers Verifier checks (see :mod:`.fb_verify`) and refuses anything else with
:class:`~hipdnn_graph.errors.HipdnnError` (``UNSUPPORTED_GRAPH_FORMAT``); work and memory stay
proportional to the input.

Example:
    >>> data = write_engine_config(7, [("tile.size", 64), ("mode", "fast")])
    >>> read_engine_config(data)
    (7, [('tile.size', 64), ('mode', 'fast')], '')
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

from ..errors import HipdnnError
from .fb_verify import (
    MAX_BUFFER,
    Table,
    field_scalar,
    field_string,
    field_tables,
    field_target,
    new_counter,
    u32,
)
from .fb_write import Builder
from .wire_rules import unsupported

__all__ = ["MAX_KNOB_SETTINGS", "KnobPair", "read_engine_config", "write_engine_config"]

#: a knob id and its value, as the wire holds them
KnobPair = tuple[str, int | float | str]
#: the most knob settings one configuration may hold (hipDNN's engines declare a handful)
MAX_KNOB_SETTINGS = 4096
_INT, _FLOAT, _STRING = 1, 2, 3
_INT64 = (-(2**63), 2**63 - 1)


def _value_table(b: Builder, value: int | float | str) -> tuple[int, int]:
    """(union type, table size) of one knob value."""
    if isinstance(value, bool):
        raise unsupported(f"A knob value must be an int, a float or a str; got {value!r}")
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise unsupported(f"Knob value {value} does not fit in int64")
        return _INT, b.table([(0, "q", value)] if value else [])
    if isinstance(value, float):
        kept = value != 0.0 or math.copysign(1.0, value) < 0  # 0.0 is the default; -0.0 is not
        return _FLOAT, b.table([(0, "d", value)] if kept else [])
    if isinstance(value, str):
        text = b.string(value.encode())
        return _STRING, b.table([(0, "O", text)])
    raise unsupported(f"A knob value must be an int, a float or a str; got {value!r}")


def write_engine_config(
    engine_id: int, knobs: Sequence[KnobPair], ranking_metric: str = ""
) -> bytes:
    """hipDNN's ``EngineConfig`` bytes for ``engine_id`` (an unsigned or signed 64-bit id, stored
    as int64) and ``knobs`` in order.

    Raises:
        HipdnnError: ``UNSUPPORTED_GRAPH_FORMAT`` for a value the schema cannot hold.
    """
    b = Builder()
    settings: list[int] = []
    for knob_id, value in knobs:
        kind, table = _value_table(b, value)
        name = b.string(knob_id.encode())
        settings.append(b.table([(2, "O", table), (0, "O", name), (1, "B", kind)]))
    metric = b.string(ranking_metric.encode()) if ranking_metric else None
    vector = b.offsets(settings)
    signed = engine_id - 2**64 if engine_id >= 2**63 else engine_id
    fields: list[tuple[int, str, object]] = [(0, "q", signed)] if signed else []
    if metric is not None:
        fields.append((2, "O", metric))
    fields.append((1, "O", vector))
    return b.finish(b.table(fields))


def _bad(detail: str) -> HipdnnError:
    return unsupported(f"Invalid hipDNN engine config: {detail}")


def _value(buf: bytes, n: int, setting: Table, what: str, counter: list[int]) -> int | float | str:
    kind = field_scalar(buf, n, setting, 1, "B", what) or 0
    pos = field_target(buf, n, setting, 2, f"{what} value")
    if kind not in (_INT, _FLOAT, _STRING) or pos is None:
        raise _bad(f"{what} has no int, float or string value (union type {kind})")
    table = Table(buf, n, pos, f"{what} value", counter)
    if kind == _INT:
        return int(field_scalar(buf, n, table, 0, "q", what) or 0)
    if kind == _FLOAT:
        number = field_scalar(buf, n, table, 0, "d", what)
        return 0.0 if number is None else float(number)
    return field_string(buf, n, table, 0, f"{what} string")


def read_engine_config(data: bytes) -> tuple[int, list[KnobPair], str]:
    """``(engine_id, knob settings, ranking_metric)`` from hipDNN's ``EngineConfig`` bytes; the
    id is unsigned (hipDNN's engine ids are FNV-1a hashes).

    Raises:
        HipdnnError: ``UNSUPPORTED_GRAPH_FORMAT`` for bytes that do not verify, a knob setting
            without a value, or more than :data:`MAX_KNOB_SETTINGS` settings.
    """
    buf = bytes(data)
    n = len(buf)
    if n < 12 or n >= MAX_BUFFER:
        raise _bad(f"the buffer is {n} bytes, not between 12 and {MAX_BUFFER - 1}")
    counter = new_counter()
    try:
        root = u32(buf, 0)[0]
        if root == 0 or root >= n:
            raise _bad("the root offset points outside the buffer")
        config = Table(buf, n, root, "the engine config table", counter)
        engine = int(field_scalar(buf, n, config, 0, "q", "engine_id") or 0)
        positions = field_tables(buf, n, config, 1, "knob settings", MAX_KNOB_SETTINGS)
        metric = field_string(buf, n, config, 2, "ranking_metric")
        knobs: list[KnobPair] = []
        for index, pos in enumerate(positions):
            what = f"knob setting {index}"
            setting = Table(buf, n, pos, what, counter)
            knob_id = field_string(buf, n, setting, 0, f"{what} id")
            knobs.append((knob_id, _value(buf, n, setting, what, counter)))
    except (struct.error, IndexError):  # pragma: no cover - every read is bounds-checked first
        raise _bad("a field lies outside the buffer") from None
    except HipdnnError as err:
        if err.message.startswith("Invalid hipDNN engine config"):
            raise
        raise _bad(err.message.removeprefix("Invalid hipDNN graph: ")) from None
    return engine & (2**64 - 1), knobs, metric
