"""Attributes of the batch-norm inference node (hipDNN's ``BatchnormInferenceAttributes``).

Example:
    >>> from hipdnn_graph import BatchnormInferenceAttributes, TensorAttributes
    >>> a = BatchnormInferenceAttributes().set_mean(TensorAttributes(name="running_mean"))
    >>> a.get_mean().get_name(), a.get_y()
    ('running_mean', None)
"""

from __future__ import annotations

from .accessors import slot
from .node_attributes import InputSlots, NodeAttributes, OutputSlots

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

    class InputNames(InputSlots):
        X = 0
        MEAN = 1
        INV_VARIANCE = 2
        SCALE = 3
        BIAS = 4

    class OutputNames(OutputSlots):
        Y = 0

    set_x, get_x = slot("X")
    set_mean, get_mean = slot("MEAN")
    set_inv_variance, get_inv_variance = slot("INV_VARIANCE")
    set_scale, get_scale = slot("SCALE")
    set_bias, get_bias = slot("BIAS")
    set_y, get_y = slot("Y")
