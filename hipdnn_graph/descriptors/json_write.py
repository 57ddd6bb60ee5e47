"""hipDNN's JSON form of a graph, writing (:func:`graph_to_json`); :mod:`.hipdnn_json` says what
the form is and :mod:`.json_read` reads it.

Example:
    >>> format_number(0.10000000149011612), format_number(1e15), format_number(1e-05)
    ('0.10000000149011612', '1e+15', '1e-05')
"""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

from ..tensor import TensorAttributes
from ..types import DataType
from .node_spec import (
    INT32_KINDS,
    JSON_ON_NODE,
    JSON_SCALARS_ON_NODE,
    LIST_KINDS,
    Kind,
    NodeSpec,
    WireEnum,
)
from .wire_model import WireGraph
from .wire_rules import unsupported
from .wire_trusted import refuse_unmodelled
from .wire_values import DATA_TYPE_NAMES, encode_value, float32

__all__ = ["format_number", "graph_to_json"]


def format_number(x: float) -> str:
    """A double as nlohmann::json writes it: shortest round-trip digits, exponent form outside
    ``1e-4 <= |x| < 1e15`` (sign and two digits at least: ``1e-05``, ``1e+15``).

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT for NaN and ±inf, which JSON cannot hold.
    """
    if not math.isfinite(x):
        raise unsupported(f"{x!r} cannot be written in JSON")
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    text = repr(abs(x))
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + int(exponent or 0)  # value = 0.<digits> × 10^point
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 15:
        body = digits + "0" * (n - k) + ".0"
    elif 0 < n <= 15:
        body = digits[:n] + "." + digits[n:]
    elif -4 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        e = n - 1
        body = digits[0] + ("." + digits[1:] if k > 1 else "")
        body += "e" + ("-" if e < 0 else "+") + f"{abs(e):02d}"
    return sign + body


class _Numbers:
    """Floats for the C JSON encoder: Python's ``repr`` is nlohmann's format except for
    ``1e15 <= |x| < 1e16``; those are written as a sentinel string and replaced afterwards."""

    __slots__ = ("found", "token")

    def __init__(self) -> None:
        self.token = uuid.uuid4().hex
        self.found: list[str] = []

    def __call__(self, x: float) -> Any:
        if not math.isfinite(x):
            raise unsupported(f"{x!r} cannot be written in JSON")
        if 1e15 <= abs(x) < 1e16:
            self.found.append(format_number(x))
            return f"{self.token}{len(self.found) - 1}"
        return x

    def finish(self, text: str) -> str:
        for i, number in enumerate(self.found):
            text = text.replace(f'"{self.token}{i}"', number, 1)
        return text


_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
)


def _tensor_json(t: TensorAttributes, numbers: _Numbers) -> dict[str, Any]:
    d = t.__dict__
    out: dict[str, Any] = {
        "alignment": d["alignment"],
        "data_type": _dtype_name(d["data_type"], f"Tensor {d['name'] or d['uid']}"),
        "dims": d["dim"],
        "is_runtime_pass_by_value": d["is_pass_by_value"],
        "name": d["name"],
        "strides": d["stride"],
        "uid": d["uid"],
        "virtual": d["is_virtual"],
    }
    if d["ragged_offset"] is not None:
        out["ragged_offset_tensor_uid"] = d["ragged_offset"].uid
    if d["ragged_offset_multiplier"] != 1:
        out["ragged_offset_multiplier"] = d["ragged_offset_multiplier"]
    if d["value"] is not None:
        member, raw = encode_value(d["value"], d["data_type"], f"Tensor {d['name'] or d['uid']}")
        out["value_type"] = member.name
        out["value"] = numbers(raw) if type(raw) is float else raw
    return out


def _dtype_name(dtype: DataType, where: str) -> str:
    name = DATA_TYPE_NAMES.get(dtype)
    if name is None:
        raise unsupported(f"{where}: data type {dtype.name} has no number in hipDNN's schema")
    return name


