"""Attributes of the batch-norm inference node (hipDNN's ``BatchnormInferenceAttributes``).

Example:
    >>> from hipdnn_graph import BatchnormInferenceAttributes, TensorAttributes
    >>> a = BatchnormInferenceAttributes().set_mean(TensorAttributes(name="running_mean"))
    >>> a.get_mean().get_name(), a.get_y()
    ('running_mean', None)
"""

from __future__ import annotations

from enum import IntEnum

from ..tensor import TensorAttributes
from .base import NodeAttributes

__all__ = ["BatchnormInferenceAttributes"]


class BatchnormInferenceAttributes(NodeAttributes):
    """Configuration of a batch-norm inference node (spatial mode), with saved statistics:
    ``Y = (X - MEAN_c) · INV_VARIANCE_c · SCALE_c + BIAS_c`` per channel ``c``.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | X | rank ≥ 2, ``[N, C, ...]`` | | Y | X's (inferred) |
    | MEAN, INV_VARIANCE, SCALE, BIAS | ``[1, C, 1, ...]`` | | | |

    There is no epsilon: INV_VARIANCE already holds ``1 / sqrt(var + eps)``.
    """

    class InputNames(IntEnum):
        """Input slots in hipDNN's order."""

        X = 0
        MEAN = 1
        INV_VARIANCE = 2
        SCALE = 3
        BIAS = 4

    class OutputNames(IntEnum):
        """Output slots in hipDNN's order."""

        Y = 0

    def set_x(self, tensor: TensorAttributes | None) -> BatchnormInferenceAttributes:
        return self._set_input(self.InputNames.X, tensor)

    def set_mean(self, tensor: TensorAttributes | None) -> BatchnormInferenceAttributes:
        return self._set_input(self.InputNames.MEAN, tensor)

    def set_inv_variance(self, tensor: TensorAttributes | None) -> BatchnormInferenceAttributes:
        return self._set_input(self.InputNames.INV_VARIANCE, tensor)

    def set_scale(self, tensor: TensorAttributes | None) -> BatchnormInferenceAttributes:
        return self._set_input(self.InputNames.SCALE, tensor)

    def set_bias(self, tensor: TensorAttributes | None) -> BatchnormInferenceAttributes:
        return self._set_input(self.InputNames.BIAS, tensor)

    def set_y(self, tensor: TensorAttributes | None) -> BatchnormInferenceAttributes:
        return self._set_output(self.OutputNames.Y, tensor)

    def get_x(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.X)

    def get_mean(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.MEAN)

    def get_inv_variance(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.INV_VARIANCE)

    def get_scale(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.SCALE)

    def get_bias(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.BIAS)

    def get_y(self) -> TensorAttributes | None:
        return self.outputs.get(self.OutputNames.Y)
