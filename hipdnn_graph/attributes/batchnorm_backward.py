"""Attributes of the batch-norm backward node (hipDNN's ``BatchnormBackwardAttributes``).

Example:
    >>> from hipdnn_graph import BatchnormBackwardAttributes, TensorAttributes
    >>> a = BatchnormBackwardAttributes().set_saved_mean_and_inv_variance(
    ...     TensorAttributes(name="m"), TensorAttributes(name="iv"))
    >>> a.get_mean().get_name(), a.get_inv_variance().get_name(), a.get_dx()
    ('m', 'iv', None)
"""

from __future__ import annotations

from enum import IntEnum

from ..tensor import TensorAttributes
from .batchnorm import PeerStatsAttributes

__all__ = ["BatchnormBackwardAttributes"]


class BatchnormBackwardAttributes(PeerStatsAttributes):
    """Configuration of a batch-norm backward node (spatial mode): from DY, X, SCALE and
    (optionally) the forward pass's saved MEAN and INV_VARIANCE, the gradients DX, DSCALE and
    DBIAS.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | DY | X's | | DX | X's (inferred) |
    | X | rank ≥ 2, ``[N, C, ...]`` | | DSCALE, DBIAS | ``[1, C, 1, ...]`` (inferred) |
    | SCALE | ``[1, C, 1, ...]`` | | | |
    | MEAN, INV_VARIANCE (both or neither) | ``[1, C, 1, ...]`` | | | |

    Peer statistics are held but not modelled (see :class:`BatchnormAttributes`).
    """

    class InputNames(IntEnum):
        """Input slots."""

        DY = 0
        X = 1
        SCALE = 2
        MEAN = 3
        INV_VARIANCE = 4

    class OutputNames(IntEnum):
        """Output slots."""

        DX = 0
        DSCALE = 1
        DBIAS = 2

    def set_dy(self, tensor: TensorAttributes | None) -> BatchnormBackwardAttributes:
        return self._set_input(self.InputNames.DY, tensor)

    def set_x(self, tensor: TensorAttributes | None) -> BatchnormBackwardAttributes:
        return self._set_input(self.InputNames.X, tensor)

    def set_scale(self, tensor: TensorAttributes | None) -> BatchnormBackwardAttributes:
        return self._set_input(self.InputNames.SCALE, tensor)

    def set_mean(self, tensor: TensorAttributes | None) -> BatchnormBackwardAttributes:
        return self._set_input(self.InputNames.MEAN, tensor)

    def set_inv_variance(self, tensor: TensorAttributes | None) -> BatchnormBackwardAttributes:
        return self._set_input(self.InputNames.INV_VARIANCE, tensor)

    def set_saved_mean_and_inv_variance(
        self, mean: TensorAttributes | None, inv_variance: TensorAttributes | None
    ) -> BatchnormBackwardAttributes:
        """Set MEAN and INV_VARIANCE at once (the forward pass's saved statistics)."""
        return self.set_mean(mean).set_inv_variance(inv_variance)

    def set_dx(self, tensor: TensorAttributes | None) -> BatchnormBackwardAttributes:
        return self._set_output(self.OutputNames.DX, tensor)

    def set_dscale(self, tensor: TensorAttributes | None) -> BatchnormBackwardAttributes:
        return self._set_output(self.OutputNames.DSCALE, tensor)

    def set_dbias(self, tensor: TensorAttributes | None) -> BatchnormBackwardAttributes:
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

    def get_dx(self) -> TensorAttributes | None:
        return self.outputs.get(self.OutputNames.DX)

    def get_dscale(self) -> TensorAttributes | None:
        return self.outputs.get(self.OutputNames.DSCALE)

    def get_dbias(self) -> TensorAttributes | None:
        return self.outputs.get(self.OutputNames.DBIAS)
