"""Graph builders and float64 torch references shared by the torch family tests (CPU and GPU).

Each ``build_<family>`` returns ``(graph, inputs, reference)``: a validated one-node graph, its
input tensors by graph tensor (float64 values already rounded to the io type) and the float64
outputs by graph tensor computed independently (``torch.nn.functional`` and autograd).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

import hipdnn_graph as hg
from hipdnn_graph.testing.draw_common import layout_strides

M = hg.PointwiseMode
R = hg.ReductionMode
TORCH_TYPES = {
    hg.DataType.FLOAT: torch.float32,
    hg.DataType.HALF: torch.float16,
    hg.DataType.BFLOAT16: torch.bfloat16,
    hg.DataType.DOUBLE: torch.float64,
    hg.DataType.INT32: torch.int32,
    hg.DataType.INT8: torch.int8,
}


def graph(io: hg.DataType, name: str = "g") -> hg.Graph:
    return hg.Graph(name=name, io_data_type=io, intermediate_data_type=io,
                    compute_data_type=hg.DataType.FLOAT)  # fmt: skip


def rand(shape: list[int], io: hg.DataType, seed: int, low: float | None = None) -> torch.Tensor:
    """Float64 values exactly representable in ``io``."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    if low is not None:
        x = x.abs() + low
    return x.to(TORCH_TYPES[io]).to(torch.float64)


# ----- pointwise -----
def _relu(x: torch.Tensor) -> torch.Tensor:
    return F.relu(x)


FORWARD: dict[M, Any] = {
    M.ABS: torch.abs, M.CEIL: torch.ceil, M.ELU_FWD: F.elu, M.ERF: torch.erf, M.EXP: torch.exp,
    M.FLOOR: torch.floor, M.GELU_APPROX_TANH_FWD: lambda x: F.gelu(x, approximate="tanh"),
    M.GELU_FWD: F.gelu, M.IDENTITY: lambda x: x, M.LOG: torch.log,
    M.LOGICAL_NOT: lambda x: (x == 0).double(), M.NEG: torch.neg, M.RECIPROCAL: lambda x: 1 / x,
    M.RELU_FWD: _relu, M.RSQRT: lambda x: 1 / torch.sqrt(x), M.SIGMOID_FWD: torch.sigmoid,
    M.SIN: torch.sin, M.SOFTPLUS_FWD: F.softplus, M.SQRT: torch.sqrt, M.SWISH_FWD: F.silu,
    M.TAN: torch.tan, M.TANH_FWD: torch.tanh,
}  # fmt: skip
BINARY: dict[M, Any] = {
    M.ADD: lambda a, b: a + b, M.ADD_SQUARE: lambda a, b: a + b**2,
    M.CMP_EQ: lambda a, b: (a == b).double(), M.CMP_GE: lambda a, b: (a >= b).double(),
    M.CMP_GT: lambda a, b: (a > b).double(), M.CMP_LE: lambda a, b: (a <= b).double(),
    M.CMP_LT: lambda a, b: (a < b).double(), M.CMP_NEQ: lambda a, b: (a != b).double(),
    M.DIV: lambda a, b: a / b, M.LOGICAL_AND: lambda a, b: ((a != 0) & (b != 0)).double(),
    M.LOGICAL_OR: lambda a, b: ((a != 0) | (b != 0)).double(), M.MAX: torch.maximum,
    M.MIN: torch.minimum, M.MUL: lambda a, b: a * b, M.SUB: lambda a, b: a - b,
}  # fmt: skip
#: backward mode -> its forward function (the reference is autograd's gradient)
BACKWARD: dict[M, Any] = {
    M.ELU_BWD: F.elu, M.GELU_APPROX_TANH_BWD: lambda x: F.gelu(x, approximate="tanh"),
    M.GELU_BWD: F.gelu, M.RELU_BWD: _relu, M.SIGMOID_BWD: torch.sigmoid,
    M.SOFTPLUS_BWD: F.softplus, M.SWISH_BWD: F.silu, M.TANH_BWD: torch.tanh,
}  # fmt: skip
POSITIVE = {M.LOG, M.SQRT, M.RSQRT, M.RECIPROCAL}


