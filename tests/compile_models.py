"""The small models the torch.compile backend and exporter tests compile, and what the backend
refuses of a traced function (:func:`refusals`); torch is imported by the tests'
``importorskip`` before this module.

Example:
    >>> import torch
    >>> Block()(torch.randn(2, 5, 16)).shape
    torch.Size([2, 5, 16])
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

F = torch.nn.functional


class Block(torch.nn.Module):
    """A pre-norm transformer block: layernorm, qkv linear, causal SDPA, projection, residual."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.ln = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        qkv = self.qkv(self.ln(x)).view(b, s, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + F.gelu(self.proj(attn.transpose(1, 2).reshape(b, s, d)))


def refusals(f: Callable[..., Any], *args: Any, op: Any = None) -> list[str | None]:
    """Why the compile backend leaves each aten call of ``f`` (traced on fake ``args``) in
    aten, ``None`` where a family takes it: every call but ``getitem``, or those of ``op``."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from hipdnn_graph.torch.compile._partition import FamilySupport

    graph = make_fx(f, tracing_mode="fake")(*args).graph
    if op is not None:
        nodes = list(graph.find_nodes(op="call_function", target=op))
    else:
        nodes = [
            n for n in graph.nodes if n.op == "call_function" and n.target.__name__ != "getitem"
        ]
    return [FamilySupport.refusal(n) for n in nodes]


def make_mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))


def make_cnn() -> torch.nn.Module:
    """Convolutions with ReLU and an inference batch norm between them (eval mode)."""
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.BatchNorm2d(8),
        torch.nn.Conv2d(8, 4, 3, stride=2, padding=1),
    ).eval()


class _Kept(logging.Handler):
    """A handler that keeps the records it is given."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def trains_as_eager(model: torch.nn.Module, x: torch.Tensor) -> None:
    """Compiled with the backend, ``model``'s output and the gradients of its parameters and of
    ``x`` (a leaf) for ``out.square().sum()`` equal eager's, and no hipDNN subgraph fell back to
    aten at run time."""
    from hipdnn_graph.torch.compile import compile_backend

    handler = _Kept(logging.WARNING)
    logger = logging.getLogger("hipdnn_graph.compile")
    logger.addHandler(handler)
    try:
        out = torch.compile(model, backend=compile_backend)(x)
        out.square().sum().backward()
    finally:
        logger.removeHandler(handler)
    assert [r.getMessage() for r in handler.records] == []
    grads = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    model.zero_grad()
    x.grad = None
    want = model(x)
    want.square().sum().backward()
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    for got, ref in zip(grads, [p.grad for p in model.parameters()] + [x.grad], strict=True):
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)
