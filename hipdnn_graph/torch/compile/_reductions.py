"""The reduction rules of the torch.compile backend: aten's ``sum``, ``mean``, ``amax``,
``amin`` and ``prod`` over dims as hipDNN ``reduction`` nodes.

hipDNN's reduction keeps the reduced axes as 1s in Y (its dims say which axes reduce), so only
``keepdim=True`` reductions are taken; the rest (dropped dims, a ``dtype=`` conversion, a 0-d
input) stay in aten. ``aten.amax`` is ``ReductionMode.MAX`` (hipDNN's ``AMAX`` is the max of
``|x|``).

Example:
    >>> import torch
    >>> from hipdnn_graph.torch.compile._reductions import REDUCTION_RULES
    >>> REDUCTION_RULES[torch.ops.aten.mean.dim].family
    'reduction'
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from ...types import ReductionMode
from ._lowering import Lowering, meta_value
from ._rule import Rule, args, keyword

__all__ = ["REDUCTION_RULES"]

aten = torch.ops.aten


def _refusal(node: torch.fx.Node) -> str | None:
    x = args(node)[0]
    if not isinstance(x, torch.fx.Node) or not meta_value(x).shape:
        return "a 0-d input (a reduction's Y keeps X's rank)"
    if keyword(node, 3, "dtype", None) is not None:
        return "a dtype= conversion"
    if len(meta_value(node).shape) != len(meta_value(x).shape):
        return "keepdim=False (hipDNN's reduction keeps the reduced dims as 1s)"
    return None


def _reduction(mode: ReductionMode) -> Rule:
    def lower(cx: Lowering, node: torch.fx.Node) -> Any:
        y = cx.graph.reduction(cx.tensor(args(node)[0]), name=node.name, mode=mode)
        out = meta_value(node)
        return y.set_dim(list(out.shape)).set_stride(list(out.stride()))

    return Rule("reduction", lower, _refusal)


#: aten reduction op -> rule
REDUCTION_RULES: dict[Any, Rule] = {
    aten.sum.dim_IntList: _reduction(ReductionMode.ADD),
    aten.mean.dim: _reduction(ReductionMode.AVG),
    aten.amax.default: _reduction(ReductionMode.MAX),
    aten.amin.default: _reduction(ReductionMode.MIN),
    aten.prod.dim_int: _reduction(ReductionMode.MUL),
}
