"""The layer-norm and RMSNorm backward lowerings, as hipDNN's CPU reference defines them.

With ``X̂`` the normalized input, ``G = DY · SCALE`` and means over the normalized axes::

    layer norm:  X̂ = (X − MEAN) · INV_VARIANCE
                 DX = INV_VARIANCE · (G − mean(G) − X̂ · mean(G · X̂))
    RMSNorm:     X̂ = X · INV_RMS
                 DX = INV_RMS · (G − X̂ · mean(G · X̂))
    DSCALE = Σ DY · X̂ and DBIAS = Σ DY over the other (batch) axes, in SCALE's dims.

The axes are the forward node's: for layer norm the dims where a full-rank SCALE equals X (else
X's last ``normalized_dim_count``), for RMSNorm the trailing run of dims where SCALE equals X.
A layer-norm backward without its saved MEAN and INV_VARIANCE recomputes them from X with the
node's EPSILON, or hipDNN's reference default of 1e-5 without one.

Example:
    >>> import torch, hipdnn_graph as hg
    >>> d = hg.DataType.DOUBLE
    >>> g = hg.Graph(io_data_type=d, intermediate_data_type=d, compute_data_type=d)
    >>> t = lambda name, dims: g.tensor(name=name, dim=dims)
    >>> outs = g.rmsnorm_backward(t("dy", [1, 2]), t("x", [1, 2]), t("s", [1, 2]), t("r", [1, 1]))
    >>> for o in outs[:2]:
    ...     _ = o.set_output(True)
    >>> g.validate()
    >>> out = prepare_rmsnorm_backward(g.nodes[0])({
    ...     "DY": torch.tensor([[1.0, 0.0]], dtype=torch.float64),
    ...     "X": torch.tensor([[3.0, 4.0]], dtype=torch.float64),
    ...     "SCALE": torch.ones(1, 2, dtype=torch.float64),
    ...     "INV_RMS": torch.tensor([[0.2]], dtype=torch.float64)})
    >>> [round(v, 4) for v in out["DX"].flatten().tolist()], sorted(out)
    ([0.164, -0.048], ['DSCALE', 'DX'])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import hipdnn_graph as hg

from ._common import FLOATING, Prepared, TorchFamily, as_scalar, compute_dtype, dtype_refusal
from .norms import rmsnorm_axes

__all__ = [
    "FAMILIES",
    "layernorm_backward_axes",
    "layernorm_backward_refusal",
    "prepare_layernorm_backward",
    "prepare_rmsnorm_backward",
    "rmsnorm_backward_refusal",
]

#: the epsilon hipDNN's CPU reference uses when a layer-norm backward has none
DEFAULT_EPSILON = 1e-5


def layernorm_backward_axes(node: hg.LayernormBackwardNode) -> tuple[int, ...] | None:
    """The axes the node normalizes over, or None where hipDNN's reference defines none (a
    full-rank SCALE dim that is neither 1 nor X's, a lower-rank SCALE that is not X's last
    ``normalized_dim_count`` dims, a count outside ``[1, rank]``)."""
    t = node.attributes.tensors_by_slot()
    x, scale = list(t["X"].dim), list(t["SCALE"].dim)
    count = node.attributes.get_normalized_dim_count()
    if not 1 <= count <= len(x):
        return None
    if len(scale) == len(x):
        if any(s not in (1, d) for d, s in zip(x, scale, strict=True)):
            return None
        return tuple(i for i, (d, s) in enumerate(zip(x, scale, strict=True)) if s == d)
    if scale != x[len(x) - count :]:
        return None
    return tuple(range(len(x) - count, len(x)))


def layernorm_backward_refusal(node: hg.LayernormBackwardNode) -> str | None:
    """Why the lowering does not run the node, or None."""
    a = node.attributes
    if layernorm_backward_axes(node) is None:
        return f"node '{node.name}': its SCALE dims and normalized_dim_count define no axes"
    if (a.get_mean() is None) != (a.get_inv_variance() is None):
        return f"node '{node.name}': MEAN and INV_VARIANCE come together or not at all"
    return dtype_refusal(node, FLOATING)


def rmsnorm_backward_refusal(node: hg.RMSNormBackwardNode) -> str | None:
    """Why the lowering does not run the node, or None."""
    return dtype_refusal(node, FLOATING)


def prepare_layernorm_backward(node: hg.LayernormBackwardNode) -> Prepared:
    """The node's lowering with its axes and types read now."""
    t = node.attributes.tensors_by_slot()
    x_dims = list(t["X"].dim)
    axes = layernorm_backward_axes(node)
    assert axes is not None  # refused otherwise
    batch = tuple(i for i in range(len(x_dims)) if i not in axes)
    broadcast = [d if i in axes else 1 for i, d in enumerate(x_dims)]
    kept = [1 if i in axes else d for i, d in enumerate(x_dims)]
    saved = "MEAN" in t
    has_epsilon = "EPSILON" in t
    compute = compute_dtype(node)

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        import torch

        x = inputs["X"].to(compute)
        dy = inputs["DY"].to(compute).reshape(x.shape)
        scale = inputs["SCALE"].to(compute).reshape(broadcast)
        if saved:
            mean = inputs["MEAN"].to(compute).reshape(kept)
            inv = inputs["INV_VARIANCE"].to(compute).reshape(kept)
        else:
            eps = as_scalar(inputs["EPSILON"], compute) if has_epsilon else DEFAULT_EPSILON
            mean = x.mean(dim=axes, keepdim=True)
            var = ((x - mean) ** 2).mean(dim=axes, keepdim=True)
            inv = torch.rsqrt(var + eps)
        x_hat = (x - mean) * inv
        g = dy * scale
        dx = inv * (
            g - g.mean(dim=axes, keepdim=True) - x_hat * (g * x_hat).mean(dim=axes, keepdim=True)
        )
        return {
            "DX": dx,
            "DSCALE": (dy * x_hat).sum(dim=batch, keepdim=True),
            "DBIAS": dy.sum(dim=batch, keepdim=True),
        }

    return run


def prepare_rmsnorm_backward(node: hg.RMSNormBackwardNode) -> Prepared:
    """The node's lowering with its axes and types read now."""
    t = node.attributes.tensors_by_slot()
    x_dims = list(t["X"].dim)
    axes = rmsnorm_axes(node)  # the forward node's axes: SCALE and X are in the same slots
    leading = tuple(range(axes[0]))
    kept = [1 if i in axes else d for i, d in enumerate(x_dims)]
    want_dbias = "DBIAS" in t
    compute = compute_dtype(node)

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        x = inputs["X"].to(compute)
        dy = inputs["DY"].to(compute).reshape(x.shape)
        scale = inputs["SCALE"].to(compute)
        inv = inputs["INV_RMS"].to(compute).reshape(kept)
        x_hat = x * inv
        g = dy * scale
        out = {
            "DX": inv * (g - x_hat * (g * x_hat).mean(dim=axes, keepdim=True)),
            "DSCALE": (dy * x_hat).sum(dim=leading, keepdim=True),
        }
        if want_dbias:
            out["DBIAS"] = dy.sum(dim=leading, keepdim=True)
        return out

    return run


#: the node types this module lowers, as the package collects them
FAMILIES = (
    TorchFamily(
        hg.NodeType.LAYERNORM_BACKWARD, prepare_layernorm_backward, layernorm_backward_refusal
    ),
    TorchFamily(hg.NodeType.RMS_NORM_BACKWARD, prepare_rmsnorm_backward, rmsnorm_backward_refusal),
)
