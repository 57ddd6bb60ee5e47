"""Tensor attributes: the shared handles that connect nodes in a graph.

A :class:`TensorAttributes` describes one tensor: its uid, name, data type, dims, strides, whether
it is virtual (an intermediate the graph allocates) and whether it is passed by value (a scalar).
Like hipDNN's ``shared_ptr<TensorAttributes>``, the object is a *handle*: the node that produces a
tensor and every node that reads it hold the same object, so objects compare and hash by identity.
Use :meth:`TensorAttributes.logically_equals` to compare content.

Example:
    >>> from hipdnn_graph import DataType, TensorAttributes, generate_strides
    >>> q = TensorAttributes().set_name("Q").set_dim([2, 8, 16, 64]).set_data_type(DataType.HALF)
    >>> q.set_stride(generate_strides(q.get_dim())).get_stride()
    [8192, 1024, 64, 1]
    >>> q.validate()  # raises HipdnnError on the first broken rule
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from .changes import CLOCK, STAMP_SLOT
from .errors import HipdnnError
from .tensor_input import (
    DataTypeLike,
    ScalarValue,
    as_data_type,
    as_flag,
    as_index,
    as_int_list,
    as_optional_index,
    as_scalar_value,
    as_text,
    keyword,
    scalar_type_of,
)
from .types import DataType, ErrorCode

if TYPE_CHECKING:
    from .attributes.graph_attributes import GraphAttributes

__all__ = ["DataTypeLike", "ScalarValue", "TensorAttributes", "assign_uid", "generate_strides"]

_DEFAULT_ALIGNMENT = 16


def generate_strides(dims: Sequence[int]) -> list[int]:
    """Packed row-major strides for ``dims`` (the last stride is 1).

    Example:
        >>> generate_strides([2, 8, 16, 64])
        [8192, 1024, 64, 1]
    """
    strides = []
    running = 1
    for d in reversed(dims):
        strides.append(running)
        running *= d if d > 1 else 1
    strides.reverse()
    return strides


class TensorAttributes(BaseModel):
    """One tensor of a graph (hipDNN's ``TensorAttributes``).

    Every setter returns ``self`` so calls chain. Fields can also be given as keywords:
    ``TensorAttributes(name="Q", dim=[1, 2, 3, 4], data_type=DataType.FLOAT)``.

    | field | default | meaning |
    |---|---|---|
    | ``uid`` | unset | the id used in variant packs; assigned during lowering if unset |
    | ``name`` | ``""`` | a label used in messages and for debugging |
    | ``data_type`` | ``NOT_SET`` | filled from the graph at validation when unset |
    | ``dim`` / ``stride`` | ``[]`` | shape and element strides |
    | ``is_virtual`` | ``False`` | a graph-owned intermediate (``set_output(True)`` clears it) |
    | ``is_pass_by_value`` | ``False`` | runtime pass-by-value scalar flag |
    | ``value`` | ``None`` | a compile-time constant scalar (``set_value``) |
    | ``alignment`` | ``16`` | required byte alignment of the buffer |
    | ``ragged_offset`` | ``None`` | the offsets tensor of a packed (ragged) batch |
    | ``ragged_offset_multiplier`` | ``1`` | element offset = stored offset × multiplier |

    Raises:
        HipdnnError: ``INVALID_VALUE`` when a keyword has the wrong type.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=False)
    # the change clock's time of the last field change (see :mod:`hipdnn_graph.changes`)
    __slots__ = (STAMP_SLOT,)

    # Keywords get the setters' checks: no bools or floats for integers, no strings for flags.
    uid: Annotated[int | None, keyword(as_optional_index, "TensorAttributes uid")] = None
    name: Annotated[str, keyword(as_text, "Tensor name")] = ""
    data_type: Annotated[DataType, BeforeValidator(as_data_type)] = DataType.NOT_SET
    dim: Annotated[list[int], keyword(as_int_list, "TensorAttributes dim")] = Field(
        default_factory=list
    )
    stride: Annotated[list[int], keyword(as_int_list, "TensorAttributes stride")] = Field(
        default_factory=list
    )
    is_virtual: Annotated[bool, keyword(as_flag, "TensorAttributes is_virtual")] = False
    is_pass_by_value: Annotated[bool, keyword(as_flag, "TensorAttributes is_pass_by_value")] = False
    value: Annotated[ScalarValue | None, BeforeValidator(as_scalar_value)] = None
    alignment: Annotated[int, keyword(as_index, "TensorAttributes alignment")] = _DEFAULT_ALIGNMENT
    ragged_offset: TensorAttributes | None = None
    ragged_offset_multiplier: Annotated[
        int, keyword(as_index, "TensorAttributes ragged_offset_multiplier")
    ] = 1

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, f"TensorAttributes {where}: {err['msg']}"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        # Setters already check their values; skip pydantic's generic path (hot in validate()).
        # Every field change is recorded, so that a graph holding this tensor knows it changed.
        if name in _FIELD_NAMES:
            self.__dict__[name] = value
            self.__pydantic_fields_set__.add(name)
            CLOCK.now += 1  # touch(self), inlined: inference sets fields of every output
            _set_stamp(self, CLOCK.now)
        else:
            super().__setattr__(name, value)

    # Tensors are shared handles: identity semantics, like shared_ptr.
    def __eq__(self, other: object) -> bool:
        return self is other

    #: identity hash, in C (a variant pack keyed by tensors hashes each key on every execute)
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        parts = [f"name={self.name!r}"]
        if self.uid is not None:
            parts.append(f"uid={self.uid}")
        parts += [f"data_type={self.data_type.name}", f"dim={self.dim}", f"stride={self.stride}"]
        if self.is_virtual:
            parts.append("virtual")
        if self.value is not None:
            parts.append(f"value={self.value!r}")
        return f"TensorAttributes({', '.join(parts)})"

    __str__ = __repr__

    # ----- setters (chainable) -----
    def set_uid(self, uid: int) -> TensorAttributes:
        """Set the uid used to bind this tensor in variant packs."""
        self.uid = as_index(uid, "Tensor uid")
        return self

    def clear_uid(self) -> TensorAttributes:
        """Forget the uid (it will be assigned again during lowering)."""
        self.uid = None
        return self

    def set_name(self, name: str) -> TensorAttributes:
        """Set the tensor's name.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a name that is not a string, or not valid
                Unicode text (a lone surrogate cannot be serialized).
        """
        self.name = as_text(name, "Tensor name")
        return self

    def set_data_type(self, data_type: DataTypeLike) -> TensorAttributes:
        """Set the element type."""
        self.data_type = as_data_type(data_type)
        return self

    def set_dim(self, dim: Sequence[int]) -> TensorAttributes:
        """Set the dims (shape)."""
        self.dim = as_int_list(dim, f"Tensor {self.name} dims")
        return self

    def set_stride(self, stride: Sequence[int]) -> TensorAttributes:
        """Set the element strides."""
        self.stride = as_int_list(stride, f"Tensor {self.name} strides")
        return self

    def set_is_virtual(self, is_virtual: bool) -> TensorAttributes:
        """Mark the tensor virtual (a graph-owned intermediate) or not; takes a bool."""
        self.is_virtual = as_flag(is_virtual, f"Tensor {self.name} is_virtual")
        return self

    def set_output(self, output: bool) -> TensorAttributes:
        """``set_output(True)`` makes a node output a real, caller-provided tensor."""
        return self.set_is_virtual(not as_flag(output, f"Tensor {self.name} set_output"))

    def set_is_pass_by_value(self, flag: bool) -> TensorAttributes:
        """Set the runtime pass-by-value flag, leaving any stored value intact."""
        self.is_pass_by_value = as_flag(flag, f"Tensor {self.name} is_pass_by_value")
        return self

    def set_as_runtime_parameter(self) -> TensorAttributes:
        """Mark as a runtime pass-by-value scalar and clear any stored value."""
        self.value = None
        self.is_pass_by_value = True
        return self

    def set_value(self, value: ScalarValue | np.generic) -> TensorAttributes:
        """Store a compile-time constant scalar.

        Sets dim ``[1]``, stride ``[1]`` and the data type from the value's type: ``float`` is
        FLOAT, ``int`` INT32 (INT64 outside the int32 range), ``bool`` BOOLEAN, and NumPy or
        ml_dtypes scalars map to their own type (``np.float64(0.5)`` is DOUBLE).

        Example:
            >>> from hipdnn_graph import TensorAttributes
            >>> t = TensorAttributes().set_value(0.125)
            >>> t.get_data_type().name, t.get_dim(), t.get_is_pass_by_value()
            ('FLOAT', [1], True)
        """
        py, dtype = scalar_type_of(value)
        self.value = py
        self.is_pass_by_value = False
        self.data_type = dtype
        self.dim = [1]
        self.stride = [1]
        return self

    def clear_value(self) -> TensorAttributes:
        """Drop the stored scalar value."""
        self.value = None
        return self

    def set_alignment(self, alignment: int) -> TensorAttributes:
        """Set the required byte alignment of the buffer (must be >= 1 at validation)."""
        self.alignment = as_index(alignment, f"Tensor {self.name} alignment")
        return self

    def set_ragged_offset(self, offsets: TensorAttributes) -> TensorAttributes:
        """Describe a packed (ragged) batch: ``offsets`` holds ``B + 1`` element offsets (shape
        ``[B + 1, 1, 1, 1]``, INT32 or INT64, hipDNN's and cuDNN's ``set_ragged_offset``);
        sequence ``b`` occupies elements ``[offsets[b], offsets[b + 1])`` of the buffer, times
        :meth:`set_ragged_offset_multiplier`. The dims stay the padded maximum shape.

        Example:
            >>> from hipdnn_graph import DataType, TensorAttributes
            >>> off = TensorAttributes(name="off", dim=[3, 1, 1, 1], stride=[1, 1, 1, 1],
            ...                        data_type=DataType.INT32)
            >>> q = TensorAttributes(name="q").set_ragged_offset(off)
            >>> q.get_ragged_offset() is off
            True

        Raises:
            HipdnnError: ``INVALID_VALUE`` when ``offsets`` is not a tensor.
        """
        if not isinstance(offsets, TensorAttributes):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"Tensor {self.name} ragged offset must be a tensor, got {type(offsets).__name__}",
            )
        self.ragged_offset = offsets
        return self

    def clear_ragged_offset(self) -> TensorAttributes:
        """Make the tensor dense again (no ragged offsets)."""
        self.ragged_offset = None
        return self

    def set_ragged_offset_multiplier(self, multiplier: int) -> TensorAttributes:
        """Set the unit of the stored offsets: element offset = stored offset × ``multiplier``
        (``H * D`` lets token-unit cumulative sequence lengths be the offsets); >= 1."""
        self.ragged_offset_multiplier = as_index(
            multiplier, f"Tensor {self.name} ragged_offset_multiplier"
        )
        return self

    # ----- getters -----
    def get_uid(self) -> int:
        """The uid, or 0 when none is set (hipDNN's default)."""
        return 0 if self.uid is None else self.uid

    def has_uid(self) -> bool:
        """Whether a uid has been set."""
        return self.uid is not None

    def get_name(self) -> str:
        return self.name

    def get_data_type(self) -> DataType:
        return self.data_type

    def get_dim(self) -> list[int]:
        return self.dim

    def get_stride(self) -> list[int]:
        return self.stride

    def get_is_virtual(self) -> bool:
        return self.is_virtual

    def get_is_runtime_pass_by_value(self) -> bool:
        """The raw runtime pass-by-value flag."""
        return self.is_pass_by_value

    def get_is_pass_by_value(self) -> bool:
        """True if the runtime flag is set or a value is held."""
        return self.is_pass_by_value or self.value is not None

    def get_value(self) -> ScalarValue | None:
        """The stored scalar, or ``None``."""
        return self.value

    def get_alignment(self) -> int:
        return self.alignment

    def get_ragged_offset(self) -> TensorAttributes | None:
        """The offsets tensor of a packed batch, or ``None`` for a dense tensor."""
        return self.ragged_offset

    def get_ragged_offset_multiplier(self) -> int:
        return self.ragged_offset_multiplier

    def get_volume(self) -> int:
        """Product of the dims (1 for empty dims)."""
        volume = 1
        for d in self.dim:
            volume *= d
        return volume

    # ----- graph-time behaviour -----
    def _set_fields(self, values: dict[str, Any]) -> None:
        """Set already checked fields at once, recording one change (for inference)."""
        self.__dict__.update(values)
        self.__pydantic_fields_set__.update(values)
        CLOCK.now += 1
        _set_stamp(self, CLOCK.now)

    def fill_from_context(self, graph_attributes: GraphAttributes) -> TensorAttributes:
        """Fill an unset data type from the graph: intermediate type if virtual, else io type."""
        if not self.data_type:  # NOT_SET is 0
            data_type = context_data_type(self.is_virtual, graph_attributes)
            self._set_fields({"data_type": data_type})
        return self

    def validate(self) -> None:  # type: ignore[override]  # pydantic's is a deprecated alias
        """Check the tensor, raising on the first broken rule (hipDNN's order).

        ``check()`` is this same function under another name: it always raises, whatever a
        subclass makes of ``validate()`` (``hipdnn_graph.frontend.Tensor`` returns hipDNN's
        ``Error`` value from it); the graph calls ``check()``.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing data type or empty dims,
                ``INVALID_VALUE`` for the other rules.
        """
        fields = self.__dict__  # read once: every tensor of a graph is checked
        name, dim, virtual = fields["name"], fields["dim"], fields["is_virtual"]
        if not fields["data_type"]:  # NOT_SET is 0
            raise HipdnnError(
                ErrorCode.ATTRIBUTE_NOT_SET, f"Tensor {name} does not have a data type set"
            )
        if virtual and fields["is_pass_by_value"]:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"Tensor {name} cannot be virtual and runtime pass by value",
            )
        if virtual and fields["value"] is not None:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, f"Tensor {name} cannot be virtual and pass by value"
            )
        if len(dim) != len(fields["stride"]):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, f"Tensor {name} dims and strides have different sizes"
            )
        if not dim:
            raise HipdnnError(ErrorCode.ATTRIBUTE_NOT_SET, f"Tensor {name} dims must be non-empty")
        if min(dim) <= 0:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, f"Tensor {name} must have only positive dimensions"
            )
        if fields["alignment"] < 1:
            raise HipdnnError(ErrorCode.INVALID_VALUE, f"Tensor {name} alignment must be >= 1")
        if fields["ragged_offset"] is not None or fields["ragged_offset_multiplier"] != 1:
            check_ragged(self)

    #: The rules of :meth:`TensorAttributes.validate`, always raising, whatever a subclass makes
    #: of ``validate()`` (``hipdnn_graph.frontend.Tensor`` returns hipDNN's ``Error`` value from
    #: it, as hipDNN's Python bindings do). The graph calls this one for every tensor it checks;
    #: it is the same function object (not a method calling it), so a check is one call.
    check: ClassVar[Callable[[TensorAttributes], None]] = validate

    def logically_equals(self, other: TensorAttributes) -> bool:
        """Compare content (type, dims, strides, virtual flag, pass-by-value, raggedness),
        ignoring name/uid."""
        return (
            (self.ragged_offset is None) == (other.ragged_offset is None)
            and self.ragged_offset_multiplier == other.ragged_offset_multiplier
            and self.data_type == other.data_type
            and self.dim == other.dim
            and self.stride == other.stride
            and self.is_virtual == other.is_virtual
            and self.is_pass_by_value == other.is_pass_by_value
            and self.value == other.value
            and type(self.value) is type(other.value)
        )

    def clone(self) -> TensorAttributes:
        """A new, independent handle with the same content (uid included); a packed tensor's copy
        shares its offsets tensor (a handle, as hipDNN's ``shared_ptr``)."""
        copy = self.model_copy(deep=True)
        if self.ragged_offset is not None:
            copy.__dict__["ragged_offset"] = self.ragged_offset
        return copy


