"""Attributes of the matmul node (hipDNN's ``MatmulAttributes``).

Example:
    >>> from hipdnn_graph import MatmulAttributes, TensorAttributes
    >>> a = MatmulAttributes().set_name("proj").set_a(TensorAttributes(name="x", dim=[4, 8]))
    >>> a.get_name(), a.get_a().get_name(), a.get_c()
    ('proj', 'x', None)
"""

from __future__ import annotations

from .accessors import slot
from .node_attributes import InputSlots, NodeAttributes, OutputSlots

__all__ = ["MatmulAttributes"]


class MatmulAttributes(NodeAttributes):
    """Configuration of a matmul node: ``C = A @ B``, batched over leading dims.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | A | [..., M, K] | | C | [..., M, N] (inferred) |
    | B | [..., K, N], same rank as A | | | |

    Matmul has no members besides its tensors, its name and its compute type.
    """

    class InputNames(InputSlots):
        A = 0
        B = 1

    class OutputNames(OutputSlots):
        C = 0

    set_a, get_a = slot("A")
    set_b, get_b = slot("B")
    set_c, get_c = slot("C")
