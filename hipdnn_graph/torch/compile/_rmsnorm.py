"""RMSNorm in the torch.compile backend: the chain aten decomposes ``torch.nn.RMSNorm`` into,
put back together as ``aten._fused_rms_norm``, which the rule table lowers to hipDNN's RMSNorm.

AOTAutograd hands the partitioner ``rms_norm`` decomposed::

    pow_1 = pow.Tensor_Scalar(x, 2); mean = mean.dim(pow_1, trailing dims, True)
    add = add.Scalar(mean, eps); rsqrt = rsqrt(add)
    mul = mul.Tensor(x, rsqrt); y = mul.Tensor(mul, weight)

:func:`fuse_rms_norm` replaces each such chain (a weight over the trailing dims) by one
``_fused_rms_norm(x, normalized_shape, weight, eps)``: its result 0 takes ``y``'s users, its
result 1 (the inverse RMS, keepdim) ``rsqrt``'s; a training graph's saved ``mul`` stays, reading
the inverse RMS. aten runs the fused op wherever a partition falls back. The backward stays
decomposed (pointwise and reduction nodes where the families express them).

Example:
    >>> import torch
    >>> from torch.fx.experimental.proxy_tensor import make_fx
    >>> from hipdnn_graph.torch.compile._rmsnorm import fuse_rms_norm
    >>> aten = torch.ops.aten
    >>> def f(x, w):
    ...     ms = aten.mean.dim(aten.pow.Tensor_Scalar(x, 2), [-1], True)
    ...     r = aten.rsqrt.default(aten.add.Scalar(ms, 1e-6))
    ...     return aten.mul.Tensor(aten.mul.Tensor(x, r), w)
    >>> gm = make_fx(f, tracing_mode="fake")(torch.randn(2, 8), torch.randn(8))
    >>> fuse_rms_norm(gm)
    1
    >>> [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    ['aten._fused_rms_norm.default', '<built-in function getitem>']
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

from ...types import NormFwdPhase
from ._lowering import Lowering, meta_value
from ._rule import Rule, args, keyword

__all__ = ["RMSNORM_RULES", "fuse_rms_norm"]

aten = torch.ops.aten


def _only(node: Any, target: Any) -> torch.fx.Node | None:
    """``node`` when it is a call of ``target`` with exactly one user, else ``None``."""
    if (
        isinstance(node, torch.fx.Node)
        and node.op == "call_function"
        and node.target is target
        and len(node.users) == 1
    ):
        return node
    return None


def _pairs(node: torch.fx.Node) -> list[tuple[Any, Any]]:
    """A binary node's operands, in both orders."""
    if len(node.args) != 2:
        return []
    a, b = args(node)
    return [(a, b), (b, a)]


def _match(y: torch.fx.Node) -> tuple[torch.fx.Node, ...] | None:
    """``(x, weight, rsqrt, mul, add, mean, square)`` when ``y`` ends an RMSNorm chain."""
    if y.target is not aten.mul.Tensor:
        return None
    for mul, weight in _pairs(y):
        if not isinstance(mul, torch.fx.Node) or mul.target is not aten.mul.Tensor:
            continue
        if not isinstance(weight, torch.fx.Node):
            continue
        for x, rsqrt in _pairs(mul):
            if not isinstance(rsqrt, torch.fx.Node) or rsqrt.target is not aten.rsqrt.default:
                continue
            add = _only(rsqrt.args[0], aten.add.Scalar)
            mean = _only(add.args[0], aten.mean.dim) if add is not None else None
            square = _only(mean.args[0], aten.pow.Tensor_Scalar) if mean is not None else None
            if square is not None and square.args == (x, 2) and isinstance(x, torch.fx.Node):
                assert add is not None and mean is not None
                return (x, weight, rsqrt, mul, add, mean, square)
    return None


def _normalized_shape(
    x: torch.fx.Node, weight: torch.fx.Node, mean: torch.fx.Node
) -> list[int] | None:
    """The trailing dims the chain normalizes over, when the weight has exactly those."""
    shape = list(meta_value(x).shape)
    given: Any = mean.args[1]
    if not shape or not isinstance(given, list | tuple):
        return None
    dims = sorted(int(d) % len(shape) for d in given)
    if mean.args[2:3] != (True,) or dims != list(range(len(shape) - len(dims), len(shape))):
        return None
    normalized = shape[len(shape) - len(dims) :]
    return normalized if list(meta_value(weight).shape) == normalized else None


def fuse_rms_norm(gm: torch.fx.GraphModule) -> int:
    """Replace ``gm``'s decomposed RMSNorm chains by ``aten._fused_rms_norm``; returns how many.

    A chain is left alone when its pieces have other users (but ``rsqrt`` and ``mul``, which a
    training graph saves), it normalizes other than trailing dims, or its weight is not over
    those dims or is made after the chain starts.
    """
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    fused = 0
    for y in list(gm.graph.find_nodes(op="call_function", target=aten.mul.Tensor)):
        if y not in order:  # erased with an earlier chain
            continue
        found = _match(y)
        if found is None:
            continue
        x, weight, rsqrt, mul, add, mean, square = found
        normalized = _normalized_shape(x, weight, mean)
        if normalized is None or order[weight] > order[rsqrt]:
            continue
        with gm.graph.inserting_before(rsqrt):
            node = gm.graph.call_function(
                aten._fused_rms_norm.default, (x, normalized, weight, float(args(add)[1]))
            )
            node.meta["val"] = (meta_value(y), meta_value(rsqrt))
            out, inv = (gm.graph.call_function(operator.getitem, (node, i)) for i in (0, 1))
            out.meta["val"], inv.meta["val"] = meta_value(y), meta_value(rsqrt)
        y.replace_all_uses_with(out)
        rsqrt.replace_all_uses_with(inv)
        for dead in (y, mul, rsqrt, add, mean, square, inv):
            if not dead.users:
                gm.graph.erase_node(dead)
        fused += 1
    if fused:
        gm.graph.lint()
        gm.recompile()
    return fused


def _refusal(node: torch.fx.Node) -> str | None:
    if args(node)[2] is None:
        return "no weight (hipDNN's RMSNorm takes a scale)"
    return None


def _lower(cx: Lowering, node: torch.fx.Node) -> Any:
    x_arg, normalized, weight = args(node)[:3]
    x = cx.tensor(x_arg)
    dims = list(meta_value(x_arg).shape)
    eps = keyword(node, 3, "eps", None)
    if eps is None:  # aten's default: the machine epsilon of the input's type
        eps = torch.finfo(meta_value(x_arg).dtype).eps
    epsilon = cx.scalar(node, "eps", eps)
    training = any(user.args[1] == 1 for user in node.users)
    y, inv_rms = cx.graph.rmsnorm(
        x,
        cx.tensor(weight, [1] * (len(dims) - len(normalized)) + list(normalized)),
        name=node.name,
        epsilon=epsilon,
        forward_phase=NormFwdPhase.TRAINING if training else NormFwdPhase.INFERENCE,
    )
    return (y, inv_rms)


#: aten op -> rule
RMSNORM_RULES: dict[Any, Rule] = {aten._fused_rms_norm.default: Rule("rmsnorm", _lower, _refusal)}
