"""Padding-free training through transformers with ``attn_implementation="hipdnn"``: a packed
batch from ``DataCollatorWithFlattening`` (position ids that restart, with and without the
FlashAttention kwargs ``cu_seq_lens_q/k``, ``max_length_q/k``) runs through the packed graphs,
and its loss and every parameter gradient equal those of each sequence run alone (through
``"sdpa"``), for a tiny GPT-2 and a tiny Llama with GQA, random weights, on CPU."""

from __future__ import annotations

import contextvars
import os
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import hipdnn_graph as hg  # noqa: E402
import hipdnn_graph.torch as hgt  # noqa: E402

VOCAB = 96
LENGTHS = (5, 9, 3, 7)


def _model(arch: str) -> Any:
    if arch == "gpt2":
        config = transformers.GPT2Config(
            vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=4,
            attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0,
        )  # fmt: skip
    else:
        config = transformers.LlamaConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
        )  # fmt: skip
    hgt.register_transformers()
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="hipdnn")
    return model.train()


def _sequences() -> list[list[int]]:
    g = torch.Generator().manual_seed(2)
    return [torch.randint(0, VOCAB, (n,), generator=g).tolist() for n in LENGTHS]


def _grads(model: Any, loss: Any) -> dict[str, Any]:
    model.zero_grad()
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _alone(model: Any, sequences: list[list[int]]) -> Any:
    """The packed batch's loss from each sequence run alone (``"sdpa"``): the summed token
    losses over the count of predicted tokens (each sequence's first label is ignored)."""
    model.set_attn_implementation("sdpa")
    total, count = 0.0, 0
    for seq in sequences:
        ids = torch.tensor([seq])
        logits = model(input_ids=ids, use_cache=False).logits[0, :-1]
        total = total + torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum")
        count += len(seq) - 1
    model.set_attn_implementation("hipdnn")
    return total / count


@pytest.mark.parametrize("flash_kwargs", [False, True], ids=["position_ids", "cu_seq_lens"])
@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_packed_batch_equals_each_sequence_alone(arch: str, flash_kwargs: bool) -> None:
    model = _model(arch)
    sequences = _sequences()
    collator = transformers.DataCollatorWithFlattening(return_flash_attn_kwargs=flash_kwargs)
    batch = collator([{"input_ids": s} for s in sequences])
    assert batch["input_ids"].shape == (1, sum(LENGTHS))
    assert ("cu_seq_lens_q" in batch) is flash_kwargs
    hgt.graph_cache().clear()
    loss = model(**batch, use_cache=False).loss
    names = {g.graph.get_name() for g in hgt.cached_graphs()}
    assert names == {"hipdnn_torch_varlen_fwd"}  # the packed route, not the dense mask
    got = _grads(model, loss)
    assert "hipdnn_torch_varlen_bwd" in {g.graph.get_name() for g in hgt.cached_graphs()}
    ref_loss = _alone(model, sequences)
    want = _grads(model, ref_loss)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)
    assert got.keys() == want.keys()
    for name in got:
        torch.testing.assert_close(got[name], want[name], rtol=1e-4, atol=1e-5, msg=name)


def test_one_sequence_and_plain_batches_keep_the_dense_route() -> None:
    """Position ids that do not restart (one sequence, or a batch of two rows) are no packing."""
    model = _model("llama").eval()
    hgt.graph_cache().clear()
    ids = torch.tensor([_sequences()[1]])
    model(input_ids=ids, position_ids=torch.arange(ids.shape[1])[None], use_cache=False)
    model(input_ids=ids.repeat(2, 1), use_cache=False)
    assert {g.graph.get_name() for g in hgt.cached_graphs()} == {"hipdnn_torch_sdpa_fwd"}


def _mask_for(arch: str, position_ids: Any, attention_mask: Any = None) -> Any:
    from transformers.masking_utils import create_causal_mask

    config = _model(arch).config
    embeds = torch.zeros(*position_ids.shape, config.hidden_size)
    return create_causal_mask(config=config, inputs_embeds=embeds, attention_mask=attention_mask,
                              past_key_values=None, position_ids=position_ids)  # fmt: skip


