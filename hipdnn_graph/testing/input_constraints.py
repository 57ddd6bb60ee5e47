"""Per-family constraints on the values of a node's inputs, for the kit's input maker.

Most inputs are valid with any values and :func:`~hipdnn_graph.testing.make_inputs` draws them
by role. Some are not: a variance under a square root must be positive, an epsilon small and
positive, a momentum in ``(0, 1)``, a dequantize's SCALE positive (E8M0 holds no negative
value), and the routing tensors of a MoE grouped matmul must describe
valid routes (offsets non-decreasing within the routed rows, the first 0; GATHER indices within
the token rows; SCATTER destinations ``TOKEN_INDEX · top_k + TOKEN_KS`` distinct and within the
output, ``TOKEN_KS`` below ``top_k``), and a ``MAXPOOL`` backward's INDEX must name an element
of each output's window (or ``-1``) for its gradient to reach X. :data:`INPUT_CONSTRAINTS` maps a node type to a function that
reads the node (its tensors' dims, its mode, ``top_k``) and draws values for the input slots
it constrains; every value follows from the node, none is fixed.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> F, I = hg.DataType.FLOAT, hg.DataType.INT32
    >>> g = hg.Graph(io_data_type=F, compute_data_type=F, intermediate_data_type=F)
    >>> _ = g.moe_grouped_matmul(g.tensor(name="t", dim=[1, 6, 2]), g.tensor(name="w", dim=[3, 2, 4]),
    ...     g.tensor(name="o", dim=[3, 1, 1], data_type=I), None, None)
    >>> g.validate()
    >>> values = constrained_values(g.nodes[0], np.random.default_rng(0))
    >>> offsets = values["FIRST_TOKEN_OFFSET"].ravel()
    >>> bool(np.all(np.diff(offsets) >= 0)), int(offsets.min()) >= 0, int(offsets.max()) <= 6
    (True, True, True)
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..types import MoeGroupedMatmulMode, NodeType, PaddingMode, ResampleMode

__all__ = ["INPUT_CONSTRAINTS", "Constraint", "constrained_values"]

Array = np.ndarray[Any, Any]
#: ``constraint(node, rng) -> {input slot: values}`` (arrays of the slot's dims, or Python
#: numbers for one-element slots)
Constraint = Callable[[Any, np.random.Generator], dict[str, Any]]

#: the range a small positive epsilon is drawn from
_EPSILON = (1e-5, 1e-2)
#: the range a running-statistics momentum is drawn from
_MOMENTUM = (0.05, 0.5)
#: the range positive statistics (variances, their inverse square roots) are drawn from
_POSITIVE = (0.25, 2.0)


def _dims(node: Any, slot: str) -> tuple[int, ...]:
    return tuple(node.attributes.tensors_by_slot()[slot].dim)


def _positive(node: Any, rng: np.random.Generator, *slots: str) -> dict[str, Any]:
    """Values drawn from :data:`_POSITIVE` for each of ``slots`` the node has."""
    present = node.attributes.tensors_by_slot()
    return {s: rng.uniform(*_POSITIVE, size=_dims(node, s)) for s in slots if s in present}


def _scalars(node: Any, rng: np.random.Generator) -> dict[str, Any]:
    """An epsilon and a momentum for the node's EPSILON and MOMENTUM slots, when it has them."""
    present = node.attributes.tensors_by_slot()
    ranges = {"EPSILON": _EPSILON, "MOMENTUM": _MOMENTUM}
    return {s: float(rng.uniform(*r)) for s, r in ranges.items() if s in present}


def _statistics(*positive: str) -> Constraint:
    """A constraint: epsilon, momentum and the named positive statistics."""

    def constraint(node: Any, rng: np.random.Generator) -> dict[str, Any]:
        return {**_scalars(node, rng), **_positive(node, rng, *positive)}

    return constraint


def _offsets(rng: np.random.Generator, groups: int, rows: int) -> Array:
    """``groups`` non-decreasing offsets in ``[0, rows]``, the first 0 (the backward requires
    it; a forward node's offsets then also serve a backward node that reads the same tensor)."""
    offsets = np.sort(rng.integers(0, rows + 1, size=groups))
    offsets[0] = 0
    return offsets.reshape(groups, 1, 1)


