"""Graphs built with the project's public API, for the writer tests (HIPDNN_WIRE.md C3).

``WRITABLE``: typical graphs (tests/sdpa_graph_cases.py) plus one graph per hipDNN data type and
one scale value per TensorValue member; ``serialize()`` must write each so that hipDNN reads the
graph's own content. ``UNWRITABLE``: graphs whose content hipDNN's schema cannot carry; the writer
must refuse them with ``UNSUPPORTED_GRAPH_FORMAT``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import sdpa_graph_cases as cases
from wire_model import HIPDNN_DATA_TYPES

import hipdnn_graph as hg


def _forward_with_scale(name: str, scale: hg.TensorAttributes | None, io: hg.DataType) -> hg.Graph:
    g = cases.new_graph(name, io=io)
    q, k, v = (g.tensor(name=n, dim=cases.SHAPE) for n in "QKV")
    kwargs: dict[str, Any] = {}
    if scale is not None:
        g.tensor(scale)
        kwargs["attn_scale"] = scale
    o, _ = g.sdpa(q, k, v, name="fwd", generate_stats=False, **kwargs)
    o.set_output(True)
    return g


def io_type(dtype: hg.DataType) -> Callable[[], hg.Graph]:
    """Q, K, V and O of ``dtype`` (tensors without values: every type of the schema)."""
    return lambda: _forward_with_scale(f"io_{dtype.name.lower()}", None, dtype)


def scale_of(dtype: hg.DataType, value: Any) -> Callable[[], hg.Graph]:
    """A scale tensor of ``dtype`` holding ``value`` (set as a Python scalar, then retyped)."""

    def build() -> hg.Graph:
        scale = hg.TensorAttributes(name="Scale").set_value(value).set_data_type(dtype)
        return _forward_with_scale(f"scale_{dtype.name.lower()}", scale, hg.DataType.HALF)

    return build


def backward_band_dropout() -> hg.Graph:
    """Backward alone with a band, bottom-right alignment, a runtime scale and philox dropout."""
    g = cases.new_graph("bwd_band")
    q, k, v, o, do = (g.tensor(name=n, dim=cases.SHAPE) for n in ("Q", "K", "V", "O", "dO"))
    stats = g.tensor(name="Stats", dim=[cases.B, cases.H, cases.S, 1], data_type=hg.DataType.FLOAT)
    scale = g.tensor(name="Scale", dim=[1], data_type=hg.DataType.FLOAT)
    scale.set_as_runtime_parameter()
    seed = g.tensor(name="Seed").set_value(np.int64(-3))
    offset = g.tensor(name="Offset").set_value(np.int64(2**62))
    attrs = (
        hg.SdpaBackwardAttributes()
        .set_name("bwd")
        .set_attn_scale(scale)
        .set_dropout(0.3, seed, offset)
        .set_diagonal_band_left_bound(5)
        .set_diagonal_band_right_bound(0)
        .set_diagonal_alignment(hg.DiagonalAlignment.BOTTOM_RIGHT)
    )
    for t in g.sdpa_backward(q, k, v, o, do, stats, attrs):
        t.set_output(True)
    return g


def pointwise_chain() -> hg.Graph:
    """Pointwise nodes of one, two and three inputs with every scalar of the table set."""
    g = cases.new_graph("pointwise_chain")
    x = g.tensor(name="X", dim=[2, 8])
    bias = g.tensor(name="Bias", dim=[1, 8])
    cond = g.tensor(name="Cond", dim=[2, 8], data_type=hg.DataType.UINT8)
    M = hg.PointwiseMode
    s = g.pointwise(x, bias, mode=M.ADD, name="add")
    r = g.pointwise(
        s,
        mode=M.RELU_FWD,
        relu_lower_clip=0.1,
        relu_upper_clip=6.0,
        relu_lower_clip_slope=0.01,
        swish_beta=1.5,
        elu_alpha=-0.25,
        softplus_beta=3.0,
        axis=1,
    )
    m = g.pointwise(r, x, mode=M.MAX)
    y = g.pointwise(cond, m, s, mode=M.BINARY_SELECT, compute_data_type=hg.DataType.DOUBLE)
    y.set_output(True)
    return g


def attention_then_pointwise() -> hg.Graph:
    """SDPA forward whose O is scaled by a pointwise MUL: two families in one graph."""
    g = cases.new_graph("attn_pointwise")
    q, k, v = (g.tensor(name=n, dim=cases.SHAPE) for n in "QKV")
    o, _ = g.sdpa(q, k, v, name="fwd", generate_stats=False)
    gain = g.tensor(name="Gain", dim=[1, 1, 1, 1])
    y = g.pointwise(o, gain, hg.PointwiseAttributes().set_mode(hg.PointwiseMode.MUL))
    y.set_output(True)
    return g


def matmul_bias_relu() -> hg.Graph:
    """A batched matmul with a broadcast B, a bias add and a ReLU (matmul + pointwise)."""
    g = cases.new_graph("matmul_bias_relu", io=hg.DataType.BFLOAT16)
    a = g.tensor(name="A", dim=[4, 16, 32])
    b = g.tensor(name="B", dim=[1, 32, 8])
    c = g.matmul(a, b, hg.MatmulAttributes().set_name("mm"))
    bias = g.tensor(name="bias", dim=[1, 1, 8])
    s = g.pointwise(c, bias, mode=hg.PointwiseMode.ADD, name="add")
    y = g.pointwise(s, mode=hg.PointwiseMode.RELU_FWD, name="relu")
    y.set_output(True)
    return g


def conv_block() -> hg.Graph:
    """A convolution block: a channels-last 3x3 convolution, a bias add and a ReLU, then a
    strided, dilated true convolution with asymmetric padding (conv_fprop + pointwise)."""
    g = cases.new_graph("conv_block")
    x = g.tensor(name="X", dim=[2, 8, 16, 16], stride=[2048, 1, 128, 8])
    w1 = g.tensor(name="W1", dim=[16, 8, 3, 3])
    attrs = hg.ConvFpropAttributes().set_padding([1, 1]).set_stride([1, 1]).set_dilation([1, 1])
    c = g.conv_fprop(x, w1, attrs.set_name("conv1"))
    bias = g.tensor(name="bias", dim=[1, 16, 1, 1])
    s = g.pointwise(c, bias, mode=hg.PointwiseMode.ADD, name="add")
    r = g.pointwise(s, mode=hg.PointwiseMode.RELU_FWD, name="relu")
    w2 = g.tensor(name="W2", dim=[32, 4, 3, 2])
    y = g.conv_fprop(
        r, w2, name="conv2", pre_padding=[1, 0], post_padding=[0, 2], stride=[2, 3],
        dilation=[2, 1], convolution_mode=hg.ConvolutionMode.CONVOLUTION,
    )  # fmt: skip
    y.set_output(True)
    return g


def conv_gradients() -> hg.Graph:
    """A forward convolution whose output feeds both gradient convolutions (conv_fprop,
    conv_dgrad, conv_wgrad in one connected graph; Y, DX and DW inferred)."""
    g = cases.new_graph("conv_gradients")
    x = g.tensor(name="X", dim=[2, 8, 16, 16])
    w = g.tensor(name="W", dim=[16, 8, 3, 3])
    members = {"pre_padding": [1, 1], "post_padding": [1, 1], "stride": [2, 2]}
    members["dilation"] = [1, 1]
    dy = g.conv_fprop(x, w, name="fprop", **members)
    dx = g.conv_dgrad(dy, w, name="dgrad", **members)
    dw = g.conv_wgrad(dy, x, hg.ConvWgradAttributes().set_name("wgrad"), **members)
    dx.set_output(True)
    dw.set_output(True)
    return g


def pool_training_step() -> hg.Graph:
    """A convolution's ReLU max-pooled with its INDEX (Y and INDEX inferred), the pooling's
    backward from that INDEX, and an average pooling of the ReLU (resample, resample_fwd
    and resample_bwd in one graph)."""
    g = cases.new_graph("pool_training_step")
    x = g.tensor(name="X", dim=[2, 4, 8, 8], stride=[256, 1, 32, 4])
    r = g.pointwise(x, mode=hg.PointwiseMode.RELU_FWD, name="relu")
    pool = (
        hg.ResampleFwdAttributes().set_name("maxpool").set_resample_mode(hg.ResampleMode.MAXPOOL)
        .set_padding_mode(hg.PaddingMode.NEG_INF_PAD).set_pre_padding([0, 0])
        .set_post_padding([0, 0]).set_stride([2, 2]).set_window([2, 2]).set_generate_index(True)
    )  # fmt: skip
    y, index = g.resample(r, pool)
    assert index is not None
    dy = g.tensor(name="dY", dim=[2, 4, 4, 4], stride=[64, 1, 16, 4])
    back = hg.ResampleBwdAttributes().set_name("maxpool_bwd")
    for member in ("pre_padding", "post_padding", "stride", "window"):
        getattr(back, f"set_{member}")(getattr(pool, member))
    back.set_resample_mode(hg.ResampleMode.MAXPOOL).set_padding_mode(hg.PaddingMode.NEG_INF_PAD)
    dx = g.resample_bwd(dy, back, index=index)
    avg = g.resample_fwd(
        r, name="avgpool", resample_mode=hg.ResampleMode.AVGPOOL_EXCLUDE_PADDING,
        padding_mode=hg.PaddingMode.ZERO_PAD, pre_padding=[1, 1], post_padding=[1, 0],
        stride=[2, 3], window=[3, 3],
    )  # fmt: skip
    for out in (y, index, dx, avg):
        out.set_output(True)
    return g


def norm_scale_reduction() -> hg.Graph:
    """A pointwise square feeding a deterministic sum over the last axis, then an AMAX over
    everything (pointwise + reduction, one reduction with Y given, one with Y made here)."""
    g = cases.new_graph("pointwise_reduction")
    x = g.tensor(name="X", dim=[4, 8, 32])
    sq = g.pointwise(x, x, mode=hg.PointwiseMode.MUL, name="square")
    total = g.tensor(name="Total", dim=[4, 8, 1], data_type=hg.DataType.FLOAT)
    g.reduction(sq, total, mode=hg.ReductionMode.ADD, is_deterministic=True, name="sum")
    peak = g.reduction(total, hg.ReductionAttributes().set_mode(hg.ReductionMode.AMAX))
    peak.set_dim([1, 1, 1]).set_stride([1, 1, 1]).set_output(True)
    total.set_output(True)
    return g


def rmsnorm_then_matmul() -> hg.Graph:
    """RMSNorm (training, with a bias) feeding a matmul and a pointwise SiLU: a transformer's
    pre-norm projection, three families in one graph."""
    g = cases.new_graph("rmsnorm_matmul", io=hg.DataType.BFLOAT16)
    x = g.tensor(name="X", dim=[4, 16, 32])
    gamma = g.tensor(name="gamma", dim=[1, 1, 32], data_type=hg.DataType.FLOAT)
    beta = g.tensor(name="beta", dim=[1, 1, 32], data_type=hg.DataType.FLOAT)
    eps = g.tensor(name="eps").set_value(1e-6)
    attrs = hg.RMSNormAttributes().set_name("norm").set_epsilon(eps).set_bias(beta)
    y, inv_rms = g.rmsnorm(x, gamma, attrs.set_forward_phase(hg.NormFwdPhase.TRAINING))
    assert inv_rms is not None
    inv_rms.set_output(True)
    w = g.tensor(name="W", dim=[1, 32, 8])
    h = g.matmul(y, w, name="proj")
    g.pointwise(h, mode=hg.PointwiseMode.SWISH_FWD, swish_beta=1.0).set_output(True)
    return g


def layernorm_then_matmul() -> hg.Graph:
    """Layer norm (training) feeding a matmul and a GELU: a transformer's post-attention block,
    three families in one graph."""
    g = cases.new_graph("layernorm_matmul", io=hg.DataType.HALF)
    x = g.tensor(name="X", dim=[4, 16, 32])
    gamma = g.tensor(name="gamma", dim=[1, 16, 32], data_type=hg.DataType.FLOAT)
    beta = g.tensor(name="beta", dim=[1, 16, 32], data_type=hg.DataType.FLOAT)
    eps = g.tensor(name="eps").set_value(1e-5)
    y, mean, inv_variance = g.layernorm(
        x, gamma, beta, epsilon=eps, forward_phase=hg.NormFwdPhase.TRAINING,
        normalized_dim_count=2, name="ln",
    )  # fmt: skip
    assert mean is not None and inv_variance is not None
    mean.set_output(True)
    inv_variance.set_output(True)
    h = g.matmul(y, g.tensor(name="W", dim=[1, 32, 8]), name="proj")
    g.pointwise(h, mode=hg.PointwiseMode.GELU_FWD).set_output(True)
    return g


def batchnorm_then_relu() -> hg.Graph:
    """Batch norm in training with running statistics feeding a ReLU: a convolution block's
    tail, NHWC activations."""
    g = cases.new_graph("batchnorm_relu", io=hg.DataType.HALF)
    x = g.tensor(name="X", dim=[4, 8, 6, 6], stride=[288, 1, 48, 8])
    f32 = hg.DataType.FLOAT
    scale, bias, rm, rv = (
        g.tensor(name=n, dim=[1, 8, 1, 1], data_type=f32) for n in ("gamma", "beta", "rm", "rv")
    )
    momentum = g.tensor(name="momentum").set_value(0.1)
    eps = g.tensor(name="eps").set_value(1e-5)
    attrs = hg.BatchnormAttributes().set_previous_running_stats(rm, rv, momentum)
    y, *stats = g.batchnorm(x, scale, bias, attrs, epsilon=eps, name="bn")
    for t in stats:
        assert t is not None
        t.set_output(True)
    g.pointwise(y, mode=hg.PointwiseMode.RELU_FWD).set_output(True)
    return g


def batchnorm_inference_then_relu() -> hg.Graph:
    """Batch-norm inference with saved statistics feeding a ReLU (a deployed convolution block's
    tail)."""
    g = cases.new_graph("batchnorm_inference_relu", io=hg.DataType.HALF)
    x = g.tensor(name="X", dim=[2, 4, 3, 3])
    stats = (
        g.tensor(name=n, dim=[1, 4, 1, 1], data_type=hg.DataType.FLOAT)
        for n in ("mean", "inv_std", "gamma", "beta")
    )
    y = g.batchnorm_inference(x, *stats, name="bn")
    g.pointwise(y, mode=hg.PointwiseMode.RELU_FWD).set_output(True)
    return g


def batchnorm_inference_variance_then_relu() -> hg.Graph:
    """Batch-norm inference from the saved variance and an epsilon value, then ReLU."""
    g = cases.new_graph("batchnorm_inference_variance_relu", io=hg.DataType.FLOAT)
    x = g.tensor(name="X", dim=[2, 4, 3, 3])
    stats = [g.tensor(name=n, dim=[1, 4, 1, 1]) for n in ("mean", "var", "gamma", "beta")]
    eps = g.tensor(name="eps").set_value(1e-5)
    y = g.batchnorm_inference_variance_ext(x, *stats, eps, name="bn")
    g.pointwise(y, mode=hg.PointwiseMode.RELU_FWD).set_output(True)
    return g


def batchnorm_training_step() -> hg.Graph:
    """A batch norm's forward (training) and its backward in one graph: the backward reads the
    forward's saved mean and inverse variance."""
    g = cases.new_graph("batchnorm_training_step", io=hg.DataType.FLOAT)
    x = g.tensor(name="X", dim=[4, 3, 2, 2])
    scale, bias = g.tensor(name="gamma", dim=[1, 3, 1, 1]), g.tensor(name="beta", dim=[1, 3, 1, 1])
    eps = g.tensor(name="eps").set_value(1e-5)
    y, mean, inv_var, _, _ = g.batchnorm(x, scale, bias, epsilon=eps, name="bn")
    y.set_output(True)
    dy = g.tensor(name="dY", dim=[4, 3, 2, 2])
    attrs = hg.BatchnormBackwardAttributes().set_saved_mean_and_inv_variance(mean, inv_var)
    for t in g.batchnorm_backward(dy, x, scale, attrs, name="bn_bwd"):
        t.set_output(True)
    return g