def _grad(fn: Any, dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    x = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(fn(x), x, dy)
    return g


def build_pointwise(mode: M, io: hg.DataType, seed: int = 0) -> tuple[hg.Graph, dict, dict]:
    g = graph(io)
    out_dims = [2, 3, 8]
    x = g.tensor(name="x", dim=out_dims)
    xv = rand(out_dims, io, seed, low=0.25 if mode in POSITIVE else None)
    if mode == M.GEN_INDEX:
        y = g.pointwise(x, mode=mode, axis=1, name="pw")
        ref = torch.arange(3, dtype=torch.float64).reshape(1, 3, 1).expand(out_dims)
        inputs = {x: xv}
    elif mode in FORWARD:
        y = g.pointwise(x, mode=mode, name="pw")
        inputs, ref = {x: xv}, FORWARD[mode](xv)
    elif mode == M.BINARY_SELECT:
        b = g.tensor(name="b", dim=[8])  # broadcast from the right
        t = g.tensor(name="t", dim=[3, 1])
        y = g.pointwise(x, b, t, mode=mode, name="pw")
        y.set_dim(out_dims).set_stride(hg.generate_strides(out_dims))
        bv, tv = rand([8], io, seed + 1), (rand([3, 1], io, seed + 2) > 0).double()
        inputs, ref = {x: xv, b: bv, t: tv}, torch.where(tv != 0, xv, bv)
    else:
        b = g.tensor(name="b", dim=[1, 3, 8])
        bv = rand([1, 3, 8], io, seed + 1, low=0.25 if mode == M.DIV else None)
        if mode in (M.CMP_EQ, M.CMP_NEQ, M.CMP_GE, M.CMP_LE):
            bv[0, 0] = xv[0, 0]  # some equal pairs
        y = g.pointwise(x, b, mode=mode, name="pw")
        if mode in BINARY:
            ref = BINARY[mode](xv, bv)
        else:  # a backward mode: IN_0 the gradient, IN_1 the forward input
            ref = _grad(BACKWARD[mode], xv, bv.expand(out_dims))
        inputs = {x: xv, b: bv}
    y.set_output(True)
    g.validate()
    return g, inputs, {y: ref}


def build_matmul(io: hg.DataType, seed: int = 0) -> tuple[hg.Graph, dict, dict]:
    g = graph(io)
    a = g.tensor(name="a", dim=[2, 1, 5, 16])
    b = g.tensor(name="b", dim=[1, 3, 16, 7])
    c = g.matmul(a, b, name="mm")
    c.set_output(True)
    g.validate()
    av, bv = rand([2, 1, 5, 16], io, seed), rand([1, 3, 16, 7], io, seed + 1)
    return g, {a: av, b: bv}, {c: av @ bv}


REDUCE: dict[R, Any] = {
    R.ADD: lambda v, d: v.sum(d, keepdim=True),
    R.MUL: lambda v, d: v.prod(d[0], keepdim=True).prod(d[1], keepdim=True),
    R.MIN: lambda v, d: v.amin(d, keepdim=True), R.MAX: lambda v, d: v.amax(d, keepdim=True),
    R.AMAX: lambda v, d: v.abs().amax(d, keepdim=True), R.AVG: lambda v, d: v.mean(d, keepdim=True),
    R.NORM1: lambda v, d: torch.linalg.vector_norm(v, 1, d, keepdim=True),
    R.NORM2: lambda v, d: torch.linalg.vector_norm(v, 2, d, keepdim=True),
    R.MUL_NO_ZEROS: lambda v, d: torch.where(v == 0, 1.0, v).prod(d[0], keepdim=True)
    .prod(d[1], keepdim=True),
}  # fmt: skip


def build_reduction(mode: R, io: hg.DataType, seed: int = 0) -> tuple[hg.Graph, dict, dict]:
    g = graph(io)
    x = g.tensor(name="x", dim=[2, 3, 4])
    y = g.tensor(name="y", dim=[1, 3, 1])
    g.reduction(x, y, mode=mode, name="red")
    y.set_output(True)
    g.validate()
    xv = rand([2, 3, 4], io, seed)
    if mode in (R.MUL, R.MUL_NO_ZEROS):
        xv = xv.sign() * (0.75 + xv.abs() / 8)  # products of modest size
        xv[0, 1, 2] = 0.0
    return g, {x: xv}, {y: REDUCE[mode](xv, (0, 2))}


def build_conv(kind: str, spatial: int, io: hg.DataType, *, groups: int = 1,
               mode: hg.ConvolutionMode = hg.ConvolutionMode.CROSS_CORRELATION,
               seed: int = 0) -> tuple[hg.Graph, dict, dict]:  # fmt: skip
    """A forward, data-gradient or weight-gradient convolution with unequal padding, stride 2
    and dilation 2 on the first spatial axis, checked against autograd of ``F.conv{n}d``."""
    g = graph(io)
    n, c, k = 2, 4, 6
    size = [9, 8, 7][:spatial]
    kernel = [3, 2, 2][:spatial]
    pre, post = [2, 1, 0][:spatial], [1, 1, 1][:spatial]
    stride, dilation = [2, 1, 1][:spatial], [2, 1, 1][:spatial]
    x_dims, w_dims = [n, c, *size], [k, c // groups, *kernel]
    y_sp = [
        (s + p + q - d * (kk - 1) - 1) // st + 1
        for s, p, q, d, kk, st in zip(size, pre, post, dilation, kernel, stride, strict=True)
    ]
    y_dims = [n, k, *y_sp]
    xv, wv, dyv = rand(x_dims, io, seed), rand(w_dims, io, seed + 1), rand(y_dims, io, seed + 2)
    conv = [F.conv1d, F.conv2d, F.conv3d][spatial - 1]
    pad = [v for p, q in zip(reversed(pre), reversed(post), strict=True) for v in (p, q)]

    def forward(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if mode == hg.ConvolutionMode.CONVOLUTION:
            w = torch.flip(w, list(range(2, 2 + spatial)))
        return conv(F.pad(x, pad), w, None, stride, 0, dilation, groups)

    geometry = {"pre_padding": pre, "post_padding": post, "stride": stride,
                "dilation": dilation, "convolution_mode": mode}  # fmt: skip
    xr, wr = xv.clone().requires_grad_(True), wv.clone().requires_grad_(True)
    yr = forward(xr, wr)
    dx, dw = torch.autograd.grad(yr, (xr, wr), dyv)
    if kind == "fprop":
        x, w = g.tensor(name="x", dim=x_dims), g.tensor(name="w", dim=w_dims)
        out = g.conv_fprop(x, w, name="conv", **geometry)
        inputs, ref = {x: xv, w: wv}, yr.detach()
    elif kind == "dgrad":
        dy, w = g.tensor(name="dy", dim=y_dims), g.tensor(name="w", dim=w_dims)
        out = g.conv_dgrad(dy, w, name="conv", **geometry)
        out.set_dim(x_dims).set_stride(hg.generate_strides(x_dims))
        inputs, ref = {dy: dyv, w: wv}, dx
    else:
        dy, x = g.tensor(name="dy", dim=y_dims), g.tensor(name="x", dim=x_dims)
        out = g.conv_wgrad(dy, x, name="conv", **geometry)
        out.set_dim(w_dims).set_stride(hg.generate_strides(w_dims))
        inputs, ref = {dy: dyv, x: xv}, dw
    out.set_output(True)
    g.validate()
    return g, inputs, {out: ref}


def _channel(c: int, rank: int) -> list[int]:
    return [1, c] + [1] * (rank - 2)


def build_batchnorm(kind: str, io: hg.DataType, seed: int = 0) -> tuple[hg.Graph, dict, dict]:
    """Training (with running statistics), inference, inference from the variance, backward."""
    g = graph(io)
    x_dims, c = [3, 4, 5, 2], 4
    cd = _channel(c, 4)
    xv = rand(x_dims, io, seed)
    sv, bv = rand(cd, io, seed + 1), rand(cd, io, seed + 2)
    x, s = g.tensor(name="x", dim=x_dims), g.tensor(name="s", dim=cd)
    eps = 1e-3
    axes = (0, 2, 3)
    mean = xv.mean(axes, keepdim=True)
    var = xv.var(axes, unbiased=False, keepdim=True)
    if kind == "training":
        b = g.tensor(name="b", dim=cd)
        pm, pv = g.tensor(name="pm", dim=cd), g.tensor(name="pv", dim=cd)
        mom = g.tensor(name="mom", dim=[1, 1, 1, 1])
        pmv, pvv = rand(cd, io, seed + 3), rand(cd, io, seed + 4, low=0.5)
        momv = torch.full([1, 1, 1, 1], 0.25, dtype=torch.float64)
        epsilon = g.tensor(name="eps").set_value(eps)
        y, m, iv, nm, nv = g.batchnorm(x, s, b, name="bn", epsilon=epsilon, momentum=mom,
                                       prev_running_mean=pm, prev_running_variance=pv)  # fmt: skip
        rm, rv = pmv.flatten().clone(), pvv.flatten().clone()
        yref = F.batch_norm(xv, rm, rv, sv.flatten(), bv.flatten(), True, 0.25, eps)
        outs = {y: yref, m: mean, iv: 1 / torch.sqrt(var + eps), nm: rm.reshape(cd),
                nv: rv.reshape(cd)}  # fmt: skip
        inputs = {x: xv, s: sv, b: bv, pm: pmv, pv: pvv, mom: momv}
    elif kind == "inference":
        b, m, iv = (g.tensor(name=n, dim=cd) for n in ("b", "m", "iv"))
        mv, ivv = rand(cd, io, seed + 3), rand(cd, io, seed + 4, low=0.5)
        y = g.batchnorm_inference(x, m, iv, s, b, name="bn")
        outs = {y: (xv - mv) * ivv * sv + bv}
        inputs = {x: xv, m: mv, iv: ivv, s: sv, b: bv}
    elif kind == "variance":
        b, m, v = (g.tensor(name=n, dim=cd) for n in ("b", "m", "v"))
        mv, vv = rand(cd, io, seed + 3), rand(cd, io, seed + 4, low=0.5)
        y = g.batchnorm_inference_variance_ext(x, m, v, s, b, g.tensor(name="eps").set_value(eps),
                                               name="bn")  # fmt: skip
        yref = F.batch_norm(
            xv, mv.flatten(), vv.flatten(), sv.flatten(), bv.flatten(), False, 0.0, eps
        )
        outs = {y: yref}
        inputs = {x: xv, m: mv, v: vv, s: sv, b: bv}
    else:
        dy, m, iv = (
            g.tensor(name="dy", dim=x_dims),
            g.tensor(name="m", dim=cd),
            g.tensor(name="iv", dim=cd),
        )
        dyv = rand(x_dims, io, seed + 5)
        ivv = 1 / torch.sqrt(var + eps)
        mv = mean
        dx, ds, db = g.batchnorm_backward(dy, x, s, name="bn", mean=m, inv_variance=iv)
        xr = xv.clone().requires_grad_(True)
        sr = sv.flatten().clone().requires_grad_(True)
        br = torch.zeros(c, dtype=torch.float64, requires_grad=True)
        yr = F.batch_norm(xr, None, None, sr, br, True, 0.0, eps)
        gx, gs, gb = torch.autograd.grad(yr, (xr, sr, br), dyv)
        outs = {dx: gx, ds: gs.reshape(cd), db: gb.reshape(cd)}
        inputs = {dy: dyv, x: xv, s: sv, m: mv.to(TORCH_TYPES[io]).double(),
                  iv: ivv.to(TORCH_TYPES[io]).double()}  # fmt: skip
    for t in outs:
        t.set_output(True)
    g.validate()
    return g, inputs, outs


def build_layernorm(io: hg.DataType, training: bool, seed: int = 0) -> tuple[hg.Graph, dict, dict]:
    g = graph(io)
    x_dims = [2, 3, 16]
    xv, sv, bv = (
        rand(x_dims, io, seed),
        rand([1, 1, 16], io, seed + 1),
        rand([1, 1, 16], io, seed + 2),
    )
    x, s, b = (
        g.tensor(name="x", dim=x_dims),
        g.tensor(name="s", dim=[1, 1, 16]),
        g.tensor(name="b", dim=[1, 1, 16]),
    )
    phase = hg.NormFwdPhase.TRAINING if training else hg.NormFwdPhase.INFERENCE
    eps = 1e-5
    y, m, iv = g.layernorm(x, s, b, hg.LayernormAttributes().set_name("ln").set_forward_phase(phase)
                           .set_epsilon(g.tensor(name="eps").set_value(eps)))  # fmt: skip
    outs = {y: F.layer_norm(xv, [16], sv.flatten(), bv.flatten(), eps)}
    if training:
        assert m is not None and iv is not None
        outs[m] = xv.mean(-1, keepdim=True)
        outs[iv] = 1 / torch.sqrt(xv.var(-1, unbiased=False, keepdim=True) + eps)
    for t in outs:
        t.set_output(True)
    g.validate()
    return g, {x: xv, s: sv, b: bv}, outs


def build_rmsnorm(io: hg.DataType, training: bool, bias: bool = False,
                  seed: int = 0) -> tuple[hg.Graph, dict, dict]:  # fmt: skip
    g = graph(io)
    x_dims = [2, 3, 16]
    xv, sv = rand(x_dims, io, seed), rand([1, 1, 16], io, seed + 1)
    x, s = g.tensor(name="x", dim=x_dims), g.tensor(name="s", dim=[1, 1, 16])
    phase = hg.NormFwdPhase.TRAINING if training else hg.NormFwdPhase.INFERENCE
    eps = 1e-5
    kw: dict[str, Any] = {}
    inputs = {x: xv, s: sv}
    ref_bias = 0.0
    if bias:
        b = g.tensor(name="b", dim=[1, 1, 16])
        bvv = rand([1, 1, 16], io, seed + 2)
        kw["bias"], inputs[b], ref_bias = b, bvv, bvv
    y, inv = g.rmsnorm(x, s, epsilon=g.tensor(name="eps").set_value(eps), forward_phase=phase,
                       name="rms", **kw)  # fmt: skip
    inv_ref = 1 / torch.sqrt((xv * xv).mean(-1, keepdim=True) + eps)
    outs = {y: xv * inv_ref * sv + ref_bias}
    if training:
        assert inv is not None
        outs[inv] = inv_ref
    for t in outs:
        t.set_output(True)
    g.validate()
    return g, inputs, outs


# ----- resample (pooling) -----
RS, PAD = hg.ResampleMode, hg.PaddingMode
RESAMPLE_MODES = [RS.MAXPOOL, RS.AVGPOOL_EXCLUDE_PADDING, RS.AVGPOOL_INCLUDE_PADDING]
PADDING_MODES = [PAD.NEG_INF_PAD, PAD.ZERO_PAD]
#: spatial rank -> (x dims, window, stride, pre, post): unequal pre and post padding, strides
#: below and above the window (overlapping and gapped windows)
RESAMPLE_GEOMETRY = {
    1: ([2, 3, 11], [3], [2], [1], [2]),
    2: ([2, 3, 9, 10], [3, 2], [2, 1], [1, 0], [0, 1]),
    3: ([1, 2, 5, 6, 4], [2, 3, 2], [1, 2, 3], [1, 0, 1], [0, 2, 1]),
}


def resample_members(spatial: int) -> dict[str, Any]:
    _, window, stride, pre, post = RESAMPLE_GEOMETRY[spatial]
    return {"window": window, "stride": stride, "pre_padding": pre, "post_padding": post}


def distinct(dims: list[int], seed: int) -> torch.Tensor:
    """Float64 values with no tie (and no zero) within any [N, C] plane, exact in every
    floating io type (integers of magnitude at most half a plane)."""
    gen = torch.Generator().manual_seed(seed)
    plane = 1
    for d in dims[2:]:
        plane *= d
    rows = [torch.randperm(plane, generator=gen) - plane // 2 for _ in range(dims[0] * dims[1])]
    x = torch.stack(rows).double()
    return torch.where(x >= 0, x + 1, x).reshape(dims)


def _pad_spatial(t: torch.Tensor, pre: list[int], post: list[int], value: float) -> torch.Tensor:
    widths = [v for a, b in zip(reversed(pre), reversed(post), strict=True) for v in (a, b)]
    return F.pad(t, widths, value=value)


def torch_pool(x: torch.Tensor, mode: hg.ResampleMode, padding: hg.PaddingMode,
               spatial: int) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """Pooling in float64 torch (``F.max_pool*d`` / ``F.avg_pool*d`` on an explicitly padded
    input; differentiable) and, for MAXPOOL, hipDNN's INDEX: the flat spatial index in X, -1
    for a zero of the padding."""
    _, window, stride, pre, post = RESAMPLE_GEOMETRY[spatial]
    size = float(torch.tensor(window).prod())
    if mode == RS.MAXPOOL:
        fill = float("-inf") if padding == PAD.NEG_INF_PAD else 0.0
        padded = _pad_spatial(x, pre, post, fill)
        pool = [F.max_pool1d, F.max_pool2d, F.max_pool3d][spatial - 1]
        y, flat = pool(padded, window, stride, return_indices=True)
        index, real, rest, scale = torch.zeros_like(flat), flat >= 0, flat, 1
        for i in reversed(range(spatial)):  # unravel over the padded dims, last first
            coord = rest % padded.shape[2 + i] - pre[i]
            rest = rest // padded.shape[2 + i]
            real &= (coord >= 0) & (coord < x.shape[2 + i])
            index, scale = index + coord * scale, scale * x.shape[2 + i]
        return y, torch.where(real, index, -1)
    avg = [F.avg_pool1d, F.avg_pool2d, F.avg_pool3d][spatial - 1]
    total = avg(_pad_spatial(x, pre, post, 0.0), window, stride) * size
    if mode == RS.AVGPOOL_INCLUDE_PADDING:
        return total / size, None
    ones = torch.ones_like(x)
    count = avg(_pad_spatial(ones, pre, post, 0.0), window, stride) * size
    return total / count.clamp(min=1), None


def build_resample(kind: str, mode: hg.ResampleMode, padding: hg.PaddingMode, spatial: int,
                   io: hg.DataType, *, channels_last: bool = False,
                   seed: int = 0) -> tuple[hg.Graph, dict, dict]:  # fmt: skip
    """A resample forward (Y and, for MAXPOOL, INDEX) or backward (DX) node of
    :data:`RESAMPLE_GEOMETRY`, checked against float64 torch pooling and its autograd (MAXPOOL
    on values without ties, so the maximum and its INDEX are unique)."""
    g = graph(io)
    dims = RESAMPLE_GEOMETRY[spatial][0]
    members = resample_members(spatial)
    xv = distinct(dims, seed) if mode == RS.MAXPOOL else rand(dims, io, seed)
    xr = xv.clone().requires_grad_(True)
    yr, index = torch_pool(xr, mode, padding, spatial)
    y_dims = list(yr.shape)

    def strides(d: list[int]) -> list[int]:
        return layout_strides(d, channels_last)

    if kind == "fwd":
        x = g.tensor(name="x", dim=dims, stride=strides(dims))
        y, idx = g.resample(x, name="pool", resample_mode=mode, padding_mode=padding,
                            generate_index=mode == RS.MAXPOOL, **members)  # fmt: skip
        y.set_dim(y_dims).set_stride(strides(y_dims))
        refs: dict[Any, Any] = {y: yr.detach()}
        if idx is not None:
            idx.set_dim(y_dims).set_stride(strides(y_dims))
            refs[idx] = index.double()
        inputs: dict[Any, Any] = {x: xv}
    else:
        dyv = rand(y_dims, io, seed + 1)
        (dxr,) = torch.autograd.grad(yr, xr, dyv)
        dy = g.tensor(name="dy", dim=y_dims, stride=strides(y_dims))
        idx = None
        inputs = {dy: dyv}
        if mode == RS.MAXPOOL:
            idx = g.tensor(name="index", dim=y_dims, stride=strides(y_dims),
                           data_type=hg.DataType.INT32)  # fmt: skip
            inputs[idx] = index.double()
        dx = g.resample_bwd(dy, name="pool_bwd", index=idx, resample_mode=mode,
                            padding_mode=padding, **members)  # fmt: skip
        dx.set_dim(dims).set_stride(strides(dims))
        refs = {dx: dxr}
    for t in refs:
        t.set_output(True)
    g.validate()
    return g, inputs, refs


def tolerance(io: hg.DataType) -> float:
    """Relative error allowed: the io type's rounding of the result, with headroom."""
    return {hg.DataType.FLOAT: 1e-5, hg.DataType.DOUBLE: 1e-5, hg.DataType.HALF: 4e-3,
            hg.DataType.BFLOAT16: 2e-2}[io]  # fmt: skip


def max_rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.double().cpu(), want.double().cpu()
    scale = max(want.abs().max().item(), 1.0)
    return float((got - want).abs().max().item() / scale) if want.numel() else 0.0


def fusion_examples() -> Any:
    """``benchmarks/family_fusion.py`` as a module: its builders make issue 25's example graphs
    (RMSNorm -> matmul, convolution + bias + ReLU, matmul + bias + GELU)."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "family_fusion.py"
    spec = importlib.util.spec_from_file_location("family_fusion_benchmark", path)
    assert spec is not None and spec.loader is not None
    if spec.name in sys.modules:
        return sys.modules[spec.name]
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# ----- block scale and MoE: checked against the NumPy reference (bit for bit where it rounds) --
D = hg.DataType
#: quantize Y types torch holds (FP4_E2M1, FP6_E2M3 and FP6_E3M2 it has no dtype for)
QUANTIZE_Y = [D.FP8_E4M3, D.FP8_E5M2, D.FP8_E4M3_FNUZ, D.FP8_E5M2_FNUZ, D.INT8, D.UINT8,
              D.INT32, D.HALF, D.BFLOAT16, D.FLOAT]  # fmt: skip
QUANTIZE_SCALE = [D.FP8_E8M0, D.FLOAT, D.HALF, D.BFLOAT16]
#: types with no torch dtype of one element per byte
NO_TORCH = [D.FP4_E2M1, D.FP6_E2M3, D.FP6_E3M2]


def storage(t: hg.TensorAttributes) -> torch.dtype:
    """The torch dtype a tensor is stored in."""
    from hipdnn_graph.backend.dtypes import torch_dtype

    return torch_dtype(t.data_type)  # type: ignore[no-any-return]


def wide(shape: list[int], seed: int) -> Any:
    """float64 NumPy values over a wide range (each row its own magnitude, from 2^-40 to 2^40,
    some exact ties of the narrow types), the first block of the first row zero."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.exp2(
        rng.integers(-40, 40, [shape[0], *[1] * (len(shape) - 1)])
    )
    x.reshape(-1)[::7] = np.round(x.reshape(-1)[::7] * 8) / 8  # short mantissas: ties
    x[0, ..., :32] = 0.0  # an all-zero block (E8M0: the scale 2^-127)
    return x


def build_quantize(compute: D, y_type: D, scale_type: D, *, x_type: D | None = None,
                   axis: int = 2, dims: tuple[int, ...] = (4, 6, 64),
                   block: int = 32) -> tuple[hg.Graph, hg.TensorAttributes, list[Any]]:  # fmt: skip
    """A quantize graph (X of ``x_type``, compute type ``compute``; Y and SCALE outputs)."""
    g = hg.Graph(name="bsq", io_data_type=x_type or compute, intermediate_data_type=compute,
                 compute_data_type=compute)  # fmt: skip
    x = g.tensor(name="x", dim=list(dims))
    y, s = g.block_scale_quantize(x, block_size=block, axis=axis, name="q")
    y.set_data_type(y_type).set_output(True)
    s.set_data_type(scale_type).set_output(True)
    g.validate()
    return g, x, [y, s]


def build_dequantize(
    compute: D, x_type: D, scale_type: D, *, negative: bool = False, block: tuple[int, ...] = (32,)
) -> tuple[hg.Graph, list[Any], Any]:
    """A dequantize graph over X ``[4, 6, 64]`` with SCALE of the blocks ``block`` gives."""
    g = hg.Graph(name="bsd", io_data_type=x_type, intermediate_data_type=compute,
                 compute_data_type=compute)  # fmt: skip
    dims = [4, 6, 64]
    sizes = [1] * (3 - len(block)) + list(block)
    x = g.tensor(name="x", dim=dims)
    s = g.tensor(name="s", dim=[d // b for d, b in zip(dims, sizes, strict=True)],
                 data_type=scale_type)  # fmt: skip
    y = g.block_scale_dequantize(x, s, block_size=list(block), is_negative_scale=negative,
                                 name="dq")  # fmt: skip
    y.set_data_type(compute).set_output(True)
    g.validate()
    return g, [x, s], y


def numpy_values(t: hg.TensorAttributes, values: Any) -> Any:
    """``values`` (float64 NumPy) in ``t``'s storage type, clamped into its range."""
    import ml_dtypes
    import numpy as np

    from hipdnn_graph.backend.dtypes import numpy_dtype

    dtype = numpy_dtype(t.data_type)
    info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else ml_dtypes.finfo(dtype)
    clipped = np.clip(values, float(info.min), float(info.max))
    if np.issubdtype(dtype, np.integer):
        clipped = np.rint(clipped)
    return clipped.astype(dtype)


def as_torch(values: Any) -> torch.Tensor:
    """A NumPy array (ml_dtypes types included) as a torch tensor of the same type and bits."""
    import numpy as np

    from hipdnn_graph.backend.dtypes import torch_dtype
    from hipdnn_graph.dtype_names import data_type_of

    dt = data_type_of(values.dtype)
    assert dt is not None
    if values.dtype.name in ("float16", "float32", "float64", "int8", "uint8", "int32", "int64"):
        return torch.from_numpy(np.ascontiguousarray(values))
    bits = {1: np.uint8, 2: np.int16}[values.dtype.itemsize]
    raw = torch.from_numpy(np.ascontiguousarray(values).view(bits))
    return raw.view(torch_dtype(dt))


def assert_same_bits(got: torch.Tensor, want: Any, what: str) -> None:
    """``got`` holds exactly ``want``'s values in ``want``'s type (NaN where it has NaN)."""
    import numpy as np

    assert str(got.dtype).removeprefix("torch.") == want.dtype.name, (what, got.dtype, want.dtype)
    g = got.detach().cpu().to(torch.float64).numpy()
    w = want.astype(np.float64)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    assert same.all(), (
        f"{what}: {int((~same).sum())} of {same.size} differ, first at "
        f"{np.argwhere(~same)[0].tolist()}: {g[~same][0]!r} vs {w[~same][0]!r}"
    )
