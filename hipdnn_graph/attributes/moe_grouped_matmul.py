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

from ..tensor import TensorAttributes
from ..tensor_input import keyword
from ..types import MoeGroupedMatmulMode
from .accessors import SlotSetter, member, slot
from .checks import bounded_int, enum_check
from .node_attributes import InputSlots, NodeAttributes, OutputSlots

__all__ = ["MoeGroupedMatmulAttributes", "MoeGroupedMatmulBwdAttributes"]


#: ``(value, what) -> MoeGroupedMatmulMode`` (a member or its number; not a bool)
_mode = enum_check(MoeGroupedMatmulMode)


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

    class InputNames(InputSlots):
        TOKEN = 0
        WEIGHT = 1
        FIRST_TOKEN_OFFSET = 2
        TOKEN_INDEX = 3
        TOKEN_KS = 4

    class OutputNames(OutputSlots):
        OUTPUT = 0

    mode: Annotated[MoeGroupedMatmulMode, keyword(_mode, "MoE grouped matmul mode")] = (
        MoeGroupedMatmulMode.NONE
    )
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

    set_mode, get_mode = member(
        "mode", _mode, "MoE grouped matmul mode", doc="How rows are routed."
    )
    set_top_k, get_top_k = member(
        "top_k", _top_k, doc="How many experts each token is routed to (``SCATTER`` mode)."
    )


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

    class InputNames(InputSlots):
        DOUTPUT = 0
        TOKEN = 1
        FIRST_TOKEN_OFFSET = 2

    class OutputNames(OutputSlots):
        DWEIGHT = 0

    set_doutput, get_doutput = slot("DOUTPUT")
    set_token, get_token = slot("TOKEN")
    set_first_token_offset, get_first_token_offset = slot("FIRST_TOKEN_OFFSET")
    set_dweight, get_dweight = slot("DWEIGHT")
