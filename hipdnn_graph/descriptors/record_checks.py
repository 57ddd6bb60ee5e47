"""Record-level rules, limits and the trusted fast constructor of graph records.

The rules hold for every :class:`~.records.GraphRecord`, however it was made (validated by pydantic,
decoded from bytes, or built with :func:`construct_record` and then checked); see
:mod:`.records` for the list.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from math import prod
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from ..errors import HipdnnError
from ..types import ErrorCode

if TYPE_CHECKING:
    from .records import GraphRecord, NodeRecord

__all__ = [
    "FORMAT_VERSION",
    "MAX_DIM",
    "MAX_NAME_LENGTH",
    "MAX_NODES",
    "MAX_RANK",
    "MAX_STRIDE",
    "MAX_TENSORS",
    "MAX_VOLUME",
    "check_graph_parts",
    "check_graph_record",
    "construct_record",
]

#: Version of the record layout, written into both formats; readers reject any other.
FORMAT_VERSION = 1
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


def _invalid(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, message)


def _check_name(kind: str, name: str) -> None:
    if len(name) > MAX_NAME_LENGTH:
        raise _invalid(f"{kind} name is longer than {MAX_NAME_LENGTH} characters")


def _check_tensor(d: dict[str, Any], dims_key: str, strides_key: str) -> None:
    dims, strides = d[dims_key], d[strides_key]
    if (
        len(dims) != len(strides)
        or len(dims) > MAX_RANK
        or len(d["name"]) > MAX_NAME_LENGTH
        or d["alignment"] < 1
        or (
            dims
            and (
                min(dims) < 1
                or max(dims) > MAX_DIM
                or min(strides) < 0
                or max(strides) > MAX_STRIDE
                or prod(dims) > MAX_VOLUME
            )
        )
    ):
        _explain_tensor(d["name"], dims, strides)


def _explain_tensor(name: str, dims: list[int], strides: list[int]) -> None:
    """Raise for the first broken tensor rule (the slow path of :func:`_check_tensor`)."""
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
    if any(not 0 <= stride <= MAX_STRIDE for stride in strides):
        raise _invalid(f"Tensor {name} strides must be in [0, {MAX_STRIDE}]")
    raise _invalid(f"Tensor {name} alignment must be >= 1")


def check_graph_record(rec: GraphRecord) -> None:
    """Check the record-level rules of a whole graph (see the module docstring).

    Args:
        rec: The graph record.

    Raises:
        HipdnnError: INVALID_VALUE for the first broken rule.
    """
    d = rec.__dict__
    check_graph_parts(d["name"], d["tensors"], d["nodes"])


def check_graph_parts(
    name: str,
    tensors: Sequence[Any],
    nodes: Sequence[NodeRecord],
    dims_key: str = "dims",
    strides_key: str = "strides",
) -> None:
    """:func:`check_graph_record` on the parts of a graph that is not a record yet.

    Args:
        name: The graph's name.
        tensors: Objects whose ``__dict__`` holds a tensor record's fields, except that dims and
            strides may be stored under other keys (a decoder building frontend tensors directly).
        nodes: The node records.
        dims_key: The key of the dims in each tensor's ``__dict__``.
        strides_key: The key of the strides.

    Raises:
        HipdnnError: INVALID_VALUE for the first broken rule.
    """
    if len(tensors) > MAX_TENSORS:
        raise _invalid(f"Graph has {len(tensors)} tensors, more than {MAX_TENSORS}")
    if len(nodes) > MAX_NODES:
        raise _invalid(f"Graph has {len(nodes)} nodes, more than {MAX_NODES}")
    _check_name("Graph", name)
    # One pass of cheap per-tensor checks; dims and strides are range-checked all at once.
    uids: list[int] = []
    all_dims: list[int] = []
    all_strides: list[int] = []
    add_uid, add_dims, add_strides = uids.append, all_dims.extend, all_strides.extend
    for t in tensors:
        td = t.__dict__
        dims, strides = td[dims_key], td[strides_key]
        rank = len(dims)
        if (
            rank != len(strides)
            or rank > MAX_RANK
            or len(td["name"]) > MAX_NAME_LENGTH
            or td["alignment"] < 1
            or prod(dims) > MAX_VOLUME
        ):
            _explain_tensor(td["name"], dims, strides)
        add_dims(dims)
        add_strides(strides)
        add_uid(td["uid"])
    if all_dims and (
        min(all_dims) < 1
        or max(all_dims) > MAX_DIM
        or min(all_strides) < 0
        or max(all_strides) > MAX_STRIDE
    ):
        for t in tensors:
            _check_tensor(t.__dict__, dims_key, strides_key)
    known = set(uids)
    if len(known) != len(uids):
        seen: set[int] = set()
        duplicates = {u for u in uids if u in seen or seen.add(u)}  # type: ignore[func-returns-value]
        listed = ", ".join(str(u) for u in sorted(duplicates))
        raise _invalid(f"Duplicate tensor UIDs found in the graph: {listed}")
    accepted = {*known, None}  # a node's uids: tensors of the graph, or None for unset optionals
    for node in nodes:
        nd = node.__dict__
        _check_name("Node", nd["name"])
        attrs = nd["attributes"]
        ad = attrs.__dict__
        slots = (*attrs.REQUIRED_UIDS, *attrs.OPTIONAL_UIDS)
        uids_of_node = itemgetter(*slots)(ad)
        if (
            not accepted.issuperset(uids_of_node)
            or None in uids_of_node[: len(attrs.REQUIRED_UIDS)]
        ):
            for slot in slots:
                uid = ad[slot]
                if uid not in known and (uid is not None or slot in attrs.REQUIRED_UIDS):
                    _dangling(nd["name"], slot, uid)


def _dangling(node: str, slot: str, uid: int) -> None:
    raise _invalid(
        f"Node {node} refers to tensor uid {uid} ({slot}), which is not a tensor of the graph"
    )


_R = TypeVar("_R", bound=BaseModel)
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
    cls: type[_R],
    values: dict[str, Any],
    fields_set: AbstractSet[str],
    private: dict[str, Any] | None = None,
) -> _R:
    """A pydantic model of ``cls`` whose state is ``values``, skipping validation.

    What ``model_construct`` does minus its per-field loop: a model's state is exactly its
    ``__dict__``, its fields-set, its extra (None) and its private attributes. ``values`` must
    hold every field, already checked and typed.
    """
    obj = _object_new(cls)
    _set_dict(obj, values)
    _set_fields(obj, fields_set)
    _set_extra(obj, None)
    _set_private(obj, private)
    return obj


_LAYOUTS: dict[type[BaseModel], tuple[tuple[tuple[str, Any], ...], frozenset[str]]] = {}
_REQUIRED = object()


def _layout(cls: type[BaseModel]) -> tuple[tuple[tuple[str, Any], ...], frozenset[str]]:
    layout = _LAYOUTS.get(cls)
    if layout is None:
        fields = tuple(
            (name, _REQUIRED if info.is_required() else info.default)
            for name, info in cls.model_fields.items()
        )
        layout = _LAYOUTS[cls] = (fields, frozenset(cls.model_fields))
    return layout


def construct_record(cls: type[_R], **values: Any) -> _R:
    """Build a record from trusted, already typed values, without pydantic validation.

    Cheaper than ``model_construct`` and than validation (about 2 µs instead of 5-6 µs for a
    tensor on the reference machine): meant for code that converts already validated objects
    into records on a hot path. Fields left out take their
    defaults; keys end up in field order, so the canonical JSON is the same as for a validated
    record. Nothing is checked here: pass the result through :func:`check_graph_record` (the
    codec's writers do not re-check).

    Args:
        cls: The record class (:class:`TensorRecord`, :class:`GraphRecord`, ...).
        **values: Field values, with their final types (e.g. ``DataType`` members).

    Returns:
        The record.

    Raises:
        HipdnnError: INVALID_VALUE when a required field is missing or an unknown one is given.

    Example:
        >>> from hipdnn_graph.descriptors.records import TensorRecord
        >>> t = construct_record(TensorRecord, uid=3, dims=[2], strides=[1])
        >>> t.alignment, t == TensorRecord(uid=3, dims=[2], strides=[1])
        (16, True)
    """
    fields, names = _layout(cls)
    if len(values) == len(names) and names.issuperset(values):  # every field given
        data = {name: values[name] for name, _ in fields}
    else:
        if not names.issuperset(values):
            raise _invalid(f"{cls.__name__} has no fields {sorted(set(values) - names)}")
        data = {}
        for name, default in fields:
            value = values.get(name, default)
            if value is _REQUIRED:
                raise _invalid(f"{cls.__name__} needs a value for {name}")
            data[name] = list(value) if type(value) is list and name not in values else value
    return new_trusted(cls, data, names)
