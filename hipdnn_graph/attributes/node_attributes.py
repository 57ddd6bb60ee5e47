"""The base of every node's attributes: named input/output slots, name, compute type, and
hipDNN's record of cuDNN-compatibility setters that hipDNN does not support."""

from __future__ import annotations

from enum import IntEnum
from numbers import Real
from typing import Annotated, Any, ClassVar, Self

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr

from ..changes import STAMP_SLOT, touch
from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..tensor_input import as_data_type, as_text, keyword
from ..types import DataType, ErrorCode
from .accessors import Accessor, member
from .checks import data_type_check
from .graph_attributes import GraphAttributes

__all__ = ["InputSlots", "NodeAttributes", "OutputSlots", "scalar_slots"]


class InputSlots(IntEnum):
    """Input slots in hipDNN's order: the base of each family's ``InputNames``."""


class OutputSlots(IntEnum):
    """Output slots in hipDNN's order: the base of each family's ``OutputNames``."""


class NodeAttributes(BaseModel):
    """Base of every node's attributes: ``inputs``/``outputs`` keyed by the node's slot enums."""

    # the slot accessors (``set_x, get_x = slot("X")``) are methods, not fields
    model_config = ConfigDict(
        extra="forbid", arbitrary_types_allowed=True, ignored_types=(Accessor,)
    )
    # the change clock's time of the last change (see :mod:`hipdnn_graph.changes`)
    __slots__ = (STAMP_SLOT,)

    InputNames: ClassVar[type[IntEnum]]
    OutputNames: ClassVar[type[IntEnum]]
    # slot name -> member, for fast lookups by name (filled per subclass)
    _IN: ClassVar[dict[str, Any]] = {}
    _OUT: ClassVar[dict[str, Any]] = {}
    # slot name -> (is an output, member): what the slot accessors look up
    _SLOTS: ClassVar[dict[str, tuple[bool, Any]]] = {}

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if "InputNames" in cls.__dict__:
            cls._IN = dict(cls.InputNames.__members__)
        if "OutputNames" in cls.__dict__:
            cls._OUT = dict(cls.OutputNames.__members__)
        both = cls._IN.keys() & cls._OUT.keys()
        if both:  # a slot accessor finds its slot by name: the name must say the direction
            raise TypeError(f"{cls.__name__}: slots {sorted(both)} are inputs and outputs")
        cls._SLOTS = {name: (False, member) for name, member in cls._IN.items()}
        cls._SLOTS.update({name: (True, member) for name, member in cls._OUT.items()})

    name: Annotated[str, keyword(as_text, "Node name")] = ""
    compute_data_type: Annotated[DataType, BeforeValidator(as_data_type)] = DataType.NOT_SET
    inputs: dict[Any, TensorAttributes] = Field(default_factory=dict)
    outputs: dict[Any, TensorAttributes] = Field(default_factory=dict)
    _unsupported_reason: str | None = PrivateAttr(default=None)

    def __setattr__(self, name: str, value: Any) -> None:
        # Setters check their values (no validate_assignment): store fields directly, as
        # pydantic would, and record the change so that a graph holding the node validates again.
        if name in type(self).__pydantic_fields__:
            self.__dict__[name] = value
            self.__pydantic_fields_set__.add(name)
        else:
            super().__setattr__(name, value)
        touch(self)

    def set_name(self, name: str) -> Self:
        """Set the node's name (unnamed nodes get ``<Prefix>_<index>`` when added to a graph).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a name that is not a string, or not valid
                Unicode text (a lone surrogate cannot be serialized).
        """
        self.name = as_text(name, "Node name")
        return self

    def get_name(self) -> str:
        return self.name

    set_compute_data_type, get_compute_data_type = member(
        "compute_data_type",
        data_type_check,
        doc="Set the type the node computes in (defaults to the graph's).",
    )

    # ----- slots -----
    def _set_input(self, slot: IntEnum, tensor: TensorAttributes | float | None) -> Self:
        """Put ``tensor`` in input ``slot``; a scalar slot (pass-by-value in the family's
        :class:`~hipdnn_graph.descriptors.node_spec.NodeSpec`) also takes a Python or NumPy
        number, stored as a constant pass-by-value tensor (:meth:`TensorAttributes.set_value`)."""
        if tensor is None:
            self.inputs.pop(slot, None)
        elif isinstance(tensor, TensorAttributes):
            self.inputs[slot] = tensor
        else:
            self.inputs[slot] = _scalar_tensor(tensor, slot, scalar_slots(type(self)))
        touch(self)
        return self

    def _set_output(self, slot: IntEnum, tensor: TensorAttributes | None) -> Self:
        if tensor is None:
            self.outputs.pop(slot, None)
        else:
            self.outputs[slot] = _check_tensor(tensor, slot)
        touch(self)
        return self

    def get_input(self, slot: IntEnum) -> TensorAttributes | None:
        """The tensor in input ``slot``, or ``None``."""
        return self.inputs.get(slot)

    def get_output(self, slot: IntEnum) -> TensorAttributes | None:
        """The tensor in output ``slot``, or ``None``."""
        return self.outputs.get(slot)

    def input_tensors(self) -> list[TensorAttributes]:
        """Set input tensors in slot order (the slot enums' value order)."""
        inputs = self.inputs
        return list(map(inputs.__getitem__, sorted(inputs)))

    def output_tensors(self) -> list[TensorAttributes]:
        """Set output tensors in slot order (the slot enums' value order)."""
        outputs = self.outputs
        return list(map(outputs.__getitem__, sorted(outputs)))

    def tensors_by_slot(self) -> dict[str, TensorAttributes]:
        """Every set tensor by its slot's name, inputs then outputs.

        Example:
            >>> from hipdnn_graph import SdpaAttributes, TensorAttributes
            >>> a = SdpaAttributes().set_q(TensorAttributes(name="q", dim=[1, 1, 4, 8]))
            >>> {slot: t.name for slot, t in a.tensors_by_slot().items()}
            {'Q': 'q'}
        """
        slots = {s.name: t for s, t in self.inputs.items()}
        slots.update({s.name: t for s, t in self.outputs.items()})
        return slots

    # ----- unsupported usage (first recorded reason wins) -----
    def _record_unsupported(self, reason: str) -> Self:
        if self._unsupported_reason is None:
            self._unsupported_reason = reason
        return self

    def record_unsupported(self, reason: str) -> Self:
        """Record that a feature hipDNN does not support was asked for; ``validate()`` then fails
        with ``INVALID_VALUE`` and the first recorded reason (as the cuDNN-only setters do).

        Example:
            >>> from hipdnn_graph import SdpaAttributes
            >>> SdpaAttributes().record_unsupported("no").get_unsupported_reason()
            'no'
        """
        return self._record_unsupported(reason)

    def unmodelled_values(self) -> dict[str, Any]:
        """Values set for fields of hipDNN's table this project does not model, by wire name
        (none by default); the writers refuse any that is not the field's default."""
        return {}

    def has_unsupported_usage(self) -> bool:
        """Whether a setter hipDNN does not support was called."""
        private = self.__pydantic_private__  # read directly: checked for every node
        return private is not None and private.get("_unsupported_reason") is not None

    def get_unsupported_reason(self) -> str:
        """The first recorded unsupported-usage reason (``""`` when none)."""
        return self._unsupported_reason or ""

    # ----- graph context -----
    def fill_from_context(self, graph_attributes: GraphAttributes) -> Self:
        """Fill every set tensor's data type and an unset compute type from the graph."""
        for tensors in (self.inputs, self.outputs):
            for tensor in tensors.values():
                if not tensor.data_type:  # NOT_SET is 0; most tensors have a type already
                    tensor.fill_from_context(graph_attributes)
        if not self.compute_data_type:  # NOT_SET is 0
            self.compute_data_type = graph_attributes.get_compute_data_type()
        return self

    def copy_for_node(self) -> Self:
        """A copy whose slot maps are independent (tensor handles stay shared)."""
        clone = self.model_copy()
        clone.inputs = dict(self.inputs)
        clone.outputs = dict(self.outputs)
        clone._unsupported_reason = self._unsupported_reason
        return clone


