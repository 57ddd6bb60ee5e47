"""Attention on a GPU: the Dynamo graph's ``scaled_dot_product_attention`` calls become the
``hipdnn_graph::sdpa_fwd`` custom op before AOTAutograd traces them.

On a GPU, torch's SDPA kernels (flash, efficient, cuDNN) return RNG state and sequence
bookkeeping that their backward reads and that no hipDNN graph makes, so a training graph could
not partition them (:mod:`._rules` takes their forward only when those results are unused). The
custom op of :mod:`hipdnn_graph.torch` runs SDPA forward and backward as hipDNN graphs with its
own autograd formula, so AOTAutograd puts ``hipdnn_graph.sdpa_fwd`` in the forward graph and
``hipdnn_graph.sdpa_bwd`` in the backward graph; both run their own hipDNN graphs and the
census counts them there. A call the op does not take (a mask, dropout, GQA's flag) stays
torch's. On the CPU the aten kernels partition as they are (forward and backward).

Example:
    >>> import torch
    >>> from hipdnn_graph.torch.compile._attention import OWN_GRAPH_OPS
    >>> sorted(OWN_GRAPH_OPS.values())
    ['sdpa', 'sdpa_backward']
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from .. import _custom_ops  # noqa: F401  (registers the hipdnn_graph:: ops)

__all__ = ["OWN_GRAPH_OPS", "route_attention", "routes_to_op"]

#: ops that run hipDNN graphs by themselves: op -> family (the census places them in hipDNN)
OWN_GRAPH_OPS: dict[Any, str] = {
    torch.ops.hipdnn_graph.sdpa_fwd.default: "sdpa",
    torch.ops.hipdnn_graph.sdpa_bwd.default: "sdpa_backward",
}


def routes_to_op(q: Any) -> bool:
    """Whether attention on ``q``'s device goes through the custom op (not on the CPU)."""
    return isinstance(q, torch.Tensor) and q.device.type != "cpu"


def _attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """F.scaled_dot_product_attention through the custom op where it takes the call."""
    if attn_mask is None and dropout_p == 0.0 and not enable_gqa and q.dim() == 4:
        out: torch.Tensor = torch.ops.hipdnn_graph.sdpa_fwd(
            q, k, v, None, None, None, 0.0, scale, is_causal, 0, None, None, False, None
        )[0]
        return out
    return F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=attn_mask,
        dropout_p=dropout_p,
        is_causal=is_causal,
        scale=scale,
        enable_gqa=enable_gqa,
    )


def route_attention(gm: torch.fx.GraphModule) -> int:
    """Point ``gm``'s SDPA calls whose query is not on the CPU at the custom op; returns how
    many were changed."""
    changed = 0
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not F.scaled_dot_product_attention:
            continue
        q = (
            node.args[0].meta.get("example_value")
            if isinstance(node.args[0], torch.fx.Node)
            else None
        )
        if routes_to_op(q):
            node.target = _attention
            changed += 1
    if changed:
        gm.recompile()
    return changed
