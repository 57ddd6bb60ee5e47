"""Attributes of the layer-norm backward node (hipDNN's ``LayernormBackwardAttributes``).

Example:
    >>> from hipdnn_graph import LayernormBackwardAttributes, TensorAttributes
    >>> a = LayernormBackwardAttributes().set_saved_mean_and_inv_variance(
    ...     TensorAttributes(name="m"), TensorAttributes(name="iv"))
    >>> a.get_mean().get_name(), a.get_inv_variance().get_name(), a.get_normalized_dim_count()
    ('m', 'iv', 0)
"""

from __future__ import annotations

from .accessors import scalar_slot
from .node_attributes import InputSlots
from .norm_common import NormalizedDimCount, NormGradients, SavedStatistics

__all__ = ["LayernormBackwardAttributes"]


class LayernormBackwardAttributes(NormalizedDimCount, NormGradients, SavedStatistics):
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

    class InputNames(InputSlots):
        DY = 0
        X = 1
        SCALE = 2
        MEAN = 3
        INV_VARIANCE = 4
        EPSILON = 5

    set_epsilon, get_epsilon = scalar_slot("EPSILON")
