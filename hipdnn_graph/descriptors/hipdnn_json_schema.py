"""The JSON Schema (draft 2020-12) of hipDNN's graph JSON in the canonical form
:mod:`.json_write` writes, derived from the registered node specs (each family's JSON layout: its
groups, the keys it may leave out, its enum spellings). :mod:`.json_read` accepts more, as
hipDNN's reader does: unknown keys, defaulted keys, the nested layout and spellings of hipDNN's
benchmark graphs.

Example:
    >>> schema = json_schema()
    >>> schema["required"][:3]
    ['compute_data_type', 'intermediate_data_type', 'io_data_type']
"""

from __future__ import annotations

from typing import Any

from .node_spec import JSON_ON_NODE, JSON_SCALARS_ON_NODE, Kind, NodeSpec, WireEnum, node_specs
from .wire_rules import MAX_NODES, MAX_RANK, MAX_TENSORS
from .wire_values import DATA_TYPE_NAMES, ValueMember

__all__ = ["json_schema"]

_NULLABLE_INT: dict[str, Any] = {"type": ["integer", "null"]}


def _kind_schema(kind: Kind, enum: WireEnum | None = None) -> dict[str, Any]:
    if kind is Kind.ENUM:
        assert enum is not None
        return {"enum": list(enum.json.values())}
    return {
        Kind.UID: {"type": "integer"},
        Kind.UID_OPT: _NULLABLE_INT,
        Kind.BOOL: {"type": "boolean"},
        Kind.BOOL_OPT: {"type": ["boolean", "null"]},
        Kind.F32_OPT: {"type": ["number", "null"]},
        Kind.I64: {"type": "integer"},
        Kind.I64_OPT: _NULLABLE_INT,
        Kind.I32_OPT: _NULLABLE_INT,
        Kind.I32: {"type": "integer"},
        Kind.DTYPE: {"$ref": "#/$defs/DataType"},
        Kind.STRING: {"type": "string"},
        Kind.I64_VEC: {"type": "array", "items": {"type": "integer"}},
        Kind.I32_VEC: {"type": "array", "items": {"type": "integer"}},
        Kind.U8_VEC: {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 255}},
    }[kind]


def _closed(properties: dict[str, Any], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": sorted(k for k in properties if k not in optional),
        "additionalProperties": False,
    }


def _node_schema(spec: NodeSpec) -> dict[str, Any]:
    groups: dict[str, dict[str, Any]] = {"inputs": {}, "outputs": {}, "scalars": {}}
    absent_uids = {s.wire for s in spec.slots if spec.omit_absent_uids and not s.required}
    for slot in spec.slots:
        kind = Kind.UID if slot.wire in absent_uids else slot.kind
        groups["outputs" if slot.output else "inputs"][slot.wire] = _kind_schema(kind)
    for held in spec.tensor_lists:
        groups["outputs" if held.output else "inputs"][held.wire] = _kind_schema(Kind.I64_VEC)
    holder = spec.json_scalar_holder
    for scalar in spec.scalars:
        groups[holder][scalar.key] = _kind_schema(scalar.kind, scalar.enum)
    extras = []
    for extra in spec.unmodelled:
        if extra.group == "extra" and holder != "scalars":
            continue  # no object to hold it: the field must keep its default
        key = holder if extra.group in ("extra", "scalars") else extra.group
        groups[key][extra.wire] = _kind_schema(extra.kind, extra.enum)
        if extra.group == "extra":
            extras.append(extra.wire)
    inputs_optional = tuple(extras) if holder == "inputs" else ()
    optional_scalars = tuple(s.key for s in spec.scalars if s.json_presence != "always")
    inputs_optional += optional_scalars if holder == "inputs" else ()
    if spec.scalar_group == JSON_ON_NODE:
        on_node = {**groups["inputs"], **groups["outputs"]}
        on_node.update(
            compute_data_type={"$ref": "#/$defs/DataType"},
            name={"type": "string"},
            type={"const": spec.table},
        )
        return _closed(on_node, inputs_optional + tuple(absent_uids))
    properties = {
        "compute_data_type": {"$ref": "#/$defs/DataType"},
        "inputs": _closed(groups["inputs"], inputs_optional + tuple(absent_uids)),
        "name": {"type": "string"},
        "outputs": _closed(groups["outputs"], tuple(absent_uids)),
        "type": {"const": spec.table},
    }
    if spec.scalar_group == JSON_SCALARS_ON_NODE:
        properties.update(groups["scalars"])
        return _closed(properties, optional_scalars)
    if holder == "scalars":
        properties[spec.scalar_group] = _closed(groups["scalars"], tuple(extras))
    return _closed(properties)


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of hipDNN's graph JSON as this library writes it, derived
    from the registered node specs.

    Example:
        >>> schema = json_schema()
        >>> schema["required"][:3]
        ['compute_data_type', 'intermediate_data_type', 'io_data_type']
    """
    int64 = {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}
    tensor = _closed(
        {
            "alignment": {"type": "integer", "minimum": 1},
            "data_type": {"$ref": "#/$defs/DataType"},
            "dims": {"type": "array", "items": int64, "maxItems": MAX_RANK},
            "is_runtime_pass_by_value": {"type": "boolean"},
            "name": {"type": "string"},
            "ragged_offset_multiplier": {"type": "integer", "minimum": 1},
            "ragged_offset_tensor_uid": int64,
            "strides": {"type": "array", "items": int64, "maxItems": MAX_RANK},
            "uid": int64,
            "value": {"type": ["number", "boolean"]},
            "value_type": {"enum": [m.name for m in ValueMember]},
            "virtual": {"type": "boolean"},
        },
        (
            "alignment",
            "ragged_offset_multiplier",
            "ragged_offset_tensor_uid",
            "value",
            "value_type",
        ),
    )
    version = _closed({k: {"type": "integer", "minimum": 0} for k in ("major", "minor", "patch")})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "hipDNN graph",
        **_closed(
            {
                "compute_data_type": {"$ref": "#/$defs/DataType"},
                "id": {"type": "string", "pattern": "^[0-9a-fA-F-]{36}$"},
                "intermediate_data_type": {"$ref": "#/$defs/DataType"},
                "io_data_type": {"$ref": "#/$defs/DataType"},
                "is_override_shape_enabled": {"type": "boolean"},
                "min_required_engine_api_version": version,
                "name": {"type": "string"},
                "nodes": {
                    "type": "array",
                    "maxItems": MAX_NODES,
                    "items": {"oneOf": [_node_schema(s) for s in node_specs().values()]},
                },
                "preferred_engine_id": int64,
                "tensors": {"type": "array", "maxItems": MAX_TENSORS, "items": tensor},
            },
            (
                "id",
                "is_override_shape_enabled",
                "min_required_engine_api_version",
                "preferred_engine_id",
            ),
        ),
        "$defs": {"DataType": {"enum": sorted(DATA_TYPE_NAMES.values())}},
    }
