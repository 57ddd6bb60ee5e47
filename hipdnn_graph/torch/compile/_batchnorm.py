"""Batch norm in inference in the torch.compile backend: aten's
``_native_batch_norm_legit_no_training`` as pointwise ``ADD``/``RSQRT`` (the inverse standard
deviation from the running variance and epsilon) feeding hipDNN's ``batchnorm_inference``.

Taken when the op has a weight and a bias and only its output is used (its saved statistics
are empty on the CPU); other batch norms (training, no affine parameters) stay in aten.

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


def _refusal(node: torch.fx.Node) -> str | None:
    if args(node)[1] is None or args(node)[2] is None:
        return "no weight or no bias (hipDNN's batchnorm_inference takes both)"
    if len(meta_value(args(node)[0]).shape) < 2:
        return "an input without a channel dim"
    used: set[Any] = {user.args[1] for user in node.users if user.users}
    if not used <= {0}:
        return "its saved mean or inverse standard deviation is used"
    return None


def _lower(cx: Lowering, node: torch.fx.Node) -> Any:
    x_arg, weight, bias, mean, var, _, eps = args(node)[:7]
    dims = list(meta_value(x_arg).shape)
    per_channel = [1, dims[1], *[1] * (len(dims) - 2)]
    rank = len(dims)
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


#: aten op -> rule
BATCHNORM_RULES: dict[Any, Rule] = {
    aten._native_batch_norm_legit_no_training.default: Rule(
        "batchnorm_inference", _lower, _refusal
    ),
}
