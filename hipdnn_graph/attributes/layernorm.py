"""Attributes of the layer-norm forward node (hipDNN's ``LayernormAttributes``).

Example:
    >>> from hipdnn_graph import LayernormAttributes, NormFwdPhase
    >>> a = LayernormAttributes().set_forward_phase(NormFwdPhase.INFERENCE)
    >>> a.get_forward_phase().name, a.get_normalized_dim_count(), a.get_mean()
    ('INFERENCE', 0, None)
"""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated, Any

from pydantic import BeforeValidator

from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..tensor_input import as_index
from ..types import ErrorCode, NormFwdPhase
from .base import NodeAttributes
from .rmsnorm import norm_fwd_phase

__all__ = ["LayernormAttributes"]


def _int64(value: Any) -> int:
    number = as_index(value, "normalized_dim_count")
    if not -(2**63) <= number < 2**63:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"normalized_dim_count {number} is not a 64-bit integer"
        )
    return number


class LayernormAttributes(NodeAttributes):
    """Configuration of a layer-norm forward node:
    ``Y = (X - mean) / sqrt(var + EPSILON) * SCALE + BIAS``, the statistics taken over the
    normalized dims.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | X | rank ≥ 1 | | Y | X's (inferred) |
    | SCALE | rank ≥ 1 (X's with 1 at index 0 when inferred) | | MEAN (not inference) | X's, 1 where SCALE is not (inferred) |
    | BIAS | SCALE's | | INV_VARIANCE (not inference) | as MEAN |
    | EPSILON | one element, pass-by-value | | | |

    Members: ``forward_phase`` (:class:`NormFwdPhase`, ``NOT_SET`` until set; refused at
    validation) and ``normalized_dim_count`` (an integer carried to the engines, 0 unless set).
    """  # noqa: E501

    class InputNames(IntEnum):
        """Input slots in hipDNN's order."""

        X = 0
        SCALE = 1
        BIAS = 2
        EPSILON = 3

    class OutputNames(IntEnum):
        """Output slots in hipDNN's order."""

        Y = 0
        MEAN = 1
        INV_VARIANCE = 2

    forward_phase: Annotated[NormFwdPhase, BeforeValidator(norm_fwd_phase)] = NormFwdPhase.NOT_SET
    normalized_dim_count: Annotated[int, BeforeValidator(_int64)] = 0

    def set_x(self, tensor: TensorAttributes | None) -> LayernormAttributes:
        return self._set_input(self.InputNames.X, tensor)

    def set_scale(self, tensor: TensorAttributes | None) -> LayernormAttributes:
        return self._set_input(self.InputNames.SCALE, tensor)

    def set_bias(self, tensor: TensorAttributes | None) -> LayernormAttributes:
        return self._set_input(self.InputNames.BIAS, tensor)

    def set_epsilon(self, tensor: TensorAttributes | float | None) -> LayernormAttributes:
        return self._set_input(self.InputNames.EPSILON, tensor)

    def set_y(self, tensor: TensorAttributes | None) -> LayernormAttributes:
        return self._set_output(self.OutputNames.Y, tensor)

    def set_mean(self, tensor: TensorAttributes | None) -> LayernormAttributes:
        return self._set_output(self.OutputNames.MEAN, tensor)

    def set_inv_variance(self, tensor: TensorAttributes | None) -> LayernormAttributes:
        return self._set_output(self.OutputNames.INV_VARIANCE, tensor)

    def get_x(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.X)

    def get_scale(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.SCALE)

    def get_bias(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.BIAS)

    def get_epsilon(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.EPSILON)

    def get_y(self) -> TensorAttributes | None:
        return self.outputs.get(self.OutputNames.Y)

    def get_mean(self) -> TensorAttributes | None:
        return self.outputs.get(self.OutputNames.MEAN)

    def get_inv_variance(self) -> TensorAttributes | None:
        return self.outputs.get(self.OutputNames.INV_VARIANCE)

    def set_forward_phase(self, value: NormFwdPhase | int) -> LayernormAttributes:
        """``TRAINING`` (also writes MEAN and INV_VARIANCE) or ``INFERENCE``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a phase.
        """
        self.forward_phase = norm_fwd_phase(value)
        return self

    def get_forward_phase(self) -> NormFwdPhase:
        return self.forward_phase

    def set_normalized_dim_count(self, value: int) -> LayernormAttributes:
        """The number of trailing dims normalized, as hipDNN carries it (no rule reads it).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a 64-bit integer.
        """
        self.normalized_dim_count = _int64(value)
        return self

    def get_normalized_dim_count(self) -> int:
        return self.normalized_dim_count
