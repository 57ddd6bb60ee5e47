"""Engines running packed (ragged) SDPA graphs end to end: the NumPy reference and the torch math
engine, forward and backward, against torch's ``F.scaled_dot_product_attention`` (and autograd)
run on each sequence alone in float64; the variant-pack checks of packed buffers and offsets; a
packed graph read back from bytes and JSON; ``hipdnn-graph run`` of a packed graph file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.cli import main
from hipdnn_graph.testing import make_inputs

torch = pytest.importorskip("torch")
F = torch.nn.functional

ENGINES = ["NUMPY_REFERENCE_ENGINE", "TORCH_SDPA_MATH_ENGINE"]
H, HK, D = 4, 2, 8
SCALE = 0.3
#: per sequence (Sq, Skv): Sq > Skv, Sq < Skv, equal, a single query
LENGTHS = [(5, 3), (2, 7), (6, 6), (1, 4)]
SQ, SKV = 8, 8  # S_max of each side
B = len(LENGTHS)
MASKS: dict[str, dict[str, Any]] = {
    "none": {},
    "causal_top_left": {"causal_mask": True},
    "causal_bottom_right": {"causal_mask_bottom_right": True},
}


def _strides(heads: int, s: int) -> list[int]:
    return [s * heads * D, D, heads * D, 1]  # token-major (BSHD)


def _offsets(g: hg.Graph, name: str) -> hg.TensorAttributes:
    return g.tensor(name=name, dim=[B + 1, 1, 1, 1], stride=[1, 1, 1, 1],
                    data_type=hg.DataType.INT32)  # fmt: skip


def _graph(backward: bool, mask: dict[str, Any]) -> tuple[hg.Graph, dict[str, Any]]:
    """A packed forward (O packed, Stats dense) or backward (dQ, dK, dV packed, Stats dense)
    graph; offsets in tokens (multiplier H·D / Hk·D, torch's cumulative sequence lengths)."""
    g = hg.Graph(
        name="packed",
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    off_q, off_kv = _offsets(g, "off_q"), _offsets(g, "off_kv")
    q = g.tensor(name="Q", dim=[B, H, SQ, D], stride=_strides(H, SQ))
    k, v = (g.tensor(name=n, dim=[B, HK, SKV, D], stride=_strides(HK, SKV)) for n in "KV")
    q.set_ragged_offset(off_q).set_ragged_offset_multiplier(H * D)
    for t in (k, v):
        t.set_ragged_offset(off_kv).set_ragged_offset_multiplier(HK * D)
    keywords = {"attn_scale": SCALE, **{"use_" + key: True for key in mask}}
    t = {"Q": q, "K": k, "V": v, "off_q": off_q, "off_kv": off_kv}
    if not backward:
        o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=True, **keywords)
        o.set_output(True).set_stride(_strides(H, SQ)).set_ragged_offset(off_q)
        o.set_ragged_offset_multiplier(H * D)
        stats.set_output(True)
        t.update(O=o, Stats=stats)
    else:
        o, do = (g.tensor(name=n, dim=[B, H, SQ, D], stride=_strides(H, SQ)) for n in ("O", "dO"))
        for x in (o, do):
            x.set_ragged_offset(off_q).set_ragged_offset_multiplier(H * D)
        stats = g.tensor(name="Stats", dim=[B, H, SQ, 1])
        grads = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", **keywords)
        for name, x, heads, s, off in zip(("dQ", "dK", "dV"), grads, (H, HK, HK), (SQ, SKV, SKV),
                                          (off_q, off_kv, off_kv), strict=True):  # fmt: skip
            x.set_output(True).set_stride(_strides(heads, s)).set_ragged_offset(off)
            x.set_ragged_offset_multiplier(heads * D)
            t[name] = x
        t.update(O=o, dO=do, Stats=stats)
    return g, t


def _visible(sq: int, skv: int, mask: dict[str, Any]) -> Any:
    i, j = torch.arange(sq)[:, None], torch.arange(skv)[None, :]
    if "causal_mask" in mask:
        return j <= i
    if "causal_mask_bottom_right" in mask:
        return j <= i + skv - sq
    return torch.ones(sq, skv, dtype=torch.bool)


def _torch_sequence(q: Any, k: Any, v: Any, mask: dict[str, Any]) -> tuple[Any, Any]:
    """O ``[Sq, H, D]`` and LSE ``[Sq, H]`` of one sequence (THD, float64, autograd-able)
    through F.scaled_dot_product_attention; rows that see no key: O = 0, LSE = +inf."""
    qh, kh, vh = (x.transpose(0, 1) for x in (q, k, v))
    seen = _visible(q.shape[0], k.shape[0], mask)
    rows = seen.any(-1)
    safe = seen | ~rows[:, None]  # rows that see nothing: any finite value, zeroed below
    o = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=safe, scale=SCALE, enable_gqa=True)
    o = torch.where(rows[None, :, None], o, torch.zeros_like(o))
    scores = SCALE * qh @ kh.repeat_interleave(H // HK, 0).transpose(-1, -2)
    lse = torch.logsumexp(scores.masked_fill(~seen, float("-inf")), -1)
    lse = torch.where(rows[None], lse, torch.full_like(lse, float("inf")))
    return o.transpose(0, 1), lse.transpose(0, 1)


def _tokens(lengths: list[int]) -> list[int]:
    return [0, *np.cumsum(lengths).tolist()]


def _arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    tq, tkv = sum(a for a, _ in LENGTHS), sum(b for _, b in LENGTHS)
    return {
        "Q": rng.standard_normal((tq, H, D)),
        "K": rng.standard_normal((tkv, HK, D)),
        "V": rng.standard_normal((tkv, HK, D)),
        "dO": rng.standard_normal((tq, H, D)),
        "off_q": np.array(_tokens([a for a, _ in LENGTHS]), np.int32).reshape(B + 1, 1, 1, 1),
        "off_kv": np.array(_tokens([b for _, b in LENGTHS]), np.int32).reshape(B + 1, 1, 1, 1),
    }


def _reference(a: dict[str, np.ndarray], mask: dict[str, Any]) -> dict[str, np.ndarray]:
    """O, dense Stats ``[B, H, SQ, 1]`` and the gradients, sequence by sequence in float64."""
    bq, bkv = a["off_q"].reshape(-1), a["off_kv"].reshape(-1)
    leaves = {n: torch.tensor(a[n], requires_grad=True) for n in "QKV"}
    outs, stats = [], np.full((B, H, SQ, 1), np.inf)
    for b in range(B):
        qs, ks = slice(bq[b], bq[b + 1]), slice(bkv[b], bkv[b + 1])
        o, lse = _torch_sequence(leaves["Q"][qs], leaves["K"][ks], leaves["V"][ks], mask)
        outs.append(o)
        stats[b, :, : lse.shape[0], 0] = lse.detach().numpy().T
    o = torch.cat(outs)
    o.backward(torch.tensor(a["dO"]))
    result = {"O": o.detach().numpy(), "Stats": stats}
    result.update({"d" + n: leaves[n].grad.numpy() for n in "QKV"})  # type: ignore[union-attr]
    return result


def _buffers(engine: str, pack: dict[Any, Any]) -> dict[Any, Any]:
    if engine.startswith("TORCH"):
        return {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in pack.items()}
    return pack


def _pack_refusal(call: Callable[[], Any]) -> str:
    """The message of the ``INVALID_VARIANT_PACK`` error ``call`` raises."""
    with pytest.raises(hg.HipdnnError) as err:
        call()
    assert err.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
    return err.value.message


def _numpy(x: Any) -> np.ndarray:
    return x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mask_name", sorted(MASKS))
def test_forward_matches_torch_per_sequence(engine: str, mask_name: str) -> None:
    mask = MASKS[mask_name]
    g, t = _graph(False, mask)
    g.set_preferred_engine_id_ext(engine).build()
    a, ref = _arrays(), _reference(_arrays(), mask)
    tq = a["Q"].shape[0]
    o = np.full((tq + 3, H, D), -7.0, np.float32)  # 3 tokens no sequence holds
    stats = np.full((B, H, SQ, 1), np.nan, np.float32)
    inputs = {t[n]: a[n].astype(np.float32) for n in "QKV"}
    inputs.update({t["off_q"]: a["off_q"], t["off_kv"]: a["off_kv"]})
    copies = {k: v.copy() for k, v in inputs.items()}
    pack = _buffers(engine, {**inputs, t["O"]: o, t["Stats"]: stats})
    g.execute(pack, None)
    out, st = _numpy(pack[t["O"]]), _numpy(pack[t["Stats"]])
    np.testing.assert_allclose(out[:tq], ref["O"], rtol=1e-4, atol=1e-5)
    assert (out[tq:] == -7.0).all()  # tokens past the last sequence are left as they were
    np.testing.assert_allclose(st, ref["Stats"], rtol=1e-5, atol=1e-5)  # +inf past each length
    assert np.isposinf(st[0, :, 5:]).all()
    for key, value in inputs.items():
        np.testing.assert_array_equal(value, copies[key])  # inputs are never written


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mask_name", sorted(MASKS))
def test_backward_matches_autograd_per_sequence(engine: str, mask_name: str) -> None:
    mask = MASKS[mask_name]
    g, t = _graph(True, mask)
    g.set_preferred_engine_id_ext(engine).build()
    a = _arrays(1)
    ref = _reference(a, mask)
    inputs = {t[n]: a[n].astype(np.float32) for n in ("Q", "K", "V", "dO")}
    inputs.update({t[n]: ref[n].astype(np.float32) for n in ("O", "Stats")})
    inputs.update({t["off_q"]: a["off_q"], t["off_kv"]: a["off_kv"]})
    results = g.run(_buffers(engine, inputs))
    for name in ("dQ", "dK", "dV"):
        got = _numpy(results[t[name]])
        assert got.shape == ref[name].shape  # Graph.run hands back [T, H, D]
        np.testing.assert_allclose(got, ref[name], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("engine", ENGINES)
def test_forward_then_backward_in_one_graph_and_offsets_not_starting_at_zero(engine: str) -> None:
    """Stats virtual between the nodes; Q/O offsets starting at token 2 (tokens before it are
    no sequence's); the NumPy reference and the torch math engine agree with the definition."""
    from hipdnn_graph_numpy_reference.sdpa_packed import Packing, packed_sdpa_forward

    g = hg.Graph(io_data_type=hg.DataType.FLOAT, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    off = _offsets(g, "off")
    q, k, v, do = (g.tensor(name=n, dim=[B, H, SQ, D], stride=_strides(H, SQ))
                   for n in ("Q", "K", "V", "dO"))  # fmt: skip
    for x in (q, k, v, do):
        x.set_ragged_offset(off).set_ragged_offset_multiplier(H * D)
    o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=True, use_causal_mask=True)
    grads = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", use_causal_mask=True)
    for x in (o, *grads):
        x.set_output(True).set_stride(_strides(H, SQ)).set_ragged_offset(off)
        x.set_ragged_offset_multiplier(H * D)
    g.set_preferred_engine_id_ext(engine).build()
    rng = np.random.default_rng(3)
    tokens = [2, 5, 6, 8, 11]  # sequences of 3, 1, 2, 3 tokens after 2 unused ones
    arrays = {x: rng.standard_normal((11, H, D)).astype(np.float32) for x in (q, k, v, do)}
    offsets = np.array(tokens, np.int64).astype(np.int32).reshape(B + 1, 1, 1, 1)
    outs = {x: np.full((11, H, D), 5.0, np.float32) for x in (o, *grads)}
    pack = _buffers(engine, {**arrays, off: offsets, **outs})
    g.execute(pack, None)
    p = Packing.from_lengths(np.diff(tokens))
    want, _ = packed_sdpa_forward(*(arrays[x][2:] for x in (q, k, v)), p, p, scale=D**-0.5,
                                  right_bound=0)  # fmt: skip
    got = _numpy(pack[o])
    np.testing.assert_allclose(got[2:], want, rtol=1e-5, atol=1e-6)
    assert (got[:2] == 5.0).all() and (_numpy(pack[grads[0]])[:2] == 5.0).all()
    assert np.isfinite(_numpy(pack[grads[0]])).all()


@pytest.mark.parametrize("engine", ENGINES)
def test_padding_mask_within_packed_sequences(engine: str) -> None:
    """hipDNN's ragged sample sets the padding mask too: SEQ_LEN_Q/KV shorten each sequence
    (clipped to its length); rows past them get O = 0 and Stats = +inf."""
    g, t = _graph(False, {})
    node = g.nodes[0].attributes
    lens = {n: g.tensor(name=n, dim=[B, 1, 1, 1], data_type=hg.DataType.INT32)
            for n in ("sq", "skv")}  # fmt: skip
    node.set_padding_mask(True).set_seq_len_q(lens["sq"]).set_seq_len_kv(lens["skv"])
    g.set_preferred_engine_id_ext(engine).build()
    a = _arrays(2)
    seq_q, seq_kv = [3, 9, 6, 1], [3, 4, 2, 9]  # 9: clipped to the sequence's length
    shorter = [(min(x, sq), min(y, skv)) for x, y, (sq, skv) in
               zip(seq_q, seq_kv, LENGTHS, strict=True)]  # fmt: skip
    inputs = {t[n]: a[n].astype(np.float32) for n in "QKV"}
    inputs.update({t["off_q"]: a["off_q"], t["off_kv"]: a["off_kv"]})
    inputs[lens["sq"]] = np.array(seq_q, np.int32).reshape(B, 1, 1, 1)
    inputs[lens["skv"]] = np.array(seq_kv, np.int32).reshape(B, 1, 1, 1)
    out = g.run(_buffers(engine, inputs))
    o, stats = _numpy(out[t["O"]]), _numpy(out[t["Stats"]])
    bq, bkv = a["off_q"].reshape(-1), a["off_kv"].reshape(-1)
    for b, (nq, nkv) in enumerate(shorter):
        qs = a["Q"][bq[b] : bq[b] + nq]
        ks, vs = (a[n][bkv[b] : bkv[b] + nkv] for n in "KV")
        want_o, want_lse = _torch_sequence(*(torch.tensor(x) for x in (qs, ks, vs)), {})
        np.testing.assert_allclose(o[bq[b] : bq[b] + nq], want_o.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(stats[b, :, :nq, 0], want_lse.numpy().T, atol=1e-5)
        assert (o[bq[b] + nq : bq[b + 1]] == 0).all()
        assert np.isposinf(stats[b, :, nq:]).all()


# ----- the variant pack of a packed graph -------------------------------------------------------


def _built(engine: str = "NUMPY_REFERENCE_ENGINE") -> tuple[hg.Graph, dict[str, Any], dict]:
    g, t = _graph(False, {})
    g.set_preferred_engine_id_ext(engine).build()
    a = _arrays()
    pack = {t[n]: a[n].astype(np.float32) for n in "QKV"}
    pack.update({t["off_q"]: a["off_q"], t["off_kv"]: a["off_kv"]})
    return g, t, pack


BAD_PACKS: list[tuple[str, Any, str]] = [
    ("offsets past the buffer", {"off_q": [0, 5, 7, 13, 20]},
     "Variant pack tensor 'Q' (uid 3) is packed: its ragged offsets 'off_q' reach 640 "
     "elements (20 tokens), but its buffer holds 448"),
    ("decreasing offsets", {"off_kv": [0, 3, 2, 16, 20]},
     "Ragged offsets 'off_kv' of tensor 'K': offsets must not decrease, but offset [1] = 3 > "
     "offset [2] = 2"),
    ("a negative offset", {"off_q": [-1, 5, 7, 13, 14]},
     "Ragged offsets 'off_q' of tensor 'Q': offset [0] is -1, below 0"),
    ("a sequence past S_max", {"off_q": [0, 9, 10, 11, 12]},
     "Ragged offsets 'off_q' of tensor 'Q': sequence 0 holds 9 tokens, more than S_max (8)"),
]  # fmt: skip


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("what", "change", "message"), BAD_PACKS, ids=[b[0] for b in BAD_PACKS])
def test_bad_offsets_are_refused_with_a_message(
    engine: str, what: str, change: dict[str, list[int]], message: str
) -> None:
    g, t, pack = _built(engine)
    for name, tokens in change.items():
        pack[t[name]] = np.array(tokens, np.int32).reshape(B + 1, 1, 1, 1)
    assert _pack_refusal(lambda: g.run(_buffers(engine, pack))) == message


def test_offsets_in_elements_must_be_whole_tokens() -> None:
    g, t = _graph(False, {})
    t["Q"].set_ragged_offset_multiplier(1)  # element offsets now
    t["O"].set_ragged_offset_multiplier(1)
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    a = _arrays()
    pack = {t[n]: a[n].astype(np.float32) for n in "QKV"}
    pack[t["off_kv"]] = a["off_kv"]
    pack[t["off_q"]] = np.array([0, 160, 224, 420, 448], np.int32).reshape(B + 1, 1, 1, 1)
    assert _pack_refusal(lambda: g.run(pack)) == (
        "Ragged offsets 'off_q' of tensor 'Q': offset [3] = 420 (x 1) is 420 elements, not a "
        "whole number of tokens of 32 elements"
    )


def test_buffer_type_and_layout_are_checked() -> None:
    g, t, pack = _built()
    bad = {**pack, t["off_q"]: pack[t["off_q"]].astype(np.int64)}
    assert _pack_refusal(lambda: g.run(bad)) == (
        "Variant pack tensor 'off_q' (uid 1) has dtype int64 but the graph declares INT32"
    )
    bad = {**pack, t["Q"]: pack[t["Q"]].astype(np.float64)}
    assert _pack_refusal(lambda: g.run(bad)) == (
        "Variant pack tensor 'Q' (uid 3) has dtype float64 but the graph declares FLOAT"
    )
    strided = np.zeros((pack[t["Q"]].shape[0], H, 2 * D), np.float32)[..., ::2]
    assert _pack_refusal(lambda: g.run({**pack, t["Q"]: strided})) == (
        "Variant pack tensor 'Q' (uid 3) is packed (ragged): its buffer must be one dense block "
        "of memory (a flat array, [T, H, D] or the declared layout), got shape (14, 4, 8) and "
        "strides (64, 16, 2)"
    )


def test_flat_and_declared_layout_buffers_are_accepted() -> None:
    g, t, pack = _built()
    want = g.run(pack)[t["O"]]
    flat = {k: (v.reshape(-1) if k.name in "QKV" else v) for k, v in pack.items()}
    np.testing.assert_array_equal(g.run(flat)[t["O"]], want)
    read_only = {}
    for key, value in pack.items():
        value = value.copy()
        value.flags.writeable = False
        read_only[key] = value
    np.testing.assert_array_equal(g.run(read_only)[t["O"]], want)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_packed_output_sharing_an_inputs_memory_is_refused(engine: str) -> None:
    g, t, pack = _built(engine)
    stats = np.zeros((B, H, SQ, 1), np.float32)
    shared = {**pack, t["O"]: pack[t["Q"]], t["Stats"]: stats}  # O would overwrite Q's tokens
    assert _pack_refusal(lambda: g.execute(_buffers(engine, shared), None)) == (
        "Variant pack output 'fwd::O' (uid 6) shares memory with input 'Q' (uid 3); outputs "
        "must not alias other tensors"
    )


def test_sides_must_agree_on_their_lengths() -> None:
    g, t = _graph(False, {})
    other = _offsets(g, "off_o")
    t["O"].set_ragged_offset(other)
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    _, _, pack = _built()
    pack = {t[k.name]: v for k, v in pack.items()}
    pack[other] = np.array([0, 5, 7, 13, 13], np.int32).reshape(B + 1, 1, 1, 1)
    assert _pack_refusal(lambda: g.run(pack)) == (
        "Ragged offsets 'off_o' of tensor 'fwd::O' give sequence lengths [5, 2, 6, 0], but "
        "'off_q' of tensor 'Q' give [5, 2, 6, 1]; the tensors of one side of the attention "
        "share their sequences"
    )


# ----- which engines run packed graphs, files and the CLI ---------------------------------------


def test_fused_engines_refuse_and_ragged_is_for_sdpa_only() -> None:
    from hipdnn_graph.backend.contract import checked_support
    from hipdnn_graph.backend.registry import current_registry

    g, _ = _graph(False, MASKS["causal_bottom_right"])
    g.validate()
    engines = {e.name: e for e in current_registry().engines()}
    for name in ENGINES:
        assert checked_support(engines[name], g) == (True, "")
    for name, op in (("TORCH_SDPA_CUDNN_ENGINE", "cudnn"), ("TORCH_SDPA_FLEX_ENGINE", "flex")):
        assert checked_support(engines[name], g) == (
            False,
            "does not support packed (ragged) tensors: Q has ragged offsets off_q (the "
            f"{op} kernels' variable-length path is not wired to graphs yet; "
            "TORCH_SDPA_FLASH_ENGINE, TORCH_SDPA_EFFICIENT_ENGINE and TORCH_SDPA_MATH_ENGINE "
            "run packed graphs)",
        )
    # flash and efficient read packed graphs (tests/test_packed_fused_engines.py); float32
    # packed tokens on the memory-efficient kernel need a device, which this host lacks
    if not torch.cuda.is_available():
        assert checked_support(engines["TORCH_SDPA_EFFICIENT_ENGINE"], g) == (
            False, "efficient needs a CUDA or ROCm device; none is available"
        )  # fmt: skip
    g2 = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
                  intermediate_data_type=hg.DataType.FLOAT)  # fmt: skip
    off = g2.tensor(name="off", dim=[2, 1, 1, 1], data_type=hg.DataType.INT32)
    x = g2.tensor(name="x", dim=[1, 4]).set_ragged_offset(off)
    g2.pointwise(x, mode=hg.PointwiseMode.EXP).set_output(True)
    assert checked_support(engines["NUMPY_REFERENCE_ENGINE"], g2) == (
        False, "node 'Pointwise_0': IN_0 'x' is ragged; only SDPA nodes read packed tensors"
    )  # fmt: skip


def test_bias_in_a_packed_graph_is_refused_by_name() -> None:
    from hipdnn_graph.backend.contract import checked_support
    from hipdnn_graph.backend.registry import current_registry

    g, _ = _graph(False, {})
    bias = g.tensor(name="bias", dim=[1, H, SQ, SKV])
    g.nodes[0].attributes.set_bias(bias)
    g.validate()
    engines = {e.name: e for e in current_registry().engines()}
    for name in ENGINES:
        assert checked_support(engines[name], g) == (
            False, "node 'fwd': packed (ragged) SDPA with a bias is not implemented"
        )  # fmt: skip


@pytest.mark.parametrize("engine", ENGINES)
def test_graph_read_back_from_bytes_and_json_runs_the_same(engine: str) -> None:
    g, t, pack = _built(engine)
    want = g.run(pack)[t["O"]]
    for back in (hg.Graph.deserialize(g.serialize()), hg.Graph.from_json(g.to_json())):
        back.set_preferred_engine_id_ext(engine).build()
        tensors = {x.name: x for x in back.tensors}
        again = back.run({tensors[k.name]: v for k, v in pack.items()})
        np.testing.assert_array_equal(again[tensors["fwd::O"]], want)


def test_make_inputs_gives_valid_offsets_and_packed_buffers() -> None:
    g, t = _graph(False, MASKS["causal_top_left"])
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    pack = make_inputs(g, np.random.default_rng(0))
    tokens = pack[t["off_q"]].reshape(-1)  # token units: the multiplier is H·D
    lengths = np.diff(tokens)
    assert tokens[0] == 0 and (lengths >= 1).all() and (lengths <= SQ).all()
    assert pack[t["Q"]].shape == (tokens[-1], H, D)
    assert np.isnan(pack[t["O"]]).all() and pack[t["O"]].shape == (tokens[-1], H, D)
    g.execute(pack, None)
    assert np.isfinite(pack[t["O"]]).all()


def test_cli_runs_a_packed_graph_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    g, _ = _graph(True, MASKS["causal_bottom_right"])
    path = tmp_path / "packed.json"
    path.write_text(g.to_json())
    assert main(["run", str(path), "--engine", "NUMPY_REFERENCE_ENGINE"]) == 0
    out = capsys.readouterr().out
    assert "NUMPY_REFERENCE_ENGINE" in out
    assert "bwd::dQ" in out and "nan" not in out.lower()


def test_cli_runs_packed_inputs_from_an_npz_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    g, _ = _graph(False, MASKS["causal_top_left"])
    path, inputs, saved = tmp_path / "packed.bin", tmp_path / "in.npz", tmp_path / "out.npz"
    path.write_bytes(g.serialize())
    a = _arrays()
    np.savez(inputs, **{n: a[n] for n in ("Q", "K", "V", "off_q", "off_kv")})
    args = ["run", str(path), "--engine", "NUMPY_REFERENCE_ENGINE", "--inputs", str(inputs)]
    assert main([*args, "--save", str(saved)]) == 0
    ref = _reference(a, MASKS["causal_top_left"])
    with np.load(saved) as out:
        np.testing.assert_allclose(out["fwd::O"], ref["O"], rtol=1e-4, atol=1e-5)
    too_big = {n: a[n] for n in ("K", "V", "off_q", "off_kv")}
    np.savez(inputs, Q=np.zeros((B * SQ + 1, H, D)), **too_big)
    assert main(args) == 1
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            "input 'Q' has 1056 elements; the packed tensor 'Q' (uid 3) holds at most 1024, its "
            "dims [4, 4, 8, 8]"
        )
    )


