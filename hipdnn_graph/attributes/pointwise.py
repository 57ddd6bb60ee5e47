"""Attributes of the pointwise node (hipDNN's ``PointwiseAttributes``).

Example:
    >>> from hipdnn_graph import PointwiseAttributes, PointwiseMode
    >>> a = PointwiseAttributes().set_mode(PointwiseMode.RELU_FWD).set_relu_lower_clip(0.1)
    >>> a.get_mode().name, a.get_relu_lower_clip()
    ('RELU_FWD', 0.10000000149011612)
"""

from __future__ import annotations

from typing import Annotated, Any

from ..tensor_input import as_index, as_optional_index, keyword
from ..types import PointwiseMode
from .accessors import member, optional_member, slot
from .checks import enum_check, real_float32
from .node_attributes import InputSlots, NodeAttributes, OutputSlots

__all__ = ["PointwiseAttributes"]


#: ``(value, what) -> PointwiseMode`` (a member or its number; not a bool)
_mode = enum_check(PointwiseMode)


def _optional_float(value: Any, what: str) -> float | None:
    return None if value is None else real_float32(value, what)


class PointwiseAttributes(NodeAttributes):
    """Configuration of a pointwise node: ``OUT_0 = mode(IN_0[, IN_1[, IN_2]])``.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | IN_0 | any | | OUT_0 | the inputs' common shape |
    | IN_1, IN_2 | broadcastable to OUT_0 (binary, ternary modes) | | | |

    Scalars (float32 as hipDNN stores them, ``None`` until set): ``relu_lower_clip``,
    ``relu_upper_clip``, ``relu_lower_clip_slope``, ``swish_beta``, ``elu_alpha``,
    ``softplus_beta``; ``axis`` (an integer, for ``GEN_INDEX``).
    """

    class InputNames(InputSlots):
        IN_0 = 0
        IN_1 = 1
        IN_2 = 2

    class OutputNames(OutputSlots):
        OUT_0 = 0

    mode: Annotated[PointwiseMode, keyword(_mode, "pointwise mode")] = PointwiseMode.NOT_SET
    relu_lower_clip: Annotated[float | None, keyword(_optional_float, "relu_lower_clip")] = None
    relu_upper_clip: Annotated[float | None, keyword(_optional_float, "relu_upper_clip")] = None
    relu_lower_clip_slope: Annotated[
        float | None, keyword(_optional_float, "relu_lower_clip_slope")
    ] = None
    axis: Annotated[int | None, keyword(as_optional_index, "axis")] = None
    swish_beta: Annotated[float | None, keyword(_optional_float, "swish_beta")] = None
    elu_alpha: Annotated[float | None, keyword(_optional_float, "elu_alpha")] = None
    softplus_beta: Annotated[float | None, keyword(_optional_float, "softplus_beta")] = None

    # ----- slots -----
    set_input_0, get_input_0 = slot("IN_0")
    set_input_1, get_input_1 = slot("IN_1")
    set_input_2, get_input_2 = slot("IN_2")
    set_output_0, get_output_0 = slot("OUT_0")

    # ----- scalars -----
    set_mode, get_mode = member("mode", _mode, "pointwise mode", doc="The operation.")
    set_relu_lower_clip, get_relu_lower_clip = optional_member("relu_lower_clip", real_float32)
    set_relu_upper_clip, get_relu_upper_clip = optional_member("relu_upper_clip", real_float32)
    set_relu_lower_clip_slope, get_relu_lower_clip_slope = optional_member(
        "relu_lower_clip_slope", real_float32
    )
    set_swish_beta, get_swish_beta = optional_member("swish_beta", real_float32)
    set_elu_alpha, get_elu_alpha = optional_member("elu_alpha", real_float32)
    set_softplus_beta, get_softplus_beta = optional_member("softplus_beta", real_float32)
    set_axis, get_axis = optional_member("axis", as_index)