def _scalar_json(
    kind: Kind, value: Any, where: str, numbers: _Numbers, enum: WireEnum | None = None
) -> Any:
    if value is None:
        return None
    if kind is Kind.F32_OPT:
        return numbers(float32(value, where))
    if kind is Kind.ENUM:
        assert enum is not None
        return enum.json[enum.wire_number(value, where)]
    if kind is Kind.DTYPE:
        return _dtype_name(value, where)
    if kind in (Kind.BOOL, Kind.BOOL_OPT):
        return bool(value)
    if kind in INT32_KINDS:
        values = value if kind in LIST_KINDS else [value]
        for v in values:
            if not -(2**31) <= v < 2**31:
                raise unsupported(f"{where}: {v} does not fit a 32-bit int")
    if kind in LIST_KINDS:
        return [int(v) for v in value]
    if kind is Kind.U8_VEC:
        return list(bytes(value))
    return value


def _node_json(spec: NodeSpec, attributes: Any, numbers: _Numbers) -> dict[str, Any]:
    where = f"Node {attributes.name}"
    slots = attributes.tensors_by_slot()
    groups: dict[str, dict[str, Any]] = {"inputs": {}, "outputs": {}, "scalars": {}}
    for slot in spec.slots:
        tensor = slots.get(slot.name)
        if tensor is None and spec.omit_absent_uids:
            continue  # hipDNN leaves the key out rather than writing null
        groups["outputs" if slot.output else "inputs"][slot.wire] = (
            None if tensor is None else tensor.uid
        )
    for held in spec.tensor_lists:
        tensors = attributes.outputs if held.output else attributes.inputs
        groups["outputs" if held.output else "inputs"][held.wire] = [
            tensors[key].uid for key in sorted(tensors)
        ]
    d = attributes.__dict__
    scalars = groups[spec.json_scalar_holder]
    for scalar in spec.scalars:
        value = scalar.wire_value(d[scalar.name])
        if scalar.json_presence == "when_set" and value == scalar.default:
            continue
        scalars[scalar.key] = _scalar_json(scalar.kind, value, where, numbers, scalar.enum)
    set_values = attributes.unmodelled_values() if spec.unmodelled else {}
    for extra in spec.unmodelled:
        value = set_values.get(extra.wire, extra.default)
        refuse_unmodelled(spec, where, extra.wire, value, extra.default)
        if extra.group != "extra":
            holder = groups[extra.group if extra.group != "scalars" else spec.json_scalar_holder]
            holder[extra.wire] = _scalar_json(extra.kind, extra.default, where, numbers, extra.enum)
    node: dict[str, Any] = {
        "compute_data_type": _dtype_name(attributes.compute_data_type, where),
        "name": attributes.name,
        "type": spec.table,
    }
    if spec.scalar_group == JSON_ON_NODE:  # every key on the node object itself
        return {**node, **groups["inputs"], **groups["outputs"]}
    node.update(inputs=groups["inputs"], outputs=groups["outputs"])
    if spec.scalar_group == JSON_SCALARS_ON_NODE:
        node.update(groups["scalars"])
    elif spec.scalar_group not in ("", "inputs"):
        node[spec.scalar_group] = groups["scalars"]
    return node


def graph_to_json(graph: WireGraph) -> str:
    """hipDNN's canonical JSON text of ``graph``.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT for content JSON or hipDNN's schema cannot hold
            (NaN, ±inf, a data type without a number, a value its type cannot store).
    """
    meta = graph.metadata
    numbers = _Numbers()
    doc: dict[str, Any] = {
        "compute_data_type": _dtype_name(graph.compute_data_type, "Graph"),
        "intermediate_data_type": _dtype_name(graph.intermediate_data_type, "Graph"),
        "io_data_type": _dtype_name(graph.io_data_type, "Graph"),
        "is_override_shape_enabled": meta.is_override_shape_enabled,
        "name": graph.name,
        "nodes": [_node_json(spec, a, numbers) for spec, a in graph.nodes],
        "tensors": [_tensor_json(t, numbers) for t in graph.tensors],
    }
    if graph.preferred_engine_id is not None:
        doc["preferred_engine_id"] = graph.preferred_engine_id
    if meta.id is not None:
        doc["id"] = str(uuid.UUID(bytes=bytes(meta.id)))
    if meta.min_required_engine_api_version is not None:
        major, minor, patch = meta.min_required_engine_api_version
        doc["min_required_engine_api_version"] = {"major": major, "minor": minor, "patch": patch}
    return numbers.finish(_ENCODER.encode(doc))
