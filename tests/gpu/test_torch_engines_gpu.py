"""GPU suite of the torch engines (run on the device machine; skipped without CUDA/ROCm).

Every engine × {MHA, GQA 4:1, MQA} × {no mask, causal top-left, causal bottom-right with
Sq ≠ Skv, bias, bias with dBias, padding, dropout mask} × {bf16, fp16}, backward and forward,
against the float64 autograd reference (``tests/sdpa_autograd_reference.py``) on the same
rounded inputs: relative error ≤ 1e-2, no NaN, every output written, padded rows zero. A
combination an engine cannot run exactly must be refused by its ``check()`` (the test then
skips with the refusal as its reason, so the summary lists what ran where).
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

ENGINES = [
    "CUDNN_FRONTEND_ENGINE",
    "TORCH_SDPA_CUDNN_ENGINE",
    "TORCH_SDPA_FLASH_ENGINE",
    "TORCH_SDPA_EFFICIENT_ENGINE",
    "TORCH_SDPA_MATH_ENGINE",
]
HEADS = {"MHA": (8, 8), "GQA4": (8, 2), "MQA": (8, 1)}
FEATURES = ["none", "causal_tl", "causal_br", "bias", "bias_dbias", "padding", "dropout_mask"]
DTYPES = {"bf16": (torch.bfloat16, hg.DataType.BFLOAT16), "fp16": (torch.float16, hg.DataType.HALF)}
B, D = 2, 64
TOL = 1e-2


def _seed(*case: str) -> int:
    """A seed fixed per test case (``hash`` of strings changes from one process to the next)."""
    return zlib.crc32(repr(case).encode())


def _rel(out: np.ndarray, ref: np.ndarray) -> float:
    assert not np.isnan(out).any(), "NaN in output"
    denom = float(np.linalg.norm(ref))
    return float(np.linalg.norm(out - ref)) / (denom if denom > 0 else 1.0)


def _case(feature: str, heads: tuple[int, int]) -> dict[str, Any]:
    h, hk = heads
    sq, skv = (96, 160) if feature == "causal_br" else (128, 128)
    case: dict[str, Any] = {"h": h, "hk": hk, "sq": sq, "skv": skv, "kw": {}, "ref": {}}
    if feature == "causal_tl":
        case["kw"]["use_causal_mask"] = True
        case["ref"]["right_bound"] = 0
    elif feature == "causal_br":
        case["kw"]["use_causal_mask_bottom_right"] = True
        case["ref"].update(right_bound=0, bottom_right=True)
    elif feature == "padding":
        case["lens"] = ([100, 128], [128, 90])
    return case


def _graph(
    backward: bool, case: dict[str, Any], feature: str, dt: hg.DataType, engine: str
) -> tuple[hg.Graph, dict[str, hg.TensorAttributes]]:
    g = hg.Graph(
        name=f"{feature}", io_data_type=dt, intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )  # fmt: skip
    h, hk, sq, skv = case["h"], case["hk"], case["sq"], case["skv"]
    t = {
        "Q": g.tensor(name="Q", dim=[B, h, sq, D]),
        "K": g.tensor(name="K", dim=[B, hk, skv, D]),
        "V": g.tensor(name="V", dim=[B, hk, skv, D]),
    }
    kw = dict(case["kw"])
    if feature in ("bias", "bias_dbias"):
        t["Bias"] = g.tensor(name="Bias", dim=[1, h, sq, skv], data_type=hg.DataType.FLOAT)
        kw["bias"] = t["Bias"]
        if feature == "bias_dbias" and backward:
            t["dBias"] = g.tensor(name="dBias", dim=[1, h, sq, skv], data_type=hg.DataType.FLOAT)
            kw["dBias"] = t["dBias"]
    if feature == "padding":
        for name in ("SEQ_LEN_Q", "SEQ_LEN_KV"):
            t[name] = g.tensor(name=name, dim=[B, 1, 1, 1], data_type=hg.DataType.INT32)
        kw.update(use_padding_mask=True, seq_len_q=t["SEQ_LEN_Q"], seq_len_kv=t["SEQ_LEN_KV"])
    if feature == "dropout_mask":
        t["Mask"] = g.tensor(name="Mask", dim=[B, h, sq, skv])
        scale = g.tensor(name="DropScale").set_value(1 / 0.9)
        if backward:
            inv = g.tensor(name="DropScaleInv").set_value(0.9)
            kw["dropout"] = (t["Mask"], scale, inv)
        else:
            kw["dropout"] = (t["Mask"], scale)
    if backward:
        t["O"] = g.tensor(name="O", dim=[B, h, sq, D])
        t["dO"] = g.tensor(name="dO", dim=[B, h, sq, D])
        t["Stats"] = g.tensor(name="Stats", dim=[B, h, sq, 1], data_type=hg.DataType.FLOAT)
        t["dQ"], t["dK"], t["dV"] = g.sdpa_backward(
            t["Q"], t["K"], t["V"], t["O"], t["dO"], t["Stats"], name="bwd", **kw
        )
        outs = ("dQ", "dK", "dV")
    else:
        t["O"], t["Stats"] = g.sdpa(t["Q"], t["K"], t["V"], name="fwd", generate_stats=True, **kw)
        outs = ("O", "Stats")
    for name in outs:
        t[name].set_output(True)
    g.set_preferred_engine_id_ext(engine)
    g.build()
    if g.get_plan_name() != engine:
        reason = g.get_engine_refusals().get(engine, "ranked below another engine")
        assert isinstance(reason, str) and reason
        pytest.skip(f"{engine} refuses: {reason}")
    return g, t


def _inputs(
    case: dict[str, Any], feature: str, tdt: Any, rng: np.random.Generator
) -> dict[str, Any]:
    h, hk, sq, skv = case["h"], case["hk"], case["sq"], case["skv"]

    def rand(*shape: int, dtype: Any = tdt) -> Any:
        return torch.from_numpy(rng.standard_normal(shape)).to("cuda", dtype)

    x = {"Q": rand(B, h, sq, D), "K": rand(B, hk, skv, D), "V": rand(B, hk, skv, D)}
    x["dO"] = rand(B, h, sq, D)
    ref = dict(case["ref"], scale=1 / np.sqrt(D))
    if feature in ("bias", "bias_dbias"):
        x["Bias"] = rand(1, h, sq, skv, dtype=torch.float32)
        ref["bias"] = x["Bias"]
    if feature == "padding":
        lq, lkv = case["lens"]
        x["SEQ_LEN_Q"] = torch.tensor(lq, dtype=torch.int32, device="cuda").view(B, 1, 1, 1)
        x["SEQ_LEN_KV"] = torch.tensor(lkv, dtype=torch.int32, device="cuda").view(B, 1, 1, 1)
        ref.update(seq_len_q=x["SEQ_LEN_Q"], seq_len_kv=x["SEQ_LEN_KV"])
    if feature == "dropout_mask":
        mask = (rng.random((B, h, sq, skv)) < 0.9).astype(np.float32)
        x["Mask"] = torch.from_numpy(mask).to("cuda", tdt)
        ref.update(dropout_mask=mask, dropout_scale=float(np.float32(1 / 0.9)))
    return {"x": x, "ref": ref}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("feature", FEATURES)
@pytest.mark.parametrize("heads", list(HEADS))
@pytest.mark.parametrize("engine", ENGINES)
def test_backward(engine: str, heads: str, feature: str, dtype: str) -> None:
    tdt, hdt = DTYPES[dtype]
    case = _case(feature, HEADS[heads])
    g, t = _graph(True, case, feature, hdt, engine)
    rng = np.random.default_rng(_seed(engine, heads, feature, dtype))
    data = _inputs(case, feature, tdt, rng)
    x, ref_kw = data["x"], data["ref"]
    o, stats = reference_forward(x["Q"], x["K"], x["V"], **ref_kw)
    x["O"] = torch.from_numpy(o).to("cuda", tdt)
    x["Stats"] = torch.from_numpy(stats).to("cuda", torch.float32)
    pack: dict[Any, Any] = {t[n]: x[n] for n in x if n in t}
    outs = {
        n: torch.full(t[n].dim, float("nan"), device="cuda", dtype=tdt) for n in ("dQ", "dK", "dV")
    }
    if "dBias" in t:
        outs["dBias"] = torch.full(t["dBias"].dim, float("nan"), device="cuda")
        ref_kw["dbias_shape"] = tuple(t["dBias"].dim)
    before = {n: v.clone() for n, v in x.items()}
    g.execute({**pack, **{t[n]: v for n, v in outs.items()}})
    torch.cuda.synchronize()
    for n, v in x.items():
        assert torch.equal(v, before[n]), f"input {n} was modified"
    grads = reference_backward(x["Q"], x["K"], x["V"], x["O"], x["dO"], x["Stats"], **ref_kw)
    for name, ref in zip(("dQ", "dK", "dV", "dBias"), grads, strict=True):
        if name not in outs:
            continue
        got = outs[name].float().cpu().numpy()
        err = _rel(got, ref)
        assert err <= TOL, f"{name}: relative error {err:.3g}"
    if feature == "padding":
        lq, lkv = case["lens"]
        for b in range(B):
            assert (
                float(outs["dQ"][b, :, lq[b] :].abs().max().cpu() if lq[b] < case["sq"] else 0) == 0
            )
            if lkv[b] < case["skv"]:
                assert float(outs["dK"][b, :, lkv[b] :].abs().max().cpu()) == 0
                assert float(outs["dV"][b, :, lkv[b] :].abs().max().cpu()) == 0


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("feature", [f for f in FEATURES if f != "bias_dbias"])
@pytest.mark.parametrize("heads", list(HEADS))
@pytest.mark.parametrize("engine", ENGINES)
def test_forward(engine: str, heads: str, feature: str, dtype: str) -> None:
    tdt, hdt = DTYPES[dtype]
    case = _case(feature, HEADS[heads])
    g, t = _graph(False, case, feature, hdt, engine)
    rng = np.random.default_rng(_seed(engine, heads, feature, dtype, "f"))
    data = _inputs(case, feature, tdt, rng)
    x, ref_kw = data["x"], data["ref"]
    x.pop("dO")
    pack: dict[Any, Any] = {t[n]: x[n] for n in x if n in t}
    o = torch.full(t["O"].dim, float("nan"), device="cuda", dtype=tdt)
    stats = torch.full(t["Stats"].dim, float("nan"), device="cuda")
    g.execute({**pack, t["O"]: o, t["Stats"]: stats})
    torch.cuda.synchronize()
    ref_o, ref_stats = reference_forward(x["Q"], x["K"], x["V"], **ref_kw)
    assert _rel(o.float().cpu().numpy(), ref_o) <= TOL
    finite = np.isfinite(ref_stats)
    got_stats = stats.cpu().numpy()
    assert np.array_equal(np.isinf(got_stats), ~finite), "rows without keys must have Stats=+inf"
    assert _rel(got_stats[finite], ref_stats[finite]) <= 1e-3
    if feature == "padding":
        lq, _ = case["lens"]
        for b in range(B):
            if lq[b] < case["sq"]:
                assert float(o[b, :, lq[b] :].abs().max().cpu()) == 0


def test_fused_forward_backward_graph_runs_on_the_fastest_engine() -> None:
    """A bf16 fwd→bwd graph with default ranking runs on a fused engine, not the math one."""
    g = hg.Graph(
        io_data_type=hg.DataType.BFLOAT16,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = g.tensor(name="Q", dim=[2, 8, 256, 64])
    k, v, do = g.tensor_like(q, "K"), g.tensor_like(q, "V"), g.tensor_like(q, "dO")
    o, stats = g.sdpa(q, k, v, use_causal_mask=True)
    dq, dk, dv = g.sdpa_backward(q, k, v, o, do, stats, use_causal_mask=True)
    for x in (dq, dk, dv):
        x.set_output(True)
    g.build()
    assert g.get_plan_name() != "TORCH_SDPA_MATH_ENGINE", g.get_engine_refusals()
    rng = np.random.default_rng(0)
    data = {
        x: torch.from_numpy(rng.standard_normal(x.dim)).to("cuda", torch.bfloat16)
        for x in (q, k, v, do)
    }
    outs = {
        x: torch.full(x.dim, float("nan"), device="cuda", dtype=torch.bfloat16)
        for x in (dq, dk, dv)
    }
    g.execute({**data, **outs})
    torch.cuda.synchronize()
    for x in outs.values():
        assert not torch.isnan(x).any()


def _backward_pack(
    case: dict[str, Any], t: dict[str, hg.TensorAttributes], rng: np.random.Generator
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[Any, Any]]:
    """Inputs of a causal bf16 backward with O and Stats from the reference forward, empty
    dQ/dK/dV buffers and the variant pack: ``(x, reference keywords, outputs, pack)``."""
    data = _inputs(case, "causal_tl", torch.bfloat16, rng)
    x, ref_kw = data["x"], data["ref"]
    o, stats = reference_forward(x["Q"], x["K"], x["V"], **ref_kw)
    x["O"] = torch.from_numpy(o).to("cuda", torch.bfloat16)
    x["Stats"] = torch.from_numpy(stats).to("cuda", torch.float32)
    outs = {
        n: torch.empty(t[n].dim, device="cuda", dtype=torch.bfloat16) for n in ("dQ", "dK", "dV")
    }
    pack = {
        **{t[n]: x[n] for n in ("Q", "K", "V", "O", "dO", "Stats")},
        **{t[n]: v for n, v in outs.items()},
    }
    return x, ref_kw, outs, pack


@pytest.mark.parametrize("engine", ENGINES)
def test_repeated_execute_replays_a_cuda_graph_that_reads_new_values(engine: str) -> None:
    """Same buffers again: the plan captures once and replays; new input values are picked up."""
    case = _case("causal_tl", HEADS["GQA4"])
    g, t = _graph(True, case, "causal_tl", hg.DataType.BFLOAT16, engine)
    rng = np.random.default_rng(7)
    x, ref_kw, outs, pack = _backward_pack(case, t, rng)
    results = []
    for _ in range(4):
        for v in outs.values():
            v.fill_(float("nan"))
        g.execute(pack)
        torch.cuda.synchronize()
        results.append([v.clone() for v in outs.values()])
    for later in results[1:]:
        for a, b in zip(results[0], later, strict=True):
            assert torch.equal(a, b)
    plan = g._state.active.plan  # type: ignore[union-attr]
    assert plan.replay.captures == 1
    x["dO"].copy_(
        torch.from_numpy(rng.standard_normal(tuple(x["dO"].shape))).to("cuda", torch.bfloat16)
    )
    g.execute(pack)
    torch.cuda.synchronize()
    grads = reference_backward(x["Q"], x["K"], x["V"], x["O"], x["dO"], x["Stats"], **ref_kw)
    for name, ref in zip(("dQ", "dK", "dV"), grads, strict=False):
        assert _rel(outs[name].float().cpu().numpy(), ref) <= TOL


@pytest.mark.parametrize("engine", ["TORCH_SDPA_CUDNN_ENGINE", "TORCH_SDPA_MATH_ENGINE"])
def test_replay_keeps_a_graph_per_buffer_set_and_survives_run(engine: str) -> None:
    """Two buffer sets used in turn each keep their graph; ``Graph.run`` in between (outputs
    allocated by the engine, never captured) neither drops nor recaptures them."""
    case = _case("causal_tl", HEADS["MHA"])
    g, t = _graph(True, case, "causal_tl", hg.DataType.BFLOAT16, engine)
    rng = np.random.default_rng(11)
    packs, expected = [], []
    for _ in range(2):
        x, ref_kw, _, pack = _backward_pack(case, t, rng)
        packs.append(pack)
        grads = reference_backward(x["Q"], x["K"], x["V"], x["O"], x["dO"], x["Stats"], **ref_kw)
        expected.append(dict(zip(("dQ", "dK", "dV"), grads, strict=False)))
    plan = g._state.active.plan  # type: ignore[union-attr]
    a, b = packs
    for pack in (a, a, b, b):
        g.execute(pack)
    assert plan.replay.captures == 2
    inputs = {k: v for k, v in a.items() if k not in (t["dQ"], t["dK"], t["dV"])}
    ran = g.run(inputs)
    for which, pack in ((0, a), (1, b), (0, a)):
        for n in ("dQ", "dK", "dV"):
            pack[t[n]].fill_(float("nan"))
        g.execute(pack)
        torch.cuda.synchronize()
        for n in ("dQ", "dK", "dV"):
            assert _rel(pack[t[n]].float().cpu().numpy(), expected[which][n]) <= TOL
    assert plan.replay.captures == 2
    for n in ("dQ", "dK", "dV"):
        assert _rel(ran[t[n]].float().cpu().numpy(), expected[0][n]) <= TOL


def test_a_plan_that_syncs_with_the_host_runs_eagerly_without_a_warning() -> None:
    """The math engine reads padding lengths on the host: its capture fails at once and the plan
    stays eager, with the right numbers and without torch's "CUDA Graph is empty" warning."""
    import warnings

    case = _case("padding", HEADS["MHA"])
    g, t = _graph(True, case, "padding", hg.DataType.BFLOAT16, "TORCH_SDPA_MATH_ENGINE")
    data = _inputs(case, "padding", torch.bfloat16, np.random.default_rng(5))
    x, ref_kw = data["x"], data["ref"]
    o, stats = reference_forward(x["Q"], x["K"], x["V"], **ref_kw)
    x["O"] = torch.from_numpy(o).to("cuda", torch.bfloat16)
    x["Stats"] = torch.from_numpy(stats).to("cuda", torch.float32)
    outs = {n: torch.empty(t[n].dim, device="cuda", dtype=x["Q"].dtype) for n in ("dQ", "dK", "dV")}
    pack = {t[n]: v for n, v in {**x, **outs}.items() if n in t}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(3):
            g.execute(pack)
        torch.cuda.synchronize()
    assert not [w for w in seen if "CUDA Graph is empty" in str(w.message)]
    plan = g._state.active.plan  # type: ignore[union-attr]
    assert plan.replay.captures == 0 and plan.replay.capacity == 0
    grads = reference_backward(x["Q"], x["K"], x["V"], x["O"], x["dO"], x["Stats"], **ref_kw)
    for name, ref in zip(("dQ", "dK", "dV"), grads, strict=False):
        assert _rel(outs[name].float().cpu().numpy(), ref) <= TOL


