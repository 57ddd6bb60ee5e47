"""hipDNN's JSON form of a graph, reading (:func:`graph_from_json`) as hipDNN's JSON helpers
read it: any whitespace and key order, the keys they require (``.at``) required, the keys they
default (``.value``) defaulted, keys they do not read (``_comment``) ignored, no duplicate keys,
the types hipDNN's schema gives; :mod:`.hipdnn_json` says what the form is and :mod:`.json_write`
writes it.

Example:
    >>> finite_number(1.5), finite_number(10**400), finite_number("1")
    (1.5, None, None)
"""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import DataType, ErrorCode
from .fb_read import NODE_KINDS
from .node_spec import (
    INT32_KINDS,
    JSON_ON_NODE,
    JSON_SCALARS_ON_NODE,
    Kind,
    NodeSpec,
    SlotSpec,
    WireEnum,
    node_specs,
    supported_kinds,
)
from .wire_model import WireGraph, WireMetadata
from .wire_rules import (
    MAX_INPUT_BYTES,
    MAX_NODES,
    MAX_RANK,
    MAX_TENSORS,
    check_node_names,
    check_wire_graph,
    unsupported,
    wide_text_encoding,
    wide_text_error,
)
from .wire_trusted import decoded_attributes, decoded_tensor, link_ragged, refuse_unmodelled
from .wire_values import DATA_TYPE_NAMES, ValueMember, decode_value, float32

__all__ = ["finite_number", "graph_from_json"]

#: hipDNN's DataType spellings, and ``"UNSET"``: its benchmark graphs write it for data-type
#: attributes left unset, and its reader takes it, as any string it does not know, as UNSET.
_DATA_TYPES = {name: dtype for dtype, name in DATA_TYPE_NAMES.items()} | {"UNSET": DataType.NOT_SET}


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise unsupported(f"Invalid hipDNN graph JSON: duplicate key {key!r}")
    return obj


def _no_constant(name: str) -> Any:
    raise unsupported(f"Invalid hipDNN graph JSON: {name} is not a JSON number")


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constant)


class _Obj:
    """Typed access to one JSON object (keys it is not asked for are ignored, as hipDNN's
    reader, nlohmann::json, ignores them)."""

    __slots__ = ("obj", "path")

    def __init__(self, obj: Any, path: str) -> None:
        if not isinstance(obj, dict):
            raise unsupported(f"Invalid hipDNN graph JSON: {path} must be an object")
        self.obj, self.path = obj, path

    def _get(self, key: str, optional: bool) -> Any:
        if key not in self.obj:
            if optional:
                return None
            raise unsupported(f"Invalid hipDNN graph JSON: key '{key}' not found in {self.path}")
        return self.obj[key]

    def _fail(self, key: str, what: str) -> HipdnnError:
        return unsupported(f"Invalid hipDNN graph JSON: {self.path}.{key} must be {what}")

    def get_int(self, key: str, optional: bool = False, nullable: bool = False) -> Any:
        value = self._get(key, optional)
        if value is None and (optional or nullable):
            return None
        if type(value) is not int:
            raise self._fail(key, "an integer")
        if not -(2**63) <= value < 2**63:
            raise self._fail(key, "a 64-bit integer")
        return value

    def get_bool(self, key: str, optional: bool = False, nullable: bool = False) -> Any:
        value = self._get(key, optional)
        if value is None and (optional or nullable):
            return None
        if type(value) is not bool:
            raise self._fail(key, "true or false")
        return value

    def get_number(self, key: str) -> float | None:
        value = self._get(key, False)
        if value is None:
            return None
        number = finite_number(value)
        if number is None:
            raise self._fail(key, "a finite number")
        return number

    def get_str(self, key: str, optional: bool = False) -> Any:
        value = self._get(key, optional)
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise self._fail(key, "a string")
        if not value.isascii():
            try:
                value.encode()
            except UnicodeEncodeError:  # a lone surrogate escaped as \ud800
                raise self._fail(key, "valid Unicode text (it holds a lone surrogate)") from None
        return value

    def get_list(self, key: str) -> list[Any]:
        value = self._get(key, False)
        if not isinstance(value, list):
            raise self._fail(key, "an array")
        return value

    def get_longs(self, key: str, cap: int = MAX_RANK) -> list[int]:
        values = self.get_list(key)
        if len(values) > cap:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"{self.path}.{key} has {len(values)} entries, more than {cap}",
            )
        if any(type(v) is not int or not -(2**63) <= v < 2**63 for v in values):
            raise self._fail(key, "an array of 64-bit integers")
        return values

    def get_ubytes(self, key: str) -> bytes:
        values = self.get_list(key)
        if any(type(v) is not int or not 0 <= v < 256 for v in values):
            raise self._fail(key, "an array of bytes (integers 0-255)")
        return bytes(values)

    def obj_at(self, key: str, optional: bool = False) -> _Obj | None:
        value = self._get(key, optional)
        if value is None and optional:
            return None
        return _Obj(value, f"{self.path}.{key}")

    def get_dtype(self, key: str) -> DataType:
        name = self.get_str(key)
        dtype = _DATA_TYPES.get(name)
        if dtype is None:
            raise unsupported(
                f"Invalid hipDNN graph JSON: {self.path}.{key} = {name!r} is not a hipDNN data type"
            )
        return dtype


