"""Random valid graphs of the convolution, normalization and MoE families, and the graphs that
chain them, for the conformance kit (:data:`~hipdnn_graph.testing.FAMILIES` registers them).

| family | what a graph holds |
|---|---|
| ``"convolution"`` | one forward, data-gradient or weight-gradient convolution: 1 or 2 spatial dims, padding (pre and post apart), stride, dilation, groups, both modes, NCHW or channels-last |
| ``"batchnorm"`` | one batch norm: training (with running statistics or not), inference, inference from the variance, or backward with the saved statistics |
| ``"layernorm"`` | one layer norm (training or inference; full-rank or reduced-rank scale) or its backward (saved statistics or an epsilon) |
| ``"rmsnorm"`` | one RMSNorm (training or inference, with a bias or not) or its backward (with DBIAS or not) |
| ``"moe"`` | one MoE grouped matmul (routing mode NONE, GATHER or SCATTER) or its weight gradient |

Chains for ``"mixed"``: :func:`draw_conv_bn_relu` (convolution → batch-norm inference → ReLU)
and :func:`draw_rmsnorm_matmul_silu` (RMSNorm → matmul → SiLU). Epsilons and momenta are
compile-time constants or runtime parameters; the routing tensors of MoE graphs and the
statistics that must be positive get valid values from the kit's input maker
(:mod:`hipdnn_graph.testing.input_constraints`).

Example:
    >>> import numpy as np
    >>> from hipdnn_graph.types import DataType
    >>> g, features = draw_moe(np.random.default_rng(1), DataType.FLOAT, 1)
    >>> g.validate(); g.nodes[0].get_node_type().name.startswith("MOE_GROUPED_MATMUL")
    True
"""  # noqa: E501

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Graph
from ..tensor import TensorAttributes, generate_strides
from ..types import ConvolutionMode, DataType, MoeGroupedMatmulMode, NormFwdPhase, PointwiseMode
from .draw_common import draw_dims, layout_strides, mark_output, new_graph, pick, scalar_operand

__all__ = [
    "draw_batchnorm",
    "draw_conv_bn_relu",
    "draw_convolution",
    "draw_layernorm",
    "draw_moe",
    "draw_rmsnorm",
    "draw_rmsnorm_matmul_silu",
]

_INT32 = DataType.INT32


