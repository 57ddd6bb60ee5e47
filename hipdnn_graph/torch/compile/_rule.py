"""One rule of the torch.compile backend's table, and the helpers its rules read nodes with.

A :class:`Rule` names the hipDNN family of an aten op, checks a node (``refusal``: ``None`` or
the reason it stays in aten) and lowers it through the public builder. The table itself is
:data:`hipdnn_graph.torch.compile._rules.RULES`.

Example:
    >>> from hipdnn_graph.torch.compile._rule import Rule
    >>> Rule("pointwise", lambda cx, node: None).refusal(None) is None
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from ._lowering import Lowering, meta_value

__all__ = ["Check", "Lower", "Rule", "args", "keyword", "rank"]

Lower = Callable[[Lowering, torch.fx.Node], Any]
Check = Callable[[torch.fx.Node], "str | None"]


def _no_check(node: torch.fx.Node) -> str | None:
    return None


@dataclass(frozen=True)
class Rule:
    """How one aten op becomes hipDNN nodes."""

    family: str
    lower: Lower
    refusal: Check = _no_check


def args(node: torch.fx.Node) -> tuple[Any, ...]:
    """The node's positional arguments, typed loosely (FX types them as any argument)."""
    return node.args


def rank(node: torch.fx.Node) -> int:
    """The rank of the node's example value."""
    return len(meta_value(node).shape)


def keyword(node: torch.fx.Node, index: int, name: str, default: Any) -> Any:
    """An argument given by position ``index`` or by keyword ``name``, else ``default``."""
    if len(args(node)) > index:
        return args(node)[index]
    return node.kwargs.get(name, default)
