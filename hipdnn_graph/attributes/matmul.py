"""Attributes of the matmul node (hipDNN's ``MatmulAttributes``).

Example:
    >>> from hipdnn_graph import MatmulAttributes, TensorAttributes
    >>> a = MatmulAttributes().set_name("proj").set_a(TensorAttributes(name="x", dim=[4, 8]))
    >>> a.get_name(), a.get_a().get_name(), a.get_c()
    ('proj', 'x', None)
"""

from __future__ import annotations

from enum import IntEnum

from ..tensor import TensorAttributes
from .base import NodeAttributes

__all__ = ["MatmulAttributes"]


class MatmulAttributes(NodeAttributes):
    """Configuration of a matmul node: ``C = A @ B``, batched over leading dims.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | A | [..., M, K] | | C | [..., M, N] (inferred) |
    | B | [..., K, N], same rank as A | | | |

    Matmul has no members besides its tensors, its name and its compute type.
    """

    class InputNames(IntEnum):
        """Input slots in hipDNN's order."""

        A = 0
        B = 1

    class OutputNames(IntEnum):
        """Output slots in hipDNN's order."""

        C = 0

    def set_a(self, tensor: TensorAttributes | None) -> MatmulAttributes:
        return self._set_input(self.InputNames.A, tensor)

    def set_b(self, tensor: TensorAttributes | None) -> MatmulAttributes:
        return self._set_input(self.InputNames.B, tensor)

    def set_c(self, tensor: TensorAttributes | None) -> MatmulAttributes:
        return self._set_output(self.OutputNames.C, tensor)

    def get_a(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.A)

    def get_b(self) -> TensorAttributes | None:
        return self.inputs.get(self.InputNames.B)

    def get_c(self) -> TensorAttributes | None:
        return self.outputs.get(self.OutputNames.C)