def mx_matmul() -> hg.Graph:
    """MX block scaling around a matmul: both operands quantized (the weight transposed, along
    its first axis), dequantized and multiplied."""
    g = cases.new_graph("mx_matmul", io=hg.DataType.FLOAT)
    a, b = g.tensor(name="A", dim=[1, 8, 64]), g.tensor(name="B", dim=[1, 64, 16])
    operands = []
    for t, axis, transpose in ((a, 2, False), (b, 1, True)):
        q, s = g.block_scale_quantize(t, block_size=32, axis=axis, transpose=transpose)
        q.set_data_type(hg.DataType.FP8_E4M3)
        s.set_data_type(hg.DataType.FP8_E8M0)
        blocks = [1, 1, 32] if axis == 2 else [1, 32, 1]
        operands.append(g.block_scale_dequantize(q, s, block_size=blocks))
    g.matmul(*operands, name="mm").set_output(True)
    return g


def layernorm_training_step() -> hg.Graph:
    """A layer norm's forward (training) and its backward in one graph: the backward reads the
    forward's saved mean and inverse variance and its epsilon."""
    g = cases.new_graph("layernorm_training_step", io=hg.DataType.FLOAT)
    x = g.tensor(name="X", dim=[4, 16, 32])
    gamma, beta = g.tensor(name="gamma", dim=[1, 16, 32]), g.tensor(name="beta", dim=[1, 16, 32])
    eps = g.tensor(name="eps").set_value(1e-5)
    y, mean, inv_var = g.layernorm(
        x, gamma, beta, epsilon=eps, forward_phase=hg.NormFwdPhase.TRAINING, name="ln"
    )
    y.set_output(True)
    dy = g.tensor(name="dY", dim=[4, 16, 32])
    attrs = hg.LayernormBackwardAttributes().set_saved_mean_and_inv_variance(mean, inv_var)
    for t in g.layernorm_backward(dy, x, gamma, attrs.set_epsilon(eps), name="ln_bwd"):
        t.set_output(True)
    return g


