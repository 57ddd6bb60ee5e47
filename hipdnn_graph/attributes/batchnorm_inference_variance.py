"""Attributes of the batch-norm inference node that takes the variance and epsilon (hipDNN's
``BatchnormInferenceAttributesVarianceExt``).

Example:
    >>> from hipdnn_graph import BatchnormInferenceAttributesVarianceExt, TensorAttributes
    >>> a = BatchnormInferenceAttributesVarianceExt().set_variance(TensorAttributes(name="var"))
    >>> a.get_variance().get_name(), a.get_epsilon()
    ('var', None)
"""

from __future__ import annotations

from .accessors import scalar_slot, slot
from .node_attributes import InputSlots, NodeAttributes, OutputSlots

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

    class InputNames(InputSlots):
        X = 0
        MEAN = 1
        VARIANCE = 2
        SCALE = 3
        BIAS = 4
        EPSILON = 5

    class OutputNames(OutputSlots):
        Y = 0

    set_x, get_x = slot("X")
    set_mean, get_mean = slot("MEAN")
    set_variance, get_variance = slot("VARIANCE")
    set_scale, get_scale = slot("SCALE")
    set_bias, get_bias = slot("BIAS")
    set_epsilon, get_epsilon = scalar_slot("EPSILON")
    set_y, get_y = slot("Y")
