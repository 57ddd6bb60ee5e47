"""The backend descriptor model: hipDNN's C API objects, in Python.

hipDNN lowers a graph to *backend descriptors*: typed bags of attributes that are set one by one,
then finalized, then read. This module reproduces that contract for the descriptor types the
frontend lowers to (tensor, operation graph, SDPA forward, SDPA backward), including hipDNN's
status codes and messages (``projects/hipdnn/backend/src/descriptors/*.cpp``):

* setting an attribute on a finalized descriptor fails with
  ``<Class>::setAttribute() failed: Already finalized.`` (``NOT_INITIALIZED``);
* reading one before ``finalize()`` fails with ``<Class>::getAttribute() failed: Not finalized.``
  (``NOT_INITIALIZED``);
* an attribute type other than the slot's fails with
  ``<Class>::setAttribute(): attributeType mismatch`` (``BAD_PARAM``), an attribute the descriptor
  does not have with ``<Class>::setAttribute: attributeName not supported`` (``NOT_SUPPORTED``);
* ``finalize()`` checks the required slots in hipDNN's order, e.g.
  ``SdpaBwdOperationDescriptor::finalize() failed: Q tensor not set`` (``BAD_PARAM``); finalizing
  twice is allowed, as in hipDNN.

Every failure raises :class:`DescriptorError`, a :class:`~hipdnn_graph.errors.HipdnnError` with code
``HIPDNN_BACKEND_ERROR`` (what hipDNN's frontend reports for a failing backend call) whose
``status`` is hipDNN's backend :class:`~hipdnn_graph.descriptors.enums.Status`.

Value conventions (``values`` is always a list): ``BOOLEAN`` → ``bool``; ``INT64``/``INT32`` →
``int``; ``FLOAT``/``DOUBLE`` → ``float``; ``DATA_TYPE`` → :class:`~hipdnn_graph.types.DataType`;
``DIAGONAL_ALIGNMENT`` → :class:`~hipdnn_graph.types.DiagonalAlignment`; ``CHAR`` → one ``str``
(names) or one ``bytes`` object (``TENSOR_VALUE_EXT``, the pass-by-value bytes);
``BACKEND_DESCRIPTOR`` → finalized :class:`BackendDescriptor` objects (stored by reference,
which is how tensors are shared).

Deliberate extensions over hipDNN: the operation graph's attributes can be read back after
``finalize()`` (hipDNN's ``GraphDescriptor::getAttribute`` is not implemented yet; its TODO asks for
exactly this), the graph needs no handle, and a tensor's finalize also requires a unique id.

Example:
    >>> from hipdnn_graph.types import DataType
    >>> from hipdnn_graph.descriptors.enums import AttributeName as A, AttributeType as T
    >>> from hipdnn_graph.descriptors.enums import DescriptorType
    >>> t = BackendDescriptor(DescriptorType.TENSOR)
    >>> t.set_attribute(A.TENSOR_UNIQUE_ID, T.INT64, [7])
    >>> t.set_attribute(A.TENSOR_DATA_TYPE, T.DATA_TYPE, [DataType.HALF])
    >>> t.set_attribute(A.TENSOR_DIMENSIONS, T.INT64, [2, 3])
    >>> t.set_attribute(A.TENSOR_STRIDES, T.INT64, [3, 1])
    >>> t.finalize()
    >>> t.get_attribute(A.TENSOR_DIMENSIONS, T.INT64)
    [2, 3]
    >>> try:
    ...     t.set_attribute(A.TENSOR_IS_VIRTUAL, T.BOOLEAN, [True])
    ... except DescriptorError as err:
    ...     print(err.status.name, err)
    NOT_INITIALIZED TensorDescriptor::setAttribute() failed: Already finalized.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ..errors import HipdnnError
from ..types import DataType, DiagonalAlignment, ErrorCode
from .enums import AttributeName as A
from .enums import AttributeType as T
from .enums import DescriptorType as D
from .enums import Status

__all__ = ["BackendDescriptor", "DescriptorError"]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


class DescriptorError(HipdnnError):
    """A failed backend-descriptor call: code ``HIPDNN_BACKEND_ERROR`` plus hipDNN's status.

    Attributes:
        status: hipDNN's backend status (``BAD_PARAM``, ``NOT_INITIALIZED``, ...).

    Example:
        >>> from hipdnn_graph.descriptors.enums import Status
        >>> err = DescriptorError(Status.BAD_PARAM, "TensorDescriptor::finalize() failed: ...")
        >>> err.code.name, err.status.name
        ('HIPDNN_BACKEND_ERROR', 'BAD_PARAM')
    """

    status: Status

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(ErrorCode.HIPDNN_BACKEND_ERROR, message)
        self.status = Status(status)

    def __reduce__(self) -> tuple[type[HipdnnError], tuple[Status, str]]:  # type: ignore[override]
        return (DescriptorError, (self.status, self.message))


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
    T.DIAGONAL_ALIGNMENT: _as_enum(DiagonalAlignment),
    T.ATTENTION_IMPLEMENTATION: _as_int(0, 2),  # hipdnnAttentionImplementation_t: AUTO..UNIFIED
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


_Attrs = Mapping[int, list[Any]]
_Rule = tuple[Callable[[_Attrs], bool], str]  # (is broken?, message); checked in order


class _Schema(NamedTuple):
    class_name: str
    slots: Mapping[int, _Slot]
    rules: tuple[_Rule, ...]


def _missing(name: A) -> Callable[[_Attrs], bool]:
    return lambda attrs: name not in attrs


def _missing_type(name: A) -> Callable[[_Attrs], bool]:
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


def _sdpa_rules(cls: str, tensors: Sequence[tuple[A, str]], comp: A) -> tuple[_Rule, ...]:
    rules: list[_Rule] = [
        (_missing(name), f"{cls}::finalize() failed: {label} tensor not set")
        for name, label in tensors
    ]
    rules.append((_missing_type(comp), f"{cls}::finalize() failed: compute data type not set"))
    return tuple(rules)


_SDPA_BWD_REQUIRED = (
    (A.OPERATION_SDPA_BWD_Q_EXT, "Q"),
    (A.OPERATION_SDPA_BWD_K_EXT, "K"),
    (A.OPERATION_SDPA_BWD_V_EXT, "V"),
    (A.OPERATION_SDPA_BWD_O_EXT, "O"),
    (A.OPERATION_SDPA_BWD_DO_EXT, "dO"),
    (A.OPERATION_SDPA_BWD_STATS_EXT, "Stats"),
    (A.OPERATION_SDPA_BWD_DQ_EXT, "dQ"),
    (A.OPERATION_SDPA_BWD_DK_EXT, "dK"),
    (A.OPERATION_SDPA_BWD_DV_EXT, "dV"),
)

_SDPA_BWD = _Schema(
    "SdpaBwdOperationDescriptor",
    {
        **{a: _TENSOR_REF for a in A if 3100 <= a <= 3118},
        A.SDPA_BWD_ALIBI_MASK_EXT: _FLAG,
        A.SDPA_BWD_PADDING_MASK_EXT: _FLAG,
        A.SDPA_BWD_CAUSAL_MASK_EXT: _FLAG,
        A.SDPA_BWD_CAUSAL_MASK_BOTTOM_RIGHT_EXT: _FLAG,
        A.SDPA_BWD_DROPOUT_PROBABILITY_EXT: _Slot(T.FLOAT),
        A.SDPA_BWD_ATTN_SCALE_VALUE_EXT: _Slot(T.FLOAT),
        A.SDPA_BWD_LEFT_BOUND_EXT: _Slot(T.INT64),
        A.SDPA_BWD_RIGHT_BOUND_EXT: _Slot(T.INT64),
        A.SDPA_BWD_DIAGONAL_ALIGNMENT_EXT: _Slot(
            T.DIAGONAL_ALIGNMENT, default=DiagonalAlignment.TOP_LEFT
        ),
        A.SDPA_BWD_COMP_TYPE_EXT: _Slot(T.DATA_TYPE, default=DataType.NOT_SET),
        A.OPERATION_NAME_EXT: _Slot(T.CHAR),
    },
    _sdpa_rules("SdpaBwdOperationDescriptor", _SDPA_BWD_REQUIRED, A.SDPA_BWD_COMP_TYPE_EXT),
)

_SDPA_FWD_REQUIRED = (
    (A.OPERATION_SDPA_FWD_QDESC, "Q"),
    (A.OPERATION_SDPA_FWD_KDESC, "K"),
    (A.OPERATION_SDPA_FWD_VDESC, "V"),
    (A.OPERATION_SDPA_FWD_ODESC, "O"),
)

_SDPA_FWD = _Schema(
    "SdpaFwdOperationDescriptor",
    {
        **{a: _TENSOR_REF for a in A if 2600 <= a <= 2627},
        A.SDPA_FWD_GENERATE_STATS_EXT: _Slot(T.BOOLEAN),
        A.SDPA_FWD_ALIBI_MASK_EXT: _FLAG,
        A.SDPA_FWD_PADDING_MASK_EXT: _FLAG,
        A.SDPA_FWD_CAUSAL_MASK_EXT: _FLAG,
        A.SDPA_FWD_CAUSAL_MASK_BOTTOM_RIGHT_EXT: _FLAG,
        A.SDPA_FWD_DROPOUT_PROBABILITY_EXT: _Slot(T.FLOAT),
        A.SDPA_FWD_ATTN_SCALE_VALUE_EXT: _Slot(T.FLOAT),
        A.SDPA_FWD_LEFT_BOUND_EXT: _Slot(T.INT64),
        A.SDPA_FWD_RIGHT_BOUND_EXT: _Slot(T.INT64),
        A.SDPA_FWD_MAX_SEQ_LEN_KV_EXT: _Slot(T.INT32),
        A.SDPA_FWD_DIAGONAL_ALIGNMENT_EXT: _Slot(
            T.DIAGONAL_ALIGNMENT, default=DiagonalAlignment.TOP_LEFT
        ),
        A.SDPA_FWD_MMA_CORE_MODE_EXT: _Slot(T.DATA_TYPE, default=DataType.NOT_SET),
        A.SDPA_FWD_IMPLEMENTATION_EXT: _Slot(T.ATTENTION_IMPLEMENTATION, default=0),
        A.SDPA_FWD_COMP_TYPE_EXT: _Slot(T.DATA_TYPE, default=DataType.NOT_SET),
        A.OPERATION_NAME_EXT: _Slot(T.CHAR),
    },
    _sdpa_rules("SdpaFwdOperationDescriptor", _SDPA_FWD_REQUIRED, A.SDPA_FWD_COMP_TYPE_EXT),
)

_SCHEMAS: dict[int, _Schema] = {
    D.TENSOR: _TENSOR,
    D.OPERATIONGRAPH: _GRAPH,
    D.OPERATION_SDPA_FWD: _SDPA_FWD,
    D.OPERATION_SDPA_BWD_DESCRIPTOR_EXT: _SDPA_BWD,
}

#: Descriptor types :class:`BackendDescriptor` can be created with.
SUPPORTED_DESCRIPTOR_TYPES: frozenset[D] = frozenset(D(t) for t in _SCHEMAS)


class BackendDescriptor:
    """One backend descriptor: typed attributes, set before and read after ``finalize()``.

    Args:
        descriptor_type: What the descriptor describes; one of ``TENSOR``, ``OPERATIONGRAPH``,
            ``OPERATION_SDPA_FWD`` and ``OPERATION_SDPA_BWD_DESCRIPTOR_EXT``.

    Raises:
        DescriptorError: ``NOT_SUPPORTED`` for any other descriptor type.

    Example:
        >>> from hipdnn_graph.descriptors.enums import AttributeName as A, AttributeType as T
        >>> from hipdnn_graph.descriptors.enums import DescriptorType
        >>> op = BackendDescriptor(DescriptorType.OPERATION_SDPA_BWD_DESCRIPTOR_EXT)
        >>> try:
        ...     op.finalize()
        ... except DescriptorError as err:
        ...     print(err)
        SdpaBwdOperationDescriptor::finalize() failed: Q tensor not set
    """

    __slots__ = ("_attrs", "_finalized", "_schema", "_type")

    def __init__(self, descriptor_type: D) -> None:
        schema = _SCHEMAS.get(descriptor_type)
        if schema is None:
            raise DescriptorError(
                Status.NOT_SUPPORTED,
                f"BackendDescriptor: descriptor type {descriptor_type!r} is not supported",
            )
        self._type = D(descriptor_type)
        self._schema = schema
        self._attrs: dict[int, list[Any]] = {}
        self._finalized = False

    @property
    def descriptor_type(self) -> D:
        """The descriptor's :class:`DescriptorType`."""
        return self._type

    @property
    def is_finalized(self) -> bool:
        """Whether :meth:`finalize` has succeeded."""
        return self._finalized

    def has_attribute(self, name: A) -> bool:
        """Whether ``name`` was set explicitly (defaults do not count).

        Args:
            name: The attribute id.

        Returns:
            True once :meth:`set_attribute` stored a value for ``name``.
        """
        return name in self._attrs

    def set_attribute(self, name: A, attr_type: T, values: Sequence[Any]) -> None:
        """Store ``values`` for attribute ``name``; a later call replaces them.

        Args:
            name: The attribute id.
            attr_type: The element type of ``values``; must be the slot's type.
            values: The elements: exactly one for scalar slots, one or more for vector slots
                (``TENSOR_DIMENSIONS``, ``TENSOR_STRIDES``, ``OPERATIONGRAPH_OPS``).

        Raises:
            DescriptorError: ``NOT_INITIALIZED`` after finalize, ``NOT_SUPPORTED`` for an attribute
                this descriptor type does not have, ``BAD_PARAM`` for a type mismatch, a wrong
                element count or an invalid value, ``BAD_PARAM_NOT_FINALIZED`` for a referenced
                descriptor that is not finalized.
        """
        schema = self._schema
        if self._finalized:
            raise DescriptorError(
                Status.NOT_INITIALIZED,
                f"{schema.class_name}::setAttribute() failed: Already finalized.",
            )
        slot = schema.slots.get(name)
        if slot is None:
            raise DescriptorError(
                Status.NOT_SUPPORTED,
                f"{schema.class_name}::setAttribute: attributeName not supported",
            )
        prefix = schema.class_name + "::setAttribute()"
        if attr_type != slot.attr_type:
            raise DescriptorError(Status.BAD_PARAM, f"{prefix}: attributeType mismatch")
        if not isinstance(values, (list, tuple)):
            raise DescriptorError(Status.BAD_PARAM, f"{prefix}: values must be a list")
        if slot.many:
            if not values:
                raise DescriptorError(Status.BAD_PARAM, f"{prefix}: elementCount must be positive")
        elif len(values) != 1:
            raise DescriptorError(Status.BAD_PARAM, f"{prefix}: elementCount is not 1")
        if slot.refs:
            for desc in values:
                if not isinstance(desc, BackendDescriptor):
                    raise DescriptorError(
                        Status.BAD_PARAM_NULL_POINTER, f"{prefix}: descriptor is null"
                    )
                if desc._type not in slot.refs:
                    raise DescriptorError(Status.BAD_PARAM, f"{prefix}: descriptor type mismatch")
                if not desc._finalized:
                    raise DescriptorError(
                        Status.BAD_PARAM_NOT_FINALIZED, f"{prefix}: descriptor not finalized"
                    )
            self._attrs[name] = list(values)
            return
        check = _CHECKS[slot.attr_type]
        try:
            self._attrs[name] = [check(v) for v in values]
        except ValueError:
            raise DescriptorError(Status.BAD_PARAM, f"{prefix}: invalid value") from None

    def get_attribute(self, name: A, attr_type: T) -> list[Any]:
        """Read attribute ``name`` of a finalized descriptor.

        Args:
            name: The attribute id.
            attr_type: The element type expected; must be the slot's type.

        Returns:
            A new list with the stored values; the slot's default (``[False]`` for flags,
            ``[DataType.NOT_SET]``, ``[TOP_LEFT]``, ``[16]`` for the byte alignment) when never set;
            ``[]`` for an unset optional slot, as hipDNN reports an element count of 0.

        Raises:
            DescriptorError: ``NOT_INITIALIZED`` before finalize, ``NOT_SUPPORTED`` for an attribute
                this descriptor type does not have, ``BAD_PARAM`` for a type mismatch.
        """
        schema = self._schema
        if not self._finalized:
            raise DescriptorError(
                Status.NOT_INITIALIZED,
                f"{schema.class_name}::getAttribute() failed: Not finalized.",
            )
        slot = schema.slots.get(name)
        if slot is None:
            raise DescriptorError(
                Status.NOT_SUPPORTED,
                f"{schema.class_name}::getAttribute: attributeName not supported",
            )
        if attr_type != slot.attr_type:
            raise DescriptorError(
                Status.BAD_PARAM, f"{schema.class_name}::getAttribute(): attributeType mismatch"
            )
        stored = self._attrs.get(name)
        if stored is not None:
            return list(stored)
        return [] if slot.default is None else [slot.default]

    def finalize(self) -> None:
        """Check the required slots, in hipDNN's order, and freeze the descriptor.

        Finalizing an already finalized descriptor does nothing (as in hipDNN).

        Raises:
            DescriptorError: ``BAD_PARAM`` with hipDNN's message for the first broken rule, e.g.
                ``SdpaBwdOperationDescriptor::finalize() failed: dO tensor not set``.
        """
        if self._finalized:
            return
        attrs = self._attrs
        for broken, message in self._schema.rules:
            if broken(attrs):
                raise DescriptorError(Status.BAD_PARAM, message)
        self._finalized = True

    def __repr__(self) -> str:
        state = "finalized" if self._finalized else "open"
        names = ", ".join(A(n).name for n in self._attrs)
        return f"BackendDescriptor({self._type.name}, {state}, [{names}])"
