"""Compiled plans on the wire: hipDNN's ``SerializedExecutionPlan`` envelope (RFC 0009), the
plugin payload hipdnn-graph's engines put in it, and the ``HDGP`` container written with a plan.

**The envelope** is hipDNN's (``flatbuffers_sdk/schemas/execution_plan.fbs``, envelope version
1; no file identifier), by slot:

====  ==============================  ==================================================
slot  field                           here
====  ==============================  ==================================================
0     ``version: uint``               1 (:data:`PLAN_SERIALIZATION_VERSION`)
1     ``engine_id: int64``            the engine's id (FNV-1a of its name, as int64)
2     ``workspace_size: int64``       the plan's workspace bytes
3     ``tensor_uids: [int64]``        the graph's tensor uids, in the graph's order
4     ``plugin_payload: [ubyte]``     the payload below
5     ``is_override_shape_enabled``   the graph's flag (bool, default false)
====  ==============================  ==================================================

Reading applies hipDNN's checks in hipDNN's order with its messages (``ExecutionPlanDescriptor::
deserializeBackendPlan``): a zero-length plan, bytes that do not verify, another envelope
version, an empty plugin payload, no tensor uids, a negative workspace size. Fields a newer
envelope adds after slot 5 are ignored, as hipDNN's Verifier ignores them.

**The plugin payload** is ours (hipDNN leaves it to each plugin; hipDNN's fusilli provider also
puts the graph in it). All integers little-endian:

======  ====  ===========================================================================
offset  size  field
======  ====  ===========================================================================
0       8     magic ``b"HGPLAN\\0\\0"`` (:data:`PAYLOAD_MAGIC`)
8       2     format_major: uint16 = 1 (a reader refuses another major)
10      2     format_minor: uint16 = 0 (a newer minor only appends sections; read fine)
12      4     header_size: uint32, a multiple of 8, at least 32
16      4     graph_size: uint32, the hipDNN ``Graph`` FlatBuffer (:func:`~.fb_write.write_graph`)
20      4     config_size: uint32, hipDNN's ``EngineConfig`` (engine id + knob settings,
              :mod:`.engine_wire`)
24      4     engine_size: uint32, the engine's own bytes (its ``serialize_plan`` hook; may be 0)
28      4     reserved, zero
32      ...   the three sections, back to back, from ``header_size``; nothing after them
======  ====  ===========================================================================

Every size is checked against the bytes present before anything is copied, so a truncated or
forged payload is refused and never makes this module allocate more than the input holds.

**The HDGP container** (``serialized_graph_and_plan.fbs``) holds a graph blob and, optionally,
such an envelope as its plan blob, both 8-aligned as hipDNN writes them.

Example:
    >>> from hipdnn_graph.descriptors.fb_write import write_graph
    >>> from hipdnn_graph.descriptors.wire_model import WireGraph
    >>> record = CompiledPlanRecord(engine_id=7, workspace_size=0, tensor_uids=(1, 2),
    ...                             graph=write_graph(WireGraph(name="g")), knobs=(("t", 4),))
    >>> read_compiled_plan(write_compiled_plan(record)) == record
    True
    >>> read_compiled_plan(b"\\x00" * 3)
    Traceback (most recent call last):
    ...
    hipdnn_graph.errors.HipdnnError: Failed to deserialize compiled plan: Serialized execution \
plan FlatBuffer is invalid. (the buffer is 3 bytes, fewer than 12)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..backend.knobs import KnobSetting, KnobValue
from ..errors import HipdnnError
from ..types import ErrorCode
from .engine_wire import EngineConfig, read_engine_config, write_engine_config
from .fb_read import CONTAINER_IDENTIFIER
from .fb_verify import (
    MAX_BUFFER,
    Table,
    bad,
    field_longs,
    field_numbers,
    field_scalar,
    field_target,
    new_counter,
    u32,
    vector_at,
)
from .fb_write import Builder
from .node_spec import Kind
from .wire_rules import MAX_INPUT_BYTES, MAX_TENSORS

__all__ = [
    "PAYLOAD_MAGIC",
    "PLAN_SERIALIZATION_VERSION",
    "CompiledPlanRecord",
    "container_plan_blob",
    "read_compiled_plan",
    "write_compiled_plan",
    "write_container",
]

#: hipDNN's envelope version (``PLAN_SERIALIZATION_VERSION`` in its backend)
PLAN_SERIALIZATION_VERSION = 1
#: the first 8 bytes of a plugin payload written by hipdnn-graph
PAYLOAD_MAGIC = b"HGPLAN\0\0"
_FORMAT_MAJOR, _FORMAT_MINOR = 1, 0
_HEADER = struct.Struct("<8sHHIIIII")  # 32 bytes


@dataclass(frozen=True)
class CompiledPlanRecord:
    """Everything a compiled plan carries (the envelope's fields and our payload's sections).

    Attributes:
        engine_id: the engine's id, unsigned 64-bit.
        workspace_size: the plan's workspace bytes (≥ 0).
        tensor_uids: the graph's tensor uids.
        graph: hipDNN's serialized ``Graph`` of the planned graph.
        knobs: the knob settings the plan was built with, ``(knob id, value)``.
        engine_payload: the engine's own bytes (``serialize_plan``), empty for none.
        is_override_shape_enabled: the graph's override-shape flag.
    """

    engine_id: int
    workspace_size: int
    tensor_uids: tuple[int, ...]
    graph: bytes
    knobs: tuple[tuple[str, KnobValue], ...] = ()
    engine_payload: bytes = b""
    is_override_shape_enabled: bool = False


def _signed(value: int) -> int:
    return value - 2**64 if value >= 2**63 else value


def _payload(record: CompiledPlanRecord) -> bytes:
    settings = tuple(KnobSetting(knob, value) for knob, value in record.knobs)
    config = write_engine_config(EngineConfig(_signed(record.engine_id), settings))
    sizes = (len(record.graph), len(config), len(record.engine_payload))
    header = _HEADER.pack(PAYLOAD_MAGIC, _FORMAT_MAJOR, _FORMAT_MINOR, _HEADER.size, *sizes, 0)
    return header + record.graph + config + record.engine_payload


def write_compiled_plan(record: CompiledPlanRecord) -> bytes:
    """hipDNN's ``SerializedExecutionPlan`` bytes for ``record`` (see the module docstring)."""
    b = Builder()
    payload = _payload(record)
    payload_at = b.numbers(payload, "B", 1)  # hipDNN's order: the payload, the uids, the table
    uids = b.longs([_signed(uid) for uid in record.tensor_uids])
    fields: list[tuple[int, str, object]] = []
    if record.workspace_size:  # add order: 8-byte, 4-byte, 1-byte fields, each slot-descending
        fields.append((2, "q", record.workspace_size))
    if record.engine_id:
        fields.append((1, "q", _signed(record.engine_id)))
    fields += [(4, "O", payload_at), (3, "O", uids), (0, "I", PLAN_SERIALIZATION_VERSION)]
    if record.is_override_shape_enabled:
        fields.append((5, "?", True))
    return b.finish(b.table(fields))