def _tensor(o: _Obj, offset_uids: list[int | None]) -> TensorAttributes:
    uid = o.get_int("uid")
    name = o.get_str("name")
    where = f"Tensor {name or uid}"
    data_type = o.get_dtype("data_type")
    alignment = o.get_int("alignment", optional=True)
    multiplier = o.get_int("ragged_offset_multiplier", optional=True)
    offset_uids.append(o.get_int("ragged_offset_tensor_uid", optional=True))
    member_name = o.get_str("value_type", optional=True)
    value = None
    if member_name is not None and member_name != "NONE":
        member = ValueMember.__members__.get(member_name)
        if member is None:
            raise unsupported(f"{where}: {member_name!r} is not a TensorValue member")
        raw = o._get("value", False)
        value = decode_value(member, _raw_value(member, raw, where), data_type, where)
    elif o._get("value", True) is not None:
        raise unsupported(f"{where}: a value without a value_type")
    tensor = decoded_tensor(
        uid=uid,
        name=name,
        data_type=data_type,
        dim=o.get_longs("dims"),
        stride=o.get_longs("strides"),
        is_virtual=o.get_bool("virtual"),
        is_pass_by_value=bool(o.get_bool("is_runtime_pass_by_value", optional=True)),
        value=value,
        alignment=16 if alignment is None else alignment,
        ragged_offset_multiplier=1 if multiplier is None else multiplier,
    )
    return tensor


def _raw_value(member: ValueMember, raw: Any, where: str) -> Any:
    """The raw content of a TensorValue member read from JSON, checked against its struct."""
    if member is ValueMember.BoolValue:
        if type(raw) is not bool:
            raise unsupported(f"{where}: a BoolValue must be true or false")
        return raw
    if member in (ValueMember.Float8Value, ValueMember.Int32Value, ValueMember.Int64Value):
        limits = {
            ValueMember.Float8Value: (0, 255),
            ValueMember.Int32Value: (-(2**31), 2**31 - 1),
            ValueMember.Int64Value: (-(2**63), 2**63 - 1),
        }[member]
        if type(raw) is not int or not limits[0] <= raw <= limits[1]:
            raise unsupported(f"{where}: a {member.name} must be an integer in {list(limits)}")
        return raw
    number = finite_number(raw)
    if number is None:
        raise unsupported(f"{where}: a {member.name} must be a finite number")
    if member is ValueMember.Float64Value:
        return number
    return float32(number, where)


def finite_number(raw: Any) -> float | None:
    """A JSON number as a finite float, or None when it is not a number or has no finite
    double (``1e400`` parses as inf, a 400-digit integer overflows)."""
    if type(raw) not in (int, float):
        return None
    try:
        number = float(raw)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _scalar(o: _Obj, kind: Kind, key: str, where: str, enum: WireEnum | None = None) -> Any:
    if kind in (Kind.BOOL, Kind.BOOL_OPT):
        return o.get_bool(key, nullable=kind is Kind.BOOL_OPT)
    if kind in (Kind.I64, Kind.I32, Kind.I64_OPT, Kind.I32_OPT):
        value = o.get_int(key, nullable=kind in (Kind.I64_OPT, Kind.I32_OPT))
        if kind in INT32_KINDS and value is not None and not -(2**31) <= value < 2**31:
            raise o._fail(key, "a 32-bit integer")
        return value
    if kind is Kind.F32_OPT:
        number = o.get_number(key)
        return None if number is None else float32(number, where)
    if kind is Kind.ENUM:
        assert enum is not None
        name = o._get(key, False)
        alias = isinstance(name, str) and name in enum.aliases
        if type(name) is not (int if enum.numeric else str) and not alias:
            raise o._fail(key, "an integer" if enum.numeric else "a string")
        number = enum.value_of(name)
        if number is None:
            raise unsupported(f"{where}: {name!r} is not a {enum.name}")
        return enum.cls(number)
    if kind is Kind.DTYPE:
        return o.get_dtype(key)
    if kind is Kind.I64_VEC:
        return o.get_longs(key)
    if kind is Kind.I32_VEC:
        values = o.get_longs(key)
        if any(not -(2**31) <= v < 2**31 for v in values):
            raise o._fail(key, "an array of 32-bit integers")
        return values
    if kind is Kind.U8_VEC:
        return o.get_ubytes(key)
    return o.get_str(key)  # a string member is read with .at (custom op's id)


