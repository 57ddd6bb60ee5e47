"""The graph as hipDNN's wire holds it, and the facts both wire codecs share.

A :class:`WireGraph` is what hipDNN's serialized ``Graph`` holds: the graph's name, data types,
preferred engine and metadata (:class:`WireMetadata`), its tensors **in wire order** (frontend
:class:`~hipdnn_graph.TensorAttributes`) and its nodes as ``(spec, attributes)`` pairs, whose
slots hold those same tensor objects. The FlatBuffers codec (:mod:`.fb_write`, :mod:`.fb_read`)
and the JSON codec (:mod:`.hipdnn_json`) turn it into bytes and text and back; the bridge above
(``hipdnn_graph/wire.py``) turns it into a :class:`~hipdnn_graph.Graph` and back.

Shared facts (HIPDNN_WIRE.md A4, A5): hipDNN's DataType numbers (:data:`WIRE_DATA_TYPES`), the
TensorValue member a data type stores its constant in (:func:`encode_value` /
:func:`decode_value`), and the content rules every decoded graph must keep
(:func:`check_wire_graph`).

Example:
    >>> from hipdnn_graph.types import DataType
    >>> WIRE_DATA_TYPES[DataType.INT4], WIRE_DATA_TYPES[DataType.FP8_E4M3_FNUZ]
    (14, 16)
    >>> encode_value(0.1, DataType.HALF, "scale")
    (<ValueMember.Float16Value: 2>, 0.10000000149011612)
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from enum import IntEnum
from math import prod
from typing import Any, TypeVar

import ml_dtypes
import numpy as np
from pydantic import BaseModel

from ..errors import HipdnnError
from ..tensor import TensorAttributes, _text
from ..types import DataType, ErrorCode
from .node_spec import NodeSpec, TensorListSpec

__all__ = [
    "BOOLEAN_NOTE",
    "DATA_TYPE_NAMES",
    "MAX_DIM",
    "MAX_INPUT_BYTES",
    "MAX_NAME_LENGTH",
    "MAX_NODES",
    "MAX_RANK",
    "MAX_STRIDE",
    "MAX_TENSORS",
    "MAX_VOLUME",
    "WIRE_DATA_TYPES",
    "ValueMember",
    "WireGraph",
    "WireMetadata",
    "attributes_template",
    "check_node_names",
    "check_wire_graph",
    "data_type_from_wire",
    "decode_value",
    "decoded_attributes",
    "decoded_tensor",
    "encode_value",
    "float32",
    "new_trusted",
    "refuse_unmodelled",
    "unsupported",
    "wide_text_encoding",
    "wide_text_error",
]

#: Largest input either decoder accepts, in bytes (characters for ``str`` JSON).
MAX_INPUT_BYTES = 64 * 2**20
#: Largest tensor rank (cuDNN's CUDNN_DIM_MAX).
MAX_RANK = 8
#: Largest single dimension.
MAX_DIM = 2**40
#: Largest stride.
MAX_STRIDE = 2**62
#: Largest tensor volume (product of dims).
MAX_VOLUME = 2**62
#: Most tensors in one graph.
MAX_TENSORS = 65_536
#: Most nodes in one graph.
MAX_NODES = 65_536
#: Longest graph, node or tensor name, in characters.
MAX_NAME_LENGTH = 4096


#: the wider text encodings: (name, codec, byte-order mark, bytes per character)
_WIDE_TEXT = (
    ("UTF-32", "utf-32-le", b"\xff\xfe\x00\x00", 4),
    ("UTF-32", "utf-32-be", b"\x00\x00\xfe\xff", 4),
    ("UTF-16", "utf-16-le", b"\xff\xfe", 2),
    ("UTF-16", "utf-16-be", b"\xfe\xff", 2),
)
_JSON_HEAD = frozenset("\t\n\r" + "".join(map(chr, range(32, 127))))


def wide_text_encoding(data: bytes) -> str | None:
    """``"UTF-16"`` or ``"UTF-32"`` when ``data`` is JSON-looking text in that encoding (with or
    without a byte-order mark: its first characters are printable ASCII, the first one that is
    not white space a ``{`` or ``[``), else None. No binary graph looks like that: its first
    bytes would all have to be such characters interleaved with NUL bytes.

    hipDNN's JSON is UTF-8; a file saved as UTF-16 (as some Windows editors do) is neither it
    nor a binary graph, and the readers say so.

    Example:
        >>> wide_text_encoding('{"name": "g"}'.encode("utf-16")), wide_text_encoding(b"{}")
        ('UTF-16', None)
    """
    for name, codec, mark, width in _WIDE_TEXT:
        body = data.removeprefix(mark)
        head = body[: 16 * width]
        if len(head) < 2 * width or b"\0" not in head:
            continue
        try:
            text = head[: len(head) - len(head) % width].decode(codec)
        except UnicodeDecodeError:
            continue
        if set(text) <= _JSON_HEAD and text.lstrip()[:1] in ("{", "["):
            return name
    return None


def wide_text_error(encoding: str) -> HipdnnError:
    """The UNSUPPORTED_GRAPH_FORMAT error for input that is text in ``encoding``."""
    return unsupported(
        f"The input is {encoding} text, not a hipDNN graph: hipDNN's JSON is UTF-8 "
        "(save the file as UTF-8)"
    )


def unsupported(message: str) -> HipdnnError:
    """An ``UNSUPPORTED_GRAPH_FORMAT`` error (malformed input, or content we cannot carry)."""
    return HipdnnError(ErrorCode.UNSUPPORTED_GRAPH_FORMAT, message)


def _invalid(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, message)


# ----- data types (A5) ---------------------------------------------------------------------------

#: Frontend DataType → hipDNN's ``DataType`` number in ``data_types.fbs``. Types that are missing
#: have no number there and cannot be written.
WIRE_DATA_TYPES: dict[DataType, int] = {
    DataType.NOT_SET: 0,
    DataType.FLOAT: 1,
    DataType.HALF: 2,
    DataType.BFLOAT16: 3,
    DataType.DOUBLE: 4,
    DataType.UINT8: 5,
    DataType.INT32: 6,
    DataType.INT8: 7,
    DataType.FP8_E4M3: 8,
    DataType.FP8_E5M2: 9,
    DataType.FP8_E8M0: 10,
    DataType.FP4_E2M1: 11,
    DataType.FP6_E2M3: 12,
    DataType.FP6_E3M2: 13,
    DataType.INT4: 14,
    DataType.INT64: 15,
    DataType.FP8_E4M3_FNUZ: 16,
    DataType.FP8_E5M2_FNUZ: 17,
}
_FROM_WIRE = {number: dtype for dtype, number in WIRE_DATA_TYPES.items()}
#: hipDNN's JSON spelling of each data type (lower case; NOT_SET is "unset").
DATA_TYPE_NAMES: dict[DataType, str] = {
    dtype: "unset" if dtype is DataType.NOT_SET else dtype.name.lower() for dtype in WIRE_DATA_TYPES
}
#: Why BOOLEAN has no number: newer hipDNN has it, but no schema available here gives its number.
BOOLEAN_NOTE = "possibly BOOLEAN, which no hipDNN schema available here numbers"


def wire_data_type(dtype: DataType, where: str) -> int:
    """hipDNN's number for ``dtype``.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT for a type hipDNN's schema has no number for.
    """
    number = WIRE_DATA_TYPES.get(dtype)
    if number is None:
        raise unsupported(f"{where}: data type {dtype.name} has no number in hipDNN's schema")
    return number


def data_type_from_wire(number: int, where: str) -> DataType:
    """The frontend DataType of hipDNN's ``number``.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT for a number outside hipDNN's schema.
    """
    dtype = _FROM_WIRE.get(number)
    if dtype is None:
        note = f" ({BOOLEAN_NOTE})" if number == len(_FROM_WIRE) else ""
        raise unsupported(f"{where}: DataType {number} is not in hipDNN's schema{note}")
    return dtype


# ----- tensor values (A4) ------------------------------------------------------------------------


class ValueMember(IntEnum):
    """The members of hipDNN's ``TensorValue`` union (each a struct)."""

    NONE = 0
    Float32Value = 1
    Float16Value = 2
    BFloat16Value = 3
    Float8Value = 4
    Int32Value = 5
    Float64Value = 6
    Int64Value = 7
    BoolValue = 8


#: struct code of each member's single field (its size is its alignment).
VALUE_CODES: dict[ValueMember, str] = {
    ValueMember.Float32Value: "f",
    ValueMember.Float16Value: "f",
    ValueMember.BFloat16Value: "f",
    ValueMember.Float8Value: "B",
    ValueMember.Int32Value: "i",
    ValueMember.Float64Value: "d",
    ValueMember.Int64Value: "q",
    ValueMember.BoolValue: "?",
}

_BYTE_TYPES: dict[DataType, Any] = {
    DataType.UINT8: np.uint8,
    DataType.INT8: np.int8,
    DataType.FP8_E4M3: ml_dtypes.float8_e4m3fn,
    DataType.FP8_E5M2: ml_dtypes.float8_e5m2,
    DataType.FP8_E4M3_FNUZ: ml_dtypes.float8_e4m3fnuz,
    DataType.FP8_E5M2_FNUZ: ml_dtypes.float8_e5m2fnuz,
}
_MEMBERS: dict[DataType, ValueMember] = {
    DataType.FLOAT: ValueMember.Float32Value,
    DataType.HALF: ValueMember.Float16Value,
    DataType.BFLOAT16: ValueMember.BFloat16Value,
    DataType.DOUBLE: ValueMember.Float64Value,
    DataType.INT32: ValueMember.Int32Value,
    DataType.INT64: ValueMember.Int64Value,
    **dict.fromkeys(_BYTE_TYPES, ValueMember.Float8Value),
}
_F32 = struct.Struct("<f")
_INT_RANGES = {
    ValueMember.Int32Value: (-(2**31), 2**31 - 1),
    ValueMember.Int64Value: (-(2**63), 2**63 - 1),
}


def float32(value: float, where: str) -> float:
    """``value`` rounded to the nearest binary32 (as a Python float, exactly).

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT when a finite value overflows binary32.
    """
    try:
        return float(_F32.unpack(_F32.pack(value))[0])
    except (OverflowError, struct.error):
        raise unsupported(f"{where}: {value!r} does not fit a 32-bit float") from None


def encode_value(value: Any, dtype: DataType, where: str) -> tuple[ValueMember, Any]:
    """The TensorValue member and raw content that store ``value`` in a ``dtype`` tensor.

    Float32/16, BFloat16Value hold the nearest binary32 (a Python float); Float8Value the 8-bit
    pattern (an int); the others the value itself.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT when the type has no member or the value does not fit.
    """
    member = _MEMBERS.get(dtype)
    if member is None:
        raise unsupported(f"{where}: a {dtype.name} tensor cannot hold a value in hipDNN's schema")
    code = VALUE_CODES[member]
    if code == "f":
        return member, float32(float(value), where)
    if code == "d":
        return member, float(value)
    if code == "B":
        scalar_type = _BYTE_TYPES[dtype]
        if dtype in (DataType.UINT8, DataType.INT8):
            low, high = (0, 255) if dtype is DataType.UINT8 else (-128, 127)
            if (
                not (isinstance(value, int) or float(value).is_integer())
                or not low <= value <= high
            ):
                raise unsupported(f"{where}: {value!r} is not a {dtype.name} value")
            return member, int(value) & 0xFF
        pattern = int(np.array(value, dtype=scalar_type).view(np.uint8))
        return member, pattern
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise unsupported(f"{where}: {value!r} is not a {dtype.name} value")
    low, high = _INT_RANGES[member]
    if not low <= value <= high:
        raise unsupported(f"{where}: {value} does not fit {dtype.name}")
    return member, value


def decode_value(member: ValueMember, raw: Any, dtype: DataType, where: str) -> Any:
    """The frontend value of a TensorValue ``member`` holding ``raw`` in a ``dtype`` tensor.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT when the member is not the one ``dtype`` stores
            (hipDNN's "mismatched tensor value type"), or a byte pattern would not write back.
    """
    expected = _MEMBERS.get(dtype)
    if member is not expected:
        raise unsupported(
            f"{where}: a {dtype.name} tensor stores its value as "
            f"{expected.name if expected else 'nothing'}, not {member.name}"
        )
    if member is ValueMember.Float8Value:
        if dtype is DataType.UINT8:
            return raw
        if dtype is DataType.INT8:
            return raw - 256 if raw > 127 else raw
        value = float(np.array(raw, dtype=np.uint8).view(_BYTE_TYPES[dtype]))
        if encode_value(value, dtype, where)[1] != raw:
            raise unsupported(f"{where}: {dtype.name} pattern {raw:#04x} has no canonical value")
        return value
    return raw


# ----- the graph ---------------------------------------------------------------------------------


@dataclass
class WireMetadata:
    """Graph fields hipDNN's wire has and the frontend does not use, kept through round trips.

    Attributes:
        id: The graph's 16-byte UUID, when set (hipDNN mints one at finalization).
        min_required_engine_api_version: ``(major, minor, patch)``, when stamped.
        is_override_shape_enabled: hipDNN's override-shape flag.
    """

    id: bytes | None = None
    min_required_engine_api_version: tuple[int, int, int] | None = None
    is_override_shape_enabled: bool = False


@dataclass
class WireGraph:
    """One graph as hipDNN's serialized ``Graph`` holds it (see the module docstring).

    Attributes:
        name: The graph's name.
        compute_data_type: Graph compute type; likewise the next two.
        intermediate_data_type: Type of virtual tensors.
        io_data_type: Type of graph inputs and outputs.
        preferred_engine_id: The preferred engine as the signed 64-bit integer hipDNN stores.
        tensors: Every tensor once, in wire order, each with a uid.
        nodes: ``(spec, attributes)`` in topological order.
        metadata: The graph's id, engine-API floor and override flag.
    """

    name: str = ""
    compute_data_type: DataType = DataType.NOT_SET
    intermediate_data_type: DataType = DataType.NOT_SET
    io_data_type: DataType = DataType.NOT_SET
    preferred_engine_id: int | None = None
    tensors: list[TensorAttributes] = field(default_factory=list)
    nodes: list[tuple[NodeSpec, Any]] = field(default_factory=list)
    metadata: WireMetadata = field(default_factory=WireMetadata)


def _check_name(kind: str, name: str) -> None:
    if len(name) > MAX_NAME_LENGTH:
        raise _invalid(f"{kind} name is longer than {MAX_NAME_LENGTH} characters")
    if not name.isascii():
        _text(name, f"{kind} name")  # UTF-8 must encode it (a name assigned past the setters)


def _explain_tensor(t: TensorAttributes) -> None:
    """Raise for the first broken tensor rule (the slow path of :func:`check_wire_graph`)."""
    name, dims, strides = t.name, t.dim, t.stride
    _check_name("Tensor", name)
    if len(dims) > MAX_RANK:
        raise _invalid(f"Tensor {name} has rank {len(dims)}, more than {MAX_RANK}")
    if len(dims) != len(strides):
        raise _invalid(f"Tensor {name} dims and strides have different sizes")
    if any(dim < 1 for dim in dims):
        raise _invalid(f"Tensor {name} must have only positive dimensions")
    if any(dim > MAX_DIM for dim in dims):
        raise _invalid(f"Tensor {name} has a dimension larger than {MAX_DIM}")
    if prod(dims) > MAX_VOLUME:
        raise _invalid(f"Tensor {name} has more than {MAX_VOLUME} elements")
    if any(not -MAX_STRIDE <= stride <= MAX_STRIDE for stride in strides):
        raise _invalid(f"Tensor {name} strides must be in [-{MAX_STRIDE}, {MAX_STRIDE}]")
    raise _invalid(f"Tensor {name} alignment must be >= 1")


def check_wire_graph(graph: WireGraph) -> None:
    """The content rules every graph on the wire keeps, whoever wrote it.

    At most :data:`MAX_TENSORS` tensors and :data:`MAX_NODES` nodes; names at most
    :data:`MAX_NAME_LENGTH` characters; a tensor has as many strides as dims, rank at most
    :data:`MAX_RANK`, dims in ``[1, MAX_DIM]``, strides in ``[-MAX_STRIDE, MAX_STRIDE]`` (hipDNN's
    strides are int64 and its rules leave their sign free; a negative stride walks its dimension
    backwards, as the engines here read it), volume at most
    :data:`MAX_VOLUME`, alignment >= 1 (empty dims mean "not inferred yet"); uids are unique.

    Raises:
        HipdnnError: INVALID_VALUE for the first broken rule.
    """
    tensors = graph.tensors
    if len(tensors) > MAX_TENSORS:
        raise _invalid(f"Graph has {len(tensors)} tensors, more than {MAX_TENSORS}")
    if len(graph.nodes) > MAX_NODES:
        raise _invalid(f"Graph has {len(graph.nodes)} nodes, more than {MAX_NODES}")
    _check_name("Graph", graph.name)
    uids: list[int] = []
    all_dims: list[int] = []
    all_strides: list[int] = []
    for t in tensors:
        td = t.__dict__
        dims, strides = td["dim"], td["stride"]
        if (
            len(dims) != len(strides)
            or len(dims) > MAX_RANK
            or len(td["name"]) > MAX_NAME_LENGTH
            or td["alignment"] < 1
            or prod(dims) > MAX_VOLUME
        ):
            _explain_tensor(t)
        if not td["name"].isascii():
            _check_name("Tensor", td["name"])
        all_dims += dims
        all_strides += strides
        uids.append(td["uid"])
    if all_dims and (
        min(all_dims) < 1
        or max(all_dims) > MAX_DIM
        or min(all_strides) < -MAX_STRIDE
        or max(all_strides) > MAX_STRIDE
    ):
        for t in tensors:
            if t.dim and (min(t.dim) < 1 or max(t.dim) > MAX_DIM):
                _explain_tensor(t)
            if t.stride and (min(t.stride) < -MAX_STRIDE or max(t.stride) > MAX_STRIDE):
                _explain_tensor(t)
    if len(set(uids)) != len(uids):
        seen: set[int] = set()
        duplicates = sorted({u for u in uids if u in seen or seen.add(u)})  # type: ignore[func-returns-value]
        listed = ", ".join(str(u) for u in duplicates)
        raise _invalid(f"Duplicate tensor UIDs found in the graph: {listed}")
    check_node_names(graph)


def check_node_names(graph: WireGraph) -> None:
    """Node names are at most :data:`MAX_NAME_LENGTH` characters (INVALID_VALUE otherwise)."""
    for _, attributes in graph.nodes:
        _check_name("Node", attributes.name)


# ----- trusted construction ----------------------------------------------------------------------

_M = TypeVar("_M", bound=BaseModel)
_TEMPLATES: dict[type[Any], tuple[dict[str, Any], dict[str, Any]]] = {}
_set_dict, _set_fields, _set_extra, _set_private = (
    BaseModel.__dict__[name].__set__
    for name in (
        "__dict__",
        "__pydantic_fields_set__",
        "__pydantic_extra__",
        "__pydantic_private__",
    )
)
_object_new = object.__new__


def new_trusted(
    cls: type[_M],
    values: dict[str, Any],
    fields_set: AbstractSet[str],
    private: dict[str, Any] | None = None,
) -> _M:
    """A pydantic model of ``cls`` whose state is ``values``, skipping validation.

    What ``model_construct`` does minus its per-field loop: a model's state is exactly its
    ``__dict__``, its fields-set, its extra (None) and its private attributes. ``values`` must
    hold every field, already checked and typed (decoders check before they build).
    """
    obj = _object_new(cls)
    _set_dict(obj, values)
    _set_fields(obj, fields_set)
    _set_extra(obj, None)
    _set_private(obj, private)
    return obj


def attributes_template(cls: type[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Default field values and private attributes of a node attributes class (cached), for
    decoders that build attributes with :func:`new_trusted`."""
    template = _TEMPLATES.get(cls)
    if template is None:
        fields = {
            name: info.get_default(call_default_factory=True)
            for name, info in cls.model_fields.items()
        }
        private = {name: attr.get_default() for name, attr in cls.__private_attributes__.items()}
        template = _TEMPLATES[cls] = (fields, private)
    return template


def decoded_attributes(
    spec: NodeSpec,
    name: str,
    compute: DataType,
    uids: dict[Any, int | None],
    scalars: dict[str, Any],
    tensors: dict[int, TensorAttributes],
    lists: Mapping[TensorListSpec, list[int]] | None = None,
) -> Any:
    """A node's attributes from what a decoder read: the uid of each slot (``None`` when an
    optional slot is absent), the uids of each positional tensor list and the scalars, built
    without validation.

    Raises:
        HipdnnError: INVALID_VALUE for a uid that is not a tensor of the graph.
    """
    inputs: dict[Any, TensorAttributes] = {}
    outputs: dict[Any, TensorAttributes] = {}
    for slot, uid in uids.items():
        if uid is None:
            continue
        tensor = tensors.get(uid)
        if tensor is None:
            raise _invalid(
                f"Node {name} refers to tensor uid {uid} ({slot.wire}), "
                "which is not a tensor of the graph"
            )
        (outputs if slot.output else inputs)[slot.member] = tensor
    for held, uid_list in (lists or {}).items():
        for index, uid in enumerate(uid_list):
            tensor = tensors.get(uid)
            if tensor is None:
                raise _invalid(
                    f"Node {name} refers to tensor uid {uid} ({held.wire}[{index}]), "
                    "which is not a tensor of the graph"
                )
            (outputs if held.output else inputs)[held.key(index)] = tensor
    fields, private = attributes_template(spec.attributes_cls)
    values = dict(fields)
    values.update(name=name, compute_data_type=compute, inputs=inputs, outputs=outputs)
    values.update(scalars)
    for scalar in spec.scalars:
        if scalar.none_is_default and scalar.name in scalars:
            values[scalar.name] = scalar.model_value(scalars[scalar.name])
    return new_trusted(spec.attributes_cls, values, set(), dict(private))


def refuse_unmodelled(spec: NodeSpec, label: str, wire: str, value: Any, default: Any) -> None:
    """Refuse a field this version does not model unless it holds its default.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT naming the table, field and value.
    """
    if isinstance(value, list | tuple) and isinstance(default, list | tuple):
        value, default = tuple(value), tuple(default)  # a vector: bytes and JSON read alike
    if value != default:
        raise unsupported(
            f"{label}: {spec.table}.{wire} = {value!r} is not supported by this version"
        )


#: every field of a tensor with its default (a decoded tensor overrides all but fields added later)
_TENSOR_DEFAULTS = {
    name: info.get_default(call_default_factory=True)
    for name, info in TensorAttributes.model_fields.items()
}


def decoded_tensor(**fields: Any) -> TensorAttributes:
    """A tensor from decoded, checked fields (``uid``, ``name``, ``data_type``, ``dim``,
    ``stride``, ``is_virtual``, ``is_pass_by_value``, ``value``, ``alignment``), unvalidated."""
    values = dict(_TENSOR_DEFAULTS)
    values.update(fields)
    return new_trusted(TensorAttributes, values, set(_TENSOR_DEFAULTS))