def _check_tensor(tensor: Any, slot: IntEnum) -> TensorAttributes:
    if not isinstance(tensor, TensorAttributes):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Slot {slot.name} expects a TensorAttributes, got {type(tensor).__name__}",
        )
    return tensor


def scalar_slots(attributes_class: type[NodeAttributes]) -> frozenset[str]:
    """The names of the input slots of ``attributes_class`` that take a number: those its
    family's ``NodeSpec`` declares pass-by-value (the one place that says so).

    Example:
        >>> from hipdnn_graph import LayernormAttributes, MatmulAttributes
        >>> sorted(scalar_slots(LayernormAttributes)), sorted(scalar_slots(MatmulAttributes))
        (['EPSILON'], [])
    """
    from ..descriptors.node_spec import spec_for_attributes_class  # filled by the node modules

    try:
        spec = spec_for_attributes_class(attributes_class)
    except KeyError:  # attributes of no registered family
        return frozenset()
    return spec.pass_by_value_slots


def _scalar_tensor(value: Any, slot: IntEnum, scalars: frozenset[str]) -> TensorAttributes:
    """A number given to a scalar slot as a constant pass-by-value tensor.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for anything else (a bool, a string, a number given to a
            slot that is not a scalar).
    """
    number = not isinstance(value, bool | np.bool_) and isinstance(value, Real)
    if number and slot.name in scalars:
        return TensorAttributes().set_value(value)
    message = f"Slot {slot.name} expects a TensorAttributes, got {type(value).__name__}"
    if number and scalars:
        message += f" (numbers go to the scalar slots only: {', '.join(sorted(scalars))})"
    elif number:
        message += " (this node has no scalar slot that takes a number)"
    raise HipdnnError(ErrorCode.INVALID_VALUE, message)
