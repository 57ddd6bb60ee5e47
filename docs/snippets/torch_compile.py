"""torch.compile(model, backend="hipdnn") (docs/torch-compile.md): a transformer block trained
through hipDNN graphs, checked against eager, and the census of where each op ran."""

import torch
import torch.nn.functional as F

import hipdnn_graph.torch.compile as hgc


# --8<-- [start:compile]
class Block(torch.nn.Module):
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


torch.manual_seed(0)
block = Block()
x = torch.randn(2, 5, 16, requires_grad=True)
compiled = torch.compile(block, backend=hgc.compile_backend)  # installed: backend="hipdnn"
compiled(x).square().sum().backward()
assert x.grad is not None
grad = x.grad.clone()
x.grad = None
block(x).square().sum().backward()  # eager
assert x.grad is not None
print(torch.allclose(grad, x.grad, atol=1e-5))
# --8<-- [end:compile]

# --8<-- [start:census]
census = hgc.census()
print(f"{census.flops_fraction():.0%} of the matmul and attention FLOPs in hipDNN graphs")
print(census.table())
# --8<-- [end:census]
