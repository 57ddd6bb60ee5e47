"""Per-descriptor-type schemas: slots, value checks, defaults and finalize rules, as data.

Each descriptor type :class:`~.backend_descriptor.BackendDescriptor` supports has a
:class:`_Schema`: hipDNN's class name (used in messages), its attribute slots (type, vector or
scalar, default, accepted descriptor types) and its finalize rules in hipDNN's order, each a
predicate over the stored attributes plus hipDNN's message. Sources: hipDNN's
``TensorDescriptor.cpp``, ``GraphDescriptor.cpp`` and each operation's descriptor source
(``projects/hipdnn/backend/src/descriptors``); operation schemas are derived from the node specs,
an enum attribute taking its values from the spec's :class:`~.node_spec.WireEnum`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..types import DataType
from .enums import AttributeName as A
from .enums import AttributeType as T
from .enums import DescriptorType as D
from .node_spec import LIST_KINDS, NodeSpec, node_specs

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


# ---------------------------------------------------------------------------------------------
# Value checks, one per attribute type: return the normalized value or raise ValueError.
# ---------------------------------------------------------------------------------------------


def _as_bool(v: object) -> bool:
    if type(v) is bool:
        return v
    raise ValueError


def _as_int(lo: int, hi: int) -> Callable[[object], int]:
    def check(v: object) -> int:
        if isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi:
            return int(v)
        raise ValueError

    return check


def _as_float(v: object) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    raise ValueError


def _as_enum(enum_cls: Any) -> Callable[[object], Any]:
    members = {m.value: m for m in enum_cls}

    def check(v: object) -> Any:
        if isinstance(v, int) and not isinstance(v, bool) and v in members:
            return members[v]
        raise ValueError

    return check


def _as_char(v: object) -> str | bytes:
    if isinstance(v, (str, bytes)):
        return v
    raise ValueError


def _as_handle(v: object) -> object:
    if v is None:
        raise ValueError
    return v


_CHECKS: dict[T, Callable[[object], Any]] = {
    T.BOOLEAN: _as_bool,
    T.INT64: _as_int(_INT64_MIN, _INT64_MAX),
    T.INT32: _as_int(_INT32_MIN, _INT32_MAX),
    T.FLOAT: _as_float,
    T.DOUBLE: _as_float,
    T.DATA_TYPE: _as_enum(DataType),
    T.CHAR: _as_char,
    T.HANDLE: _as_handle,
}


# ---------------------------------------------------------------------------------------------
# Per-descriptor-type schemas: slots, defaults and finalize rules, as data.
# ---------------------------------------------------------------------------------------------


class _Slot(NamedTuple):
    """One attribute of a descriptor type."""

    attr_type: T
    many: bool = False  # a vector of >= 1 values instead of exactly one
    default: object = None  # what get_attribute reports while unset (None: no value, [])
    refs: frozenset[D] = frozenset()  # BACKEND_DESCRIPTOR slots: accepted descriptor types
    check: Callable[[object], Any] = _as_handle  # the value check; filled in from _CHECKS


_Attrs = Mapping[int, list[Any]]
_Rule = tuple[Callable[[_Attrs], bool], str]  # (is broken?, message); checked in order


class _Schema(NamedTuple):
    class_name: str
    slots: Mapping[int, _Slot]
    rules: tuple[_Rule, ...]


def _missing(name: int) -> Callable[[_Attrs], bool]:
    return lambda attrs: name not in attrs


def _missing_type(name: int) -> Callable[[_Attrs], bool]:
    return lambda attrs: name not in attrs or attrs[name][0] == DataType.NOT_SET


def _lengths_differ(a: A, b: A) -> Callable[[_Attrs], bool]:
    return lambda attrs: len(attrs[a]) != len(attrs[b])


_TENSOR_REF = _Slot(T.BACKEND_DESCRIPTOR, refs=frozenset({D.TENSOR}))
_FLAG = _Slot(T.BOOLEAN, default=False)
_OPERATIONS = frozenset(d for d in D if d.name.startswith("OPERATION_"))

_TENSOR = _Schema(
    "TensorDescriptor",
    {
        A.TENSOR_UNIQUE_ID: _Slot(T.INT64),
        A.TENSOR_NAME_EXT: _Slot(T.CHAR),
        A.TENSOR_DATA_TYPE: _Slot(T.DATA_TYPE, default=DataType.NOT_SET),
        A.TENSOR_DIMENSIONS: _Slot(T.INT64, many=True),
        A.TENSOR_STRIDES: _Slot(T.INT64, many=True),
        A.TENSOR_IS_VIRTUAL: _FLAG,
        A.TENSOR_VALUE_EXT: _Slot(T.CHAR),
        A.TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT: _FLAG,
        A.TENSOR_BYTE_ALIGNMENT: _Slot(T.INT64, default=16),
    },
    (
        (_missing(A.TENSOR_DIMENSIONS), "TensorDescriptor::finalize() failed: dimensions not set"),
        (_missing(A.TENSOR_STRIDES), "TensorDescriptor::finalize() failed: strides not set"),
        (
            _lengths_differ(A.TENSOR_DIMENSIONS, A.TENSOR_STRIDES),
            "TensorDescriptor::finalize() failed: dims and strides size mismatch",
        ),
        (
            _missing_type(A.TENSOR_DATA_TYPE),
            "TensorDescriptor::finalize() failed: data type not set",
        ),
        # Not checked by hipDNN (its uid defaults to 0); every frontend sets it.
        (_missing(A.TENSOR_UNIQUE_ID), "TensorDescriptor::finalize() failed: unique id not set"),
    ),
)

_GRAPH = _Schema(
    "GraphDescriptor",
    {
        A.OPERATIONGRAPH_HANDLE: _Slot(T.HANDLE),
        A.OPERATIONGRAPH_OPS: _Slot(T.BACKEND_DESCRIPTOR, many=True, refs=_OPERATIONS),
        A.OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT: _Slot(T.DATA_TYPE, default=DataType.NOT_SET),
        A.OPERATIONGRAPH_INTERMEDIATE_DATA_TYPE_EXT: _Slot(T.DATA_TYPE, default=DataType.NOT_SET),
        A.OPERATIONGRAPH_IO_DATA_TYPE_EXT: _Slot(T.DATA_TYPE, default=DataType.NOT_SET),
        A.OPERATIONGRAPH_PREFERRED_ENGINE_ID_EXT: _Slot(T.INT64),
        A.OPERATIONGRAPH_NAME_EXT: _Slot(T.CHAR),
        A.OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT: _FLAG,
    },
    ((_missing(A.OPERATIONGRAPH_OPS), "GraphDescriptor::finalize: graph is null"),),
)


_SCALAR_DEFAULTS: dict[T, object] = {
    T.BOOLEAN: False,
    T.DATA_TYPE: DataType.NOT_SET,
}


def _scalar_slot(attr_type: T, enum: Any, always: bool) -> _Slot:
    """The slot of a scalar attribute; an enum's values and default come from its spec."""
    if enum is not None:
        return _Slot(attr_type, default=enum.cls(0) if always else None, check=_as_enum(enum.cls))
    return _Slot(attr_type, default=_SCALAR_DEFAULTS.get(attr_type) if always else None)


