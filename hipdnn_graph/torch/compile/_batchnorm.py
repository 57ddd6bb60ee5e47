"""Batch norm in the torch.compile backend: aten's three batch-norm ops as hipDNN's families.

- ``_native_batch_norm_legit_no_training`` (eval mode): pointwise ``ADD``/``RSQRT`` (the inverse
  standard deviation from the running variance and epsilon) feeding ``batchnorm_inference``;
  taken when only its output is used (its saved statistics are empty on the CPU).
- ``_native_batch_norm_legit_functional`` (training): ``batchnorm`` with the previous running
  statistics and momentum, giving Y, the batch mean, the inverse standard deviation and the
  next running statistics (the variance's update unbiased, as torch's).
- ``native_batch_norm_backward``: ``batchnorm_backward`` from the saved statistics.

Per-channel tensors (``[C]`` in aten) are viewed as ``[1, C, 1, ...]``. Batch norms without a
weight and a bias, without running statistics, or whose results a family does not make stay
in aten.

Example:
    >>> import torch
    >>> from hipdnn_graph.torch.compile._batchnorm import BATCHNORM_RULES
    >>> BATCHNORM_RULES[torch.ops.aten._native_batch_norm_legit_no_training.default].family
    'batchnorm_inference'
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from ...types import PointwiseMode
from ._lowering import Lowering, meta_value
from ._rule import Rule, args

__all__ = ["BATCHNORM_RULES"]

aten = torch.ops.aten


def _per_channel(x_arg: Any) -> list[int]:
    """The dims of a per-channel tensor beside ``x_arg``: ``[1, C, 1, ...]``."""
    dims = list(meta_value(x_arg).shape)
    return [1, dims[1], *[1] * (len(dims) - 2)]


def _inference_refusal(node: torch.fx.Node) -> str | None:
    if args(node)[1] is None or args(node)[2] is None:
        return "no weight or no bias (hipDNN's batchnorm_inference takes both)"
    if len(meta_value(args(node)[0]).shape) < 2:
        return "an input without a channel dim"
    used: set[Any] = {user.args[1] for user in node.users if user.users}
    if not used <= {0}:
        return "its saved mean or inverse standard deviation is used"
    return None


def _lower_inference(cx: Lowering, node: torch.fx.Node) -> Any:
    x_arg, weight, bias, mean, var, _, eps = args(node)[:7]
    per_channel = _per_channel(x_arg)
    rank = len(per_channel)
    shifted = cx.graph.pointwise(
        cx.tensor(var, per_channel),
        cx.operand(float(eps), rank),
        name=f"{node.name}_var_eps",
        mode=PointwiseMode.ADD,
    )
    inv_std = cx.graph.pointwise(shifted, name=f"{node.name}_inv_std", mode=PointwiseMode.RSQRT)
    y = cx.graph.batchnorm_inference(
        cx.tensor(x_arg),
        cx.tensor(mean, per_channel),
        inv_std,
        cx.tensor(weight, per_channel),
        cx.tensor(bias, per_channel),
        name=node.name,
    )
    return (y, None, None)


def _training_refusal(node: torch.fx.Node) -> str | None:
    x_arg, weight, bias, running_mean, running_var, training, momentum = args(node)[:7]
    if weight is None or bias is None:
        return "no weight or no bias (hipDNN's batchnorm takes both)"
    if running_mean is None or running_var is None or not training:
        return "no running statistics, or not in training"
    if len(meta_value(x_arg).shape) < 2:
        return "an input without a channel dim"
    if not isinstance(momentum, int | float):
        return "a momentum that is not a number"
    return None


def _lower_training(cx: Lowering, node: torch.fx.Node) -> Any:
    """``_native_batch_norm_legit_functional``: Y, the batch mean and inverse standard deviation
    and the next running mean and variance."""
    x_arg, weight, bias, running_mean, running_var, _, momentum, eps = args(node)[:8]
    per_channel = _per_channel(x_arg)
    scalars = {
        name: cx.scalar(node, name, value)
        for name, value in (("epsilon", eps), ("momentum", momentum))
    }
    outputs = cx.graph.batchnorm(
        cx.tensor(x_arg),
        cx.tensor(weight, per_channel),
        cx.tensor(bias, per_channel),
        name=node.name,
        prev_running_mean=cx.tensor(running_mean, per_channel),
        prev_running_variance=cx.tensor(running_var, per_channel),
        **scalars,
    )
    return tuple(outputs)


def _backward_refusal(node: torch.fx.Node) -> str | None:
    x_arg, weight = args(node)[1:3]
    save_mean, save_invstd, training = args(node)[5:8]
    if weight is None:
        return "no weight (hipDNN's batchnorm_backward takes a scale)"
    if save_mean is None or save_invstd is None or not training:
        return "no saved statistics, or not in training"
    if list(args(node)[9]) != [True, True, True]:
        return "not all of dX, dScale, dBias asked for"
    if len(meta_value(x_arg).shape) < 2:
        return "an input without a channel dim"
    return None


def _lower_backward(cx: Lowering, node: torch.fx.Node) -> Any:
    dy_arg, x_arg, weight, _, _, save_mean, save_invstd = args(node)[:7]
    per_channel = _per_channel(x_arg)
    dx, dscale, dbias = cx.graph.batchnorm_backward(
        cx.tensor(dy_arg),
        cx.tensor(x_arg),
        cx.tensor(weight, per_channel),
        name=node.name,
        mean=cx.tensor(save_mean, per_channel),
        inv_variance=cx.tensor(save_invstd, per_channel),
    )
    return (dx, dscale, dbias)


#: aten op -> rule
BATCHNORM_RULES: dict[Any, Rule] = {
    aten._native_batch_norm_legit_no_training.default: Rule(
        "batchnorm_inference", _lower_inference, _inference_refusal
    ),
    aten._native_batch_norm_legit_functional.default: Rule(
        "batchnorm", _lower_training, _training_refusal
    ),
    aten.native_batch_norm_backward.default: Rule(
        "batchnorm_backward", _lower_backward, _backward_refusal
    ),
}
