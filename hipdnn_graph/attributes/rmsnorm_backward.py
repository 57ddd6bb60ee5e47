"""Attributes of the RMSNorm backward node (hipDNN's ``RMSNormBackwardAttributes``).

Example:
    >>> from hipdnn_graph import RMSNormBackwardAttributes, TensorAttributes
    >>> a = RMSNormBackwardAttributes().set_inv_rms(TensorAttributes(name="r"))
    >>> a.get_inv_rms().get_name(), a.get_compute_dbias(), a.set_compute_dbias(True).get_dbias()
    ('r', False, None)
"""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated, Any

from pydantic import BeforeValidator

from ..tensor import TensorAttributes
from ..tensor_input import as_flag
from .base import NodeAttributes

__all__ = ["RMSNormBackwardAttributes"]


def _compute_dbias(value: Any) -> bool:
    return as_flag(value, "compute_dbias")


class RMSNormBackwardAttributes(NodeAttributes):
    """Configuration of an RMSNorm backward node: from DY, X, SCALE and the forward pass's saved
    INV_RMS, the gradients DX, DSCALE and (optionally) DBIAS.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | DY | X's | | DX | DY's (inferred) |
    | X | rank ≥ 2 | | DSCALE | SCALE's (inferred) |
    | SCALE | X's rank; 1 before the normalized shape | | DBIAS (optional) | SCALE's (inferred) |
    | INV_RMS | X's, 1 on normalized axes | | | |

    Member: ``compute_dbias`` (``False`` unless set): whether ``Graph.rmsnorm_backward`` creates
    the DBIAS output. It is not carried on the wire; a node read back has DBIAS when the wire
    names it.
    """

    class InputNames(IntEnum):
        """Input slots in hipDNN's order."""

        DY = 0
        X = 1
        SCALE = 2
        INV_RMS = 3

    class OutputNames(IntEnum):
        """Output slots in hipDNN's order."""

        DX = 0
        DSCALE = 1
        DBIAS = 2

    compute_dbias: Annotated[bool, BeforeValidator(_compute_dbias)] = False

    def set_dy(self, tensor: TensorAttributes | None) -> RMSNormBackwardAttributes:
        return self._set_input(self.InputNames.DY, tensor)

    def set_x(self, tensor: TensorAttributes | None) -> RMSNormBackwardAttributes:
        return self._set_input(self.InputNames.X, tensor)

    def set_scale(self, tensor: TensorAttributes | None) -> RMSNormBackwardAttributes:
        return self._set_input(self.InputNames.SCALE, tensor)

    def set_inv_rms(self, tensor: TensorAttributes | None) -> RMSNormBackwardAttributes:
        return self._set_input(self.InputNames.INV_RMS, tensor)

    def set_dx(self, tensor: TensorAttributes | None) -> RMSNormBackwardAttributes:
        return self._set_output(self.OutputNames.DX, tensor)

    def set_dscale(self, tensor: TensorAttributes | None) -> RMSNormBackwardAttributes:
        return self._set_output(self.OutputNames.DSCALE, tensor)

    def set_dbias(self, tensor: TensorAttributes | None) -> RMSNormBackwardAttributes:
        return self._set_output(self.OutputNames.DBIAS, tensor)

    def get_dy(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.DY)

    def get_x(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.X)

    def get_scale(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.SCALE)

    def get_inv_rms(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.INV_RMS)

    def get_dx(self) -> TensorAttributes | None:
        return self.outputs.get(self.OutputNames.DX)

    def get_dscale(self) -> TensorAttributes | None:
        return self.outputs.get(self.OutputNames.DSCALE)

    def get_dbias(self) -> TensorAttributes | None:
        return self.outputs.get(self.OutputNames.DBIAS)

    def set_compute_dbias(self, value: bool) -> RMSNormBackwardAttributes:
        """Whether ``Graph.rmsnorm_backward`` also creates the DBIAS output.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a bool.
        """
        self.compute_dbias = _compute_dbias(value)
        return self

    def has_dbias(self, value: bool) -> RMSNormBackwardAttributes:
        """hipDNN's fluent alias of :meth:`set_compute_dbias`.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a bool.
        """
        return self.set_compute_dbias(value)

    def get_compute_dbias(self) -> bool:
        return self.compute_dbias
