"""hipDNN's ``set_<x>``/``get_<x>`` methods of the attributes, declared once each.

* ``set_x, get_x = slot("X")``: the two accessors of tensor slot ``X`` (named in the family's
  ``InputNames``/``OutputNames``), whichever direction the slot has (``MEAN`` is an input of
  batch-norm inference and an output of its training forward).
* ``set_mode, get_mode = member("mode", check, "pointwise mode")``: the two accessors of the
  member ``mode``; the setter stores ``check(value, what)`` (which raises ``INVALID_VALUE`` with
  its message) and chains, the getter returns the member (a copy of a list).

At class creation each declaration is replaced by a plain method, so a call costs what a
hand-written one does; the descriptor types tell a type checker what the methods take and
return (the attributes class itself, for chaining).

Example:
    >>> from hipdnn_graph import BatchnormInferenceAttributes, TensorAttributes
    >>> a = BatchnormInferenceAttributes().set_x(TensorAttributes(name="x"))
    >>> a.get_x().get_name(), a.get_y(), BatchnormInferenceAttributes.set_x.__doc__
    ('x', None, 'Put ``tensor`` in slot ``X`` (``None`` empties it).')
    >>> from hipdnn_graph import ReductionAttributes
    >>> ReductionAttributes().set_is_deterministic(True).get_is_deterministic()
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, overload

if TYPE_CHECKING:
    from ..tensor import TensorAttributes

__all__ = [
    "Accessor",
    "Getter",
    "MemberGetter",
    "MemberSetter",
    "Setter",
    "SlotGetter",
    "SlotSetter",
    "member",
    "optional_member",
    "scalar_slot",
    "slot",
]

V = TypeVar("V")
A = TypeVar("A")
T = TypeVar("T")


class Accessor:
    """An accessor declared in a class body, replaced there by the method it describes."""

    def __init__(self, slot: str) -> None:
        self.slot = slot

    def __set_name__(self, owner: type, name: str) -> None:
        method = self._method(self.slot)
        method.__name__ = name
        method.__qualname__ = f"{owner.__qualname__}.{name}"
        method.__module__ = owner.__module__
        setattr(owner, name, method)

    def _method(self, slot: str) -> Callable[..., Any]:
        raise NotImplementedError


class Setter(Accessor, Generic[V]):
    """A ``set_<x>(value)`` that chains: typed as taking ``V`` and returning its class."""

    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: None, owner: type) -> Self: ...

        @overload
        def __get__(self, obj: A, owner: type) -> Callable[[V], A]: ...

        def __get__(self, obj: Any, owner: type) -> Any: ...


class Getter(Accessor, Generic[T]):
    """A ``get_<x>()``: typed as returning ``T``."""

    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: None, owner: type) -> Self: ...

        @overload
        def __get__(self, obj: object, owner: type) -> Callable[[], T]: ...

        def __get__(self, obj: Any, owner: type) -> Any: ...


class SlotSetter(Setter[V]):
    """``set_<slot>(tensor)``: put ``tensor`` (a number too, for a scalar slot) in the slot."""

    def _method(self, slot: str) -> Callable[..., Any]:
        def setter(self: Any, tensor: Any) -> Any:
            output, member = self._SLOTS[slot]
            if output:
                return self._set_output(member, tensor)
            return self._set_input(member, tensor)

        setter.__doc__ = f"Put ``tensor`` in slot ``{slot}`` (``None`` empties it)."
        return setter


class SlotGetter(Getter["TensorAttributes | None"]):
    """``get_<slot>()``: the tensor in the slot, or ``None``."""

    def _method(self, slot: str) -> Callable[..., Any]:
        def getter(self: Any) -> Any:
            output, member = self._SLOTS[slot]
            return (self.outputs if output else self.inputs).get(member)

        getter.__doc__ = f"The tensor in slot ``{slot}``, or ``None``."
        return getter


def slot(name: str) -> tuple[SlotSetter[TensorAttributes | None], SlotGetter]:
    """The setter and getter of the tensor slot ``name``."""
    return SlotSetter(name), SlotGetter(name)


def scalar_slot(name: str) -> tuple[SlotSetter[TensorAttributes | float | None], SlotGetter]:
    """The setter and getter of the slot ``name``, which also takes a number (a pass-by-value
    slot of the family's ``NodeSpec``)."""
    return SlotSetter(name), SlotGetter(name)


class MemberSetter(Setter[V]):
    """``set_<member>(value)``: store ``check(value, what)`` in the member and chain."""

    def __init__(self, field: str, check: Callable[[Any, str], Any], what: str, doc: str) -> None:
        super().__init__(field)
        self.check, self.what, self.doc = check, what, doc

    def _method(self, slot: str) -> Callable[..., Any]:
        check, what = self.check, self.what

        def setter(self: Any, value: Any) -> Any:
            setattr(self, slot, check(value, what))
            return self

        first = self.doc or f"Set ``{slot}``."
        raises = f"HipdnnError: ``INVALID_VALUE`` for a value ``{slot}`` cannot hold."
        setter.__doc__ = f"{first}\n\nRaises:\n    {raises}"
        return setter


class MemberGetter(Getter[T]):
    """``get_<member>()``: the member's value (a copy, for a list)."""

    def _method(self, slot: str) -> Callable[..., Any]:
        def getter(self: Any) -> Any:
            value = getattr(self, slot)
            return list(value) if value.__class__ is list else value

        getter.__doc__ = f"The value of ``{slot}``."
        return getter


def member(
    field: str, check: Callable[[V, str], T], what: str = "", *, doc: str = ""
) -> tuple[MemberSetter[V], MemberGetter[T]]:
    """The setter and getter of the member ``field``: the setter takes what ``check`` takes and
    stores ``check(value, what)`` (``what`` defaults to ``field``; ``doc``, the setter's first
    docstring line, to one naming the member)."""
    return MemberSetter(field, check, what or field, doc), MemberGetter(field)


def optional_member(
    field: str, check: Callable[[V, str], T], what: str = "", *, doc: str = ""
) -> tuple[MemberSetter[V], MemberGetter[T | None]]:
    """:func:`member` for a member that is ``None`` until set (the setter takes no ``None``)."""
    return MemberSetter(field, check, what or field, doc), MemberGetter(field)
