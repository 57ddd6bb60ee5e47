"""Attributes of the layer-norm forward node (hipDNN's ``LayernormAttributes``).

Example:
    >>> from hipdnn_graph import LayernormAttributes, NormFwdPhase
    >>> a = LayernormAttributes().set_forward_phase(NormFwdPhase.INFERENCE)
    >>> a.get_forward_phase().name, a.get_normalized_dim_count(), a.get_mean()
    ('INFERENCE', 0, None)
"""

from __future__ import annotations

from .accessors import scalar_slot, slot
from .node_attributes import InputSlots, OutputSlots
from .norm_common import ForwardPhase, NormalizedDimCount

__all__ = ["LayernormAttributes"]


class LayernormAttributes(NormalizedDimCount, ForwardPhase):
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

    class InputNames(InputSlots):
        X = 0
        SCALE = 1
        BIAS = 2
        EPSILON = 3

    class OutputNames(OutputSlots):
        Y = 0
        MEAN = 1
        INV_VARIANCE = 2

    set_x, get_x = slot("X")
    set_scale, get_scale = slot("SCALE")
    set_bias, get_bias = slot("BIAS")
    set_epsilon, get_epsilon = scalar_slot("EPSILON")
    set_y, get_y = slot("Y")
    set_mean, get_mean = slot("MEAN")
    set_inv_variance, get_inv_variance = slot("INV_VARIANCE")
