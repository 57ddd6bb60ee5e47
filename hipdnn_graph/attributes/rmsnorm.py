"""Attributes of the RMSNorm forward node (hipDNN's ``RMSNormAttributes``).

Example:
    >>> from hipdnn_graph import NormFwdPhase, RMSNormAttributes, TensorAttributes
    >>> eps = TensorAttributes().set_value(1e-5)
    >>> a = RMSNormAttributes().set_epsilon(eps).set_forward_phase(NormFwdPhase.TRAINING)
    >>> a.get_forward_phase().name, a.get_epsilon() is eps, a.get_bias()
    ('TRAINING', True, None)
"""

from __future__ import annotations

from .accessors import scalar_slot, slot
from .node_attributes import InputSlots, OutputSlots
from .norm_common import ForwardPhase, norm_fwd_phase

__all__ = ["RMSNormAttributes", "norm_fwd_phase"]


class RMSNormAttributes(ForwardPhase):
    """Configuration of an RMSNorm forward node:
    ``Y = X * inv_rms * SCALE (+ BIAS)``, ``inv_rms = 1 / sqrt(mean(X²) + EPSILON)`` over the
    normalized shape (the trailing dims where SCALE equals X).

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | X | rank ≥ 2 | | Y | X's (inferred) |
    | SCALE | X's rank; 1 before the normalized shape | | INV_RMS (training) | X's, 1 on normalized axes (inferred) |
    | EPSILON | one element, pass-by-value | | | |
    | BIAS (optional) | SCALE's | | | |

    Member: ``forward_phase`` (:class:`NormFwdPhase`, ``NOT_SET`` until set; refused at
    validation).
    """  # noqa: E501

    class InputNames(InputSlots):
        X = 0
        SCALE = 1
        EPSILON = 2
        BIAS = 3

    class OutputNames(OutputSlots):
        Y = 0
        INV_RMS = 1

    set_x, get_x = slot("X")
    set_scale, get_scale = slot("SCALE")
    set_epsilon, get_epsilon = scalar_slot("EPSILON")
    set_bias, get_bias = slot("BIAS")
    set_y, get_y = slot("Y")
    set_inv_rms, get_inv_rms = slot("INV_RMS")
