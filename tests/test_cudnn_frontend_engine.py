"""``CUDNN_FRONTEND_ENGINE``'s decisions on CPU: environment, per-node rules, mask arguments,
refusals through the registry, bad buffers (its numerics run in ``tests/gpu``)."""

from __future__ import annotations

from typing import Any

import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend import SdpaProblem
from hipdnn_graph_torch_rocm import create_backend
from hipdnn_graph_torch_rocm.cudnn_fe import engine as fe_engine
from hipdnn_graph_torch_rocm.cudnn_fe.rules import (
    ENGINE_NAME,
    environment_refusal,
    mask_arguments,
    node_refusal,
)

BF16 = hg.DataType.BFLOAT16


def _node(
    io: hg.DataType = BF16,
    compute: hg.DataType = hg.DataType.FLOAT,
    sq: int = 64,
    skv: int = 64,
    backward: bool = False,
    **kw: Any,
) -> SdpaProblem:
    g = hg.Graph(io_data_type=io, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=compute)  # fmt: skip
    q = g.tensor(name="Q", dim=[2, 4, sq, 64])
    k = g.tensor(name="K", dim=[2, 4, skv, 64])
    v = g.tensor_like(k, "V")
    if backward:
        o, do = g.tensor_like(q, "O"), g.tensor_like(q, "dO")
        stats = g.tensor(name="Stats", dim=[2, 4, sq, 1], data_type=hg.DataType.FLOAT)
        for t in g.sdpa_backward(q, k, v, o, do, stats, name="n", **kw):
            t.set_output(True)
    else:
        out, _ = g.sdpa(q, k, v, name="n", generate_stats=True, **kw)
        out.set_output(True)
    g.build_operation_graph()
    return SdpaProblem.from_node(g.nodes[0])


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"torch_found": False, "hip": False, "cuda": False, "cudnn_found": False},
         "torch is not installed"),
        ({"torch_found": True, "hip": True, "cuda": True, "cudnn_found": True},
         "cuDNN does not exist in ROCm builds of torch"),
        ({"torch_found": True, "hip": False, "cuda": False, "cudnn_found": True},
         "cuDNN needs a CUDA device; none is available"),
        ({"torch_found": True, "hip": False, "cuda": True, "cudnn_found": False},
         "nvidia-cudnn-frontend is not installed (pip install 'hipdnn-graph[cudnn]')"),
        ({"torch_found": True, "hip": False, "cuda": True, "cudnn_found": True}, None),
    ],
)  # fmt: skip
def test_environment_refusals(env: dict[str, bool], expected: str | None) -> None:
    assert environment_refusal(**env) == expected


def test_the_backend_lists_the_engine_first_and_it_refuses_here_with_the_reason() -> None:
    engines = create_backend().engines()
    assert engines[0].name == ENGINE_NAME
    assert engines[0].priority < min(e.priority for e in engines[1:])
    g = hg.Graph(io_data_type=BF16, compute_data_type=hg.DataType.FLOAT)
    q = g.tensor(name="Q", dim=[1, 1, 16, 16])
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=True)
    o.set_output(True)
    g.build_operation_graph()
    support = engines[0].check(g)
    assert not support.ok
    # this machine has torch but no CUDA device (and no cudnn-frontend)
    assert support.reason in (
        "cuDNN needs a CUDA device; none is available",
        "torch is not installed",
    )


def test_rocm_builds_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.version, "hip", "6.4.0", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert fe_engine._environment() == "cuDNN does not exist in ROCm builds of torch"


def test_without_the_package_the_reason_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    real = fe_engine.importlib.util.find_spec
    monkeypatch.setattr(
        fe_engine.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "cudnn" else real(name, *a),
    )
    assert fe_engine._environment() == (
        "nvidia-cudnn-frontend is not installed (pip install 'hipdnn-graph[cudnn]')"
    )


def test_node_rules() -> None:
    assert node_refusal(_node(), preferred=False) is None
    assert node_refusal(_node(io=hg.DataType.FLOAT), preferred=False) == (
        "node 'n': cuDNN attention needs HALF or BFLOAT16 Q/K/V, got FLOAT"
    )
    assert node_refusal(_node(compute=hg.DataType.HALF), preferred=False) == (
        "node 'n': cuDNN attention computes in FLOAT, not HALF"
    )
    negative = _node(diagonal_band_left_bound=-1, diagonal_band_right_bound=4)
    assert node_refusal(negative, preferred=False) == (
        "node 'n': cuDNN's band needs a left bound of 0 or more, got -1"
    )


