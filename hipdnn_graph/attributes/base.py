"""Shared machinery of node attributes: named input/output slots, name, compute type, and
hipDNN's record of cuDNN-compatibility setters that hipDNN does not support."""

from __future__ import annotations

import math
from enum import IntEnum
from numbers import Real
from typing import Annotated, Any, ClassVar, Self

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr

from ..changes import STAMP_SLOT, touch
from ..errors import HipdnnError
from ..tensor import DataTypeLike, TensorAttributes
from ..tensor_input import as_data_type, as_flag, as_float32, as_index, as_text, keyword
from ..types import DataType, DiagonalAlignment, ErrorCode
from .graph_attributes import GraphAttributes

__all__ = ["MaskWindow", "NodeAttributes", "SdpaCommonAttributes"]


class NodeAttributes(BaseModel):
    """Base of every node's attributes: ``inputs``/``outputs`` keyed by the node's slot enums."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    # the change clock's time of the last change (see :mod:`hipdnn_graph.changes`)
    __slots__ = (STAMP_SLOT,)

    InputNames: ClassVar[type[IntEnum]]
    OutputNames: ClassVar[type[IntEnum]]
    # slot name -> member, for fast lookups by name (filled per subclass)
    _IN: ClassVar[dict[str, Any]] = {}
    _OUT: ClassVar[dict[str, Any]] = {}

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if "InputNames" in cls.__dict__:
            cls._IN = dict(cls.InputNames.__members__)
        if "OutputNames" in cls.__dict__:
            cls._OUT = dict(cls.OutputNames.__members__)

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

    def set_compute_data_type(self, data_type: DataTypeLike) -> Self:
        """Set the type the node computes in (defaults to the graph's)."""
        self.compute_data_type = as_data_type(data_type)
        return self

    def get_compute_data_type(self) -> DataType:
        return self.compute_data_type

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


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _real_float32(value: Any, what: str) -> float:
    """``value`` (a real number, not a bool) rounded to float32; ``inf`` when it overflows."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"{what} must be a float, got {type(value).__name__}"
        )
    try:
        return as_float32(float(value))
    except OverflowError:  # an int too large for a double
        return math.inf


def checked_attn_scale(value: Any) -> float:
    """A scale for ``attn_scale_value``: finite once rounded to float32, as hipDNN stores it.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for NaN, ±inf or a value that overflows float32.
    """
    rounded = _real_float32(value, "attn_scale")
    if not math.isfinite(rounded):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"attn_scale must be a finite number that fits in float32, got {_short(value)}",
        )
    return rounded


def checked_dropout_probability(value: Any) -> float:
    """A dropout probability in ``[0, 1)`` once rounded to float32, as hipDNN stores it.

    Raises:
        HipdnnError: ``INVALID_VALUE`` outside ``[0, 1)`` (NaN included).
    """
    rounded = _real_float32(value, "dropout probability")
    if not 0.0 <= rounded < 1.0:
        note = f" ({rounded!r} as float32)" if rounded != value else ""
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"dropout probability must be in [0, 1), got {_short(value)}{note}",
        )
    return rounded


def _bound(value: Any, what: str) -> int | None:
    """A diagonal-band bound: ``None``, or an integer in int64 (hipDNN's type for it)."""
    if value is None:
        return None
    bound = as_index(value, what)
    if not -(2**63) <= bound < 2**63:
        message = f"{what} must be a 64-bit integer (hipDNN's int64), got {bound}"
        raise HipdnnError(ErrorCode.INVALID_VALUE, message)
    return bound


def _optional(check: Any) -> BeforeValidator:
    return BeforeValidator(lambda value: None if value is None else check(value))


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


class MaskWindow(BaseModel):
    """The effective attention window of an SDPA node, resolved from its mask flags.

    Key ``j`` is visible to query ``i`` iff ``j <= i + offset + right_bound`` (when a right bound
    is set) and ``j >= i + offset - left_bound`` (when a left bound is set), where ``offset`` is 0
    for top-left alignment and ``seq_kv - seq_q`` (per batch, with padding) for bottom-right.
    """

    model_config = ConfigDict(frozen=True)

    bottom_right: bool = False
    left_bound: int | None = None
    right_bound: int | None = None

    @property
    def is_full(self) -> bool:
        """True when no diagonal constraint applies."""
        return self.left_bound is None and self.right_bound is None

    def within(self, seq_q: int, seq_kv: int) -> MaskWindow:
        """The same window for ``seq_q`` queries and ``seq_kv`` keys, its bounds clamped to
        ``±(seq_q + seq_kv + 1)``.

        A key and a query are never more than ``seq_q + seq_kv - 1`` apart (padding included:
        the bottom-right offset lies in ``[-seq_q, seq_kv]``), so a bound past that distance hides
        every key or none, exactly as the clamped one does; engines then compute
        ``i + offset + bound`` in int64 without overflow, for any int64 bound hipDNN can hold.

        Example:
            >>> MaskWindow(left_bound=-(2**63), right_bound=2**63 - 1).within(4, 6)
            MaskWindow(bottom_right=False, left_bound=-11, right_bound=11)
        """
        span = seq_q + seq_kv + 1
        left, right = self.left_bound, self.right_bound
        if left is not None:
            left = max(-span, min(left, span))
        if right is not None:
            right = max(-span, min(right, span))
        if left == self.left_bound and right == self.right_bound:
            return self
        return MaskWindow(bottom_right=self.bottom_right, left_bound=left, right_bound=right)


class SdpaCommonAttributes(NodeAttributes):
    """Slots, flags and scalars shared by SDPA forward and backward attributes."""

    # Keywords get the setters' checks (bools only for flags, finite float32 scalars, ...).
    alibi_mask: Annotated[bool, keyword(as_flag, "alibi_mask")] = False
    padding_mask: Annotated[bool, keyword(as_flag, "padding_mask")] = False
    causal_mask: Annotated[bool, keyword(as_flag, "causal_mask")] = False
    causal_mask_bottom_right: Annotated[bool, keyword(as_flag, "causal_mask_bottom_right")] = False
    dropout_probability: Annotated[float | None, _optional(checked_dropout_probability)] = None
    attn_scale_value: Annotated[float | None, _optional(checked_attn_scale)] = None
    left_bound: Annotated[int | None, keyword(_bound, "left_bound")] = None
    right_bound: Annotated[int | None, keyword(_bound, "right_bound")] = None
    diagonal_alignment: DiagonalAlignment = DiagonalAlignment.TOP_LEFT

    # ----- input slots common to forward and backward -----
    def set_q(self, tensor: TensorAttributes | None) -> Self:
        return self._set_input(self._IN["Q"], tensor)

    def set_k(self, tensor: TensorAttributes | None) -> Self:
        return self._set_input(self._IN["K"], tensor)

    def set_v(self, tensor: TensorAttributes | None) -> Self:
        return self._set_input(self._IN["V"], tensor)

    def set_attn_scale(self, scale: TensorAttributes | float | None) -> Self:
        """A scale tensor (pass-by-value scalar), or a float that sets ``attn_scale_value``."""
        if isinstance(scale, TensorAttributes) or scale is None:
            return self._set_input(self._IN["Attn_scale"], scale)
        if isinstance(scale, bool) or not isinstance(scale, Real):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"attn_scale must be a float or a TensorAttributes, got {type(scale).__name__}",
            )
        self.attn_scale_value = checked_attn_scale(scale)
        return self

    def set_bias(self, tensor: TensorAttributes | None) -> Self:
        return self._set_input(self._IN["Bias"], tensor)

    def set_seq_len_q(self, tensor: TensorAttributes | None) -> Self:
        return self._set_input(self._IN["SEQ_LEN_Q"], tensor)

    def set_seq_len_kv(self, tensor: TensorAttributes | None) -> Self:
        return self._set_input(self._IN["SEQ_LEN_KV"], tensor)

    def set_seed(self, tensor: TensorAttributes | float | None) -> Self:
        return self._set_input(self._IN["Seed"], tensor)

    def set_offset(self, tensor: TensorAttributes | float | None) -> Self:
        return self._set_input(self._IN["Offset"], tensor)

    def set_dropout_mask(self, tensor: TensorAttributes | None) -> Self:
        return self._set_input(self._IN["Dropout_mask"], tensor)

    def set_dropout_scale(self, tensor: TensorAttributes | float | None) -> Self:
        return self._set_input(self._IN["Dropout_scale"], tensor)

    def get_q(self) -> TensorAttributes | None:
        return self.inputs.get(self._IN["Q"])

    def get_k(self) -> TensorAttributes | None:
        return self.inputs.get(self._IN["K"])

    def get_v(self) -> TensorAttributes | None:
        return self.inputs.get(self._IN["V"])

    def get_attn_scale(self) -> TensorAttributes | None:
        return self.inputs.get(self._IN["Attn_scale"])

    def get_bias(self) -> TensorAttributes | None:
        return self.inputs.get(self._IN["Bias"])

    def get_seq_len_q(self) -> TensorAttributes | None:
        return self.inputs.get(self._IN["SEQ_LEN_Q"])

    def get_seq_len_kv(self) -> TensorAttributes | None:
        return self.inputs.get(self._IN["SEQ_LEN_KV"])

    def get_seed(self) -> TensorAttributes | None:
        return self.inputs.get(self._IN["Seed"])

    def get_offset(self) -> TensorAttributes | None:
        return self.inputs.get(self._IN["Offset"])

    def get_dropout_mask(self) -> TensorAttributes | None:
        return self.inputs.get(self._IN["Dropout_mask"])

    def get_dropout_scale(self) -> TensorAttributes | None:
        return self.inputs.get(self._IN["Dropout_scale"])

    # ----- flags and scalars -----
    def set_alibi_mask(self, value: bool) -> Self:
        self.alibi_mask = as_flag(value, "alibi_mask")
        return self

    def set_padding_mask(self, value: bool) -> Self:
        self.padding_mask = as_flag(value, "padding_mask")
        return self

    def set_causal_mask(self, value: bool) -> Self:
        """Causal mask aligned top-left (key ``j`` visible to query ``i`` iff ``j <= i``)."""
        self.causal_mask = as_flag(value, "causal_mask")
        return self

    def set_causal_mask_bottom_right(self, value: bool) -> Self:
        """Causal mask aligned bottom-right (``j <= i + seq_kv - seq_q``)."""
        self.causal_mask_bottom_right = as_flag(value, "causal_mask_bottom_right")
        return self

    def set_diagonal_band_left_bound(self, value: int | None) -> Self:
        """Hide keys ``j < i + offset - value`` (``None``: no left bound); any int64.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not an int64 (hipDNN's type).
        """
        self.left_bound = _bound(value, "diagonal_band_left_bound")
        return self

    def set_diagonal_band_right_bound(self, value: int | None) -> Self:
        """Hide keys ``j > i + offset + value`` (``None``: no right bound); any int64.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not an int64 (hipDNN's type).
        """
        self.right_bound = _bound(value, "diagonal_band_right_bound")
        return self

    def set_sliding_window_length(self, value: int) -> Self:
        """cuDNN spelling: sets the left diagonal-band bound."""
        return self.set_diagonal_band_left_bound(value)

    def set_diagonal_alignment(self, value: DiagonalAlignment | int) -> Self:
        try:
            self.diagonal_alignment = DiagonalAlignment(value)
        except ValueError:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, f"Unknown diagonal alignment {value!r}"
            ) from None
        return self

    def get_alibi_mask(self) -> bool:
        return self.alibi_mask

    def get_padding_mask(self) -> bool:
        return self.padding_mask

    def get_causal_mask(self) -> bool:
        return self.causal_mask

    def get_causal_mask_bottom_right(self) -> bool:
        return self.causal_mask_bottom_right

    def get_dropout_probability(self) -> float | None:
        return self.dropout_probability

    def get_attn_scale_value(self) -> float | None:
        return self.attn_scale_value

    def get_diagonal_band_left_bound(self) -> int | None:
        return self.left_bound

    def get_diagonal_band_right_bound(self) -> int | None:
        return self.right_bound

    def get_diagonal_alignment(self) -> DiagonalAlignment:
        return self.diagonal_alignment

    def _set_dropout_probability(
        self,
        probability: float,
        seed: TensorAttributes | float | None,
        offset: TensorAttributes | float | None,
    ) -> Self:
        self.dropout_probability = checked_dropout_probability(probability)
        self._set_input(self._IN["Seed"], seed)
        return self._set_input(self._IN["Offset"], offset)

    # ----- cuDNN setters hipDNN records as unsupported (first reason wins) -----
    def set_score_mod(self, value: Any) -> Self:
        return self._record_unsupported("SDPA score modifier is unsupported by hipDNN")

    def set_max_total_seq_len_q(self, value: int) -> Self:
        return self._record_unsupported("SDPA max_total_seq_len_q is unsupported by hipDNN")

    def set_max_total_seq_len_kv(self, value: int) -> Self:
        return self._record_unsupported("SDPA max_total_seq_len_kv is unsupported by hipDNN")

    def mask_window(self) -> MaskWindow:
        """The effective window these flags describe, for engines.

        ``causal_mask`` is top-left with right bound 0, ``causal_mask_bottom_right`` is
        bottom-right with right bound 0; an explicit right bound tightens (never widens) a causal
        one. Alignment is bottom-right when ``causal_mask_bottom_right`` is set, or when
        ``diagonal_alignment`` is BOTTOM_RIGHT and the top-left ``causal_mask`` is not.

        Example:
            >>> from hipdnn_graph import SdpaBackwardAttributes
            >>> SdpaBackwardAttributes().set_causal_mask_bottom_right(True).mask_window()
            MaskWindow(bottom_right=True, left_bound=None, right_bound=0)
        """
        causal = self.causal_mask or self.causal_mask_bottom_right
        right = self.right_bound
        if causal:
            right = 0 if right is None else min(right, 0)
        bottom_right = self.causal_mask_bottom_right or (
            self.diagonal_alignment == DiagonalAlignment.BOTTOM_RIGHT and not self.causal_mask
        )
        return MaskWindow(bottom_right=bottom_right, left_bound=self.left_bound, right_bound=right)
