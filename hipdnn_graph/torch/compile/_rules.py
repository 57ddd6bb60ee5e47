"""Which aten ops a hipDNN family expresses, and how: one table keyed by aten op.

Each :class:`Rule` names the family, checks the node (``refusal``: ``None`` or the reason it
stays in aten) and lowers it through the public builder. The partitioner asks the table only;
a node whose op is not a key stays in aten with the reason "no hipDNN family expresses it".

Example:
    >>> import torch
    >>> from hipdnn_graph.torch.compile._rules import RULES
    >>> RULES[torch.ops.aten.gelu.default].family
    'pointwise'
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from ...errors import HipdnnError
from ...types import NormFwdPhase, PointwiseMode, ReductionMode
from .. import _custom_ops  # noqa: F401  (the hipdnn_graph:: ops, counted by flops())
from ._batchnorm import BATCHNORM_RULES
from ._lowering import Lowering, meta_value
from ._reductions import REDUCTION_RULES
from ._rmsnorm import RMSNORM_RULES
from ._rule import Check, Rule
from ._rule import args as _a
from ._rule import keyword as _kw
from ._rule import rank as _rank

__all__ = ["FLOAT_TYPES", "RULES", "Rule", "flops"]

aten = torch.ops.aten

#: the element types a subgraph's tensors may have
FLOAT_TYPES = (torch.float32, torch.float16, torch.bfloat16)


# ----- pointwise -----
def _unary(mode: PointwiseMode) -> Rule:
    def lower(cx: Lowering, node: torch.fx.Node) -> Any:
        x = cx.operand(_a(node)[0], _rank(node))
        return cx.graph.pointwise(x, name=node.name, mode=mode)

    return Rule("pointwise", lower)


def _same_shape_first(node: torch.fx.Node) -> str | None:
    """Pointwise results take IN_0's dims: IN_0 must have the result's shape."""
    first = _a(node)[0]
    if not isinstance(first, torch.fx.Node) or meta_value(first).shape != meta_value(node).shape:
        return "its first operand does not have the result's shape (hipDNN broadcasts IN_1 only)"
    return None


def _binary(mode: PointwiseMode, commutes: bool) -> Rule:
    def lower(cx: Lowering, node: torch.fx.Node) -> Any:
        a, b = _a(node)[0], _a(node)[1]
        if commutes and _same_shape_first(node) is not None:
            a, b = b, a
        rank = _rank(node)
        return cx.graph.pointwise(
            cx.operand(a, rank), cx.operand(b, rank), name=node.name, mode=mode
        )

    def refusal(node: torch.fx.Node) -> str | None:
        if node.kwargs.get("alpha", 1) != 1 or (len(_a(node)) > 2 and _a(node)[2] != 1):
            return "alpha != 1"
        if _same_shape_first(node) is None:
            return None
        if commutes and len(_a(node)) > 1 and isinstance(_a(node)[1], torch.fx.Node):
            swapped = meta_value(_a(node)[1]).shape == meta_value(node).shape
            return None if swapped else "neither operand has the result's shape"
        return _same_shape_first(node)

    return Rule("pointwise", lower, refusal)


def _gelu_mode(node: torch.fx.Node, index: int, exact: PointwiseMode, tanh: PointwiseMode) -> Any:
    return tanh if _kw(node, index, "approximate", "none") == "tanh" else exact


def _lower_gelu(cx: Lowering, node: torch.fx.Node) -> Any:
    mode = _gelu_mode(node, 1, PointwiseMode.GELU_FWD, PointwiseMode.GELU_APPROX_TANH_FWD)
    return cx.graph.pointwise(cx.operand(_a(node)[0], _rank(node)), name=node.name, mode=mode)


def _backward(mode: PointwiseMode) -> Callable[[Lowering, torch.fx.Node], Any]:
    """``*_BWD`` modes: IN_0 the incoming gradient, IN_1 the forward input."""

    def lower(cx: Lowering, node: torch.fx.Node) -> Any:
        rank = _rank(node)
        dy, x = cx.operand(_a(node)[0], rank), cx.operand(_a(node)[1], rank)
        chosen = mode
        if mode is PointwiseMode.GELU_BWD:
            chosen = _gelu_mode(node, 2, mode, PointwiseMode.GELU_APPROX_TANH_BWD)
        return cx.graph.pointwise(dy, x, name=node.name, mode=chosen)

    return lower


def _threshold_zero(node: torch.fx.Node) -> str | None:
    return None if _a(node)[2] == 0 else "threshold != 0 (RELU_BWD masks at 0)"


#: ``pow(x, e)`` as pointwise modes: each exponent, the unary mode (or how many factors of x)
_POWERS: dict[float, PointwiseMode | int] = {
    1: PointwiseMode.IDENTITY,
    2: 2,
    3: 3,
    0.5: PointwiseMode.SQRT,
    -0.5: PointwiseMode.RSQRT,
    -1: PointwiseMode.RECIPROCAL,
}


def _pow_refusal(node: torch.fx.Node) -> str | None:
    exponent = _a(node)[1]
    if isinstance(exponent, bool) or exponent not in _POWERS:
        return f"exponent {exponent!r} (pointwise takes 1, 2, 3, 0.5, -0.5, -1)"
    return None


def _lower_pow(cx: Lowering, node: torch.fx.Node) -> Any:
    x = cx.operand(_a(node)[0], _rank(node))
    how = _POWERS[_a(node)[1]]
    if isinstance(how, PointwiseMode):
        return cx.graph.pointwise(x, name=node.name, mode=how)
    product = x
    for factor in range(1, how):
        name = f"{node.name}_{factor}"
        product = cx.graph.pointwise(product, x, name=name, mode=PointwiseMode.MUL)
    return product


# ----- matmul -----
def _lower_mm(cx: Lowering, node: torch.fx.Node) -> Any:
    a, b = _a(node)[0], _a(node)[1]
    return cx.graph.matmul(cx.tensor(a), cx.tensor(b), name=node.name)


def _lower_addmm(cx: Lowering, node: torch.fx.Node) -> Any:
    bias, a, b = _a(node)[:3]
    product = cx.graph.matmul(cx.tensor(a), cx.tensor(b), name=node.name)
    return cx.graph.pointwise(
        product, cx.operand(bias, 2), name=f"{node.name}_bias", mode=PointwiseMode.ADD
    )


def _addmm_refusal(node: torch.fx.Node) -> str | None:
    if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
        return "beta or alpha != 1"
    return None


# ----- convolution (forward, and its backward as dgrad + wgrad) -----
def _conv_keywords(stride: Any, padding: Any, dilation: Any) -> dict[str, Any]:
    return {
        "pre_padding": list(padding),
        "post_padding": list(padding),
        "stride": list(stride),
        "dilation": list(dilation),
    }


def _conv_refusal(transposed: int, groups: int) -> Check:
    def refusal(node: torch.fx.Node) -> str | None:
        if _a(node)[transposed]:
            return "a transposed convolution"
        if _a(node)[groups] != 1:
            return "a grouped convolution"
        return None

    return refusal


def _lower_conv(cx: Lowering, node: torch.fx.Node) -> Any:
    x_arg, w_arg, bias, stride, padding, dilation = _a(node)[:6]
    y = cx.graph.conv_fprop(
        cx.tensor(x_arg),
        cx.tensor(w_arg),
        name=node.name,
        **_conv_keywords(stride, padding, dilation),
    )
    if bias is None:
        return y
    shape = [1] * len(meta_value(node).shape)
    shape[1] = int(meta_value(bias).shape[0])
    return cx.graph.pointwise(
        y, cx.tensor(bias, shape), name=f"{node.name}_bias", mode=PointwiseMode.ADD
    )


def _conv_backward_refusal(node: torch.fx.Node) -> str | None:
    return _conv_refusal(7, 9)(node)


def _lower_conv_backward(cx: Lowering, node: torch.fx.Node) -> Any:
    dy_arg, x_arg, w_arg, _, stride, padding, dilation = _a(node)[:7]
    want_dx, want_dw, want_db = _a(node)[10]
    keywords = _conv_keywords(stride, padding, dilation)
    dy = cx.tensor(dy_arg)
    dx = dw = db = None
    if want_dx:
        dx = cx.graph.conv_dgrad(dy, cx.tensor(w_arg), name=f"{node.name}_dgrad", **keywords)
        dx.set_dim(list(meta_value(x_arg).shape))
    if want_dw:
        dw = cx.graph.conv_wgrad(dy, cx.tensor(x_arg), name=f"{node.name}_wgrad", **keywords)
        dw.set_dim(list(meta_value(w_arg).shape))
    if want_db:  # the sum of DY over all axes but the channels', kept as 1s
        dy_dims = list(meta_value(dy_arg).shape)
        dims = [1, dy_dims[1], *[1] * (len(dy_dims) - 2)]
        db = cx.graph.reduction(dy, name=f"{node.name}_dbias", mode=ReductionMode.ADD)
        db.set_dim(dims).set_stride([int(math.prod(dims[i + 1 :])) for i in range(len(dims))])
    return (dx, dw, db)


# ----- layer norm -----
def _layer_norm_refusal(node: torch.fx.Node) -> str | None:
    if _a(node)[2] is None or _a(node)[3] is None:
        return "no weight or no bias (hipDNN's layernorm takes both)"
    return None


def _lower_layer_norm(cx: Lowering, node: torch.fx.Node) -> Any:
    x_arg, shape, weight, bias, eps = _a(node)[:5]
    x, dims = cx.tensor(x_arg), list(meta_value(x_arg).shape)
    normalized = list(shape)
    params = [1] * (len(dims) - len(normalized)) + normalized
    epsilon = cx.scalar(node, "eps", eps)
    training = any(user.args[1] != 0 for user in node.users)
    phase = NormFwdPhase.TRAINING if training else NormFwdPhase.INFERENCE
    y, mean, inv_variance = cx.graph.layernorm(
        x,
        cx.tensor(weight, params),
        cx.tensor(bias, params),
        name=node.name,
        epsilon=epsilon,
        forward_phase=phase,
    )
    return (y, mean, inv_variance)


def _lower_layer_norm_backward(cx: Lowering, node: torch.fx.Node) -> Any:
    dy_arg, x_arg, shape, mean, rstd, weight = _a(node)[:6]
    x, dims = cx.tensor(x_arg), list(meta_value(x_arg).shape)
    normalized = list(shape)
    params = [1] * (len(dims) - len(normalized)) + normalized
    stats = [*dims[: len(dims) - len(normalized)], *([1] * len(normalized))]
    dx, dscale, dbias = cx.graph.layernorm_backward(
        cx.tensor(dy_arg),
        x,
        cx.tensor(weight, params),
        name=node.name,
        mean=cx.tensor(mean, stats),
        inv_variance=cx.tensor(rstd, stats),
    )
    return (dx, dscale, dbias)


def _layer_norm_backward_refusal(node: torch.fx.Node) -> str | None:
    if _a(node)[5] is None or _a(node)[6] is None:
        return "no weight or no bias"
    if list(_a(node)[7]) != [True, True, True]:
        return "not all of dX, dScale, dBias asked for"
    return None


# ----- SDPA: the kernels torch's SDPA dispatches to (CPU fwd and bwd; GPU fwd outputs) -----
@dataclass(frozen=True)
class _SdpaOp:
    """Where one SDPA kernel op keeps its arguments, and which of its outputs we make.

    ``outputs``: the results a hipDNN SDPA graph produces in the op's layout (O, and the
    log-sum-exp where it is Stats without the trailing 1); an op whose other results (RNG
    state, sequence bookkeeping, padded log-sum-exp) are used stays in aten.
    """

    dropout: int
    causal: int
    bias: int | None
    outputs: frozenset[int]


def _sdpa_rule(op: _SdpaOp) -> Rule:
    def refusal(node: torch.fx.Node) -> str | None:
        if _kw(node, op.dropout, "dropout_p", 0.0) != 0.0:
            return "dropout"
        if node.kwargs.get("attn_mask") is not None or (
            op.bias is not None and _kw(node, op.bias, "attn_bias", None) is not None
        ):
            return "an attention mask or bias"
        used: set[Any] = {user.args[1] for user in node.users}
        if not used <= op.outputs:
            return f"results {sorted(used - op.outputs)} (RNG state or bookkeeping) are used"
        return None

    def lower(cx: Lowering, node: torch.fx.Node) -> Any:
        q, k, v = (cx.tensor(a) for a in _a(node)[:3])
        o, stats = cx.graph.sdpa(
            q,
            k,
            v,
            name=node.name,
            attn_scale=_scale(node, int(meta_value(_a(node)[0]).shape[-1])),
            use_causal_mask=bool(_kw(node, op.causal, "is_causal", False)),
            generate_stats=1 in {user.args[1] for user in node.users},
        )
        return (o, stats)

    return Rule("sdpa", lower, refusal)


def _scale(node: torch.fx.Node, head_dim: int) -> float:
    scale: Any = node.kwargs.get("scale")
    return 1.0 / math.sqrt(head_dim) if scale is None else float(scale)


def _sdpa_backward_refusal(node: torch.fx.Node) -> str | None:
    if _kw(node, 6, "dropout_p", 0.0) != 0.0:
        return "dropout"
    if node.kwargs.get("attn_mask") is not None:
        return "an attention mask"
    return None


def _lower_sdpa_backward(cx: Lowering, node: torch.fx.Node) -> Any:
    do, q_arg, k_arg, v_arg, o, lse = _a(node)[:6]
    q = cx.tensor(q_arg)
    stats = [*meta_value(lse).shape, 1]
    dq, dk, dv = cx.graph.sdpa_backward(
        q,
        cx.tensor(k_arg),
        cx.tensor(v_arg),
        cx.tensor(o),
        cx.tensor(do),
        cx.tensor(lse, stats),
        name=node.name,
        attn_scale=_scale(node, int(meta_value(_a(node)[0]).shape[-1])),
        use_causal_mask=bool(_kw(node, 7, "is_causal", False)),
    )
    return (dq, dk, dv)


M = PointwiseMode
_UNARY = {
    aten.relu.default: M.RELU_FWD,
    aten.silu.default: M.SWISH_FWD,
    aten.tanh.default: M.TANH_FWD,
    aten.sigmoid.default: M.SIGMOID_FWD,
    aten.exp.default: M.EXP,
    aten.log.default: M.LOG,
    aten.neg.default: M.NEG,
    aten.abs.default: M.ABS,
    aten.sqrt.default: M.SQRT,
    aten.rsqrt.default: M.RSQRT,
    aten.erf.default: M.ERF,
    aten.reciprocal.default: M.RECIPROCAL,
}

#: the table: aten op -> rule (one place says what the backend covers)
RULES: dict[Any, Rule] = {
    **{op: _unary(mode) for op, mode in _UNARY.items()},
    aten.gelu.default: Rule("pointwise", _lower_gelu),
    aten.add.Tensor: _binary(M.ADD, commutes=True),
    aten.mul.Tensor: _binary(M.MUL, commutes=True),
    aten.sub.Tensor: _binary(M.SUB, commutes=False),
    aten.div.Tensor: _binary(M.DIV, commutes=False),
    aten.add.Scalar: _binary(M.ADD, commutes=True),
    aten.mul.Scalar: _binary(M.MUL, commutes=True),
    aten.sub.Scalar: _binary(M.SUB, commutes=False),
    aten.div.Scalar: _binary(M.DIV, commutes=False),
    aten.pow.Tensor_Scalar: Rule("pointwise", _lower_pow, _pow_refusal),
    aten.gelu_backward.default: Rule("pointwise", _backward(M.GELU_BWD)),
    aten.silu_backward.default: Rule("pointwise", _backward(M.SWISH_BWD)),
    aten.threshold_backward.default: Rule("pointwise", _backward(M.RELU_BWD), _threshold_zero),
    aten.mm.default: Rule("matmul", _lower_mm),
    aten.bmm.default: Rule("matmul", _lower_mm),
    aten.addmm.default: Rule("matmul", _lower_addmm, _addmm_refusal),
    aten.convolution.default: Rule("convolution", _lower_conv, _conv_refusal(6, 8)),
    aten.convolution_backward.default: Rule(
        "convolution_backward", _lower_conv_backward, _conv_backward_refusal
    ),
    aten.native_layer_norm.default: Rule("layernorm", _lower_layer_norm, _layer_norm_refusal),
    aten.native_layer_norm_backward.default: Rule(
        "layernorm_backward", _lower_layer_norm_backward, _layer_norm_backward_refusal
    ),
    aten._scaled_dot_product_flash_attention_for_cpu.default: _sdpa_rule(
        _SdpaOp(dropout=3, causal=4, bias=None, outputs=frozenset({0, 1}))
    ),
    aten._scaled_dot_product_flash_attention.default: _sdpa_rule(
        _SdpaOp(dropout=3, causal=4, bias=None, outputs=frozenset({0, 1}))
    ),
    aten._scaled_dot_product_efficient_attention.default: _sdpa_rule(
        _SdpaOp(dropout=5, causal=6, bias=3, outputs=frozenset({0}))
    ),
    aten._scaled_dot_product_cudnn_attention.default: _sdpa_rule(
        _SdpaOp(dropout=5, causal=6, bias=3, outputs=frozenset({0}))
    ),
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default: Rule(
        "sdpa_backward", _lower_sdpa_backward, _sdpa_backward_refusal
    ),
    **REDUCTION_RULES,
    **RMSNORM_RULES,
    **BATCHNORM_RULES,
}


def flops(node: torch.fx.Node) -> int:
    """Multiply-add FLOPs (x2) of the matmul, convolution and attention ops; 0 for the others."""
    target = node.target
    try:
        if target in (aten.mm.default, aten.addmm.default, aten.bmm.default):
            out = meta_value(node).shape
            a = node.args[1] if target is aten.addmm.default else _a(node)[0]
            return 2 * math.prod(out) * int(meta_value(a).shape[-1])
        if target is torch.ops.hipdnn_graph.sdpa_fwd.default:
            b, h, s, d = meta_value(node.args[0]).shape
            return 4 * b * h * s * int(meta_value(node.args[1]).shape[-2]) * d
        if target is torch.ops.hipdnn_graph.sdpa_bwd.default:
            b, h, s, d = meta_value(node.args[0]).shape
            return int(10 * b * h * s * int(meta_value(node.args[1]).shape[-2]) * d)
        if "scaled_dot_product" in str(target):
            q_node = _a(node)[1] if "backward" in str(target) else _a(node)[0]
            b, h, s, d = meta_value(q_node).shape
            skv = meta_value(_a(node)[2 if "backward" not in str(target) else 3]).shape[-2]
            fwd = 4 * b * h * s * skv * d
            return int(fwd * (2.5 if "backward" in str(target) else 1))
        if target is aten.convolution.default:
            out = meta_value(node).shape
            w = meta_value(_a(node)[1]).shape
            return 2 * math.prod(out) * math.prod(w[1:])
        if target is aten.convolution_backward.default:
            dy = meta_value(node.args[0]).shape
            w = meta_value(node.args[2]).shape
            mask: Any = node.args[10]
            return 2 * math.prod(dy) * math.prod(w[1:]) * sum(bool(m) for m in mask[:2])
    except (HipdnnError, TypeError, ValueError, IndexError):
        return 0
    return 0
