"""Attributes of the RMSNorm backward node (hipDNN's ``RMSNormBackwardAttributes``).

Example:
    >>> from hipdnn_graph import RMSNormBackwardAttributes, TensorAttributes
    >>> a = RMSNormBackwardAttributes().set_inv_rms(TensorAttributes(name="r"))
    >>> a.get_inv_rms().get_name(), a.get_compute_dbias(), a.set_compute_dbias(True).get_dbias()
    ('r', False, None)
"""

from __future__ import annotations

from typing import Annotated

from ..tensor_input import as_flag, keyword
from .accessors import member, slot
from .node_attributes import InputSlots
from .norm_common import NormGradients

__all__ = ["RMSNormBackwardAttributes"]


class RMSNormBackwardAttributes(NormGradients):
    """Configuration of an RMSNorm backward node: from DY, X, SCALE and the forward pass's saved
    INV_RMS, the gradients DX, DSCALE and (optionally) DBIAS.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | DY | X's | | DX | DY's (inferred) |
    | X | rank ≥ 2 | | DSCALE | SCALE's (inferred) |
    | SCALE | X's rank; 1 before the normalized shape | | DBIAS (optional) | SCALE's (inferred) |
    | INV_RMS | X's, 1 on normalized axes | | | |

    Member: ``compute_dbias`` (``False`` unless set): whether ``Graph.rmsnorm_backward`` creates
    the DBIAS output. It is not carried on the wire; a node read back has DBIAS when the wire
    names it.
    """

    class InputNames(InputSlots):
        DY = 0
        X = 1
        SCALE = 2
        INV_RMS = 3

    compute_dbias: Annotated[bool, keyword(as_flag, "compute_dbias")] = False

    set_inv_rms, get_inv_rms = slot("INV_RMS")

    set_compute_dbias, get_compute_dbias = member(
        "compute_dbias",
        as_flag,
        doc="Whether ``Graph.rmsnorm_backward`` also creates the DBIAS output.",
    )

    def has_dbias(self, value: bool) -> RMSNormBackwardAttributes:
        """hipDNN's fluent alias of :meth:`set_compute_dbias`.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a bool.
        """
        return self.set_compute_dbias(value)
