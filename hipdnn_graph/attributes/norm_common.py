"""What the normalization attributes share, each declared once: the forward phase (layer norm
and RMSNorm forward), the normalized dim count (layer norm forward and backward), and the
saved statistics a backward node reads (batch norm and layer norm), and the slots every backward
normalization has (batch norm, layer norm and RMSNorm).

Example:
    >>> from hipdnn_graph import LayernormBackwardAttributes, NormFwdPhase, RMSNormAttributes
    >>> RMSNormAttributes().set_forward_phase(NormFwdPhase.TRAINING).get_forward_phase().name
    'TRAINING'
    >>> LayernormBackwardAttributes().set_normalized_dim_count(2).get_normalized_dim_count()
    2
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BeforeValidator

from ..tensor import TensorAttributes
from ..types import NormFwdPhase
from .accessors import member, slot
from .checks import bounded_int, mode_of
from .node_attributes import NodeAttributes, OutputSlots

__all__ = [
    "ForwardPhase",
    "NormGradients",
    "NormalizedDimCount",
    "SavedStatistics",
    "norm_fwd_phase",
]


def norm_fwd_phase(value: Any, what: str = "forward phase") -> NormFwdPhase:
    """``value`` as a :class:`NormFwdPhase` (a member or its number; not a bool).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for anything else.
    """
    return mode_of(NormFwdPhase, value, what)


def _int64(value: Any, what: str = "normalized_dim_count") -> int:
    """``value`` as hipDNN's ``int64_t normalized_dim_count``."""
    return bounded_int(value, what, 64, "{what} {number} is not a 64-bit integer")


class ForwardPhase(NodeAttributes):
    """The ``forward_phase`` member (:class:`NormFwdPhase`, ``NOT_SET`` until set; refused at
    validation)."""

    forward_phase: Annotated[NormFwdPhase, BeforeValidator(norm_fwd_phase)] = NormFwdPhase.NOT_SET

    set_forward_phase, get_forward_phase = member(
        "forward_phase",
        norm_fwd_phase,
        "forward phase",
        doc="``TRAINING`` (also writes the statistics outputs) or ``INFERENCE``.",
    )


class NormalizedDimCount(NodeAttributes):
    """The ``normalized_dim_count`` member: hipDNN's int64, 0 unless set."""

    normalized_dim_count: Annotated[int, BeforeValidator(_int64)] = 0

    set_normalized_dim_count, get_normalized_dim_count = member(
        "normalized_dim_count",
        _int64,
        doc="The number of trailing dims normalized (a backward node infers it from SCALE when "
        "0 or less; no forward rule reads it).",
    )


class SavedStatistics(NodeAttributes):
    """The MEAN and INV_VARIANCE slots of a normalization, and hipDNN's setter of both (a
    backward node's inputs: the forward pass's saved statistics)."""

    set_mean, get_mean = slot("MEAN")
    set_inv_variance, get_inv_variance = slot("INV_VARIANCE")

    def set_saved_mean_and_inv_variance(
        self, mean: TensorAttributes | None, inv_variance: TensorAttributes | None
    ) -> Self:
        """Set MEAN and INV_VARIANCE at once (the forward pass's saved statistics)."""
        return self.set_mean(mean).set_inv_variance(inv_variance)


class NormGradients(NodeAttributes):
    """The slots of every backward normalization: DY, X and SCALE in (its first three inputs,
    the family's ``InputNames`` naming the rest), and the gradients out."""

    class OutputNames(OutputSlots):
        DX = 0
        DSCALE = 1
        DBIAS = 2

    set_dy, get_dy = slot("DY")
    set_x, get_x = slot("X")
    set_scale, get_scale = slot("SCALE")
    set_dx, get_dx = slot("DX")
    set_dscale, get_dscale = slot("DSCALE")
    set_dbias, get_dbias = slot("DBIAS")
