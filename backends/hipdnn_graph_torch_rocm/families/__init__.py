"""Torch lowerings of hipDNN's node families, one :class:`TorchFamily` record per node type.

Each family module declares its node types once, at its end, in its ``FAMILIES``:
``prepare_<family>(node)`` reads the node once and returns the closure the engines run, which
maps the node's set input slots (named as ``node.attributes.tensors_by_slot()`` names them;
pass-by-value scalars as Python numbers or one-element tensors) to every set output slot,
computed in the node's compute type with eager torch ops that ``torch.compile`` traces (no
data-dependent Python control flow, no host synchronisation). The engines
(:mod:`hipdnn_graph_torch_rocm.family_engines`) cast each result to its tensor's storage type,
so virtual intermediates are rounded to their declared type. ``<family>_refusal(node)`` says
why a node cannot run (``None`` when it can). Where torch can write a node's results straight
into the caller's buffers (``out=``), the record's ``writer`` returns a :data:`Writer` that does
(``None`` where that node cannot), so ``execute`` copies nothing; ``host_checked`` marks a
lowering that checks its data on the host. This package only collects the records:
:data:`TORCH_FAMILIES`, and :data:`TORCH_FAMILY_OF` by node type, in :data:`TORCH_TABLE`. A
family that is not hipDNN's (docs/adding-a-family.md) declares its record in its own module too
and adds it with :func:`register_family`; :func:`family_of` finds the record of any node.

Example:
    >>> import hipdnn_graph as hg
    >>> sorted(t.name for t in TORCH_FAMILY_OF)[:3]
    ['BATCHNORM', 'BATCHNORM_BACKWARD', 'BATCHNORM_INFERENCE']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import hipdnn_graph as hg
from hipdnn_graph.backend import FamilyTable

from . import (
    batchnorm,
    block_scale,
    convolution,
    custom_op,
    matmul,
    moe_grouped_matmul,
    norm_backward,
    norms,
    pointwise,
    reduction,
    resample,
)
from ._common import FLOATING, Prepared, TorchFamily, Writer, compute_dtype, dtype_refusal

__all__ = [
    "FLOATING",
    "TORCH_FAMILIES",
    "TORCH_FAMILY_OF",
    "TORCH_TABLE",
    "Prepared",
    "TorchFamily",
    "Writer",
    "compute_dtype",
    "dtype_refusal",
    "family_of",
    "lower",
    "refusal",
    "register_family",
    "torch_family",
]

#: every family module's records, in one tuple (the one list of the torch families)
TORCH_FAMILIES: tuple[TorchFamily, ...] = (
    *pointwise.FAMILIES,
    *matmul.FAMILIES,
    *reduction.FAMILIES,
    *convolution.FAMILIES,
    *batchnorm.FAMILIES,
    *norms.FAMILIES,
    *norm_backward.FAMILIES,
    *resample.FAMILIES,
    *block_scale.FAMILIES,
    *moe_grouped_matmul.FAMILIES,
    *custom_op.FAMILIES,
)

#: the records by node type (hipDNN's families) and by id (the others, :func:`register_family`)
TORCH_TABLE: FamilyTable[TorchFamily] = FamilyTable("torch", TORCH_FAMILIES)

#: node type -> its record, built once from :data:`TORCH_FAMILIES`
TORCH_FAMILY_OF: dict[hg.NodeType, TorchFamily] = TORCH_TABLE.by_type

#: add the records of a family that is not hipDNN's (its torch module calls this on import)
register_family = TORCH_TABLE.register


def family_of(node: Any) -> TorchFamily:
    """The torch record of ``node`` (by its family's id for a family that is not hipDNN's, else
    by its node type).

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` (``torch rule for <TYPE> not found``, or
            ``... for custom family '<id>' not found``) where no record runs it.
    """
    return TORCH_TABLE.get(node)


def torch_family(kind: hg.NodeType) -> TorchFamily:
    """The torch record of node type ``kind``.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` (``torch rule for <TYPE> not found``) for a node
            type no family module declares.

    Example:
        >>> import hipdnn_graph as hg
        >>> torch_family(hg.NodeType.SDPA_FWD)
        Traceback (most recent call last):
        ...
        hipdnn_graph...HipdnnError: ...torch rule for SDPA_FWD not found
    """
    family = TORCH_FAMILY_OF.get(kind)
    if family is None:
        raise hg.HipdnnError(
            hg.ErrorCode.GRAPH_NOT_SUPPORTED, f"torch rule for {kind.name} not found"
        )
    return family


def lower(node: Any, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """``node``'s outputs from ``inputs`` by its family's lowering, prepared and run once.

    Raises:
        HipdnnError: what :func:`family_of` raises; what the lowering raises.

    Example:
        >>> import torch, hipdnn_graph as hg
        >>> f = hg.DataType.FLOAT
        >>> g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
        >>> _ = g.pointwise(g.tensor(name="x", dim=[2]), mode=hg.PointwiseMode.NEG, name="n")
        >>> g.validate(); lower(g.nodes[0], {"IN_0": torch.tensor([1.0, -2.0])})["OUT_0"]
        tensor([-1.,  2.])
    """
    return family_of(node).prepare(node)(inputs)


def refusal(node: Any) -> str | None:
    """Why no torch lowering runs ``node`` (its family has none, or the family's rule refuses
    it), or None.

    Example:
        >>> import hipdnn_graph as hg
        >>> f = hg.DataType.FLOAT
        >>> g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
        >>> _ = g.pointwise(g.tensor(name="x", dim=[2]), mode=hg.PointwiseMode.EXP, name="e")
        >>> g.validate(); refusal(g.nodes[0]) is None
        True
    """
    family = TORCH_TABLE.find(node)
    if family is None:
        family_id = type(node).family_id
        what = f"custom family {family_id!r}" if family_id else node.get_node_type().name
        return f"no torch lowering for {what} nodes (node '{node.name}')"
    return family.refusal(node)
