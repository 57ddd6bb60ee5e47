"""The training page's packed batches: ``varlen_attention`` on three sequences of different
lengths (checked against the last one run alone, then a bad offsets tensor refused), and one
padding-free step of a tiny Llama through transformers, checked against each sequence alone."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is built from a config: no download

# --8<-- [start:varlen]
import torch

import hipdnn_graph as hg
import hipdnn_graph.torch as hgt

torch.manual_seed(0)
cu = torch.tensor([0, 5, 7, 15], dtype=torch.int32)  # 3 sequences: 5, 2 and 8 tokens
q = torch.randn(15, 8, 64, requires_grad=True)  # [T, H, D], no padding
k = torch.randn(15, 2, 64, requires_grad=True)  # 2 KV heads: grouped-query attention
v = torch.randn(15, 2, 64, requires_grad=True)

out = hgt.varlen_attention(q, k, v, cu, cu, 8, 8, is_causal=True, enable_gqa=True)
out.square().sum().backward()  # type: ignore[no-untyped-call]  # the packed SdpaBwd graph
qs, ks, vs = (x[7:].transpose(0, 1) for x in (q, k, v))  # the last sequence alone, [H, S, D]
alone = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=True,
                                                         enable_gqa=True)  # fmt: skip
print(out.shape, torch.allclose(out[7:], alone.transpose(0, 1), atol=1e-5))
assert q.grad is not None and k.grad is not None
print(q.grad.shape, k.grad.shape)
print([(g.kind, g.engine, g.shapes["Q"]) for g in hgt.cached_graphs()])
# --8<-- [end:varlen]

# --8<-- [start:bad]
try:
    bad = torch.tensor([0, 5, 4, 15], dtype=torch.int32)
    hgt.varlen_attention(q, k, v, bad, cu, 8, 8, enable_gqa=True)
except hg.HipdnnError as err:
    print(err.code.name, err)
# --8<-- [end:bad]

# --8<-- [start:transformers]
from transformers import AutoModelForCausalLM, DataCollatorWithFlattening, LlamaConfig  # noqa: E402

hgt.register_transformers()
config = LlamaConfig(
    vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2,
)  # fmt: skip
model = AutoModelForCausalLM.from_config(config, attn_implementation="hipdnn")  # type: ignore[no-untyped-call]
sequences = [list(range(3, 15)), list(range(40, 45)), list(range(70, 90))]
collator = DataCollatorWithFlattening()  # type: ignore[no-untyped-call]
batch = collator([{"input_ids": s} for s in sequences])
print(batch["input_ids"].shape, batch["position_ids"][0, 10:14].tolist())
hgt.graph_cache().clear()
loss = model(**batch, use_cache=False).loss  # one row of 37 tokens, no padding
loss.backward()
print(sorted({g.graph.get_name() for g in hgt.cached_graphs()}))

total = 0.0  # the same loss from each sequence run alone
for s in sequences:
    logits = model(input_ids=torch.tensor([s]), use_cache=False).logits[0, :-1]
    target = torch.tensor(s[1:])
    total += torch.nn.functional.cross_entropy(logits, target, reduction="sum").item()
print(abs(loss.item() - total / sum(len(s) - 1 for s in sequences)) < 1e-5)
# --8<-- [end:transformers]
