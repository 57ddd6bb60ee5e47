"""Attributes of the MoE grouped matmul nodes (hipDNN's ``MoeGroupedMatmulAttributes`` and
``MoeGroupedMatmulBwdAttributes``).

Example:
    >>> from hipdnn_graph import MoeGroupedMatmulAttributes, MoeGroupedMatmulMode
    >>> a = MoeGroupedMatmulAttributes().set_mode(MoeGroupedMatmulMode.SCATTER).set_top_k(2)
    >>> a.get_mode().name, a.get_top_k(), a.get_token_index()
    ('SCATTER', 2, None)
"""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator

from ..tensor import TensorAttributes
from ..tensor_input import keyword
from ..types import MoeGroupedMatmulMode
from .checks import bounded_int, mode_of
from .node_attributes import NodeAttributes
from .slots import SlotSetter, slot

__all__ = ["MoeGroupedMatmulAttributes", "MoeGroupedMatmulBwdAttributes"]


def _mode(value: Any) -> MoeGroupedMatmulMode:
    """``value`` as a :class:`MoeGroupedMatmulMode` (a member or its number; not a bool)."""
    return mode_of(MoeGroupedMatmulMode, value, "MoE grouped matmul mode")


def _top_k(value: Any, what: str) -> int:
    """``value`` as hipDNN's ``int32_t top_k``."""
    message = "{what} must be a 32-bit integer (hipDNN's int32), got {number}"
    return bounded_int(value, what, 32, message)


class MoeGroupedMatmulAttributes(NodeAttributes):
    """Configuration of a MoE grouped matmul: each group of routed rows times its expert's weight.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | TOKEN | [1, tokens, K] | | OUTPUT | [1, rows, N] (inferred) |
    | WEIGHT | [experts, K, N] | | | |
    | FIRST_TOKEN_OFFSET | [batch * experts, 1, 1], INT32 | | | |
    | TOKEN_INDEX | [1, routed, 1], INT32 (GATHER, SCATTER) | | | |
    | TOKEN_KS | [1, routed, 1], INT32 (SCATTER) | | | |

    ``rows`` is ``routed`` in ``GATHER`` mode, ``tokens`` otherwise. Members: ``mode``
    (:class:`MoeGroupedMatmulMode`, ``NONE`` unless set) and ``top_k`` (an int32, 0 unless set;
    ``SCATTER`` needs it in ``[1, experts]``).
    """

    class InputNames(IntEnum):
        """Input slots in hipDNN's order."""

        TOKEN = 0
        WEIGHT = 1
        FIRST_TOKEN_OFFSET = 2
        TOKEN_INDEX = 3
        TOKEN_KS = 4

    class OutputNames(IntEnum):
        """Output slots in hipDNN's order."""

        OUTPUT = 0

    mode: Annotated[MoeGroupedMatmulMode, BeforeValidator(_mode)] = MoeGroupedMatmulMode.NONE
    top_k: Annotated[int, keyword(_top_k, "top_k")] = 0

    set_token, get_token = slot("TOKEN")
    set_weight, get_weight = slot("WEIGHT")
    set_first_token_offset, get_first_token_offset = slot("FIRST_TOKEN_OFFSET")
    set_token_index, get_token_index = slot("TOKEN_INDEX")
    set_token_ks, get_token_ks = slot("TOKEN_KS")
    set_output: ClassVar[SlotSetter[TensorAttributes | None]] = SlotSetter("OUTPUT")

    def get_output(self, slot: IntEnum | None = None) -> TensorAttributes | None:
        """The OUTPUT tensor (hipDNN's getter), or the tensor of output ``slot`` when given."""
        return self.outputs.get(self.OutputNames.OUTPUT if slot is None else slot)

    def set_mode(self, value: MoeGroupedMatmulMode | int) -> MoeGroupedMatmulAttributes:
        """How rows are routed (:class:`MoeGroupedMatmulMode`).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a mode.
        """
        self.mode = _mode(value)
        return self

    def get_mode(self) -> MoeGroupedMatmulMode:
        return self.mode

    def set_top_k(self, value: int) -> MoeGroupedMatmulAttributes:
        """How many experts each token is routed to (``SCATTER`` mode).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not an int32.
        """
        self.top_k = _top_k(value, "top_k")
        return self

    def get_top_k(self) -> int:
        return self.top_k


class MoeGroupedMatmulBwdAttributes(NodeAttributes):
    """Configuration of a MoE grouped matmul weight gradient: per expert, its rows of TOKEN
    (transposed) times the same rows of DOUTPUT.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | DOUTPUT | [1, tokens, N] | | DWEIGHT | [experts, K, N] (inferred) |
    | TOKEN | [1, tokens, K] | | | |
    | FIRST_TOKEN_OFFSET | [experts, 1, 1], INT32 | | | |

    No members besides its tensors, its name and its compute type.
    """

    class InputNames(IntEnum):
        """Input slots in hipDNN's order."""

        DOUTPUT = 0
        TOKEN = 1
        FIRST_TOKEN_OFFSET = 2

    class OutputNames(IntEnum):
        """Output slots in hipDNN's order."""

        DWEIGHT = 0

    set_doutput, get_doutput = slot("DOUTPUT")
    set_token, get_token = slot("TOKEN")
    set_first_token_offset, get_first_token_offset = slot("FIRST_TOKEN_OFFSET")
    set_dweight, get_dweight = slot("DWEIGHT")
