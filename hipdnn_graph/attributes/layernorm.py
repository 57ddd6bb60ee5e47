"""Attributes of the layer-norm forward node (hipDNN's ``LayernormAttributes``).

Example:
    >>> from hipdnn_graph import LayernormAttributes, NormFwdPhase
    >>> a = LayernormAttributes().set_forward_phase(NormFwdPhase.INFERENCE)
    >>> a.get_forward_phase().name, a.get_normalized_dim_count(), a.get_mean()
    ('INFERENCE', 0, None)
"""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated, Any

from pydantic import BeforeValidator

from ..types import NormFwdPhase
from .accessors import member, scalar_slot, slot
from .checks import bounded_int
from .node_attributes import NodeAttributes
from .rmsnorm import norm_fwd_phase

__all__ = ["LayernormAttributes"]


def _int64(value: Any, what: str = "normalized_dim_count") -> int:
    """``value`` as hipDNN's ``int64_t normalized_dim_count``."""
    message = "{what} {number} is not a 64-bit integer"
    return bounded_int(value, what, 64, message)


class LayernormAttributes(NodeAttributes):
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

    class InputNames(IntEnum):
        """Input slots in hipDNN's order."""

        X = 0
        SCALE = 1
        BIAS = 2
        EPSILON = 3

    class OutputNames(IntEnum):
        """Output slots in hipDNN's order."""

        Y = 0
        MEAN = 1
        INV_VARIANCE = 2

    forward_phase: Annotated[NormFwdPhase, BeforeValidator(norm_fwd_phase)] = NormFwdPhase.NOT_SET
    normalized_dim_count: Annotated[int, BeforeValidator(_int64)] = 0

    set_x, get_x = slot("X")
    set_scale, get_scale = slot("SCALE")
    set_bias, get_bias = slot("BIAS")
    set_epsilon, get_epsilon = scalar_slot("EPSILON")
    set_y, get_y = slot("Y")
    set_mean, get_mean = slot("MEAN")
    set_inv_variance, get_inv_variance = slot("INV_VARIANCE")

    set_forward_phase, get_forward_phase = member(
        "forward_phase",
        norm_fwd_phase,
        "forward phase",
        doc="``TRAINING`` (also writes MEAN and INV_VARIANCE) or ``INFERENCE``.",
    )
    set_normalized_dim_count, get_normalized_dim_count = member(
        "normalized_dim_count",
        _int64,
        doc="The number of trailing dims normalized, as hipDNN carries it (no rule reads it).",
    )
