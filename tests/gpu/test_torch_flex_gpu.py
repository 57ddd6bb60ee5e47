"""GPU suite of TORCH_SDPA_FLEX_ENGINE (run on the device machine; skipped without CUDA/ROCm).

Every feature the flex engine adds × {MHA, GQA 4:1, MQA} × {bf16, fp16}, backward and forward,
through ``graph.execute`` with the flex engine preferred, against the float64 autograd reference
(``tests/sdpa_autograd_reference.py``, stricter than fp32) on the same rounded inputs: relative
error ≤ 1e-2, no NaN, inputs untouched, rows and keys that see nothing exactly zero. Each case
compiles its own kernels (seconds each), so shard the run (``-k bf16`` / ``-k fp16``, ...).
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sdpa_autograd_reference import reference_backward, reference_forward  # noqa: E402

import hipdnn_graph as hg  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]

FLEX = "TORCH_SDPA_FLEX_ENGINE"
HEADS = {"MHA": (8, 8), "GQA4": (8, 2), "MQA": (8, 1)}
DTYPES = {"bf16": (torch.bfloat16, hg.DataType.BFLOAT16), "fp16": (torch.float16, hg.DataType.HALF)}
B = 2
TOL = 1e-2

#: feature -> (Sq, Skv, D, Dv, node keywords, reference keywords, extras)
FEATURES: dict[str, tuple[int, int, int, int, dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "bias": (128, 128, 64, 64, {}, {}, {"bias": (1, 8, 128, 128)}),
    "bias_dbias": (128, 192, 64, 64, {}, {}, {"bias": (1, 8, 128, 192), "dbias": True}),
    "bias_bcast_dbias": (96, 128, 64, 64, {}, {}, {"bias": (B, 1, 1, 128), "dbias": True}),
    # a bias in the input type: its own buffer type, dBias accumulated in fp32 by flex
    "bias_io_dbias": (128, 128, 64, 64, {}, {}, {"bias": (1, 8, 128, 128), "dbias": True,
                                                 "bias_io": True}),
    "alibi_causal": (128, 128, 64, 64, {"use_alibi_mask": True, "use_causal_mask": True},
                     {"alibi": True, "right_bound": 0}, {}),
    "padding": (128, 160, 64, 64, {}, {}, {"lens": ([100, 128], [160, 37])}),
    "padding_causal_br": (128, 160, 64, 64, {"use_causal_mask_bottom_right": True},
                          {"right_bound": 0, "bottom_right": True},
                          {"lens": ([128, 50], [70, 160])}),
    "band_tl": (128, 192, 64, 64,
                {"diagonal_band_left_bound": 24, "diagonal_band_right_bound": 8},
                {"left_bound": 24, "right_bound": 8}, {}),
    "window_br": (96, 160, 64, 64,
                  {"diagonal_band_left_bound": 24, "use_causal_mask_bottom_right": True},
                  {"left_bound": 24, "right_bound": 0, "bottom_right": True}, {}),
    "causal_tl_rect": (96, 160, 64, 64, {"use_causal_mask": True}, {"right_bound": 0}, {}),
    "causal_br_sq_gt_skv": (160, 96, 64, 64, {"use_causal_mask_bottom_right": True},
                            {"right_bound": 0, "bottom_right": True}, {}),
    "dv_ne_d": (128, 128, 64, 128, {"use_causal_mask": True}, {"right_bound": 0}, {}),
}  # fmt: skip


def _seed(*case: str) -> int:
    return zlib.crc32(repr(case).encode())


def _rel(out: np.ndarray, ref: np.ndarray) -> float:
    assert not np.isnan(out).any(), "NaN in output"
    denom = float(np.linalg.norm(ref))
    return float(np.linalg.norm(out - ref)) / (denom if denom > 0 else 1.0)


def _graph(backward: bool, feature: str, heads: str, dt: hg.DataType) -> tuple[hg.Graph, dict]:
    sq, skv, d, dv, kw, _, extra = FEATURES[feature]
    h, hk = HEADS[heads]
    g = hg.Graph(name=feature, io_data_type=dt, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    t: dict[str, Any] = {
        "Q": g.tensor(name="Q", dim=[B, h, sq, d]),
        "K": g.tensor(name="K", dim=[B, hk, skv, d]),
        "V": g.tensor(name="V", dim=[B, hk, skv, dv]),
    }
    kw = dict(kw)
    if "bias" in extra:
        shape = list(extra["bias"])
        shape[1] = h if shape[1] != 1 else 1
        bias_type = dt if extra.get("bias_io") else hg.DataType.FLOAT
        t["Bias"] = g.tensor(name="Bias", dim=shape, data_type=bias_type)
        kw["bias"] = t["Bias"]
        if extra.get("dbias") and backward:
            t["dBias"] = g.tensor(name="dBias", dim=shape, data_type=hg.DataType.FLOAT)
            kw["dBias"] = t["dBias"]
    if "lens" in extra:
        for name in ("SEQ_LEN_Q", "SEQ_LEN_KV"):
            t[name] = g.tensor(name=name, dim=[B, 1, 1, 1], data_type=hg.DataType.INT32)
        kw.update(use_padding_mask=True, seq_len_q=t["SEQ_LEN_Q"], seq_len_kv=t["SEQ_LEN_KV"])
    if backward:
        t["O"] = g.tensor(name="O", dim=[B, h, sq, dv])
        t["dO"] = g.tensor(name="dO", dim=[B, h, sq, dv])
        t["Stats"] = g.tensor(name="Stats", dim=[B, h, sq, 1], data_type=hg.DataType.FLOAT)
        t["dQ"], t["dK"], t["dV"] = g.sdpa_backward(
            t["Q"], t["K"], t["V"], t["O"], t["dO"], t["Stats"], name="bwd", **kw
        )
        outs = ["dQ", "dK", "dV"] + (["dBias"] if "dBias" in t else [])
    else:
        t["O"], t["Stats"] = g.sdpa(t["Q"], t["K"], t["V"], name="fwd", generate_stats=True, **kw)
        outs = ["O", "Stats"]
    for name in outs:
        t[name].set_output(True)
    g.set_preferred_engine_id_ext(FLEX)
    g.build()
    assert g.get_plan_name() == FLEX, g.get_engine_refusals().get(FLEX)
    return g, t


def _backward_case(feature: str, heads: str, dtype: str) -> dict[str, Any]:
    """Build, run three times and check one backward case; returns its outputs."""
    tdt, hdt = DTYPES[dtype]
    g, t = _graph(True, feature, heads, hdt)
    x, ref_kw = _inputs(feature, t, tdt, _seed(feature, heads, dtype))
    o, stats = reference_forward(x["Q"], x["K"], x["V"], **ref_kw)
    x["O"] = torch.from_numpy(o).to("cuda", tdt)
    x["Stats"] = torch.from_numpy(stats).to("cuda", torch.float32)
    outs = {n: torch.full(t[n].dim, float("nan"), device="cuda", dtype=tdt)
            for n in ("dQ", "dK", "dV")}  # fmt: skip
    if "dBias" in t:
        outs["dBias"] = torch.full(t["dBias"].dim, float("nan"), device="cuda")
        ref_kw["dbias_shape"] = tuple(t["dBias"].dim)
    before = {n: v.clone() for n, v in x.items()}
    pack = {t[n]: v for n, v in x.items() if n in t}
    for _ in range(3):  # eager, capture, replay: the same numbers every time
        g.execute({**pack, **{t[n]: v for n, v in outs.items()}})
    torch.cuda.synchronize()
    for n, v in x.items():
        assert torch.equal(v, before[n]), f"input {n} was modified"
    grads = reference_backward(x["Q"], x["K"], x["V"], x["O"], x["dO"], x["Stats"], **ref_kw)
    for name, ref in zip(("dQ", "dK", "dV", "dBias"), grads, strict=True):
        if name in outs:
            err = _rel(outs[name].float().cpu().numpy(), ref)
            assert err <= TOL, f"{name}: relative error {err:.3g}"
    _zero_rows_and_keys(feature, outs, True)
    return {"graph": g, **outs}


def _inputs(feature: str, t: dict[str, Any], tdt: Any, seed: int) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    _, _, d, _, _, ref_kw, extra = FEATURES[feature]

    def rand(dims: list[int], dtype: Any = tdt) -> Any:
        return torch.from_numpy(rng.standard_normal(dims)).to("cuda", dtype)

    x = {n: rand(t[n].dim) for n in ("Q", "K", "V", "dO") if n in t}
    ref = dict(ref_kw, scale=1 / np.sqrt(d))
    if "Bias" in t:
        x["Bias"] = rand(t["Bias"].dim, tdt if extra.get("bias_io") else torch.float32)
        ref["bias"] = x["Bias"]
    if "lens" in extra:
        for name, lens in zip(("SEQ_LEN_Q", "SEQ_LEN_KV"), extra["lens"], strict=True):
            x[name] = torch.tensor(lens, dtype=torch.int32, device="cuda").view(B, 1, 1, 1)
        ref.update(seq_len_q=x["SEQ_LEN_Q"], seq_len_kv=x["SEQ_LEN_KV"])
    return x, ref


def _zero_rows_and_keys(feature: str, outs: dict[str, Any], grads: bool) -> None:
    """Rows past seq_len_q (O, dQ) and keys past seq_len_kv (dK, dV) are exactly zero."""
    extra = FEATURES[feature][6]
    if "lens" not in extra:
        return
    lq, lkv = extra["lens"]
    for b in range(B):
        row_out = outs["dQ"] if grads else outs["O"]
        if lq[b] < row_out.shape[2]:
            assert float(row_out[b, :, lq[b] :].abs().max().cpu()) == 0
        if grads and lkv[b] < outs["dK"].shape[2]:
            assert float(outs["dK"][b, :, lkv[b] :].abs().max().cpu()) == 0
            assert float(outs["dV"][b, :, lkv[b] :].abs().max().cpu()) == 0


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("heads", list(HEADS))
@pytest.mark.parametrize("feature", list(FEATURES))
def test_backward(feature: str, heads: str, dtype: str) -> None:
    outs = _backward_case(feature, heads, dtype)
    if feature == "causal_br_sq_gt_skv":  # rows i < Sq - Skv see no key
        assert float(outs["dQ"][:, :, : 160 - 96].abs().max().cpu()) == 0


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("heads", list(HEADS))
@pytest.mark.parametrize("feature", [f for f in FEATURES if not FEATURES[f][6].get("dbias")])
def test_forward(feature: str, heads: str, dtype: str) -> None:
    tdt, hdt = DTYPES[dtype]
    g, t = _graph(False, feature, heads, hdt)
    x, ref_kw = _inputs(feature, t, tdt, _seed(feature, heads, dtype, "f"))
    x.pop("dO", None)
    o = torch.full(t["O"].dim, float("nan"), device="cuda", dtype=tdt)
    stats = torch.full(t["Stats"].dim, float("nan"), device="cuda")
    pack = {t[n]: v for n, v in x.items() if n in t}
    for _ in range(3):
        g.execute({**pack, t["O"]: o, t["Stats"]: stats})
    torch.cuda.synchronize()
    ref_o, ref_stats = reference_forward(x["Q"], x["K"], x["V"], **ref_kw)
    assert _rel(o.float().cpu().numpy(), ref_o) <= TOL
    finite = np.isfinite(ref_stats)
    got = stats.cpu().numpy()
    assert np.array_equal(np.isinf(got), ~finite), "rows without keys must have Stats=+inf"
    assert _rel(got[finite], ref_stats[finite]) <= 1e-3
    _zero_rows_and_keys(feature, {"O": o}, False)
    if feature == "causal_br_sq_gt_skv":
        assert float(o[:, :, : 160 - 96].abs().max().cpu()) == 0


IN_PLACE = ["band_tl", "padding", "bias_dbias", "bias_io_dbias", "dv_ne_d"]


@pytest.mark.parametrize("feature", IN_PLACE)
def test_the_backward_kernel_stores_gradients_in_place(
    feature: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel stores dQ, dK, dV straight into their buffers (no copy kernel after it), the
    build having found both ways to agree (dQ, dK, dV bit for bit, dBias within its atomic sums'
    run-to-run variation); the values are checked as in test_backward.

    Inductor's deterministic mode is on here: by default it times the candidate configurations
    of the body's reduction kernels (delta = rowsum(O·dO)) on their first run and keeps the
    fastest, so on a loaded GPU (the suite's 16 workers) the two bodies can pick different ones
    and round dQ differently (seen: 0.25, one bf16 step); the build then keeps the copying body
    and says so in the notes, which is safe but not what this test checks. The process's kernel
    cache is emptied first: an earlier test of the same worker may have compiled this problem's
    bodies without that mode (seen in session eleven's suite run, with the mode on)."""
    from torch._inductor import config as inductor_config

    from hipdnn_graph_torch_rocm.kernels import flex

    if hasattr(inductor_config, "deterministic"):
        monkeypatch.setattr(inductor_config, "deterministic", True)
    flex.clear_cache()
    try:
        outs = _backward_case(feature, "GQA4", "bf16")
    finally:
        flex.clear_cache()  # later tests compile their own bodies, in the default mode
    kernel = outs["graph"]._state.active.plan.steps[0].run.__self__
    assert set(kernel.stored_in_place) == {"dq", "dk", "dv"}, kernel.notes
    assert not any("copied" in n for n in kernel.notes), kernel.notes


