"""Train with hipdnn-graph: a torch attention op with autograd, and transformers' registration.

Importing this package imports torch (``import hipdnn_graph`` alone never does).

Example:
    >>> import torch
    >>> import hipdnn_graph.torch as hgt
    >>> q = k = v = torch.randn(2, 4, 16, 8)
    >>> out = hgt.scaled_dot_product_attention(q, k, v, is_causal=True)
    >>> torch.allclose(out, torch.nn.functional.scaled_dot_product_attention(
    ...     q, k, v, is_causal=True), atol=1e-6)
    True
"""

from __future__ import annotations

from ._cache import CacheInfo, GraphCache
from ._graphs import CachedGraph, cached_graphs, graph_cache, sdpa_backward, sdpa_forward
from ._hf import hipdnn_attention_forward, register_transformers
from ._op import scaled_dot_product_attention

__all__ = [
    "CacheInfo",
    "CachedGraph",
    "GraphCache",
    "cached_graphs",
    "graph_cache",
    "hipdnn_attention_forward",
    "register_transformers",
    "scaled_dot_product_attention",
    "sdpa_backward",
    "sdpa_forward",
]