# ----- convolution -----
def _conv_geometry(
    rng: np.random.Generator, spatial: int
) -> tuple[dict[str, Any], list[int], list[int], list[int]]:
    """Members, input sizes, kernel and output sizes of a random convolution."""
    kernel = draw_dims(rng, spatial, high=4)
    dilation = draw_dims(rng, spatial, high=3)
    stride = draw_dims(rng, spatial, high=3)
    pre = draw_dims(rng, spatial, high=3, low=0)
    post = draw_dims(rng, spatial, high=3, low=0)
    sizes, outs = [], []
    for k, d, s, p, q in zip(kernel, dilation, stride, pre, post, strict=True):
        span = d * (k - 1) + 1
        size = max(1, span - p - q) + int(rng.integers(0, 6))
        sizes.append(size)
        outs.append((size + p + q - span) // s + 1)
    mode = pick(rng, (ConvolutionMode.CROSS_CORRELATION, ConvolutionMode.CONVOLUTION))
    members: dict[str, Any] = {"pre_padding": pre, "post_padding": post, "stride": stride,
                                  "dilation": dilation, "convolution_mode": mode}  # fmt: skip
    return members, sizes, kernel, outs


def draw_convolution(rng: np.random.Generator, io: DataType, seed: int) -> tuple[Graph, set[str]]:
    """A forward, data-gradient or weight-gradient convolution (see the module doc)."""
    kind = pick(rng, ("fprop", "dgrad", "wgrad"))
    spatial = int(rng.integers(1, 3))
    groups = pick(rng, (1, 1, 2, 3))
    n = int(rng.integers(1, 4))
    c, k = groups * int(rng.integers(1, 4)), groups * int(rng.integers(1, 4))
    members, sizes, kernel, outs = _conv_geometry(rng, spatial)
    channels_last = rng.random() < 0.5
    x_dims, w_dims, y_dims = [n, c, *sizes], [k, c // groups, *kernel], [n, k, *outs]
    g = new_graph(f"convolution_{seed}", io)

    def operand(name: str, dims: list[int]) -> TensorAttributes:
        return g.tensor(name=name, dim=dims, stride=layout_strides(dims, channels_last))

    if kind == "fprop":
        out = g.conv_fprop(operand("X", x_dims), operand("W", w_dims), name="conv", **members)
        out_dims = y_dims
    elif kind == "dgrad":
        out = g.conv_dgrad(operand("DY", y_dims), operand("W", w_dims), name="conv", **members)
        out_dims = x_dims
    else:
        out = g.conv_wgrad(operand("DY", y_dims), operand("X", x_dims), name="conv", **members)
        out_dims = w_dims
    mark_output(out, out_dims, layout_strides(out_dims, channels_last))
    features = {kind, f"spatial={spatial}", members["convolution_mode"].name}
    features |= {"channels_last"} if channels_last else set()
    features |= {f"groups={groups}"} if groups > 1 else set()
    for key in ("stride", "dilation"):
        if any(v > 1 for v in members[key]):
            features.add(key)
    if members["pre_padding"] != members["post_padding"]:
        features.add("asymmetric_padding")
    return g, features


# ----- batch norm -----
def _channel_tensor(g: Graph, name: str, c: int, rank: int) -> TensorAttributes:
    dims = [1, c] + [1] * (rank - 2)
    return g.tensor(name=name, dim=dims)


def draw_batchnorm(rng: np.random.Generator, io: DataType, seed: int) -> tuple[Graph, set[str]]:
    """One batch-norm node of a random kind (see the module doc)."""
    kind = pick(rng, ("training", "training_running", "inference", "inference_variance",
                      "backward"))  # fmt: skip
    rank = int(rng.integers(3, 5))
    dims = draw_dims(rng, rank, high=6)
    dims[0] = max(dims[0], 2)  # N x spatial > 1: a batch variance exists
    channels_last = rng.random() < 0.5
    g = new_graph(f"batchnorm_{seed}", io)
    x = g.tensor(name="X", dim=dims, stride=layout_strides(dims, channels_last))
    c = dims[1]

    def per_channel(name: str) -> TensorAttributes:
        return _channel_tensor(g, name, c, rank)

    scale, bias = per_channel("SCALE"), per_channel("BIAS")
    outputs: list[TensorAttributes | None]
    if kind.startswith("training"):
        eps = scalar_operand(g, rng, "EPSILON", 1e-5, 1e-2)
        running = {}
        if kind == "training_running":
            running = {"prev_running_mean": per_channel("PREV_RUNNING_MEAN"),
                       "prev_running_variance": per_channel("PREV_RUNNING_VARIANCE"),
                       "momentum": scalar_operand(g, rng, "MOMENTUM", 0.05, 0.5)}  # fmt: skip
        outputs = list(g.batchnorm(x, scale, bias, epsilon=eps, name="bn", **running))
    elif kind == "inference":
        mean, inv = per_channel("MEAN"), per_channel("INV_VARIANCE")
        outputs = [g.batchnorm_inference(x, mean, inv, scale, bias, name="bn")]
    elif kind == "inference_variance":
        mean, var = per_channel("MEAN"), per_channel("VARIANCE")
        eps = scalar_operand(g, rng, "EPSILON", 1e-5, 1e-2)
        outputs = [g.batchnorm_inference_variance_ext(x, mean, var, scale, bias, eps, name="bn")]
    else:
        dy = g.tensor(name="DY", dim=dims, stride=layout_strides(dims, channels_last))
        outputs = list(g.batchnorm_backward(dy, x, scale, name="bn", mean=per_channel("MEAN"),
                                            inv_variance=per_channel("INV_VARIANCE")))  # fmt: skip
    for t in outputs:
        if t is not None:
            t.set_output(True)
    features = {kind, f"rank={rank}"} | ({"channels_last"} if channels_last else set())
    return g, features


# ----- layer norm -----
def _norm_shapes(rng: np.random.Generator) -> tuple[list[int], int]:
    """X's dims (rank 2-4, normalized dims of at least 2 so that SCALE names them) and how many
    trailing dims are normalized."""
    rank = int(rng.integers(2, 5))
    dims = draw_dims(rng, rank, high=7, low=2)
    return dims, int(rng.integers(1, rank))


def draw_layernorm(rng: np.random.Generator, io: DataType, seed: int) -> tuple[Graph, set[str]]:
    """A layer-norm forward (training or inference) or backward node (see the module doc)."""
    dims, k = _norm_shapes(rng)
    rank = len(dims)
    reduced = rng.random() < 0.4
    scale_dims = dims[rank - k :] if reduced else [1] * (rank - k) + dims[rank - k :]
    stats_dims = dims[: rank - k] + [1] * k
    g = new_graph(f"layernorm_{seed}", io)
    x = g.tensor(name="X", dim=dims)
    scale = g.tensor(name="SCALE", dim=scale_dims)
    count = k if rng.random() < 0.5 or reduced else 0  # 0: inferred from SCALE
    kind = pick(rng, ("training", "inference", "backward"))
    features = {kind, f"rank={rank}", f"normalized={k}"}
    features |= {"reduced_rank_scale"} if reduced else set()
    if kind == "backward":
        keywords: dict[str, TensorAttributes] = {}
        if rng.random() < 0.6:
            keywords["mean"] = g.tensor(name="MEAN", dim=stats_dims)
            keywords["inv_variance"] = g.tensor(name="INV_VARIANCE", dim=stats_dims)
            features.add("saved_statistics")
        else:
            keywords["epsilon"] = scalar_operand(g, rng, "EPSILON", 1e-5, 1e-2)
        dy = g.tensor(name="DY", dim=dims)
        outs = g.layernorm_backward(dy, x, scale, name="ln", normalized_dim_count=count,
                                    **keywords)  # fmt: skip
        for t in outs:
            t.set_output(True)
        return g, features
    phase = NormFwdPhase.TRAINING if kind == "training" else NormFwdPhase.INFERENCE
    bias = g.tensor(name="BIAS", dim=scale_dims)
    y, mean, inv = g.layernorm(x, scale, bias, name="ln", forward_phase=phase,
                               epsilon=scalar_operand(g, rng, "EPSILON", 1e-5, 1e-2),
                               normalized_dim_count=count)  # fmt: skip
    y.set_output(True)
    for stat in (mean, inv):
        if stat is not None:
            mark_output(stat, stats_dims)
    return g, features


# ----- RMSNorm -----
def draw_rmsnorm(rng: np.random.Generator, io: DataType, seed: int) -> tuple[Graph, set[str]]:
    """An RMSNorm forward (training or inference, a bias or not) or backward node."""
    dims, k = _norm_shapes(rng)
    rank = len(dims)
    scale_dims = [1] * (rank - k) + dims[rank - k :]
    stats_dims = dims[: rank - k] + [1] * k
    g = new_graph(f"rmsnorm_{seed}", io)
    x = g.tensor(name="X", dim=dims)
    scale = g.tensor(name="SCALE", dim=scale_dims)
    kind = pick(rng, ("training", "inference", "backward"))
    features = {kind, f"rank={rank}", f"normalized={k}"}
    if kind == "backward":
        dbias = rng.random() < 0.5
        features |= {"dbias"} if dbias else set()
        dy = g.tensor(name="DY", dim=dims)
        inv_rms = g.tensor(name="INV_RMS", dim=stats_dims)
        for grad in g.rmsnorm_backward(dy, x, scale, inv_rms, name="rms", compute_dbias=dbias):
            if grad is not None:
                grad.set_output(True)
        return g, features
    phase = NormFwdPhase.TRAINING if kind == "training" else NormFwdPhase.INFERENCE
    keywords: dict[str, TensorAttributes] = {}
    if rng.random() < 0.5:
        keywords["bias"] = g.tensor(name="BIAS", dim=scale_dims)
        features.add("bias")
    y, inv = g.rmsnorm(x, scale, name="rms", forward_phase=phase,
                       epsilon=scalar_operand(g, rng, "EPSILON", 1e-6, 1e-2),
                       **keywords)  # fmt: skip
    y.set_output(True)
    if inv is not None:
        mark_output(inv, stats_dims)
    return g, features


# ----- MoE grouped matmul -----
def draw_moe(rng: np.random.Generator, io: DataType, seed: int) -> tuple[Graph, set[str]]:
    """A MoE grouped matmul in a random routing mode, or its weight gradient; the routing
    tensors' values come from the input maker."""
    g = new_graph(f"moe_{seed}", io)
    tokens, k, n = (int(v) for v in rng.integers(1, 10, size=3))
    experts = int(rng.integers(1, 5))
    mode = pick(rng, ("NONE", "GATHER", "SCATTER", "backward"))
    token = g.tensor(name="TOKEN", dim=[1, tokens, k])
    offsets_of = experts if mode == "backward" else experts * int(rng.integers(1, 3))
    offsets = g.tensor(name="FIRST_TOKEN_OFFSET", dim=[offsets_of, 1, 1], data_type=_INT32)
    if mode == "backward":
        dout = g.tensor(name="DOUTPUT", dim=[1, tokens, n])
        g.moe_grouped_matmul_bwd(dout, token, offsets, name="moe").set_output(True)
        return g, {"backward", f"experts={experts}"}
    weight = g.tensor(name="WEIGHT", dim=[experts, k, n])
    index = ks = None
    keywords: dict[str, Any] = {"mode": MoeGroupedMatmulMode[mode]}
    if mode == "GATHER":
        routed = int(rng.integers(1, 12))
        index = g.tensor(name="TOKEN_INDEX", dim=[1, routed, 1], data_type=_INT32)
    elif mode == "SCATTER":
        index = g.tensor(name="TOKEN_INDEX", dim=[1, tokens, 1], data_type=_INT32)
        ks = g.tensor(name="TOKEN_KS", dim=[1, tokens, 1], data_type=_INT32)
        keywords["top_k"] = int(rng.integers(1, experts + 1))
    g.moe_grouped_matmul(token, weight, offsets, index, ks, name="moe", **keywords).set_output(True)
    return g, {mode, f"experts={experts}", f"groups={offsets_of}"}


# ----- chains (the "mixed" family) -----
def draw_conv_bn_relu(rng: np.random.Generator, io: DataType, seed: int) -> tuple[Graph, set[str]]:
    """A convolution block as deployed: convolution → batch-norm inference → ReLU."""
    g = new_graph(f"conv_bn_relu_{seed}", io)
    spatial = int(rng.integers(1, 3))
    members, sizes, kernel, outs = _conv_geometry(rng, spatial)
    n, c, k = (int(v) for v in rng.integers(1, 5, size=3))
    channels_last = rng.random() < 0.5
    x_dims = [n, c, *sizes]
    x = g.tensor(name="X", dim=x_dims, stride=layout_strides(x_dims, channels_last))
    w = g.tensor(name="W", dim=[k, c, *kernel], stride=layout_strides([k, c, *kernel],
                                                                      channels_last))  # fmt: skip
    y = g.conv_fprop(x, w, name="conv", **members)
    stats = [_channel_tensor(g, name, k, spatial + 2)
             for name in ("MEAN", "INV_VARIANCE", "SCALE", "BIAS")]  # fmt: skip
    normed = g.batchnorm_inference(y, *stats, name="bn")
    out = g.pointwise(normed, mode=PointwiseMode.RELU_FWD, name="relu")
    out_dims = [n, k, *outs]
    mark_output(out, out_dims, layout_strides(out_dims, channels_last))
    features = {"conv_bn_relu", f"spatial={spatial}"}
    return g, features | ({"channels_last"} if channels_last else set())


def draw_rmsnorm_matmul_silu(
    rng: np.random.Generator, io: DataType, seed: int
) -> tuple[Graph, set[str]]:
    """A pre-norm projection: RMSNorm → matmul → SiLU (swish with beta 1)."""
    g = new_graph(f"rmsnorm_matmul_silu_{seed}", io)
    b, s, d, f = (int(v) for v in rng.integers(2, 9, size=4))
    x = g.tensor(name="X", dim=[b, s, d])
    scale = g.tensor(name="SCALE", dim=[1, 1, d])
    phase = pick(rng, (NormFwdPhase.TRAINING, NormFwdPhase.INFERENCE))
    y, inv_rms = g.rmsnorm(x, scale, name="norm", forward_phase=phase,
                           epsilon=scalar_operand(g, rng, "EPSILON", 1e-6, 1e-2))  # fmt: skip
    if inv_rms is not None:
        mark_output(inv_rms, [b, s, 1])
    w = g.tensor(name="W", dim=[1, d, f])
    h = g.matmul(y, w, name="proj")
    out = g.pointwise(h, mode=PointwiseMode.SWISH_FWD, swish_beta=1.0, name="silu")
    mark_output(out, [b, s, f], generate_strides([b, s, f]))
    return g, {"rmsnorm_matmul_silu", phase.name}