def check_ragged(tensor: TensorAttributes) -> None:
    """The rules of a packed (ragged) tensor: its offsets hold ``B + 1`` INT32 or INT64 values
    (shape ``[B + 1]`` or ``[B + 1, 1, 1, 1]``), are not ragged themselves, and the multiplier is
    at least 1. hipDNN's RFC 0014 states these rules without messages; the messages are ours.

    Raises:
        HipdnnError: ``INVALID_VALUE`` on the first broken rule.
    """
    name, offsets = tensor.name, tensor.ragged_offset
    if tensor.ragged_offset_multiplier < 1:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Tensor {name} ragged_offset_multiplier must be >= 1, "
            f"got {tensor.ragged_offset_multiplier}",
        )
    if offsets is None:
        return
    where = f"Tensor {name} ragged offset {offsets.name}"
    if tensor.is_virtual or tensor.get_is_pass_by_value():
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Tensor {name} cannot be ragged and virtual or pass by value",
        )
    if offsets.ragged_offset is not None:
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"{where} cannot be ragged itself")
    if offsets.data_type not in (DataType.INT32, DataType.INT64):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"{where} must have INT32 or INT64 data type, got {offsets.data_type.name}",
        )
    expected = tensor.dim[0] + 1
    if not offsets.dim or offsets.dim[0] != expected or any(d != 1 for d in offsets.dim[1:]):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"{where} must have dims [{expected}, 1, ...] (batch + 1), got {offsets.dim}",
        )


def context_data_type(is_virtual: bool, graph_attributes: GraphAttributes) -> DataType:
    """The type :meth:`TensorAttributes.fill_from_context` gives a tensor without one: the
    graph's intermediate type if the tensor is virtual, else its io type."""
    if is_virtual:
        return graph_attributes.intermediate_data_type
    return graph_attributes.io_data_type


_FIELD_NAMES = frozenset(TensorAttributes.model_fields)
_set_stamp = getattr(TensorAttributes, STAMP_SLOT).__set__


def assign_uid(tensor: TensorAttributes, uid: int) -> None:
    """Give ``tensor`` a uid chosen by lowering, without recording a change.

    Lowering only picks uids no tensor of the graph uses, which cannot break a rule that
    ``validate()`` checked, so the graph stays validated (a user's ``set_uid`` is recorded).
    """
    tensor.__dict__["uid"] = uid
    tensor.__pydantic_fields_set__.add("uid")