def _node(o: _Obj, tensors: dict[int, TensorAttributes]) -> tuple[NodeSpec, Any]:
    kind = o.get_str("type")
    name = o.get_str("name")
    label = f'hipDNN node "{name}"'
    specs = {spec.table: spec for spec in node_specs().values()}
    spec = specs.get(kind)
    if spec is None:
        tag = NODE_KINDS.index(kind) if kind in NODE_KINDS else None
        shown = f"{kind} ({tag})" if tag is not None else repr(kind)
        raise unsupported(f"{label} has kind {shown}; only {supported_kinds()} are supported")
    compute = o.get_dtype("compute_data_type")
    inputs_obj, outputs_obj, scalars_obj, nested = _groups(o, spec, label)
    uids: dict[Any, int | None] = {
        slot: _uid(outputs_obj if slot.output else inputs_obj, slot, spec, nested)
        for slot in spec.slots
    }
    lists = {
        held: (outputs_obj if held.output else inputs_obj).get_longs(held.wire, MAX_TENSORS)
        for held in spec.tensor_lists
    }
    scalars = {
        s.name: _scalar(scalars_obj, s.kind, s.key, label, s.enum)
        if s.json_presence == "always" or s.key in scalars_obj.obj
        else s.default  # a key hipDNN's reader defaults
        for s in spec.scalars
    }
    holders = {"inputs": inputs_obj, "outputs": outputs_obj, "scalars": scalars_obj}
    for extra in spec.unmodelled:
        if extra.group == "extra":  # written only in a scalar object of the family's own
            own = spec.json_scalar_holder == "scalars"
            if not own:
                value = extra.default
            elif extra.kind is Kind.STRING:
                value = scalars_obj.get_str(extra.wire, optional=True) or ""
            elif extra.wire in scalars_obj.obj:
                value = _scalar(scalars_obj, extra.kind, extra.wire, label, extra.enum)
            else:
                value = extra.default
        elif extra.kind is Kind.UID_OPT:
            value = holders[extra.group].get_int(extra.wire, nullable=True)
        else:
            value = _scalar(holders[extra.group], extra.kind, extra.wire, label, extra.enum)
        refuse_unmodelled(spec, label, extra.wire, value, extra.default)
    return spec, decoded_attributes(spec, name, compute, uids, scalars, tensors, lists)


def _uid(o: _Obj, slot: SlotSpec, spec: NodeSpec, nested: bool) -> int | None:
    """A slot's uid: required, or an optional tensor's key, ``null`` for no tensor (never
    ``null`` where hipDNN leaves absent tensors out: its reader takes the key as a uid); where
    the layout leaves absent tensors out (such families, the nested layout of hipDNN's
    benchmark graphs), an absent key is no tensor too."""
    if not slot.required and (nested or spec.omit_absent_uids) and slot.wire not in o.obj:
        return None
    return o.get_int(  # type: ignore[no-any-return]
        slot.wire, nullable=not slot.required and not spec.omit_absent_uids
    )


def _groups(o: _Obj, spec: NodeSpec, label: str) -> tuple[_Obj, _Obj, _Obj, bool]:
    """The JSON objects holding a node's input uids, output uids and scalars: its family's
    layout, or the nested layout of hipDNN's benchmark graphs (``spec.nested_json_group``, where
    absent optional tensors are left out; the last item says which).

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT for a missing object, or a field given both in the
            nested object and on the node.
    """
    on_node = spec.scalar_group == JSON_ON_NODE
    nested = spec.nested_json_group
    if nested and (nested in o.obj or (on_node and "inputs" in o.obj)):
        both = [s.key for s in spec.scalars if s.key in o.obj]
        if both:
            raise unsupported(f"{label}: {both} given both in '{nested}' and on the node")
        inputs, outputs, scalars = (o.obj_at(k) for k in ("inputs", "outputs", nested))
        assert inputs is not None and outputs is not None and scalars is not None
        return inputs, outputs, scalars, True
    inputs = o if on_node else o.obj_at("inputs")
    outputs = o if on_node else o.obj_at("outputs")
    assert inputs is not None and outputs is not None
    return inputs, outputs, _scalars_object(o, spec, label, inputs), False


