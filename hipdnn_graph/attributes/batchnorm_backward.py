"""Attributes of the batch-norm backward node (hipDNN's ``BatchnormBackwardAttributes``).

Example:
    >>> from hipdnn_graph import BatchnormBackwardAttributes, TensorAttributes
    >>> a = BatchnormBackwardAttributes().set_saved_mean_and_inv_variance(
    ...     TensorAttributes(name="m"), TensorAttributes(name="iv"))
    >>> a.get_mean().get_name(), a.get_inv_variance().get_name(), a.get_dx()
    ('m', 'iv', None)
"""

from __future__ import annotations

from .batchnorm import PeerStatsAttributes
from .node_attributes import InputSlots
from .norm_common import NormGradients, SavedStatistics

__all__ = ["BatchnormBackwardAttributes"]


class BatchnormBackwardAttributes(PeerStatsAttributes, NormGradients, SavedStatistics):
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

    class InputNames(InputSlots):
        """DY, X, SCALE first (:class:`NormGradients`)."""

        DY = 0
        X = 1
        SCALE = 2
        MEAN = 3
        INV_VARIANCE = 4