@pytest.mark.parametrize("engine", ["TORCH_SDPA_EFFICIENT_ENGINE", "TORCH_SDPA_FLASH_ENGINE"])
def test_a_device_engine_given_host_arrays_stages_them_through_the_device(engine: str) -> None:
    """NumPy arrays (host memory) on a fused engine: copied to the device, run there, and the
    outputs written back into the caller's arrays; the inputs are left as they were."""
    dtype, hg_dtype = (
        (np.float32, hg.DataType.FLOAT)
        if engine.endswith("EFFICIENT_ENGINE")
        else (np.float16, hg.DataType.HALF)
    )
    g = hg.Graph(
        io_data_type=hg_dtype,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = g.tensor(name="Q", dim=[1, 2, 64, 32])
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    o, _ = g.sdpa(q, k, v, use_causal_mask=True)
    o.set_output(True)
    g.set_preferred_engine_id_ext(engine)
    g.build()
    assert g.get_plan_name() == engine, g.get_engine_refusals()
    rng = np.random.default_rng(1)
    x = {t: rng.standard_normal(t.dim).astype(dtype) for t in (q, k, v)}
    before = {t: a.copy() for t, a in x.items()}
    out = np.full(o.dim, np.nan, dtype)
    g.execute({**x, o: out})
    for t, a in x.items():
        np.testing.assert_array_equal(a, before[t])
    ref, _ = reference_forward(
        *(a.astype(np.float64) for a in x.values()), scale=32**-0.5, right_bound=0
    )
    assert _rel(out.astype(np.float64), ref) <= TOL
