"""The ``set_<slot>``/``get_<slot>`` methods of a node's attributes, declared once per slot.

A family names its slots in its ``InputNames``/``OutputNames`` enums; ``set_x, get_x =
slot("X")`` in the class body then gives it hipDNN's two accessors of slot ``X``, whichever
direction the slot has (``MEAN`` is an input of batch-norm inference and an output of its
training forward). At class creation each declaration is replaced by a plain method, so a call
costs what a hand-written one does; the descriptor types tell a type checker what the methods
take and return (the attributes class itself, for chaining).

Example:
    >>> from hipdnn_graph import BatchnormInferenceAttributes, TensorAttributes
    >>> a = BatchnormInferenceAttributes().set_x(TensorAttributes(name="x"))
    >>> a.get_x().get_name(), a.get_y(), BatchnormInferenceAttributes.set_x.__doc__
    ('x', None, 'Put ``tensor`` in slot ``X`` (``None`` empties it).')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, overload

if TYPE_CHECKING:
    from ..tensor import TensorAttributes

__all__ = ["SlotGetter", "SlotSetter", "scalar_slot", "slot"]

V = TypeVar("V")
A = TypeVar("A")


class _Accessor:
    """A slot accessor declared in a class body, replaced there by the method it describes."""

    def __init__(self, slot: str) -> None:
        self.slot = slot

    def __set_name__(self, owner: type, name: str) -> None:
        method = self._method(self.slot)
        method.__name__ = name
        method.__qualname__ = f"{owner.__qualname__}.{name}"
        method.__module__ = owner.__module__
        setattr(owner, name, method)

    @staticmethod
    def _method(slot: str) -> Callable[..., Any]:
        raise NotImplementedError


class SlotSetter(_Accessor, Generic[V]):
    """``set_<slot>(tensor)``: put ``tensor`` (a number too, for a scalar slot) in the slot."""

    @staticmethod
    def _method(slot: str) -> Callable[..., Any]:
        def setter(self: Any, tensor: Any) -> Any:
            output, member = self._SLOTS[slot]
            if output:
                return self._set_output(member, tensor)
            return self._set_input(member, tensor)

        setter.__doc__ = f"Put ``tensor`` in slot ``{slot}`` (``None`` empties it)."
        return setter

    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: None, owner: type) -> Self: ...

        @overload
        def __get__(self, obj: A, owner: type) -> Callable[[V], A]: ...

        def __get__(self, obj: Any, owner: type) -> Any: ...


class SlotGetter(_Accessor):
    """``get_<slot>()``: the tensor in the slot, or ``None``."""

    @staticmethod
    def _method(slot: str) -> Callable[..., Any]:
        def getter(self: Any) -> Any:
            output, member = self._SLOTS[slot]
            return (self.outputs if output else self.inputs).get(member)

        getter.__doc__ = f"The tensor in slot ``{slot}``, or ``None``."
        return getter

    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: None, owner: type) -> Self: ...

        @overload
        def __get__(self, obj: object, owner: type) -> Callable[[], TensorAttributes | None]: ...

        def __get__(self, obj: Any, owner: type) -> Any: ...


def slot(name: str) -> tuple[SlotSetter[TensorAttributes | None], SlotGetter]:
    """The setter and getter of the tensor slot ``name``."""
    return SlotSetter(name), SlotGetter(name)


def scalar_slot(name: str) -> tuple[SlotSetter[TensorAttributes | float | None], SlotGetter]:
    """The setter and getter of the slot ``name``, which also takes a number (a pass-by-value
    slot of the family's ``NodeSpec``)."""
    return SlotSetter(name), SlotGetter(name)