def test_cli_allocates_no_packed_output_past_its_dims(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Offsets starting far along (every sequence empty) would have a packed output buffer of
    that many tokens allocated and filled with NaN: refused before, naming the span."""
    g, _ = _graph(False, {})
    path, inputs = tmp_path / "packed.bin", tmp_path / "in.npz"
    path.write_bytes(g.serialize())
    a = _arrays()
    far = np.full((B + 1, 1, 1, 1), 100_000, np.int32)
    np.savez(inputs, Q=a["Q"], K=a["K"], V=a["V"], off_q=far, off_kv=a["off_kv"])
    args = ["run", str(path), "--engine", "NUMPY_REFERENCE_ENGINE", "--inputs", str(inputs)]
    assert main(args) == 1
    assert capsys.readouterr().err == (
        "INVALID_VARIANT_PACK: Ragged offsets 'off_q' of tensor 'fwd::O' reach 3200000 elements "
        "(100000 tokens), more than its dims [4, 4, 8, 8] and strides [256, 8, 32, 1] span "
        "(1024)\n"
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_packed_queries_attend_to_dense_keys(engine: str) -> None:
    """Q and O packed, K and V dense ``[B, Hk, Skv, D]``: each sequence's queries see all the
    Skv keys of their batch element (a side with no packed tensor has the padded length)."""
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    off = _offsets(g, "off_q")
    q = g.tensor(name="Q", dim=[B, H, SQ, D], stride=_strides(H, SQ))
    q.set_ragged_offset(off).set_ragged_offset_multiplier(H * D)
    k, v = (g.tensor(name=n, dim=[B, HK, SKV, D]) for n in "KV")
    o, _ = g.sdpa(q, k, v, name="fwd", generate_stats=False, attn_scale=SCALE,
                  use_causal_mask_bottom_right=True)  # fmt: skip
    o.set_output(True).set_stride(_strides(H, SQ)).set_ragged_offset(off)
    o.set_ragged_offset_multiplier(H * D)
    g.set_preferred_engine_id_ext(engine).build()
    a, rng = _arrays(4), np.random.default_rng(5)
    kv = {n: rng.standard_normal((B, HK, SKV, D)) for n in "KV"}
    pack = {q: a["Q"].astype(np.float32), off: a["off_q"]}
    pack.update({k: kv["K"].astype(np.float32), v: kv["V"].astype(np.float32)})
    got = _numpy(g.run(_buffers(engine, pack))[o])
    bounds = a["off_q"].reshape(-1)
    for b in range(B):
        q_b = torch.tensor(a["Q"][bounds[b] : bounds[b + 1]])
        k_b, v_b = (torch.tensor(kv[n][b]).transpose(0, 1) for n in "KV")
        want, _ = _torch_sequence(q_b, k_b, v_b, MASKS["causal_bottom_right"])
        np.testing.assert_allclose(got[bounds[b] : bounds[b + 1]], want.numpy(), atol=1e-5)
