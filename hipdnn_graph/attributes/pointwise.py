"""Attributes of the pointwise node (hipDNN's ``PointwiseAttributes``).

Example:
    >>> from hipdnn_graph import PointwiseAttributes, PointwiseMode
    >>> a = PointwiseAttributes().set_mode(PointwiseMode.RELU_FWD).set_relu_lower_clip(0.1)
    >>> a.get_mode().name, a.get_relu_lower_clip()
    ('RELU_FWD', 0.10000000149011612)
"""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated, Any

from pydantic import BeforeValidator

from ..tensor_input import as_index, as_optional_index, keyword
from ..types import PointwiseMode
from .checks import mode_of, real_float32
from .node_attributes import NodeAttributes
from .slots import slot

__all__ = ["PointwiseAttributes"]


def _mode(value: Any) -> PointwiseMode:
    """``value`` as a :class:`PointwiseMode` (a member or its number; not a bool)."""
    return mode_of(PointwiseMode, value, "pointwise mode")


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

    class InputNames(IntEnum):
        """Input slots in hipDNN's order."""

        IN_0 = 0
        IN_1 = 1
        IN_2 = 2

    class OutputNames(IntEnum):
        """Output slots in hipDNN's order."""

        OUT_0 = 0

    mode: Annotated[PointwiseMode, BeforeValidator(_mode)] = PointwiseMode.NOT_SET
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
    def set_mode(self, value: PointwiseMode | int) -> PointwiseAttributes:
        """The operation (:class:`PointwiseMode`).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a mode.
        """
        self.mode = _mode(value)
        return self

    def set_relu_lower_clip(self, value: float) -> PointwiseAttributes:
        self.relu_lower_clip = real_float32(value, "relu_lower_clip")
        return self

    def set_relu_upper_clip(self, value: float) -> PointwiseAttributes:
        self.relu_upper_clip = real_float32(value, "relu_upper_clip")
        return self

    def set_relu_lower_clip_slope(self, value: float) -> PointwiseAttributes:
        self.relu_lower_clip_slope = real_float32(value, "relu_lower_clip_slope")
        return self

    def set_swish_beta(self, value: float) -> PointwiseAttributes:
        self.swish_beta = real_float32(value, "swish_beta")
        return self

    def set_elu_alpha(self, value: float) -> PointwiseAttributes:
        self.elu_alpha = real_float32(value, "elu_alpha")
        return self

    def set_softplus_beta(self, value: float) -> PointwiseAttributes:
        self.softplus_beta = real_float32(value, "softplus_beta")
        return self

    def set_axis(self, value: int) -> PointwiseAttributes:
        self.axis = as_index(value, "axis")
        return self

    def get_mode(self) -> PointwiseMode:
        return self.mode

    def get_relu_lower_clip(self) -> float | None:
        return self.relu_lower_clip

    def get_relu_upper_clip(self) -> float | None:
        return self.relu_upper_clip

    def get_relu_lower_clip_slope(self) -> float | None:
        return self.relu_lower_clip_slope

    def get_swish_beta(self) -> float | None:
        return self.swish_beta

    def get_elu_alpha(self) -> float | None:
        return self.elu_alpha

    def get_softplus_beta(self) -> float | None:
        return self.softplus_beta

    def get_axis(self) -> int | None:
        return self.axis
