"""The training page's examples: the op with autograd, and a transformers model on it."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is built from a config: no download

# --8<-- [start:op]
import torch

import hipdnn_graph.torch as hgt

torch.manual_seed(0)
q = torch.randn(2, 8, 128, 64, requires_grad=True)
k = torch.randn(2, 2, 128, 64, requires_grad=True)  # 2 KV heads: grouped-query attention
v = torch.randn(2, 2, 128, 64, requires_grad=True)
bias = torch.zeros(1, 8, 1, 128, requires_grad=True)  # broadcast over batch and queries

out = hgt.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=True, enable_gqa=True)
out.square().sum().backward()  # type: ignore[no-untyped-call]  # SdpaBwd fed the forward's O, Stats
ref = torch.nn.functional.scaled_dot_product_attention(
    q, k, v, attn_mask=bias + torch.full((128, 128), float("-inf")).triu(1), enable_gqa=True
)
print(out.shape, torch.allclose(out, ref, atol=1e-5))
assert q.grad is not None and k.grad is not None and bias.grad is not None
print(q.grad.shape, k.grad.shape, bias.grad.shape)  # dBias summed to the bias's own shape
print(hgt.graph_cache().info())
# --8<-- [end:op]

# --8<-- [start:transformers]
from transformers import AutoModelForCausalLM, LlamaConfig  # noqa: E402

hgt.register_transformers()  # adds "hipdnn" to transformers' AttentionInterface
config = LlamaConfig(
    vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2,
)  # fmt: skip
model = AutoModelForCausalLM.from_config(config, attn_implementation="hipdnn")  # type: ignore[no-untyped-call]
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
ids = torch.arange(32).repeat(2, 1)
padding = torch.ones_like(ids)
padding[1, :4] = 0  # left padding: transformers builds the mask, hipdnn-graph applies it
for _ in range(3):
    loss = model(input_ids=ids, attention_mask=padding, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
print(model.config._attn_implementation, torch.isfinite(loss).item())
# --8<-- [end:transformers]