def _operation_schema(spec: NodeSpec) -> _Schema:
    """A node family's descriptor schema, derived from its spec."""
    slots: dict[int, _Slot] = {slot.attribute: _TENSOR_REF for slot in spec.slots}
    for held in spec.tensor_lists:  # an array of tensors
        slots[held.attribute] = _TENSOR_REF._replace(many=True)
    for scalar in spec.scalars:
        if scalar.attribute is not None:
            name, attr_type = scalar.attribute
            slots[name] = (
                _Slot(attr_type, many=True)  # a list member: one or more values
                if scalar.kind in LIST_KINDS
                else _scalar_slot(attr_type, scalar.enum, scalar.always)
            )
    for extra in spec.unmodelled:  # what hipDNN's descriptor accepts and the frontend ignores
        if extra.attribute is not None:
            name, attr_type = extra.attribute
            slots[name] = (
                _TENSOR_REF
                if attr_type is T.BACKEND_DESCRIPTOR
                else _scalar_slot(attr_type, extra.enum, attr_type is not T.INT32)
            )
    slots[spec.compute_type] = _Slot(T.DATA_TYPE, default=DataType.NOT_SET)
    slots[A.OPERATION_NAME_EXT] = _Slot(T.CHAR)
    cls = spec.descriptor_class
    rules: list[_Rule] = [
        (_missing(slot.attribute), f"{cls}::finalize() failed: {slot.name} tensor not set")
        for slot in sorted(spec.slots, key=lambda s: s.attribute)
        if slot.required
    ]
    rules.append(
        (_missing_type(spec.compute_type), f"{cls}::finalize() failed: compute data type not set")
    )
    return _Schema(cls, slots, tuple(rules))


def _with_checks(schema: _Schema) -> _Schema:
    return schema._replace(
        slots={
            name: slot
            if slot.check is not _as_handle
            else slot._replace(check=_CHECKS.get(slot.attr_type, _as_handle))
            for name, slot in schema.slots.items()
        }
    )


_BUILT_IN: dict[int, _Schema] = {
    D.TENSOR: _with_checks(_TENSOR),
    D.OPERATIONGRAPH: _with_checks(_GRAPH),
}
_OPERATIONS_CACHE: dict[int, _Schema] = {}


def schema_for(descriptor_type: int) -> _Schema | None:
    """The schema of a descriptor type: tensors and graphs are built in; operation descriptors
    come from the registered node specs. ``None`` for a type no schema covers."""
    schema = _BUILT_IN.get(descriptor_type) or _OPERATIONS_CACHE.get(descriptor_type)
    if schema is None:
        for spec in node_specs().values():
            if spec.descriptor_type == descriptor_type:
                schema = _OPERATIONS_CACHE[descriptor_type] = _with_checks(_operation_schema(spec))
    return schema