def _scalars_object(o: _Obj, spec: NodeSpec, label: str, inputs: _Obj) -> _Obj:
    """The JSON object holding a node's scalars: its scalar group (or a legacy spelling of it),
    or the inputs object for families whose JSON writes the scalars there.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT when the group and a legacy spelling both appear.
    """
    if spec.json_scalar_holder == "inputs":
        return inputs
    if spec.scalar_group == JSON_SCALARS_ON_NODE:
        return o
    group = spec.scalar_group
    if group not in o.obj:
        legacy = [g for g in spec.legacy_scalar_groups if g in o.obj]
        group = legacy[0] if legacy else group
    for other in (spec.scalar_group, *spec.legacy_scalar_groups):
        if other != group and other in o.obj:
            raise unsupported(f"{label}: both '{group}' and '{other}' are present")
    scalars = o.obj_at(group)
    assert scalars is not None
    return scalars


def _text(text: Any) -> str:
    if isinstance(text, bytes | bytearray | memoryview):
        if len(text) > MAX_INPUT_BYTES:
            raise unsupported(f"Graph JSON is larger than {MAX_INPUT_BYTES} bytes")
        raw = bytes(text)
        encoding = wide_text_encoding(raw)
        if encoding is not None:
            raise wide_text_error(encoding)
        try:
            return raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise unsupported("Graph JSON is not UTF-8") from None
    if not isinstance(text, str):
        raise unsupported(f"Graph JSON must be str or bytes, not {type(text).__name__}")
    if len(text) > MAX_INPUT_BYTES:
        raise unsupported(f"Graph JSON is larger than {MAX_INPUT_BYTES} characters")
    return text[1:] if text.startswith("\ufeff") else text


def graph_from_json(text: str | bytes | bytearray | memoryview) -> WireGraph:
    """Read hipDNN's JSON form of a graph (any whitespace and key order; no duplicate keys).

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT for text that is not such a document (a missing or
            unknown key, a wrong type, refused content); INVALID_VALUE for a broken content rule.
    """
    source = _text(text)
    try:
        doc = _DECODER.decode(source)
    except (ValueError, RecursionError) as exc:
        raise unsupported(f"Invalid hipDNN graph JSON: {exc}") from None
    o = _Obj(doc, "graph")
    tensor_docs = o.get_list("tensors")
    node_docs = o.get_list("nodes")
    if len(tensor_docs) > MAX_TENSORS:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Graph has {len(tensor_docs)} tensors, more than {MAX_TENSORS}",
        )
    if len(node_docs) > MAX_NODES:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"Graph has {len(node_docs)} nodes, more than {MAX_NODES}"
        )
    offset_uids: list[int | None] = []
    tensors = [_tensor(_Obj(t, f"tensors[{i}]"), offset_uids) for i, t in enumerate(tensor_docs)]
    graph = WireGraph(
        name=o.get_str("name"),
        compute_data_type=o.get_dtype("compute_data_type"),
        intermediate_data_type=o.get_dtype("intermediate_data_type"),
        io_data_type=o.get_dtype("io_data_type"),
        preferred_engine_id=o.get_int("preferred_engine_id", optional=True),
        tensors=tensors,
        metadata=WireMetadata(
            id=_uuid(o.get_str("id", optional=True)),
            min_required_engine_api_version=_version(
                o.obj_at("min_required_engine_api_version", optional=True)
            ),
            is_override_shape_enabled=bool(o.get_bool("is_override_shape_enabled", optional=True)),
        ),
    )
    check_wire_graph(graph)  # the tensors, before any node refers to them
    link_ragged(tensors, offset_uids)
    by_uid: dict[int, TensorAttributes] = {t.uid: t for t in tensors}  # type: ignore[misc]
    graph.nodes = [_node(_Obj(n, f"nodes[{i}]"), by_uid) for i, n in enumerate(node_docs)]
    check_node_names(graph)
    return graph


def _uuid(text: str | None) -> bytes | None:
    if text is None:
        return None
    try:
        parsed = uuid.UUID(text)
    except ValueError:
        raise unsupported(f"Invalid hipDNN graph JSON: id {text!r} is not a UUID") from None
    if len(text) != 36:
        raise unsupported(f"Invalid hipDNN graph JSON: id {text!r} is not in 8-4-4-4-12 form")
    return parsed.bytes


def _version(o: _Obj | None) -> tuple[int, int, int] | None:
    if o is None:
        return None
    major, minor, patch = (o.get_int(key) for key in ("major", "minor", "patch"))
    if any(not 0 <= p < 2**32 for p in (major, minor, patch)):
        raise unsupported("Invalid hipDNN graph JSON: engine API version parts must be uint32")
    return major, minor, patch