def _philox_node() -> SdpaProblem:
    g = hg.Graph(io_data_type=BF16, compute_data_type=hg.DataType.FLOAT)
    q = g.tensor(name="Q", dim=[1, 2, 64, 64])
    seed = g.tensor(name="seed", dim=[1], data_type=hg.DataType.INT64).set_is_pass_by_value(True)
    off = g.tensor(name="off", dim=[1], data_type=hg.DataType.INT64).set_is_pass_by_value(True)
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="n",
                  generate_stats=True, dropout=(0.1, seed, off))  # fmt: skip
    o.set_output(True)
    g.build_operation_graph()
    return SdpaProblem.from_node(g.nodes[0])


def test_philox_dropout_runs_only_when_the_graph_prefers_the_engine() -> None:
    p = _philox_node()
    reason = node_refusal(p, preferred=False)
    assert reason is not None
    assert reason.startswith("node 'n': philox dropout: CUDNN_FRONTEND_ENGINE draws its mask")
    assert "documented stream" in reason
    assert node_refusal(p, preferred=True) is None


def test_dbias_with_padding_is_refused() -> None:
    g = hg.Graph(io_data_type=BF16, compute_data_type=hg.DataType.FLOAT)
    q = g.tensor(name="Q", dim=[2, 2, 64, 64])
    k, v, o, do = (g.tensor_like(q, n) for n in ("K", "V", "O", "dO"))
    stats = g.tensor(name="Stats", dim=[2, 2, 64, 1], data_type=hg.DataType.FLOAT)
    bias = g.tensor(name="Bias", dim=[1, 2, 64, 64])
    dbias = g.tensor(name="dBias", dim=[1, 2, 64, 64])
    lq = g.tensor(name="lq", dim=[2, 1, 1, 1], data_type=hg.DataType.INT32)
    lkv = g.tensor(name="lkv", dim=[2, 1, 1, 1], data_type=hg.DataType.INT32)
    for t in g.sdpa_backward(q, k, v, o, do, stats, name="n", bias=bias, dBias=dbias,
                             use_padding_mask=True, seq_len_q=lq, seq_len_kv=lkv):  # fmt: skip
        t.set_output(True)
    g.build_operation_graph()
    assert node_refusal(SdpaProblem.from_node(g.nodes[0]), preferred=False) == (
        "node 'n': cuDNN computes no dBias together with a padding mask"
    )


@pytest.mark.parametrize(
    ("kw", "sq", "skv", "expected"),
    [
        ({}, 64, 64, {}),
        ({"use_causal_mask": True}, 64, 64,
         {"diagonal_alignment": "TOP_LEFT", "diagonal_band_right_bound": 0}),
        ({"use_causal_mask_bottom_right": True}, 32, 64,
         {"diagonal_alignment": "BOTTOM_RIGHT", "diagonal_band_right_bound": 0}),
        # hipDNN's left bound l keeps j >= i - l; cuDNN's L keeps j > i - L: L = l + 1
        ({"diagonal_band_left_bound": 8, "diagonal_band_right_bound": 4}, 64, 64,
         {"diagonal_alignment": "TOP_LEFT", "diagonal_band_left_bound": 9,
          "diagonal_band_right_bound": 4}),
        ({"use_causal_mask": True, "sliding_window_length": 16}, 64, 64,
         {"diagonal_alignment": "TOP_LEFT", "diagonal_band_left_bound": 17,
          "diagonal_band_right_bound": 0}),
    ],
)  # fmt: skip
def test_mask_arguments(kw: dict[str, Any], sq: int, skv: int, expected: dict[str, Any]) -> None:
    assert mask_arguments(_node(sq=sq, skv=skv, **kw)) == expected


def test_host_buffers_and_empty_packs_are_refused_with_hipdnn_errors() -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(hg.HipdnnError) as err:
        fe_engine._device_of({1: torch.zeros(4, 4), 2: 0.5})
    assert err.value.code == hg.ErrorCode.GRAPH_EXECUTION_FAILED
    assert "runs on CUDA tensors; a buffer is on cpu" in str(err.value)
    with pytest.raises(hg.HipdnnError) as err:
        fe_engine._device_of({1: 0.5})
    assert "no CUDA buffer was given" in str(err.value)
    assert fe_engine._workspace(None, 0, "cpu", torch) is None


