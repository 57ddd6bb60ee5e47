"""``hipdnn_graph.torch.varlen_attention`` on the GPU: a packed batch (GQA, ``Sq ≠ Skv`` per
sequence, causal top-left and bottom-right) against ``F.scaled_dot_product_attention`` run on
each sequence alone on the same device; float32 tightly, bf16 within 2e-2 relative error; the
outputs and gradients stay on the device; a second batch packed differently hits the cached
graphs. And one padding-free transformers step (tiny Llama, GQA, bf16) against each sequence
alone."""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")

import hipdnn_graph.torch as hgt  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]

F = torch.nn.functional
H, HK, D = 8, 2, 64
LENGTHS = [(128, 200), (7, 7), (300, 256), (64, 1)]
MASKS: dict[str, dict[str, Any]] = {
    "causal_top_left": {"is_causal": True},
    "causal_bottom_right": {"is_causal": True, "diagonal_alignment": "bottom_right"},
    "none": {},
}


def _cu(lengths: list[int]) -> Any:
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32,
                        device="cuda")  # fmt: skip


def _inputs(dtype: Any, lengths: list[tuple[int, int]], seed: int = 0) -> dict[str, Any]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    tq, tk = sum(a for a, _ in lengths), sum(b for _, b in lengths)

    def rand(*shape: int) -> Any:
        return torch.randn(*shape, generator=g, device="cuda", dtype=dtype)

    return {"q": rand(tq, H, D).requires_grad_(), "k": rand(tk, HK, D).requires_grad_(),
            "v": rand(tk, HK, D).requires_grad_(), "do": rand(tq, H, D),
            "cu_q": _cu([a for a, _ in lengths]), "cu_k": _cu([b for _, b in lengths]),
            "max_q": max(a for a, _ in lengths), "max_k": max(b for _, b in lengths)}  # fmt: skip


def _per_sequence(a: dict[str, Any], mask: dict[str, Any]) -> Any:
    cq, ck = a["cu_q"].tolist(), a["cu_k"].tolist()
    outs = []
    for b in range(len(cq) - 1):
        q = a["q"][cq[b] : cq[b + 1]].transpose(0, 1)
        k, v = (a[n][ck[b] : ck[b + 1]].transpose(0, 1) for n in "kv")
        i = torch.arange(q.shape[1], device="cuda")[:, None]
        j = torch.arange(k.shape[1], device="cuda")[None, :]
        if not mask:
            seen = torch.ones(q.shape[1], k.shape[1], dtype=torch.bool, device="cuda")
        else:
            seen = j <= i + (k.shape[1] - q.shape[1] if "diagonal_alignment" in mask else 0)
        rows = seen.any(-1)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=seen | ~rows[:, None],
                                           enable_gqa=True)  # fmt: skip
        outs.append(torch.where(rows[None, :, None], o, torch.zeros_like(o)).transpose(0, 1))
    return torch.cat(outs)


def _rel(out: Any, ref: Any) -> float:
    assert not torch.isnan(out).any()
    out, ref = out.detach().double(), ref.detach().double()
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


@pytest.mark.parametrize("mask_name", sorted(MASKS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_packed_forward_backward_matches_each_sequence_on_the_device(
    dtype: Any, mask_name: str
) -> None:
    mask = MASKS[mask_name]
    a = _inputs(dtype, LENGTHS)
    out = hgt.varlen_attention(a["q"], a["k"], a["v"], a["cu_q"], a["cu_k"], a["max_q"],
                               a["max_k"], enable_gqa=True, **mask)  # fmt: skip
    ref = _per_sequence(a, mask)
    got = torch.autograd.grad(out, [a["q"], a["k"], a["v"]], a["do"])
    want = torch.autograd.grad(ref, [a["q"], a["k"], a["v"]], a["do"])
    assert out.device.type == "cuda" and out.dtype == dtype
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    assert _rel(out, ref) < tol
    for g, w in zip(got, want, strict=True):
        assert g.device.type == "cuda" and g.shape == w.shape
        assert _rel(g, w) < tol


def test_a_batch_packed_differently_hits_the_cached_graphs_on_the_device() -> None:
    hgt.graph_cache().clear()
    for seed, lengths in enumerate((LENGTHS, [(100, 90), (50, 50), (260, 256), (3, 3)])):
        a = _inputs(torch.float32, lengths, seed)
        out = hgt.varlen_attention(a["q"], a["k"], a["v"], a["cu_q"], a["cu_k"], a["max_q"],
                                   a["max_k"], is_causal=True, enable_gqa=True)  # fmt: skip
        torch.autograd.grad(out, [a["q"]], a["do"])
        assert _rel(out, _per_sequence(a, MASKS["causal_top_left"])) < 1e-5
    assert hgt.graph_cache().info()[:2] == (2, 2)  # same B and S_max buckets: nothing built


def test_padding_free_llama_step_bf16_matches_each_sequence_alone() -> None:
    transformers = pytest.importorskip("transformers")
    hgt.register_transformers()
    config = transformers.LlamaConfig(
        vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=512,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="hipdnn")
    model = model.to("cuda", torch.bfloat16).train()
    g = torch.Generator().manual_seed(1)
    sequences = [torch.randint(0, 256, (n,), generator=g).tolist() for n in (200, 17, 311, 64)]
    batch = transformers.DataCollatorWithFlattening()([{"input_ids": s} for s in sequences])
    batch = {k: v.to("cuda") for k, v in batch.items()}
    loss = model(**batch, use_cache=False).loss
    model.set_attn_implementation("sdpa")
    total: Any = 0.0
    count = 0
    for seq in sequences:
        ids = torch.tensor([seq], device="cuda")
        logits = model(input_ids=ids, use_cache=False).logits[0, :-1].float()
        total = total + F.cross_entropy(logits, ids[0, 1:], reduction="sum")
        count += len(seq) - 1
    assert abs(loss.item() - (total / count).item()) < 2e-2 * abs(loss.item())