def test_default_ranking_sends_bias_with_dbias_to_flex() -> None:
    """bf16 bias + dBias: efficient defers to flex (measured faster), cuDNN has no dBias."""
    h = hg.Graph(io_data_type=hg.DataType.BFLOAT16, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    q = h.tensor(name="Q", dim=[2, 8, 256, 64])
    k, v, o, do = (h.tensor_like(q, n) for n in ("K", "V", "O", "dO"))
    st = h.tensor(name="Stats", dim=[2, 8, 256, 1], data_type=hg.DataType.FLOAT)
    bias = h.tensor(name="Bias", dim=[1, 8, 256, 256], data_type=hg.DataType.FLOAT)
    dbias = h.tensor(name="dBias", dim=[1, 8, 256, 256], data_type=hg.DataType.FLOAT)
    grads = h.sdpa_backward(q, k, v, o, do, st, bias=bias, dBias=dbias)
    for x in grads:
        x.set_output(True)
    dbias.set_output(True)
    h.build()
    assert h.get_plan_name() == FLEX, h.get_engine_refusals()
    refusals = h.get_engine_refusals()
    assert "defers to TORCH_SDPA_FLEX_ENGINE" in str(refusals.get("TORCH_SDPA_EFFICIENT_ENGINE"))


@pytest.mark.parametrize("heads", ["MHA", "GQA4"])
@pytest.mark.parametrize("feature", ["bias_dbias", "bias_io_dbias"])
def test_a_bias_past_the_offset_limit_runs_in_head_groups(
    feature: str, heads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the 32-bit offset limit lowered to this bias's size, the node runs in two head
    groups (as a [1,16,16k,16k] bias does at the real limit) with the same accuracy."""
    from hipdnn_graph_torch_rocm.kernels import _flex_spec, flex

    bias = FEATURES[feature][6]["bias"]
    monkeypatch.setattr(_flex_spec, "_MAX_BUFFER", int(np.prod(bias)))
    flex.clear_cache()
    try:
        outs = _backward_case(feature, heads, "bf16")
        plan = outs["graph"]._state.active.plan
        kernel = plan.steps[0].run.__self__
        assert isinstance(kernel, flex.HeadGroups) and kernel.groups == 2, kernel
    finally:
        flex.clear_cache()


def test_padding_plans_replay_and_read_new_lengths_in_place() -> None:
    """A padding plan computes its block mask from the lengths in closed form (a kernel compiled
    at build time, checked against create_block_mask), so the plan is captured as a CUDA graph
    like any other; lengths written into the same seq_len buffers are read by the replay."""
    tdt, hdt = DTYPES["bf16"]
    g, t = _graph(True, "padding", "GQA4", hdt)
    plan = g._state.active.plan
    assert not any("create_block_mask" in n for n in plan.steps[0].run.__self__.notes)
    x, ref_kw = _inputs("padding", t, tdt, _seed("padding", "new lengths"))
    for name in ("O", "dQ", "dK", "dV"):
        x[name] = torch.empty(t[name].dim, device="cuda", dtype=tdt)
    x["Stats"] = torch.empty(t["Stats"].dim, device="cuda")
    pack = {t[n]: v for n, v in x.items()}

    def run_with(len_q: list[int], len_kv: list[int]) -> None:
        x["SEQ_LEN_Q"].copy_(torch.tensor(len_q).view(B, 1, 1, 1))
        x["SEQ_LEN_KV"].copy_(torch.tensor(len_kv).view(B, 1, 1, 1))
        o, stats = reference_forward(x["Q"], x["K"], x["V"], **ref_kw)
        x["O"].copy_(torch.from_numpy(o))
        x["Stats"].copy_(torch.from_numpy(stats))
        for name in ("dQ", "dK", "dV"):
            x[name].fill_(float("nan"))
        g.execute(pack)
        torch.cuda.synchronize()
        grads = reference_backward(x["Q"], x["K"], x["V"], x["O"], x["dO"], x["Stats"], **ref_kw)
        for name, ref in zip(("dQ", "dK", "dV"), grads, strict=False):
            err = _rel(x[name].float().cpu().numpy(), ref)
            assert err <= TOL, f"{name} with lengths {len_q}, {len_kv}: relative error {err:.3g}"
        for b in range(B):  # rows and keys past the lengths: exactly zero
            assert not x["dQ"][b, :, len_q[b] :].any()
            assert not x["dK"][b, :, len_kv[b] :].any()

    run_with([100, 128], [160, 37])  # new buffers: eager
    run_with([100, 128], [160, 37])  # captured
    assert plan.replay.captures == 1, "the padding plan was not captured"
    run_with([64, 128], [160, 90])  # replayed, with new lengths in the same buffers
    run_with([128, 1], [3, 160])
    assert plan.replay.captures == 1


def test_the_build_check_compares_large_outputs_in_a_chunks_memory() -> None:
    """The copying/storing agreement check of a flex build compares outputs in float64 a chunk
    at a time: a [1,4,16384,16384] dBias once took tens of GiB of temporaries (issue 35)."""
    from hipdnn_graph_torch_rocm.kernels import _flex_inplace as inplace

    a = torch.randn(2**28, device="cuda")  # 1 GiB: 2 GiB in float64
    b = a + 2.0**-10
    largest = float(a.abs().max())  # before the peak is reset: a.abs() is a 1 GiB temporary
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    assert inplace._spread(a, b) == pytest.approx(2.0**-10, rel=1e-3)
    assert inplace._magnitude(a) == largest
    assert torch.cuda.max_memory_allocated() - base < 2**29  # < 512 MiB above the inputs
