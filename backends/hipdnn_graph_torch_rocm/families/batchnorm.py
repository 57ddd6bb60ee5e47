"""The batch-norm lowerings (spatial mode, channel axis 1): training forward, inference with
the inverse standard deviation, inference from the variance (hipDNN's extension) and backward.

Training takes the batch statistics over every axis but 1 (the variance biased, as it
normalizes); with running statistics, ``next = (1 - MOMENTUM) · prev + MOMENTUM · batch``, the
running variance from the unbiased batch variance (``n / (n - 1)``), as MIOpen and cuDNN update
it. The backward uses the saved MEAN and INV_VARIANCE: with ``x̂ = (X - MEAN) · INV_VARIANCE``,
``DBIAS = Σ DY``, ``DSCALE = Σ DY · x̂`` and
``DX = SCALE · INV_VARIANCE · (DY - DBIAS / n - x̂ · DSCALE / n)``; a backward node without
them is refused (it has no epsilon to recompute them with). Everything is computed in the
node's compute type.

Example:
    >>> import torch, hipdnn_graph as hg
    >>> f = hg.DataType.FLOAT
    >>> g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
    >>> x = g.tensor(name="x", dim=[2, 1, 2])
    >>> m, v, s, b = (g.tensor(name=n, dim=[1, 1, 1]) for n in "mvsb")
    >>> y = g.batchnorm_inference(x, m, v, s, b, name="bn")
    >>> g.validate()
    >>> ones = torch.ones(1, 1, 1)
    >>> prepare_batchnorm_inference(g.nodes[0])({"X": torch.full((2, 1, 2), 3.0), "MEAN": ones,
    ...     "INV_VARIANCE": ones * 2, "SCALE": ones, "BIAS": ones})["Y"].flatten().tolist()
    [5.0, 5.0, 5.0, 5.0]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import hipdnn_graph as hg

from ._common import FLOATING, Prepared, TorchFamily, as_scalar, compute_dtype, dtype_refusal

__all__ = [
    "FAMILIES",
    "batchnorm_refusal",
    "prepare_batchnorm",
    "prepare_batchnorm_backward",
    "prepare_batchnorm_inference",
    "prepare_batchnorm_inference_variance",
]


def _axes_and_count(node: Any) -> tuple[tuple[int, ...], int]:
    x_dims = list(node.attributes.tensors_by_slot()["X"].dim)
    axes = tuple(i for i in range(len(x_dims)) if i != 1)
    count = 1
    for i in axes:
        count *= x_dims[i]
    return axes, count


def batchnorm_refusal(node: Any) -> str | None:
    """Why the lowering cannot run this batch-norm node, or None."""
    t = node.attributes.tensors_by_slot()
    if node.get_node_type() == hg.NodeType.BATCHNORM_BACKWARD and not (
        "MEAN" in t and "INV_VARIANCE" in t
    ):
        return (
            f"node '{node.name}': batch-norm backward without the saved MEAN and INV_VARIANCE "
            "(the node has no epsilon to recompute them with)"
        )
    return dtype_refusal(node, FLOATING)


def prepare_batchnorm(node: hg.BatchnormNode) -> Prepared:
    """Y, MEAN, INV_VARIANCE and the running statistics of a training forward node."""
    import torch

    t = node.attributes.tensors_by_slot()
    axes, count = _axes_and_count(node)
    running = "NEXT_RUNNING_MEAN" in t or "NEXT_RUNNING_VARIANCE" in t
    compute = compute_dtype(node)
    unbias = count / (count - 1) if count > 1 else 1.0

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        x = inputs["X"].to(compute)
        mean = x.mean(dim=axes, keepdim=True)
        centered = x - mean
        var = (centered * centered).mean(dim=axes, keepdim=True)
        inv = torch.rsqrt(var + as_scalar(inputs["EPSILON"], compute))
        y = centered * inv * inputs["SCALE"].to(compute) + inputs["BIAS"].to(compute)
        out = {"Y": y, "MEAN": mean, "INV_VARIANCE": inv}
        if running:
            m = as_scalar(inputs["MOMENTUM"], compute)
            prev_mean = inputs["PREV_RUNNING_MEAN"].to(compute)
            prev_var = inputs["PREV_RUNNING_VARIANCE"].to(compute)
            out["NEXT_RUNNING_MEAN"] = (1 - m) * prev_mean + m * mean
            out["NEXT_RUNNING_VARIANCE"] = (1 - m) * prev_var + m * (var * unbias)
        return out

    return run


def prepare_batchnorm_inference(node: hg.BatchnormInferenceNode) -> Prepared:
    """Y of an inference node with the saved inverse standard deviation."""
    compute = compute_dtype(node)

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        c = {k: v.to(compute) for k, v in inputs.items()}
        return {"Y": (c["X"] - c["MEAN"]) * c["INV_VARIANCE"] * c["SCALE"] + c["BIAS"]}

    return run


def prepare_batchnorm_inference_variance(node: hg.BatchnormInferenceVarianceNode) -> Prepared:
    """Y of an inference node with the saved variance and an epsilon."""
    import torch

    compute = compute_dtype(node)

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        c = {k: inputs[k].to(compute) for k in ("X", "MEAN", "VARIANCE", "SCALE", "BIAS")}
        inv = torch.rsqrt(c["VARIANCE"] + as_scalar(inputs["EPSILON"], compute))
        return {"Y": (c["X"] - c["MEAN"]) * inv * c["SCALE"] + c["BIAS"]}

    return run


def prepare_batchnorm_backward(node: hg.BatchnormBackwardNode) -> Prepared:
    """DX, DSCALE and DBIAS of a backward node from the saved statistics."""
    axes, count = _axes_and_count(node)
    compute = compute_dtype(node)

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        c = {k: v.to(compute) for k, v in inputs.items()}
        dy, inv = c["DY"], c["INV_VARIANCE"]
        xhat = (c["X"] - c["MEAN"]) * inv
        dbias = dy.sum(dim=axes, keepdim=True)
        dscale = (dy * xhat).sum(dim=axes, keepdim=True)
        dx = c["SCALE"] * inv * (dy - dbias / count - xhat * (dscale / count))
        return {"DX": dx, "DSCALE": dscale, "DBIAS": dbias}

    return run


#: the node types this module lowers, as the package collects them
FAMILIES = (
    TorchFamily(hg.NodeType.BATCHNORM, prepare_batchnorm, batchnorm_refusal),
    TorchFamily(hg.NodeType.BATCHNORM_INFERENCE, prepare_batchnorm_inference, batchnorm_refusal),
    TorchFamily(
        hg.NodeType.BATCHNORM_INFERENCE_VARIANCE_EXT,
        prepare_batchnorm_inference_variance,
        batchnorm_refusal,
    ),
    TorchFamily(hg.NodeType.BATCHNORM_BACKWARD, prepare_batchnorm_backward, batchnorm_refusal),
)
