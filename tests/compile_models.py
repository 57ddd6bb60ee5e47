"""The small models the torch.compile backend and exporter tests compile (torch is imported by
the tests' ``importorskip`` before this module).

Example:
    >>> import torch
    >>> Block()(torch.randn(2, 5, 16)).shape
    torch.Size([2, 5, 16])
"""

from __future__ import annotations

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