def rmsnorm_training_step() -> hg.Graph:
    """An RMSNorm's forward (training, with a bias) and its backward computing dbias."""
    g = cases.new_graph("rmsnorm_training_step", io=hg.DataType.BFLOAT16)
    x = g.tensor(name="X", dim=[2, 8, 64])
    f32 = hg.DataType.FLOAT
    gamma = g.tensor(name="gamma", dim=[1, 1, 64], data_type=f32)
    beta = g.tensor(name="beta", dim=[1, 1, 64], data_type=f32)
    eps = g.tensor(name="eps").set_value(1e-6)
    attrs = hg.RMSNormAttributes().set_name("norm").set_epsilon(eps).set_bias(beta)
    y, inv_rms = g.rmsnorm(x, gamma, attrs.set_forward_phase(hg.NormFwdPhase.TRAINING))
    y.set_output(True)
    dy = g.tensor(name="dY", dim=[2, 8, 64])
    for t in g.rmsnorm_backward(dy, x, gamma, inv_rms, compute_dbias=True, name="norm_bwd"):
        assert t is not None
        t.set_output(True)
    return g


def moe_expert_layer() -> hg.Graph:
    """A MoE expert layer and its weight gradient: a SCATTER grouped matmul (top_k 2 over two
    batches of expert offsets), a GATHER one fed by its output, and the weight gradient of the
    second (DWEIGHT inferred with column-major strides) fed by the second's output."""
    g = cases.new_graph("moe_expert_layer", io=hg.DataType.BFLOAT16)
    i32 = hg.DataType.INT32
    token = g.tensor(name="token", dim=[1, 8, 16])
    w1 = g.tensor(name="w1", dim=[2, 16, 32], stride=[512, 1, 16])
    offsets = g.tensor(name="offsets", dim=[4, 1, 1], data_type=i32)
    index = g.tensor(name="index", dim=[1, 8, 1], data_type=i32)
    ks = g.tensor(name="ks", dim=[1, 8, 1], data_type=i32)
    hidden = g.moe_grouped_matmul(
        token, w1, offsets, index, ks, name="fc1", mode=hg.MoeGroupedMatmulMode.SCATTER, top_k=2
    )
    w2 = g.tensor(name="w2", dim=[2, 32, 16])
    gathered = g.tensor(name="gathered", dim=[1, 6, 1], data_type=i32)
    out = g.moe_grouped_matmul(
        hidden, w2, g.tensor(name="offsets2", dim=[2, 1, 1], data_type=i32), gathered, None,
        name="fc2", mode=hg.MoeGroupedMatmulMode.GATHER,
    )  # fmt: skip
    out.set_output(True)
    dw = g.moe_grouped_matmul_bwd(  # the forward's output as the gradient: one graph
        out, g.tensor(name="routed", dim=[1, 6, 32]),
        g.tensor(name="offsets3", dim=[2, 1, 1], data_type=i32), name="dfc2",
    )  # fmt: skip
    dw.set_output(True)
    return g


