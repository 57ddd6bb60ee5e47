"""How decoders build what they read without validating it again: pydantic models made from
checked values (:func:`new_trusted`), node attributes (:func:`decoded_attributes`) and tensors
(:func:`decoded_tensor`), and the refusal of a field this version does not model
(:func:`refuse_unmodelled`).

Example:
    >>> t = decoded_tensor(uid=1, name="Q", dim=[2, 4], stride=[4, 1])
    >>> t.get_name(), t.get_stride(), t.get_is_virtual()
    ('Q', [4, 1], False)
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from pydantic import BaseModel

from ..tensor import TensorAttributes
from ..types import DataType
from .node_spec import NodeSpec, TensorListSpec
from .wire_rules import invalid, unsupported

__all__ = [
    "attributes_template",
    "decoded_attributes",
    "decoded_tensor",
    "new_trusted",
    "refuse_unmodelled",
]


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
        if uid is not None:
            tensor = _node_tensor(tensors, uid, name, slot.wire)
            (outputs if slot.output else inputs)[slot.member] = tensor
    for held, uid_list in (lists or {}).items():
        for index, uid in enumerate(uid_list):
            tensor = _node_tensor(tensors, uid, name, f"{held.wire}[{index}]")
            (outputs if held.output else inputs)[held.key(index)] = tensor
    fields, private = attributes_template(spec.attributes_cls)
    values = dict(fields)
    values.update(name=name, compute_data_type=compute, inputs=inputs, outputs=outputs)
    values.update(scalars)
    for scalar in spec.scalars:
        if scalar.none_is_default and scalar.name in scalars:
            values[scalar.name] = scalar.model_value(scalars[scalar.name])
    return new_trusted(spec.attributes_cls, values, set(), dict(private))


def _node_tensor(
    tensors: dict[int, TensorAttributes], uid: int, node: str, field: str
) -> TensorAttributes:
    """The graph's tensor ``uid``, which node ``node`` names in its ``field``.

    Raises:
        HipdnnError: INVALID_VALUE when the uid is not a tensor of the graph.
    """
    tensor = tensors.get(uid)
    if tensor is None:
        raise invalid(
            f"Node {node} refers to tensor uid {uid} ({field}), which is not a tensor of the graph"
        )
    return tensor


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


def link_ragged(tensors: list[TensorAttributes], offset_uids: list[int | None]) -> None:
    """Give each decoded tensor the offsets tensor its ``ragged_offset_tensor_uid`` names
    (``offset_uids[i]`` for ``tensors[i]``; the tensors' uids are checked unique already).

    Raises:
        HipdnnError: INVALID_VALUE when the uid is not a tensor of the graph.
    """
    by_uid = {t.uid: t for t in tensors}
    for tensor, uid in zip(tensors, offset_uids, strict=True):
        if uid is None:
            continue
        offsets = by_uid.get(uid)
        if offsets is None:
            raise invalid(
                f"Tensor {tensor.name or tensor.uid} refers to ragged offset tensor uid {uid}, "
                "which is not a tensor of the graph"
            )
        tensor.__dict__["ragged_offset"] = offsets


def decoded_tensor(**fields: Any) -> TensorAttributes:
    """A tensor from decoded, checked fields (``uid``, ``name``, ``data_type``, ``dim``,
    ``stride``, ``is_virtual``, ``is_pass_by_value``, ``value``, ``alignment``), unvalidated."""
    values = dict(_TENSOR_DEFAULTS)
    values.update(fields)
    return new_trusted(TensorAttributes, values, set(_TENSOR_DEFAULTS))