def _moe_forward(node: Any, rng: np.random.Generator) -> dict[str, Any]:
    """Valid routes for the node's mode (see the module doc)."""
    a = node.attributes
    tokens = _dims(node, "TOKEN")[1]
    groups = _dims(node, "FIRST_TOKEN_OFFSET")[0]
    mode = a.get_mode()
    values: dict[str, Any] = {}
    routed = tokens
    if mode == MoeGroupedMatmulMode.GATHER:
        shape = _dims(node, "TOKEN_INDEX")
        routed = shape[1]
        values["TOKEN_INDEX"] = rng.integers(0, tokens, size=shape)
    elif mode == MoeGroupedMatmulMode.SCATTER:
        top_k = a.get_top_k()
        destinations = rng.permutation(tokens)  # distinct rows of OUTPUT ([1, tokens, N])
        values["TOKEN_INDEX"] = (destinations // top_k).reshape(_dims(node, "TOKEN_INDEX"))
        values["TOKEN_KS"] = (destinations % top_k).reshape(_dims(node, "TOKEN_KS"))
    values["FIRST_TOKEN_OFFSET"] = _offsets(rng, groups, routed)
    return values


def _moe_backward(node: Any, rng: np.random.Generator) -> dict[str, Any]:
    """Offsets of one group per expert over the token rows, the first 0."""
    tokens = _dims(node, "TOKEN")[1]
    groups = _dims(node, "FIRST_TOKEN_OFFSET")[0]
    return {"FIRST_TOKEN_OFFSET": _offsets(rng, groups, tokens)}


def _resample_index(node: Any, rng: np.random.Generator) -> dict[str, Any]:
    """A ``MAXPOOL`` backward's INDEX as its forward writes one: each output's flat index
    (row-major over DX's spatial dims) of a random element of X in its window, or ``-1`` (a
    zero of the padding won) for a fifth of the outputs with ``ZERO_PAD``; nothing for the
    averages, which read no INDEX."""
    a = node.attributes
    if a.resample_mode != ResampleMode.MAXPOOL:
        return {}
    inner, outer = _dims(node, "DX")[2:], list(_dims(node, "INDEX"))
    flat = np.zeros(outer, dtype=np.int64)
    for i, (size, step, start, width) in enumerate(
        zip(inner, a.stride, a.pre_padding, a.window, strict=True)
    ):
        shape = [1] * len(outer)
        shape[2 + i] = outer[2 + i]
        first = (np.arange(outer[2 + i]) * step - start).reshape(shape)
        low, high = np.maximum(first, 0), np.minimum(first + width, size)  # X in the window
        offset = np.floor(rng.random(outer) * np.maximum(high - low, 1)).astype(np.int64)
        flat = flat * size + np.clip(low + offset, 0, size - 1)
    if a.padding_mode == PaddingMode.ZERO_PAD:
        flat = np.where(rng.random(outer) < 0.2, -1, flat)
    return {"INDEX": flat}


#: node type -> the constraint on its inputs' values
INPUT_CONSTRAINTS: dict[NodeType, Constraint] = {
    NodeType.BATCHNORM: _statistics("PREV_RUNNING_VARIANCE"),
    NodeType.BATCHNORM_INFERENCE: _statistics("INV_VARIANCE"),
    NodeType.BATCHNORM_INFERENCE_VARIANCE_EXT: _statistics("VARIANCE"),
    NodeType.BATCHNORM_BACKWARD: _statistics("INV_VARIANCE"),
    NodeType.LAYER_NORM: _statistics(),
    NodeType.LAYERNORM_BACKWARD: _statistics("INV_VARIANCE"),
    NodeType.RMS_NORM: _statistics(),
    NodeType.RMS_NORM_BACKWARD: _statistics("INV_RMS"),
    NodeType.MOE_GROUPED_MATMUL: _moe_forward,
    NodeType.MOE_GROUPED_MATMUL_BWD: _moe_backward,
    NodeType.RESAMPLE_BWD: _resample_index,
    NodeType.BLOCK_SCALE_DEQUANTIZE: _statistics("SCALE"),
}


def constrained_values(node: Any, rng: np.random.Generator) -> dict[str, Any]:
    """The values :data:`INPUT_CONSTRAINTS` draws for ``node``'s input slots (``{}`` for a
    family without constraints). ``node`` must be validated (its tensors have dims)."""
    constraint = INPUT_CONSTRAINTS.get(node.get_node_type())
    return {} if constraint is None else constraint(node, rng)