def _refused(message: str, code: ErrorCode = ErrorCode.HIPDNN_BACKEND_ERROR) -> HipdnnError:
    return HipdnnError(code, f"Failed to deserialize compiled plan: {message}")


def _invalid(detail: str) -> HipdnnError:
    return _refused(f"Serialized execution plan FlatBuffer is invalid. ({detail})")


def _envelope(buf: bytes) -> tuple[int, int, int, list[int], bytes, bool]:
    n = len(buf)
    if n < 12:
        raise bad(f"the buffer is {n} bytes, fewer than 12")
    if n >= MAX_BUFFER:
        raise bad("the buffer is too large")
    root = u32(buf, 0)[0]
    if root == 0 or root >= n:
        raise bad("the plan root offset points outside the buffer")
    counter = new_counter()
    t = Table(buf, n, root, "the execution plan table", counter)
    version = field_scalar(buf, n, t, 0, "I", "version") or 0
    engine = field_scalar(buf, n, t, 1, "q", "engine_id") or 0
    workspace = field_scalar(buf, n, t, 2, "q", "workspace_size") or 0
    uids = field_longs(buf, n, t, 3, "tensor_uids", MAX_TENSORS)
    payload: bytes = field_numbers(buf, n, t, 4, "plugin_payload", Kind.U8_VEC)
    override = bool(field_scalar(buf, n, t, 5, "?", "is_override_shape_enabled"))
    return version, engine, workspace, uids, payload, override


def _sections(payload: bytes, engine: int) -> tuple[bytes, bytes, bytes]:
    """The graph, engine config and engine sections of one of our plugin payloads."""
    if len(payload) < _HEADER.size or payload[:8] != PAYLOAD_MAGIC:
        raise _refused(
            f"the plugin payload of engine {engine:#x} was not written by hipdnn-graph "
            f"(it does not start with {PAYLOAD_MAGIC!r})"
        )
    _, major, _minor, header, graph, config, own, _ = _HEADER.unpack_from(payload)
    if major != _FORMAT_MAJOR:
        raise _refused(
            f"the plugin payload is format {major}.x; this hipdnn-graph reads {_FORMAT_MAJOR}.x",
            ErrorCode.UNSUPPORTED_GRAPH_FORMAT,
        )
    if header < _HEADER.size or header % 8 or header > len(payload):
        raise _refused(f"the plugin payload's header size {header} is not valid")
    if header + graph + config + own != len(payload):
        raise _refused(
            f"the plugin payload holds {len(payload) - header} bytes after its header, its "
            f"header announces {graph} + {config} + {own} (truncated or corrupt)"
        )
    if not graph or not config:
        raise _refused("the plugin payload has no graph or no engine config")
    at = header + graph
    return payload[header:at], payload[at : at + config], payload[at + config :]


