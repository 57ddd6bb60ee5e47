"""Attributes of the layer-norm backward node (hipDNN's ``LayernormBackwardAttributes``).

Example:
    >>> from hipdnn_graph import LayernormBackwardAttributes, TensorAttributes
    >>> a = LayernormBackwardAttributes().set_saved_mean_and_inv_variance(
    ...     TensorAttributes(name="m"), TensorAttributes(name="iv"))
    >>> a.get_mean().get_name(), a.get_inv_variance().get_name(), a.get_normalized_dim_count()
    ('m', 'iv', 0)
"""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated

from pydantic import BeforeValidator

from ..tensor import TensorAttributes
from .base import NodeAttributes
from .layernorm import _int64

__all__ = ["LayernormBackwardAttributes"]


class LayernormBackwardAttributes(NodeAttributes):
    """Configuration of a layer-norm backward node: from DY, X, SCALE and (optionally) the
    forward pass's saved MEAN and INV_VARIANCE or an EPSILON, the gradients DX, DSCALE and DBIAS.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | DY | X's | | DX | X's (inferred) |
    | X | any rank | | DSCALE, DBIAS | SCALE's (inferred) |
    | SCALE | 1 where X is not normalized | | | |
    | MEAN, INV_VARIANCE (optional) | X's, 1 on normalized axes | | | |
    | EPSILON (optional) | one element, pass-by-value | | | |

    Member: ``normalized_dim_count`` (the number of trailing dims normalized; 0 until set, and
    then inferred from SCALE's dims).
    """

    class InputNames(IntEnum):
        """Input slots in hipDNN's order."""

        DY = 0
        X = 1
        SCALE = 2
        MEAN = 3
        INV_VARIANCE = 4
        EPSILON = 5

    class OutputNames(IntEnum):
        """Output slots in hipDNN's order."""

        DX = 0
        DSCALE = 1
        DBIAS = 2

    normalized_dim_count: Annotated[int, BeforeValidator(_int64)] = 0

    def set_dy(self, tensor: TensorAttributes | None) -> LayernormBackwardAttributes:
        return self._set_input(self.InputNames.DY, tensor)

    def set_x(self, tensor: TensorAttributes | None) -> LayernormBackwardAttributes:
        return self._set_input(self.InputNames.X, tensor)

    def set_scale(self, tensor: TensorAttributes | None) -> LayernormBackwardAttributes:
        return self._set_input(self.InputNames.SCALE, tensor)

    def set_mean(self, tensor: TensorAttributes | None) -> LayernormBackwardAttributes:
        return self._set_input(self.InputNames.MEAN, tensor)

    def set_inv_variance(self, tensor: TensorAttributes | None) -> LayernormBackwardAttributes:
        return self._set_input(self.InputNames.INV_VARIANCE, tensor)

    def set_epsilon(self, tensor: TensorAttributes | float | None) -> LayernormBackwardAttributes:
        return self._set_input(self.InputNames.EPSILON, tensor)

    def set_saved_mean_and_inv_variance(
        self, mean: TensorAttributes | None, inv_variance: TensorAttributes | None
    ) -> LayernormBackwardAttributes:
        """Set MEAN and INV_VARIANCE at once (the forward pass's saved statistics)."""
        return self.set_mean(mean).set_inv_variance(inv_variance)

    def set_dx(self, tensor: TensorAttributes | None) -> LayernormBackwardAttributes:
        return self._set_output(self.OutputNames.DX, tensor)

    def set_dscale(self, tensor: TensorAttributes | None) -> LayernormBackwardAttributes:
        return self._set_output(self.OutputNames.DSCALE, tensor)

    def set_dbias(self, tensor: TensorAttributes | None) -> LayernormBackwardAttributes:
        return self._set_output(self.OutputNames.DBIAS, tensor)

    def get_dy(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.DY)

    def get_x(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.X)

    def get_scale(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.SCALE)

    def get_mean(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.MEAN)

    def get_inv_variance(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.INV_VARIANCE)

    def get_epsilon(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.EPSILON)

    def get_dx(self) -> TensorAttributes | None:
        return self.outputs.get(self.OutputNames.DX)

    def get_dscale(self) -> TensorAttributes | None:
        return self.outputs.get(self.OutputNames.DSCALE)

    def get_dbias(self) -> TensorAttributes | None:
        return self.outputs.get(self.OutputNames.DBIAS)

    def set_normalized_dim_count(self, value: int) -> LayernormBackwardAttributes:
        """The number of trailing dims normalized (inferred from SCALE when 0 or less).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a 64-bit integer.
        """
        self.normalized_dim_count = _int64(value)
        return self

    def get_normalized_dim_count(self) -> int:
        return self.normalized_dim_count
