"""The layer-norm and RMSNorm forward lowerings.

Layer norm normalizes over X's last ``normalized_dim_count`` dims, as hipDNN's CPU reference
does (the count inferred from SCALE as hipDNN infers it when the member is not positive: the
trailing run of SCALE dims that are not 1 for a SCALE of X's rank, SCALE's rank otherwise);
RMSNorm over its normalized shape (the trailing run of dims where
SCALE equals X). Both compute in the node's compute type; the statistics keep X's rank with 1
on the normalized axes. A layer norm over trailing axes with a constant epsilon, a FLOAT
compute type and X, SCALE and BIAS of one type runs on torch's fused ``native_layer_norm``
(float32 statistics); anything else is written out.

Example:
    >>> import torch, hipdnn_graph as hg
    >>> f = hg.DataType.FLOAT
    >>> g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
    >>> x, s = g.tensor(name="x", dim=[2, 4]), g.tensor(name="s", dim=[1, 4])
    >>> y, _ = g.rmsnorm(x, s, epsilon=g.tensor(name="e").set_value(0.0),
    ...                  forward_phase=hg.NormFwdPhase.INFERENCE, name="n")
    >>> g.validate()
    >>> out = prepare_rmsnorm(g.nodes[0])({"X": torch.full((2, 4), 2.0), "SCALE": torch.ones(1, 4),
    ...                                  "EPSILON": 0.0})
    >>> out["Y"].tolist()
    [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import hipdnn_graph as hg
from hipdnn_graph.nodes.norm_rules import infer_normalized_dim_count

from ._common import FLOATING, Prepared, TorchFamily, as_scalar, compute_dtype, dtype_refusal

__all__ = [
    "FAMILIES",
    "layernorm_axes",
    "layernorm_refusal",
    "prepare_layernorm",
    "prepare_rmsnorm",
    "rmsnorm_axes",
    "rmsnorm_refusal",
]

_FUSED_LN = frozenset({hg.DataType.HALF, hg.DataType.BFLOAT16, hg.DataType.FLOAT})


def layernorm_axes(node: hg.LayerNormNode) -> tuple[int, ...]:
    """The axes a layer-norm node normalizes over: X's last ``normalized_dim_count`` dims, the
    count inferred from SCALE as hipDNN infers it when the member is not positive (hipDNN's CPU
    reference normalizes over the node's count, whatever its statistics' dims)."""
    t = node.attributes.tensors_by_slot()
    x_dims = list(t["X"].dim)
    count = node.attributes.normalized_dim_count
    if count <= 0:
        count = infer_normalized_dim_count(x_dims, list(t["SCALE"].dim))
    count = min(count, len(x_dims))
    return tuple(range(len(x_dims) - count, len(x_dims)))


def rmsnorm_axes(node: hg.RMSNormNode | hg.RMSNormBackwardNode) -> tuple[int, ...]:
    """The axes of an RMSNorm node's normalized shape: the trailing run where SCALE equals X
    (never the batch axis 0)."""
    t = node.attributes.tensors_by_slot()
    x_dims, scale_dims = list(t["X"].dim), list(t["SCALE"].dim)
    matching = 0
    for s, d in zip(reversed(scale_dims), reversed(x_dims), strict=True):
        if s != d:
            break
        matching += 1
    start = 1 if matching >= len(x_dims) else len(x_dims) - matching
    return tuple(range(start, len(x_dims)))


def layernorm_refusal(node: hg.LayerNormNode) -> str | None:
    """Why the lowering cannot run this layer-norm node (statistics that do not hold one value
    per position of the dims before the normalized ones, or a type it does not take), or
    None."""
    t = node.attributes.tensors_by_slot()
    axes = layernorm_axes(node)
    batch = _numel([d for i, d in enumerate(t["X"].dim) if i not in axes])
    for slot in ("MEAN", "INV_VARIANCE"):
        if slot in t and _numel(list(t[slot].dim)) != batch:
            return (
                f"node '{node.name}': {slot} has dims {list(t[slot].dim)}, not one value per "
                f"position of X's dims before its {len(axes)} normalized dim(s)"
            )
    return dtype_refusal(node, FLOATING)


def rmsnorm_refusal(node: hg.RMSNormNode) -> str | None:
    """Why the lowering cannot run this node, or None."""
    return dtype_refusal(node, FLOATING)


def _stats_dims(x_dims: list[int], axes: tuple[int, ...]) -> list[int]:
    return [1 if i in axes else d for i, d in enumerate(x_dims)]


def prepare_layernorm(node: hg.LayerNormNode) -> Prepared:
    """The node's lowering with its axes and types read now."""
    import torch

    t = node.attributes.tensors_by_slot()
    x_dims = list(t["X"].dim)
    axes = layernorm_axes(node)
    stats_dims = _stats_dims(x_dims, axes)
    want_stats = "MEAN" in t or "INV_VARIANCE" in t
    compute = compute_dtype(node)
    rank = len(x_dims)
    trailing = axes == tuple(range(rank - len(axes), rank)) and len(axes) > 0
    normalized = x_dims[rank - len(axes) :]
    n_elements = 1
    for d in normalized:
        n_elements *= d
    types = {t[s].data_type for s in ("X", "SCALE", "BIAS")}
    fused = (
        trailing
        and node.attributes.compute_data_type == hg.DataType.FLOAT
        and len(types) == 1
        and types <= _FUSED_LN
        and all(_numel(t[s].dim) == n_elements for s in ("SCALE", "BIAS"))
    )

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        eps = inputs["EPSILON"]
        x = inputs["X"]
        if fused and isinstance(eps, int | float):
            w = inputs["SCALE"].reshape(normalized)
            b = inputs["BIAS"].reshape(normalized)
            y, mean, rstd = torch.native_layer_norm(x, normalized, w, b, float(eps))
            out = {"Y": y}
            if want_stats:
                out["MEAN"] = mean.reshape(stats_dims)
                out["INV_VARIANCE"] = rstd.reshape(stats_dims)
            return out
        x = x.to(compute)
        mean = x.mean(dim=axes, keepdim=True)
        centered = x - mean
        var = (centered * centered).mean(dim=axes, keepdim=True)
        inv = torch.rsqrt(var + as_scalar(eps, compute))
        y = centered * inv * inputs["SCALE"].to(compute) + inputs["BIAS"].to(compute)
        return {"Y": y, "MEAN": mean, "INV_VARIANCE": inv} if want_stats else {"Y": y}

    return run


def prepare_rmsnorm(node: hg.RMSNormNode) -> Prepared:
    """The node's lowering with its axes and types read now."""
    import torch

    t = node.attributes.tensors_by_slot()
    axes = rmsnorm_axes(node)
    has_bias = "BIAS" in t
    want_stats = "INV_RMS" in t
    compute = compute_dtype(node)

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        x = inputs["X"].to(compute)
        inv = torch.rsqrt(
            (x * x).mean(dim=axes, keepdim=True) + as_scalar(inputs["EPSILON"], compute)
        )
        y = x * inv * inputs["SCALE"].to(compute)
        if has_bias:
            y = y + inputs["BIAS"].to(compute)
        return {"Y": y, "INV_RMS": inv} if want_stats else {"Y": y}

    return run


def _numel(dims: list[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


#: the node types this module lowers, as the package collects them
FAMILIES = (
    TorchFamily(hg.NodeType.LAYER_NORM, prepare_layernorm, layernorm_refusal),
    TorchFamily(hg.NodeType.RMS_NORM, prepare_rmsnorm, rmsnorm_refusal),
)