def read_compiled_plan(data: bytes | bytearray | memoryview) -> CompiledPlanRecord:
    """The record in hipDNN's ``SerializedExecutionPlan`` bytes written by
    :func:`write_compiled_plan`.

    Raises:
        HipdnnError: ``HIPDNN_BACKEND_ERROR`` (hipDNN's code for a refused plan) with hipDNN's
            message, after "Failed to deserialize compiled plan: ", for bytes that do not
            verify, another envelope version, an empty payload, no tensor uids, a negative
            workspace or a payload that is not ours or does not add up;
            ``UNSUPPORTED_GRAPH_FORMAT`` for a payload of another major format version or input
            over the size limit.
    """
    size = data.nbytes if isinstance(data, memoryview) else len(data)
    if size == 0:
        raise _refused(
            "ExecutionPlanDescriptor::deserializeBackendPlan() failed: plan size is zero."
        )
    if size > MAX_INPUT_BYTES:
        raise _refused(f"the plan is larger than {MAX_INPUT_BYTES} bytes",
                       ErrorCode.UNSUPPORTED_GRAPH_FORMAT)  # fmt: skip
    buf = bytes(data)
    try:
        version, engine, workspace, uids, payload, override = _envelope(buf)
    except HipdnnError as err:
        raise _invalid(err.message.removeprefix("Invalid hipDNN graph: ")) from None
    if version != PLAN_SERIALIZATION_VERSION:
        raise _refused("Serialized execution plan version is not supported.")
    if not payload:
        raise _refused("Serialized execution plan contains an empty plugin payload.")
    if not uids:
        raise _refused("Serialized execution plan contains no tensor UIDs.")
    if workspace < 0:
        raise _refused("Serialized execution plan contains an invalid workspace size.")
    engine &= 2**64 - 1
    graph, config, own = _sections(payload, engine)
    try:
        engine_config = read_engine_config(config)
    except HipdnnError as err:
        raise _refused(f"the plugin payload's engine config: {err.message}") from None
    config_engine = engine_config.engine_id & (2**64 - 1)
    knobs = [(s.knob_id, s.value) for s in engine_config.knobs]
    if config_engine != engine:
        raise _refused(
            f"the plugin payload's engine config names engine {config_engine:#x}, the "
            f"envelope engine {engine:#x}"
        )
    return CompiledPlanRecord(engine, workspace, tuple(u & (2**64 - 1) for u in uids), graph,
                              tuple(knobs), own, override)  # fmt: skip


# ----- the HDGP container ------------------------------------------------------------------------


def write_container(graph_blob: bytes, plan_blob: bytes | None = None) -> bytes:
    """hipDNN's ``HDGP`` container: ``graph_blob`` and, when given, ``plan_blob`` (both
    8-aligned, the plan written first, as hipDNN's ``SerializedGraphContainer`` does)."""
    b = Builder()
    fields: list[tuple[int, str, object]] = []
    if plan_blob:
        b.prealign(len(plan_blob), 8)
        fields.append((1, "O", b.numbers(plan_blob, "B", 1)))
    b.prealign(len(graph_blob), 8)
    fields.append((0, "O", b.numbers(graph_blob, "B", 1)))
    return b.finish(b.table(fields), CONTAINER_IDENTIFIER)


def container_plan_blob(buf: bytes) -> bytes | None:
    """The ``plan_blob`` of a verified ``HDGP`` container (None when absent or empty).

    Raises:
        HipdnnError: ``UNSUPPORTED_GRAPH_FORMAT`` for a container that does not verify.
    """
    n = len(buf)
    root = u32(buf, 0)[0] if n >= 12 else 0
    if root == 0 or root >= n:
        raise bad("the container root offset points outside the buffer")
    t = Table(buf, n, root, "the container", new_counter())
    pos = field_target(buf, n, t, 1, "the container's plan_blob")
    if pos is None:
        return None
    length, start = vector_at(buf, n, pos, 1, "the container's plan_blob")
    return buf[start : start + length] or None
