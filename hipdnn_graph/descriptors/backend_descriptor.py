"""The backend descriptor model: hipDNN's C API objects, in Python.

hipDNN lowers a graph to *backend descriptors*: typed bags of attributes that are set one by one,
then finalized, then read. This module reproduces that contract for the descriptor types the
frontend lowers to (tensor, operation graph, and each registered node family's operation, whose
schema its :class:`~.node_spec.NodeSpec` gives), including hipDNN's
status codes and messages (``projects/hipdnn/backend/src/descriptors/*.cpp``):

* setting an attribute on a finalized descriptor fails with
  ``<Class>::setAttribute() failed: Already finalized.`` (``NOT_INITIALIZED``);
* reading one before ``finalize()`` fails with ``<Class>::getAttribute() failed: Not finalized.``
  (``NOT_INITIALIZED``);
* an attribute type other than the slot's fails with
  ``<Class>::setAttribute(): attributeType mismatch`` (``BAD_PARAM``), an attribute the descriptor
  does not have with ``<Class>::setAttribute: attributeName not supported`` (``NOT_SUPPORTED``);
* ``finalize()`` checks the required slots in hipDNN's order, e.g.
  ``<Class>::finalize() failed: <slot> tensor not set`` (``BAD_PARAM``); finalizing twice is
  allowed, as in hipDNN.

Every failure raises :class:`DescriptorError`, a :class:`~hipdnn_graph.errors.HipdnnError` with code
``HIPDNN_BACKEND_ERROR`` (what hipDNN's frontend reports for a failing backend call) whose
``status`` is hipDNN's backend :class:`~hipdnn_graph.descriptors.enums.Status`.

Value conventions (``values`` is always a list): ``BOOLEAN`` → ``bool``; ``INT64``/``INT32`` →
``int``; ``FLOAT``/``DOUBLE`` → ``float``; ``DATA_TYPE`` → :class:`~hipdnn_graph.types.DataType`;
an enum attribute → the member of its spec's enum (:class:`~.node_spec.WireEnum`); ``CHAR`` →
one ``str`` (names) or one ``bytes`` object (``TENSOR_VALUE_EXT``, the pass-by-value bytes);
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

from collections.abc import Sequence
from enum import IntEnum
from typing import Any

from ..errors import HipdnnError
from ..types import ErrorCode
from .descriptor_schemas import _Slot, schema_for
from .enums import AttributeName as A
from .enums import AttributeType as T
from .enums import DescriptorType as D
from .enums import Status

__all__ = ["BackendDescriptor", "DescriptorError"]


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


def _reject(class_name: str, slot: _Slot, attr_type: T, values: object) -> None:
    """Raise the error for a call whose type, container or element count is wrong."""
    prefix = class_name + "::setAttribute()"
    if attr_type != slot.attr_type:
        raise DescriptorError(Status.BAD_PARAM, f"{prefix}: attributeType mismatch")
    if not isinstance(values, (list, tuple)):
        raise DescriptorError(Status.BAD_PARAM, f"{prefix}: values must be a list")
    if slot.many:
        raise DescriptorError(Status.BAD_PARAM, f"{prefix}: elementCount must be positive")
    raise DescriptorError(Status.BAD_PARAM, f"{prefix}: elementCount is not 1")


def _reject_reference(class_name: str, slot: _Slot, desc: object) -> None:
    """Raise the error for a descriptor value that cannot be referenced."""
    prefix = class_name + "::setAttribute()"
    if not isinstance(desc, BackendDescriptor):
        raise DescriptorError(Status.BAD_PARAM_NULL_POINTER, f"{prefix}: descriptor is null")
    if desc.descriptor_type not in slot.refs:
        raise DescriptorError(Status.BAD_PARAM, f"{prefix}: descriptor type mismatch")
    raise DescriptorError(Status.BAD_PARAM_NOT_FINALIZED, f"{prefix}: descriptor not finalized")


class BackendDescriptor:
    """One backend descriptor: typed attributes, set before and read after ``finalize()``.

    Args:
        descriptor_type: What the descriptor describes: ``TENSOR``, ``OPERATIONGRAPH`` or the
            operation of a registered node family (:func:`~.node_spec.node_specs`).

    Raises:
        DescriptorError: ``NOT_SUPPORTED`` for any other descriptor type.

    Example:
        >>> from hipdnn_graph.descriptors.enums import DescriptorType
        >>> t = BackendDescriptor(DescriptorType.TENSOR)
        >>> try:
        ...     t.finalize()
        ... except DescriptorError as err:
        ...     print(err)
        TensorDescriptor::finalize() failed: dimensions not set
    """

    __slots__ = ("_attrs", "_finalized", "_schema", "_type")

    def __init__(self, descriptor_type: D) -> None:
        schema = schema_for(descriptor_type)
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

    def has_attribute(self, name: int) -> bool:
        """Whether ``name`` was set explicitly (defaults do not count).

        Args:
            name: The attribute id.

        Returns:
            True once :meth:`set_attribute` stored a value for ``name``.
        """
        return name in self._attrs

    def set_attribute(self, name: int, attr_type: T, values: Sequence[Any]) -> None:
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
        slot = self._supported_slot(name, "setAttribute")
        if (
            attr_type != slot.attr_type
            or not isinstance(values, (list, tuple))
            or not values
            or (len(values) != 1 and not slot.many)
        ):
            _reject(schema.class_name, slot, attr_type, values)
        if slot.refs:
            for desc in values:
                if (
                    not isinstance(desc, BackendDescriptor)
                    or desc._type not in slot.refs
                    or not desc._finalized
                ):
                    _reject_reference(schema.class_name, slot, desc)
            self._attrs[name] = list(values)
            return
        check = slot.check
        try:
            self._attrs[name] = [check(v) for v in values] if slot.many else [check(values[0])]
        except ValueError:
            raise DescriptorError(
                Status.BAD_PARAM, f"{schema.class_name}::setAttribute(): invalid value"
            ) from None

    def get_attribute(self, name: int, attr_type: T) -> list[Any]:
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
        slot = self._supported_slot(name, "getAttribute")
        if attr_type != slot.attr_type:
            raise DescriptorError(
                Status.BAD_PARAM, f"{schema.class_name}::getAttribute(): attributeType mismatch"
            )
        stored = self._attrs.get(name)
        if stored is not None:
            return list(stored)
        return [] if slot.default is None else [slot.default]

    def _supported_slot(self, name: int, method: str) -> _Slot:
        """The schema's slot of attribute ``name``, for hipDNN's ``method`` (``setAttribute``
        or ``getAttribute``, named in the message).

        Raises:
            DescriptorError: ``NOT_SUPPORTED`` for an attribute this descriptor type does not
                have.
        """
        slot = self._schema.slots.get(name)
        if slot is None:
            raise DescriptorError(
                Status.NOT_SUPPORTED,
                f"{self._schema.class_name}::{method}: attributeName not supported",
            )
        return slot

    def finalize(self) -> None:
        """Check the required slots, in hipDNN's order, and freeze the descriptor.

        Finalizing an already finalized descriptor does nothing (as in hipDNN).

        Raises:
            DescriptorError: ``BAD_PARAM`` with hipDNN's message for the first broken rule, e.g.
                ``TensorDescriptor::finalize() failed: strides not set``.
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
        names = ", ".join(_attribute_name(n) for n in self._attrs)
        return f"BackendDescriptor({self._type.name}, {state}, [{names}])"


def _attribute_name(name: int) -> str:
    """An attribute id's name: its own enum's (a family's) or hipDNN's generic table's."""
    if isinstance(name, IntEnum):
        return name.name
    try:
        return A(name).name
    except ValueError:
        return str(name)
