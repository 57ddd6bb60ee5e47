"""The NumPy reference of each node family: one ``run_<family>(node, inputs)`` per family.

Every runner takes a validated node and ``inputs``, its set input slots by the names
``node.attributes.tensors_by_slot()`` gives (arrays of the tensors' dims, pass-by-value scalars
as Python numbers), and returns every set output slot as an array of that tensor's dims computed
in the node's compute type; the engine casts each to its tensor's data type. A runner raises
``HipdnnError`` (``GRAPH_NOT_SUPPORTED``) naming the node and the feature for what it does not
define. Each family module declares its node types once, as :class:`ReferenceFamily` records in
its ``FAMILIES`` (the runner, and the function that says, when the plan is chosen, why the
reference refuses a node); this package only collects them: :data:`REFERENCE_FAMILIES`, and
:data:`REFERENCE_FAMILY_OF` by node type, in :data:`REFERENCE_TABLE`. A family that is not
hipDNN's (docs/adding-a-family.md) declares its record in its own module too and adds it with
:func:`register_family`; :func:`family_of` finds the record of any node. SDPA forward and
backward are not here: their steps keep their own fast paths
(:mod:`hipdnn_graph_numpy_reference.sdpa_step`).

Example:
    >>> import hipdnn_graph as hg
    >>> len(REFERENCE_FAMILY_OF), reference_family(hg.NodeType.CONVOLUTION_FPROP).run.__name__
    (21, 'run_conv_fprop')
"""

from __future__ import annotations

from typing import Any

import hipdnn_graph as hg
from hipdnn_graph.backend import FamilyTable

from . import (
    batchnorm,
    batchnorm_backward,
    block_scale,
    convolution,
    custom_op,
    layernorm,
    layernorm_backward,
    matmul,
    moe_grouped_matmul,
    pointwise,
    reduction,
    resample,
    rmsnorm,
    rmsnorm_backward,
)
from ._common import ReferenceFamily, Refusal, Runner, as_compute, compute_dtype

__all__ = [
    "REFERENCE_FAMILIES",
    "REFERENCE_FAMILY_OF",
    "REFERENCE_TABLE",
    "ReferenceFamily",
    "Refusal",
    "Runner",
    "as_compute",
    "compute_dtype",
    "family_of",
    "reference_family",
    "register_family",
]

#: every family module's records, in one tuple (the one list of the reference's families)
REFERENCE_FAMILIES: tuple[ReferenceFamily, ...] = (
    *pointwise.FAMILIES,
    *matmul.FAMILIES,
    *reduction.FAMILIES,
    *convolution.FAMILIES,
    *batchnorm.FAMILIES,
    *batchnorm_backward.FAMILIES,
    *layernorm.FAMILIES,
    *layernorm_backward.FAMILIES,
    *rmsnorm.FAMILIES,
    *rmsnorm_backward.FAMILIES,
    *moe_grouped_matmul.FAMILIES,
    *custom_op.FAMILIES,
    *resample.FAMILIES,
    *block_scale.FAMILIES,
)

#: the records by node type (hipDNN's families) and by id (the others, :func:`register_family`)
REFERENCE_TABLE: FamilyTable[ReferenceFamily] = FamilyTable("reference", REFERENCE_FAMILIES)

#: node type -> its record, built once from :data:`REFERENCE_FAMILIES`
REFERENCE_FAMILY_OF: dict[hg.NodeType, ReferenceFamily] = REFERENCE_TABLE.by_type

#: add the records of a family that is not hipDNN's (its reference module calls this on import)
register_family = REFERENCE_TABLE.register


def family_of(node: Any) -> ReferenceFamily:
    """The reference's record of ``node`` (by its family's id for a family that is not
    hipDNN's, else by its node type).

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` (``reference rule for <TYPE> not found``, or
            ``... for custom family '<id>' not found``) where no record runs it.
    """
    return REFERENCE_TABLE.get(node)


def reference_family(kind: hg.NodeType) -> ReferenceFamily:
    """The reference's record of node type ``kind``.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` (``reference rule for <TYPE> not found``) for a
            node type no family module declares.

    Example:
        >>> import hipdnn_graph as hg
        >>> reference_family(hg.NodeType.SDPA_FWD)
        Traceback (most recent call last):
        ...
        hipdnn_graph...HipdnnError: ...reference rule for SDPA_FWD not found
    """
    family = REFERENCE_FAMILY_OF.get(kind)
    if family is None:
        raise hg.HipdnnError(
            hg.ErrorCode.GRAPH_NOT_SUPPORTED, f"reference rule for {kind.name} not found"
        )
    return family
