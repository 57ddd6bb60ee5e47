"""Train with hipdnn-graph: a torch attention op with autograd, and transformers' registration.

Importing this package imports torch (``import hipdnn_graph`` alone never does).
:func:`export` (from :mod:`hipdnn_graph.torch.compile`, imported at first use) writes a model's
hipDNN subgraphs and their manifest to a directory.

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

from typing import TYPE_CHECKING, Any

try:
    import torch as _torch  # noqa: F401  (checked first: every module below imports it)
except ImportError as _missing:
    if _missing.name not in ("torch", None) and not str(_missing.name).startswith("torch."):
        raise  # torch is there but something it needs is not: its own message says what
    raise ImportError(
        "hipdnn_graph.torch needs PyTorch, which is not installed: install torch "
        "(pip install torch, or the extra: pip install 'hipdnn-graph[torch]'); "
        f"the import failed with: {_missing}",
        name=__name__,
    ) from _missing

from ._cache import CacheInfo, GraphCache
from ._graphs import CachedGraph, cached_graphs, graph_cache, sdpa_backward, sdpa_forward
from ._hf import hipdnn_attention_forward, register_transformers
from ._op import scaled_dot_product_attention
from ._varlen import varlen_attention

if TYPE_CHECKING:
    from .compile import export


def __getattr__(name: str) -> Any:
    """``export`` on first use: the compile package imports torch's FX and Dynamo machinery."""
    if name == "export":
        from .compile import export

        return export
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CacheInfo",
    "CachedGraph",
    "GraphCache",
    "cached_graphs",
    "export",
    "graph_cache",
    "hipdnn_attention_forward",
    "register_transformers",
    "scaled_dot_product_attention",
    "sdpa_backward",
    "sdpa_forward",
    "varlen_attention",
]