def test_a_rank_3_stats_is_refused() -> None:
    """hipDNN's sample_sdpa_backward.json declares Stats [B, H, Sq]: valid, but cuDNN's graph
    takes a rank-4 Stats, so the engine refuses it (the others read it as [B, H, Sq, 1])."""
    assert node_refusal(_node(backward=True), preferred=False) is None
    g = hg.Graph(io_data_type=BF16, compute_data_type=hg.DataType.FLOAT)
    q = g.tensor(name="Q", dim=[2, 4, 64, 64])
    k, v, o, do = (g.tensor_like(q, n) for n in ("K", "V", "O", "dO"))
    stats = g.tensor(name="Stats", dim=[2, 4, 64], data_type=hg.DataType.FLOAT)
    for t in g.sdpa_backward(q, k, v, o, do, stats, name="b"):
        t.set_output(True)
    g.build_operation_graph()
    assert node_refusal(SdpaProblem.from_node(g.nodes[0]), preferred=False) == (
        "node 'b': cuDNN attention takes Stats as [B, H, Sq, 1], not of rank 3"
    )


def test_an_explicit_mask_backward_is_refused_and_its_forward_is_not() -> None:
    g = hg.Graph(io_data_type=BF16, compute_data_type=hg.DataType.FLOAT)
    q = g.tensor(name="Q", dim=[1, 2, 64, 64])
    k, v, do = (g.tensor_like(q, n) for n in ("K", "V", "dO"))
    mask = g.tensor(name="Mask", dim=[1, 2, 64, 64])
    s, inv = g.tensor(name="s").set_value(1.25), g.tensor(name="si").set_value(0.8)
    o, stats = g.sdpa(q, k, v, name="f", generate_stats=True, dropout=(mask, s))
    assert stats is not None
    for x in (o, stats):
        x.set_output(True)
    for t in g.sdpa_backward(q, k, v, o, do, stats, name="b", dropout=(mask, s, inv)):
        t.set_output(True)
    g.build_operation_graph()
    fwd, bwd = (SdpaProblem.from_node(n) for n in g.nodes)
    assert node_refusal(fwd, preferred=False) is None
    reason = node_refusal(bwd, preferred=False)
    assert reason is not None
    assert reason.startswith("node 'b': cuDNN's explicit-mask dropout backward disagrees")


def _padded(backward: bool) -> SdpaProblem:
    g = hg.Graph(io_data_type=BF16, compute_data_type=hg.DataType.FLOAT)
    q = g.tensor(name="Q", dim=[2, 2, 8, 16])
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    lq = g.tensor(name="lq", dim=[2, 1, 1, 1], data_type=hg.DataType.INT32)
    lkv = g.tensor(name="lkv", dim=[2, 1, 1, 1], data_type=hg.DataType.INT32)
    kw: dict[str, Any] = {"use_padding_mask": True, "seq_len_q": lq, "seq_len_kv": lkv}
    if backward:
        o, do = g.tensor_like(q, "O"), g.tensor_like(q, "dO")
        stats = g.tensor(name="Stats", dim=[2, 2, 8, 1], data_type=hg.DataType.FLOAT)
        for t in g.sdpa_backward(q, k, v, o, do, stats, name="n", **kw):
            t.set_output(True)
    else:
        o, stats = g.sdpa(q, k, v, name="n", generate_stats=True, **kw)
        assert stats is not None
        o.set_output(True)
        stats.set_output(True)
    g.build_operation_graph()
    return SdpaProblem.from_node(g.nodes[0])