def test_no_mask_is_built_for_a_causal_packed_row_only() -> None:
    """The ``[1, 1, T, T]`` mask of a packed row is left out (the packed route never reads it);
    a padded batch, a packed batch of two rows and a sliding-window model get sdpa's masks."""
    packed = torch.tensor([[0, 1, 2, 0, 1, 2, 3]])
    assert _mask_for("llama", packed) is None
    mask = _mask_for("llama", packed.repeat(2, 1))  # two rows: sdpa's block-diagonal mask
    assert mask.shape == (2, 1, 7, 7) and not bool(mask[0, 0, 3, 2])
    padded = _mask_for("llama", torch.arange(7)[None], torch.tensor([[0, 1, 1, 1, 1, 1, 1]]))
    assert padded.shape == (1, 1, 7, 7)
    assert _mask_for("llama", torch.arange(7)[None]) is None  # plain causal: sdpa skips it too
    from transformers.masking_utils import create_sliding_window_causal_mask

    config = transformers.MistralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=1, num_attention_heads=4,
                                        num_key_value_heads=2, sliding_window=3)  # fmt: skip
    config._attn_implementation = "hipdnn"
    window: Any = create_sliding_window_causal_mask(config, torch.zeros(1, 7, 32), None, None,
                                                    position_ids=packed)  # fmt: skip
    assert window.shape == (1, 1, 7, 7)


def test_a_row_whose_attention_call_shows_no_packing_is_refused() -> None:
    """A model that does not pass position_ids to attention would attend across sequences
    once the packed row's mask is left out: the call says so instead."""

    def run() -> None:
        assert _mask_for("llama", torch.tensor([[0, 1, 2, 0, 1]])) is None
        q = torch.zeros(1, 4, 5, 8)
        with pytest.raises(hg.NotSupportedError) as err:
            hgt.hipdnn_attention_forward(torch.nn.Module(), q, q, q, None)
        assert str(err.value) == (
            "transformers found a packed batch (restarting position_ids) but this attention "
            "call carries neither position_ids nor cu_seq_lens_q/k and max_length_q/k; pass "
            "them on to the attention function, as padding-free FlashAttention needs them too"
        )
        other = torch.zeros(1, 4, 6, 8)  # another row length: not the row left out
        assert hgt.hipdnn_attention_forward(torch.nn.Module(), other, other, other, None)[0].shape

    contextvars.copy_context().run(run)


def test_packed_dropout_runs_dense_with_the_rows_block_mask() -> None:
    """Dropout is not in the packed graphs: the call builds the row's block-diagonal causal
    mask and takes the dense route (philox dropout from torch's generator, so one seed gives
    the same result as the op called with that mask)."""
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 4, 6, 8, generator=g) for _ in range(3))
    cu = torch.tensor([0, 2, 6], dtype=torch.int32)
    kwargs = {"cu_seq_lens_q": cu, "cu_seq_lens_k": cu, "max_length_q": 4, "max_length_k": 4}
    torch.manual_seed(11)
    out, _ = hgt.hipdnn_attention_forward(torch.nn.Module(), q, k, v, None, dropout=0.2, **kwargs)
    ids = torch.tensor([0, 0, 1, 1, 1, 1])
    mask = (ids[:, None] == ids[None, :]).tril()
    torch.manual_seed(11)
    want = hgt.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.2)
    torch.testing.assert_close(out, want.transpose(1, 2), rtol=0, atol=0)


def test_gpt2_with_attention_dropout_trains_packed_through_the_dense_route() -> None:
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=1,
                                     n_head=4, attn_pdrop=0.1)  # fmt: skip
    hgt.register_transformers()
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="hipdnn")
    batch = transformers.DataCollatorWithFlattening()([{"input_ids": s} for s in _sequences()])
    hgt.graph_cache().clear()
    loss = model.train()(**batch, use_cache=False).loss
    loss.backward()
    assert torch.isfinite(loss)
    names = {g.graph.get_name() for g in hgt.cached_graphs()}
    assert names == {"hipdnn_torch_sdpa_fwd", "hipdnn_torch_sdpa_bwd"}


def test_a_bad_row_for_the_block_mask_raises_invalid_value() -> None:
    q = torch.zeros(1, 4, 6, 8)
    cu = torch.tensor([0, 2, 5], dtype=torch.int32)  # ends before the row's 6 tokens
    kwargs = {"cu_seq_lens_q": cu, "cu_seq_lens_k": cu, "max_length_q": 3, "max_length_k": 3}
    with pytest.raises(hg.HipdnnError) as err:
        hgt.hipdnn_attention_forward(torch.nn.Module(), q, q, q, None, dropout=0.1, **kwargs)
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == "cu_seq_lens_q must end at the row's token count (6), got 5"
