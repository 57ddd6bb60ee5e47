"""Override shapes on the GPU (issue 36, item 5): one bf16 SDPA graph built at its largest
sequence length runs shorter ones on the engine the default ranking picks, equal to a plan built
at each length (same engine); CUDA-graph replay keeps one captured graph per shape's plan, so
alternating shapes stay correct; with a padding mask the fused engines no longer defer to flex
(which refuses override-shape graphs)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph as hg  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]

BF16 = hg.DataType.BFLOAT16
H, D, TOP = 4, 64, 512


def _graph(seq: int, flag: bool, engine: str | None = None, backward: bool = False) -> hg.Graph:
    g = hg.Graph(io_data_type=BF16, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    g.set_override_shape_enabled(flag)
    dims = [2, H, seq, D]
    q, k, v = (g.tensor(name=n, dim=dims, uid=u) for n, u in (("Q", 1), ("K", 2), ("V", 3)))
    if backward:
        o, do = g.tensor(name="O", dim=dims, uid=4), g.tensor(name="dO", dim=dims, uid=5)
        stats = g.tensor(name="Stats", dim=[2, H, seq, 1], uid=6, data_type=hg.DataType.FLOAT)
        grads = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", use_causal_mask=True)
        for uid, t in zip((7, 8, 9), grads, strict=True):
            t.set_output(True).set_uid(uid)
    else:
        out, lse = g.sdpa(q, k, v, name="fwd", use_causal_mask=True, generate_stats=True)
        assert lse is not None
        out.set_output(True).set_uid(4)
        lse.set_output(True).set_uid(5).set_data_type(hg.DataType.FLOAT)
    if engine is not None:
        g.set_preferred_engine_id_ext(engine)
    return g.build()


def _pack(g: hg.Graph, seed: int) -> dict[int, Any]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    produced = {id(t) for node in g.nodes for t in node.outputs()}
    pack = {}
    for t in g.graph_tensors():
        dtype = torch.float32 if t.data_type == hg.DataType.FLOAT else torch.bfloat16
        if id(t) in produced:
            pack[t.get_uid()] = torch.full(t.dim, float("nan"), dtype=dtype, device="cuda")
        else:
            pack[t.get_uid()] = torch.randn(t.dim, generator=gen).to("cuda", dtype)
    return pack


def _overrides(pack: dict[int, Any]) -> dict[str, Any]:
    uids = sorted(pack)
    return {"override_uids": uids, "override_shapes": [list(pack[u].shape) for u in uids],
            "override_strides": [list(pack[u].stride()) for u in uids]}  # fmt: skip


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_one_graph_serves_shorter_lengths_like_plans_built_there(backward: bool) -> None:
    big = _graph(TOP, True, backward=backward)
    engine = big.get_plan_name()
    assert engine not in ("TORCH_SDPA_FLEX_ENGINE", "CUDNN_FRONTEND_ENGINE")
    for seq in (128, 320, 512, 128):  # the last one again: its plan is reused
        small = _graph(seq, False, engine, backward)
        assert small.get_plan_name() == engine
        expected = _pack(small, seq)
        got = {u: t.clone() for u, t in expected.items()}
        small.execute(expected)
        big.execute(got, **_overrides(got))
        torch.cuda.synchronize()
        for uid, value in expected.items():
            assert not torch.isnan(got[uid]).any(), (engine, seq, uid)
            torch.testing.assert_close(got[uid], value, rtol=2e-2, atol=2e-2)


def test_replay_keeps_alternating_shapes_correct() -> None:
    big = _graph(TOP, True)
    packs = {seq: _pack(_graph(seq, False), seq) for seq in (256, 512)}
    reference = {}
    for seq, pack in packs.items():
        big.execute(pack, **_overrides(pack))
        reference[seq] = pack[4].clone()
    for _ in range(4):  # eager, capture, replays: per shape
        for seq, pack in packs.items():
            pack[4].fill_(float("nan"))
            big.execute(pack, **_overrides(pack))
            torch.cuda.synchronize()
            torch.testing.assert_close(pack[4], reference[seq], rtol=0, atol=0)


def test_padding_goes_to_a_fused_engine_when_flex_refuses_override_shapes() -> None:
    g = hg.Graph(io_data_type=BF16, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT).set_override_shape_enabled(True)  # fmt: skip
    q = g.tensor(name="Q", dim=[2, H, TOP, D])
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    lengths = [
        g.tensor(name=n, dim=[2, 1, 1, 1], data_type=hg.DataType.INT32) for n in ("sq", "skv")
    ]
    o, _ = g.sdpa(q, k, v, name="fwd", generate_stats=False, use_padding_mask=True,
                  seq_len_q=lengths[0], seq_len_kv=lengths[1])  # fmt: skip
    o.set_output(True)
    g.build()
    refusals = g.get_engine_refusals()
    assert "does not support override shapes" in refusals["TORCH_SDPA_FLEX_ENGINE"]
    assert "defers to TORCH_SDPA_FLEX_ENGINE" not in str(refusals)