def custom_op_chain() -> hg.Graph:
    """A plugin op between two families: a ReLU feeds a two-output custom op with a payload,
    whose second output a matmul reads."""
    g = cases.new_graph("custom_op_chain", io=hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[2, 8, 8])
    h = g.pointwise(x, name="relu", mode=hg.PointwiseMode.RELU_FWD)
    attrs = hg.CustomOpAttributes().set_custom_op_id("example.rope").set_data(b"\x01\x02\xff")
    kept, rotated = g.custom_op([h, g.tensor(name="pos", dim=[1, 8, 8])], 2, attrs, name="rope")
    for t in (kept, rotated):
        t.set_dim([2, 8, 8]).set_stride([64, 8, 1])
    kept.set_output(True)
    g.matmul(rotated, g.tensor(name="w", dim=[2, 8, 4]), name="proj").set_output(True)
    return g


def packed_attention() -> hg.Graph:
    """SDPA forward over a packed batch: Q and O share offsets, K and V share theirs (token-unit
    offsets on K and V, with an offset multiplier), the O's offsets set after ``sdpa``."""
    g = cases.new_graph("packed")
    b, h, s, d = 3, 2, 8, 4
    token_major = [s * h * d, d, h * d, 1]
    q, k, v = (g.tensor(name=n, dim=[b, h, s, d], stride=token_major) for n in "QKV")
    off_q, off_kv = (
        g.tensor(name=n, dim=[b + 1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=dt)
        for n, dt in (("off_q", hg.DataType.INT32), ("off_kv", hg.DataType.INT64))
    )
    q.set_ragged_offset(off_q)
    for t in (k, v):
        t.set_ragged_offset(off_kv).set_ragged_offset_multiplier(h * d)
    o, _ = g.sdpa(q, k, v, name="fwd", generate_stats=True, use_causal_mask=True)
    o.set_output(True).set_stride(token_major).set_ragged_offset(off_q)
    return g


_SCALE_VALUES: list[tuple[str, Any]] = [
    ("FLOAT", 0.1),
    ("HALF", 0.1),  # Float16Value holds the nearest binary32, not a 16-bit rounding
    ("BFLOAT16", -2.5),
    ("DOUBLE", 0.1),
    ("INT32", -(2**31)),
    ("INT64", 2**63 - 1),
    ("UINT8", 255),
    ("INT8", -128),
    ("FP8_E4M3", 1.5),
    ("FP8_E5M2", -0.25),
    ("FP8_E4M3_FNUZ", 0.5),
    ("FP8_E5M2_FNUZ", 2.0),
    ("BOOLEAN", True),
]

WRITABLE: dict[str, Callable[[], hg.Graph]] = {
    **cases.CASES,
    "bwd_band_dropout": backward_band_dropout,
    "pointwise_chain": pointwise_chain,
    "attention_then_pointwise": attention_then_pointwise,
    "pointwise_reduction": norm_scale_reduction,
    "rmsnorm_matmul": rmsnorm_then_matmul,
    "layernorm_matmul": layernorm_then_matmul,
    "batchnorm_relu": batchnorm_then_relu,
    "batchnorm_training_step": batchnorm_training_step,
    "layernorm_training_step": layernorm_training_step,
    "rmsnorm_training_step": rmsnorm_training_step,
    "batchnorm_inference_relu": batchnorm_inference_then_relu,
    "batchnorm_inference_variance_relu": batchnorm_inference_variance_then_relu,
    "matmul_bias_relu": matmul_bias_relu,
    "conv_block": conv_block,
    "conv_gradients": conv_gradients,
    "pool_training_step": pool_training_step,
    "mx_matmul": mx_matmul,
    "moe_expert_layer": moe_expert_layer,
    "custom_op_chain": custom_op_chain,
    "packed_attention": packed_attention,
    **{
        f"io_{name.lower()}": io_type(hg.DataType[name])
        for name in HIPDNN_DATA_TYPES
        if name != "UNSET"
    },
    **{f"scale_{n.lower()}": scale_of(hg.DataType[n], v) for n, v in _SCALE_VALUES},
}


def _pooled(
    mode: hg.ResampleMode = hg.ResampleMode.MAXPOOL,
    padding: hg.PaddingMode = hg.PaddingMode.ZERO_PAD,
) -> Callable[[], hg.Graph]:
    """A one-node pooling graph with these modes (validation allows any mode)."""

    def build() -> hg.Graph:
        g = cases.new_graph("pooled")
        x = g.tensor(name="X", dim=[1, 2, 4, 4])
        y = g.resample_fwd(
            x, resample_mode=mode, padding_mode=padding, pre_padding=[0, 0],
            post_padding=[0, 0], stride=[2, 2], window=[2, 2],
        )  # fmt: skip
        y.set_output(True)
        return g

    return build


#: graph -> a word the refusal's message must contain.
UNWRITABLE: dict[str, tuple[Callable[[], hg.Graph], str]] = {
    **{
        f"no_number_{name.lower()}": (io_type(hg.DataType[name]), name)
        for name in ("INT8x4", "UINT8x4", "INT8x32", "FAST_FLOAT_FOR_FP8", "COMPLEX_FP32")
    },
    # A4: types without a TensorValue member cannot hold a value
    **{
        f"value_in_{name.lower()}": (scale_of(hg.DataType[name], 1.0), name)
        for name in ("FP8_E8M0", "FP4_E2M1", "FP6_E2M3", "FP6_E3M2", "INT4")
    },
    "int32_value_out_of_range": (scale_of(hg.DataType.INT32, 2**31), "INT32"),
    # cuDNN-compatibility modes have no number in hipDNN's resample_common.fbs
    **{
        f"resample_{mode.name.lower()}": (_pooled(mode=mode), f"ResampleMode {mode.name}")
        for mode in (hg.ResampleMode.BILINEAR, hg.ResampleMode.NEAREST)
    },
    "resample_edge_val_pad": (
        _pooled(padding=hg.PaddingMode.EDGE_VAL_PAD),
        "PaddingMode EDGE_VAL_PAD",
    ),
}