def test_padding_rewrites_only_the_stats_of_padded_rows() -> None:
    """cuDNN writes zero O/dQ/dK/dV on padding itself but FLT_MAX Stats (measured on the H200):
    the forward's fixup sets those Stats to +inf, the backward has none."""
    torch = pytest.importorskip("torch")
    from hipdnn_graph_torch_rocm.cudnn_fe.node_graph import _fixup

    assert _fixup(_padded(backward=True)) is None
    p = _padded(backward=False)
    fixup = _fixup(p)
    assert fixup is not None
    o = torch.ones(2, 2, 8, 16)
    stats = torch.full((2, 2, 8, 1), 3.0e38)
    pack = {
        p.uid("Q"): torch.zeros(2, 2, 8, 16),
        p.uid("SEQ_LEN_Q"): torch.tensor([8, 5], dtype=torch.int32).view(2, 1, 1, 1),
        p.uid("SEQ_LEN_KV"): torch.tensor([8, 8], dtype=torch.int32).view(2, 1, 1, 1),
        p.uid("O"): o,
        p.uid("Stats"): stats,
    }
    fixup(pack)
    assert bool(torch.isinf(stats[1, :, 5:]).all())
    assert not bool(torch.isinf(stats[0]).any())
    assert not bool(torch.isinf(stats[1, :, :5]).any())
    assert bool((o == 1).all())  # O is cuDNN's (zero on padded rows): left as it is


def test_rows_a_band_leaves_empty_get_the_whole_convention() -> None:
    torch = pytest.importorskip("torch")
    from hipdnn_graph_torch_rocm.cudnn_fe.node_graph import _fixup

    # top-left causal band of width 2 with more queries than keys: rows 7.. see no key
    p = _node(sq=12, skv=4, diagonal_band_left_bound=2, diagonal_band_right_bound=0)
    fixup = _fixup(p)
    assert fixup is not None
    o, stats = torch.ones(2, 4, 12, 64), torch.zeros(2, 4, 12, 1)
    fixup({p.uid("Q"): torch.zeros(2, 4, 12, 64), p.uid("O"): o, p.uid("Stats"): stats})
    assert bool((o[:, :, 6:] == 0).all()) and bool((o[:, :, :6] == 1).all())
    assert bool(torch.isinf(stats[:, :, 6:]).all())
    assert _fixup(_node(use_causal_mask=True)) is None


def test_a_small_bias_with_dbias_defers_to_flex_where_flex_was_measured_faster() -> None:
    from hipdnn_graph_torch_rocm.cudnn_fe.rules import flex_deferral

    def node(s: int) -> SdpaProblem:
        g = hg.Graph(io_data_type=BF16, compute_data_type=hg.DataType.FLOAT)
        q = g.tensor(name="Q", dim=[1, 2, s, 64])
        k, v, o, do = (g.tensor_like(q, n) for n in ("K", "V", "O", "dO"))
        st = g.tensor(name="S", dim=[1, 2, s, 1], data_type=hg.DataType.FLOAT)
        bias = g.tensor(name="B", dim=[1, 2, s, s])
        dbias = g.tensor(name="dB", dim=[1, 2, s, s])
        for t in g.sdpa_backward(q, k, v, o, do, st, name="n", bias=bias, dBias=dbias):
            t.set_output(True)
        g.build_operation_graph()
        return SdpaProblem.from_node(g.nodes[0])

    small, large = node(1024), node(2048)
    reason = flex_deferral(small, flex_accepts=True, preferred=False)
    assert reason is not None and "defers to TORCH_SDPA_FLEX_ENGINE" in reason
    assert flex_deferral(small, flex_accepts=True, preferred=True) is None
    assert flex_deferral(small, flex_accepts=False, preferred=False) is None
    assert flex_deferral(large, flex_accepts=True, preferred=False) is None
    assert flex_deferral(_node(), flex_accepts=True, preferred=False) is None


def test_a_virtual_stats_no_node_reads_gets_a_buffer_per_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cuDNN writes Stats whenever the node has one; a virtual Stats that no node reads is in no
    variant pack, so the plan allocates it per call (the GPU run failed with ``KeyError`` on
    ``benchmarks/compiled_plans.py``'s graph before)."""
    g = hg.Graph(io_data_type=BF16, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    q = g.tensor(name="Q", dim=[1, 2, 64, 64])
    o, stats = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="n",
                      generate_stats=True)  # fmt: skip
    o.set_output(True)
    assert stats is not None and stats.is_virtual
    g.build_operation_graph()
    engine = fe_engine.CudnnFrontendEngine()
    step = fe_engine.CudnnNodeGraph(graph=None, uids=(), sources=(), workspace_size=0)
    monkeypatch.setattr(engine, "_node_graph", lambda p, index=0: step)
    plan = engine.build_plan(g)
    assert [t.get_uid() for t in plan.virtual] == [stats.get_uid()]
    assert plan.replay.output_uids == frozenset({o.get_uid()})
