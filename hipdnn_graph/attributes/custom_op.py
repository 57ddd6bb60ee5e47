"""Attributes of the custom op node (hipDNN's ``CustomOpAttributes``): a plugin-defined operation
whose tensors are positional lists and whose configuration is an opaque byte payload.

Example:
    >>> from hipdnn_graph import CustomOpAttributes, TensorAttributes
    >>> a = CustomOpAttributes().set_custom_op_id("example.rope").set_data([1, 2])
    >>> a = a.set_inputs([TensorAttributes(name="x")])
    >>> a.get_custom_op_id(), a.get_data(), [t.get_name() for t in a.get_inputs()]
    ('example.rope', [1, 2], ['x'])
    >>> list(a.tensors_by_slot())
    ['IN_0']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator

from ..changes import touch
from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..tensor_input import as_text, keyword
from ..types import ErrorCode
from .accessors import member
from .node_attributes import InputSlots, NodeAttributes, OutputSlots

__all__ = ["CustomOpAttributes", "InputPosition", "OutputPosition", "TensorPosition"]


class TensorPosition(int):
    """A position in a node's positional tensor list: an ``int`` that has a slot name
    (``IN_<i>``/``OUT_<i>``), so that it keys the attributes' ``inputs``/``outputs`` as the
    named slots of the other families do.

    Example:
        >>> InputPosition(2).name, OutputPosition(0).name, sorted([InputPosition(1), 0])
        ('IN_2', 'OUT_0', [0, IN_1])
    """

    prefix: ClassVar[str] = "POS"

    @property
    def name(self) -> str:
        return f"{self.prefix}_{int(self)}"

    def __repr__(self) -> str:
        return self.name


class InputPosition(TensorPosition):
    """A position in a custom op's inputs (``IN_<i>``)."""

    prefix = "IN"


class OutputPosition(TensorPosition):
    """A position in a custom op's outputs (``OUT_<i>``)."""

    prefix = "OUT"


def _payload(value: Any, what: str = "data") -> bytes:
    """``value`` (bytes, or integers 0-255) as the opaque payload hipDNN keeps in a
    ``std::vector<uint8_t>``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for anything else.
    """
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"{what} must be bytes or a list of integers 0-255, got {type(value).__name__}",
        )
    items = list(value)
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item < 256:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, f"{what} must hold integers 0-255, got {item!r}"
            )
    return bytes(items)


class CustomOpAttributes(NodeAttributes):
    """Configuration of a custom op: tensors in, tensors out, and what only its plugin reads.

    | member | meaning |
    |---|---|
    | ``custom_op_id`` | the plugin operation, ``"<plugin>.<operation>"`` (``"example.rope"``) |
    | inputs | any number of tensors, in order (slots ``IN_0``, ``IN_1``, …) |
    | outputs | any number of tensors, in order (``OUT_0``, …); their dims are the caller's |
    | ``data`` | an opaque byte payload the plugin interprets |

    hipDNN does not know the operation: it carries the tensors and the payload, checks that an id
    is set, and infers nothing but data types.
    """

    class InputNames(InputSlots):
        """No named input slots: the inputs are a positional list."""

    class OutputNames(OutputSlots):
        """No named output slots: the outputs are a positional list."""

    custom_op_id: Annotated[str, keyword(as_text, "custom_op_id")] = ""
    data: Annotated[bytes, BeforeValidator(_payload)] = b""

    set_custom_op_id, get_custom_op_id = member(
        "custom_op_id", as_text, doc='The plugin operation, ``"<plugin>.<operation>"``.'
    )

    def _set_list(self, output: bool, tensors: Any) -> CustomOpAttributes:
        kind = "output" if output else "input"
        if isinstance(tensors, TensorAttributes) or not isinstance(tensors, Iterable):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"set_{kind}s() takes a list of TensorAttributes, got {type(tensors).__name__}",
            )
        items = list(tensors)
        for index, tensor in enumerate(items):
            if tensor is None:  # hipDNN's CustomOpNode::pre_validate_node message
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"Node {self.name} has null {kind} tensor at index {index}",
                )
            if not isinstance(tensor, TensorAttributes):
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE,
                    f"{kind} {index} must be a TensorAttributes, got {type(tensor).__name__}",
                )
        key = OutputPosition if output else InputPosition
        held = {key(index): tensor for index, tensor in enumerate(items)}
        if output:
            self.outputs = held
        else:
            self.inputs = held
        touch(self)
        return self

    def set_inputs(self, tensors: Iterable[TensorAttributes]) -> CustomOpAttributes:
        """The input tensors, in order (replacing any set before).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an entry that is ``None`` (hipDNN's pre-validation
                message, raised here) or not a tensor.
        """
        return self._set_list(False, tensors)

    def set_outputs(self, tensors: Iterable[TensorAttributes]) -> CustomOpAttributes:
        """The output tensors, in order (replacing any set before).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an entry that is ``None`` or not a tensor.
        """
        return self._set_list(True, tensors)

    def get_inputs(self) -> list[TensorAttributes]:
        return self.input_tensors()

    def get_outputs(self) -> list[TensorAttributes]:
        return self.output_tensors()

    def set_data(self, value: bytes | Iterable[int]) -> CustomOpAttributes:
        """The opaque payload (bytes, or integers 0-255).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for anything else.
        """
        self.data = _payload(value)
        return self

    def get_data(self) -> list[int]:
        """The payload as integers 0-255 (hipDNN's ``std::vector<uint8_t>``)."""
        return list(self.data)
