"""Attributes of the batch-norm inference node that takes the variance and epsilon (hipDNN's
``BatchnormInferenceAttributesVarianceExt``).

Example:
    >>> from hipdnn_graph import BatchnormInferenceAttributesVarianceExt, TensorAttributes
    >>> a = BatchnormInferenceAttributesVarianceExt().set_variance(TensorAttributes(name="var"))
    >>> a.get_variance().get_name(), a.get_epsilon()
    ('var', None)
"""

from __future__ import annotations

from enum import IntEnum

from ..tensor import TensorAttributes
from .base import NodeAttributes

__all__ = ["BatchnormInferenceAttributesVarianceExt"]


class BatchnormInferenceAttributesVarianceExt(NodeAttributes):
    """Configuration of a batch-norm inference node from saved mean and variance (spatial
    mode): ``Y = (X - MEAN_c) / sqrt(VARIANCE_c + EPSILON) · SCALE_c + BIAS_c``.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | X | rank ≥ 2, ``[N, C, ...]`` | | Y | X's (inferred) |
    | MEAN, VARIANCE, SCALE, BIAS | ``[1, C, 1, ...]`` | | | |
    | EPSILON | set (hipDNN checks nothing more) | | | |
    """

    class InputNames(IntEnum):
        """Input slots in hipDNN's order."""

        X = 0
        MEAN = 1
        VARIANCE = 2
        SCALE = 3
        BIAS = 4
        EPSILON = 5

    class OutputNames(IntEnum):
        """Output slots in hipDNN's order."""

        Y = 0

    def set_x(self, tensor: TensorAttributes | None) -> BatchnormInferenceAttributesVarianceExt:
        return self._set_input(self.InputNames.X, tensor)

    def set_mean(self, tensor: TensorAttributes | None) -> BatchnormInferenceAttributesVarianceExt:
        return self._set_input(self.InputNames.MEAN, tensor)

    def set_variance(
        self, tensor: TensorAttributes | None
    ) -> BatchnormInferenceAttributesVarianceExt:
        return self._set_input(self.InputNames.VARIANCE, tensor)

    def set_scale(self, tensor: TensorAttributes | None) -> BatchnormInferenceAttributesVarianceExt:
        return self._set_input(self.InputNames.SCALE, tensor)

    def set_bias(self, tensor: TensorAttributes | None) -> BatchnormInferenceAttributesVarianceExt:
        return self._set_input(self.InputNames.BIAS, tensor)

    def set_epsilon(
        self, tensor: TensorAttributes | float | None
    ) -> BatchnormInferenceAttributesVarianceExt:
        return self._set_input(self.InputNames.EPSILON, tensor)

    def set_y(self, tensor: TensorAttributes | None) -> BatchnormInferenceAttributesVarianceExt:
        return self._set_output(self.OutputNames.Y, tensor)

    def get_x(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.X)

    def get_mean(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.MEAN)

    def get_variance(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.VARIANCE)

    def get_scale(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.SCALE)

    def get_bias(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.BIAS)

    def get_epsilon(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.EPSILON)

    def get_y(self) -> TensorAttributes | None:
        return self.outputs.get(self.OutputNames.Y)
