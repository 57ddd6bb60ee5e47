"""GPU suite of ``CUDNN_FRONTEND_ENGINE`` (CUDA with ``nvidia-cudnn-frontend``; skipped otherwise).

The engine is also in the engine × heads × feature × dtype grid of ``test_torch_engines_gpu.py``
(against the float64 reference). Here: the features that grid does not cover (bands, sliding
windows, ALiBi, ``D ≠ Dv``, a runtime scale with padding), each forward and backward against the
math engine on the same inputs; explicit-mask dropout cross-checked with the math engine (the
forward agrees; the backward does not, so the engine refuses it); cuDNN's own refusals; philox
dropout determinism; zero copies (cuDNN writes the caller's buffers: nothing is allocated during
a replayed execute, only cuDNN's workspace during an eager one); bad buffers refused with
``HipdnnError``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
import zlib
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph as hg  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(
        importlib.util.find_spec("cudnn") is None, reason="needs nvidia-cudnn-frontend"
    ),
]

ENGINE = "CUDNN_FRONTEND_ENGINE"
MATH = "TORCH_SDPA_MATH_ENGINE"
B = 2

#: feature → (graph keywords, Sq, Skv, D, Dv, heads, kv heads)
CASES: dict[str, tuple[dict[str, Any], int, int, int, int, int, int]] = {
    "band": (
        {"diagonal_band_left_bound": 8, "diagonal_band_right_bound": 4}, 128, 128, 64, 64, 4, 4
    ),
    "band_br": (
        {"diagonal_band_left_bound": 16, "diagonal_band_right_bound": 0,
         "diagonal_alignment": hg.DiagonalAlignment.BOTTOM_RIGHT},
        96, 160, 64, 64, 4, 4,
    ),
    "sliding_window": (
        {"use_causal_mask": True, "sliding_window_length": 32}, 128, 128, 64, 64, 4, 2
    ),
    "alibi": ({"use_alibi_mask": True, "use_causal_mask": True}, 128, 128, 64, 64, 4, 4),
    "d_ne_dv": ({"use_causal_mask": True}, 128, 128, 128, 64, 4, 4),
    "gqa_causal": ({"use_causal_mask": True}, 256, 256, 128, 128, 8, 2),
}  # fmt: skip


def _seed(*case: str) -> int:
    return zlib.crc32(repr(case).encode())


def _build(
    backward: bool, feature: str, engine: str, extra: dict[str, Any] | None = None
) -> tuple[hg.Graph, dict[str, hg.TensorAttributes]]:
    kw, sq, skv, d, dv, h, hk = CASES[feature]
    kw = {**kw, **(extra or {})}
    g = hg.Graph(
        io_data_type=hg.DataType.BFLOAT16, intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )  # fmt: skip
    t = {
        "Q": g.tensor(name="Q", dim=[B, h, sq, d]),
        "K": g.tensor(name="K", dim=[B, hk, skv, d]),
        "V": g.tensor(name="V", dim=[B, hk, skv, dv]),
    }
    if backward:
        t["O"] = g.tensor(name="O", dim=[B, h, sq, dv])
        t["dO"] = g.tensor(name="dO", dim=[B, h, sq, dv])
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
    assert g.get_plan_name() == engine, g.get_engine_refusals().get(engine)
    return g, t


def _rand(rng: np.random.Generator, dim: list[int], dtype: Any = torch.bfloat16) -> Any:
    return torch.from_numpy(rng.standard_normal(dim)).to("cuda", dtype)


def _run(g: hg.Graph, t: dict[str, hg.TensorAttributes], x: dict[str, Any]) -> dict[str, Any]:
    outs = {
        n: torch.full(t[n].dim, float("nan"), device="cuda",
                      dtype=torch.float32 if n == "Stats" else torch.bfloat16)
        for n in t if n not in x and not t[n].is_virtual
    }  # fmt: skip
    g.execute({**{t[n]: v for n, v in x.items() if n in t}, **{t[n]: v for n, v in outs.items()}})
    torch.cuda.synchronize()
    return outs


def _close(a: Any, b: Any, what: str, tol: float = 2e-2) -> None:
    a, b = a.float(), b.float()
    finite = torch.isfinite(b)
    assert torch.equal(torch.isfinite(a), finite), f"{what}: non-finite entries differ"
    err = float((a[finite] - b[finite]).norm() / b[finite].norm().clamp_min(1e-12))
    assert err <= tol, f"{what}: relative error {err:.3g}"


@pytest.mark.parametrize("feature", list(CASES))
def test_forward_and_backward_match_the_math_engine(feature: str) -> None:
    rng = np.random.default_rng(_seed(feature))
    g, t = _build(False, feature, ENGINE)
    gm, tm = _build(False, feature, MATH)
    x = {n: _rand(rng, t[n].dim) for n in ("Q", "K", "V")}
    got, ref = _run(g, t, x), _run(gm, tm, x)
    _close(got["O"], ref["O"], "O")
    _close(got["Stats"], ref["Stats"], "Stats", 1e-3)
    xb = {**x, "O": ref["O"], "Stats": ref["Stats"], "dO": _rand(rng, t["O"].dim)}
    g, t = _build(True, feature, ENGINE)
    gm, tm = _build(True, feature, MATH)
    got, ref = _run(g, t, xb), _run(gm, tm, xb)
    for name in ("dQ", "dK", "dV"):
        _close(got[name], ref[name], name)


def test_a_runtime_scale_with_padding() -> None:
    rng = np.random.default_rng(3)
    results = {}
    for engine in (ENGINE, MATH):
        g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, compute_data_type=hg.DataType.FLOAT,
                     intermediate_data_type=hg.DataType.FLOAT)  # fmt: skip
        q = g.tensor(name="Q", dim=[B, 4, 128, 64])
        k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
        scale = g.tensor(name="scale", dim=[1], data_type=hg.DataType.FLOAT)
        scale.set_is_pass_by_value(True)
        lq = g.tensor(name="lq", dim=[B, 1, 1, 1], data_type=hg.DataType.INT32)
        lkv = g.tensor(name="lkv", dim=[B, 1, 1, 1], data_type=hg.DataType.INT32)
        o, stats = g.sdpa(q, k, v, generate_stats=True, attn_scale=scale, use_padding_mask=True,
                          seq_len_q=lq, seq_len_kv=lkv)  # fmt: skip
        o.set_output(True)
        stats.set_output(True)
        g.set_preferred_engine_id_ext(engine)
        g.build()
        assert g.get_plan_name() == engine, g.get_engine_refusals().get(engine)
        if not results:
            data = {n: _rand(rng, [B, 4, 128, 64]) for n in ("Q", "K", "V")}
        outs = {"O": torch.full([B, 4, 128, 64], float("nan"), device="cuda", dtype=torch.bfloat16),
                "Stats": torch.full([B, 4, 128, 1], float("nan"), device="cuda")}  # fmt: skip
        g.execute({q: data["Q"], k: data["K"], v: data["V"], scale: 0.07,
                   lq: torch.tensor([100, 128], device="cuda", dtype=torch.int32).view(B, 1, 1, 1),
                   lkv: torch.tensor([128, 77], device="cuda", dtype=torch.int32).view(B, 1, 1, 1),
                   o: outs["O"], stats: outs["Stats"]})  # fmt: skip
        torch.cuda.synchronize()
        results[engine] = outs
    _close(results[ENGINE]["O"], results[MATH]["O"], "O")
    _close(results[ENGINE]["Stats"], results[MATH]["Stats"], "Stats", 1e-3)
    assert float(results[ENGINE]["O"][0, :, 100:].abs().max()) == 0
    assert bool(torch.isinf(results[ENGINE]["Stats"][0, :, 100:]).all())


def test_explicit_mask_dropout_forward_agrees_with_the_math_engine() -> None:
    rng = np.random.default_rng(7)
    shape = [B, 4, 128, 64]
    mask = torch.from_numpy((rng.random((B, 4, 128, 128)) < 0.8).astype(np.float32))
    x = {n: _rand(rng, shape) for n in ("Q", "K", "V")}
    x["Mask"] = mask.to("cuda", torch.bfloat16)
    got: dict[str, dict[str, Any]] = {}
    for engine in (ENGINE, MATH):
        g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, compute_data_type=hg.DataType.FLOAT,
                     intermediate_data_type=hg.DataType.FLOAT)  # fmt: skip
        t = {n: g.tensor(name=n, dim=shape) for n in ("Q", "K", "V")}
        t["Mask"] = g.tensor(name="Mask", dim=[B, 4, 128, 128])
        scale = g.tensor(name="s").set_value(1.25)
        t["O"], t["Stats"] = g.sdpa(t["Q"], t["K"], t["V"], generate_stats=True,
                                    use_causal_mask=True, dropout=(t["Mask"], scale))  # fmt: skip
        t["O"].set_output(True)
        t["Stats"].set_output(True)
        g.set_preferred_engine_id_ext(engine)
        g.build()
        assert g.get_plan_name() == engine, g.get_engine_refusals().get(engine)
        got[engine] = _run(g, t, x)
    _close(got[ENGINE]["O"], got[MATH]["O"], "O")
    _close(got[ENGINE]["Stats"], got[MATH]["Stats"], "Stats", 1e-3)


def test_explicit_mask_dropout_backward_is_refused_with_the_measured_reason() -> None:
    from hipdnn_graph_torch_rocm.cudnn_fe.rules import MASK_BACKWARD

    g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, compute_data_type=hg.DataType.FLOAT,
                 intermediate_data_type=hg.DataType.FLOAT)  # fmt: skip
    shape = [B, 4, 128, 64]
    t = {n: g.tensor(name=n, dim=shape) for n in ("Q", "K", "V", "O", "dO")}
    stats = g.tensor(name="Stats", dim=[B, 4, 128, 1], data_type=hg.DataType.FLOAT)
    mask = g.tensor(name="Mask", dim=[B, 4, 128, 128])
    s, inv = g.tensor(name="s").set_value(1.25), g.tensor(name="si").set_value(0.8)
    for out in g.sdpa_backward(t["Q"], t["K"], t["V"], t["O"], t["dO"], stats, name="bwd",
                               use_causal_mask=True, dropout=(mask, s, inv)):  # fmt: skip
        out.set_output(True)
    g.build()
    assert g.get_plan_name() == MATH
    assert g.get_engine_refusals()[ENGINE] == f"node 'bwd': {MASK_BACKWARD}"


def test_bottom_right_causal_with_more_queries_than_keys_is_refused_by_cudnn() -> None:
    g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, compute_data_type=hg.DataType.FLOAT,
                 intermediate_data_type=hg.DataType.FLOAT)  # fmt: skip
    q = g.tensor(name="Q", dim=[B, 4, 160, 64])
    k = g.tensor(name="K", dim=[B, 4, 96, 64])
    o, _ = g.sdpa(q, k, g.tensor_like(k, "V"), name="fwd", generate_stats=True,
                  use_causal_mask_bottom_right=True)  # fmt: skip
    o.set_output(True)
    g.build()
    assert g.get_plan_name() != ENGINE
    reason = g.get_engine_refusals()[ENGINE]
    assert reason.startswith("node 'fwd': cuDNN cannot run it: ")
    assert "max_s_q > max_s_kv" in reason


def test_philox_dropout_runs_when_preferred_and_repeats_itself() -> None:
    rng = np.random.default_rng(11)
    g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, compute_data_type=hg.DataType.FLOAT,
                 intermediate_data_type=hg.DataType.FLOAT)  # fmt: skip
    q = g.tensor(name="Q", dim=[B, 4, 256, 64])
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    seed = g.tensor(name="seed", dim=[1], data_type=hg.DataType.INT64).set_is_pass_by_value(True)
    offset = g.tensor(name="off", dim=[1], data_type=hg.DataType.INT64).set_is_pass_by_value(True)
    o, stats = g.sdpa(q, k, v, generate_stats=True, dropout=(0.2, seed, offset))
    o.set_output(True)
    stats.set_output(True)
    g.set_preferred_engine_id_ext(ENGINE)
    g.build()
    assert g.get_plan_name() == ENGINE, g.get_engine_refusals().get(ENGINE)
    data = {x: _rand(rng, [B, 4, 256, 64]) for x in (q, k, v)}

    def once(s: int) -> Any:
        out = torch.empty([B, 4, 256, 64], device="cuda", dtype=torch.bfloat16)
        st = torch.empty([B, 4, 256, 1], device="cuda")
        g.execute({**data, seed: s, offset: 0, o: out, stats: st})
        torch.cuda.synchronize()
        return out

    a, b, c = once(1), once(1), once(2)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_by_default_a_philox_graph_goes_to_the_documented_stream() -> None:
    g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, compute_data_type=hg.DataType.FLOAT,
                 intermediate_data_type=hg.DataType.FLOAT)  # fmt: skip
    q = g.tensor(name="Q", dim=[1, 2, 64, 64])
    seed = g.tensor(name="seed", dim=[1], data_type=hg.DataType.INT64).set_is_pass_by_value(True)
    offset = g.tensor(name="off", dim=[1], data_type=hg.DataType.INT64).set_is_pass_by_value(True)
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=True,
                  dropout=(0.1, seed, offset))  # fmt: skip
    o.set_output(True)
    g.build()
    assert g.get_plan_name() != ENGINE
    assert "documented stream" in g.get_engine_refusals()[ENGINE]


def test_zero_copies_and_no_workspace_needed_from_the_caller() -> None:
    g, t = _build(True, "gqa_causal", ENGINE)
    assert g.get_workspace_size() == 0
    plan = g._state.active.plan  # type: ignore[union-attr]
    rng = np.random.default_rng(5)
    x = {n: _rand(rng, t[n].dim) for n in ("Q", "K", "V", "O", "dO")}
    x["Stats"] = torch.randn(t["Stats"].dim, device="cuda").abs() + 5
    outs = {
        n: torch.empty(t[n].dim, device="cuda", dtype=torch.bfloat16) for n in ("dQ", "dK", "dV")
    }
    pack = {**{t[n]: v for n, v in x.items()}, **{t[n]: v for n, v in outs.items()}}
    ptrs = {n: v.data_ptr() for n, v in outs.items()}
    for _ in range(3):  # eager, then captured, then replayed
        g.execute(pack)
    torch.cuda.synchronize()
    assert plan.replay.captures == 1
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    g.execute(pack)
    torch.cuda.synchronize()
    assert torch.cuda.max_memory_allocated() - base == 0
    assert {n: v.data_ptr() for n, v in outs.items()} == ptrs
    # eagerly, the only memory taken is cuDNN's workspace (no output is allocated or copied)
    plan.replay.refuse("measuring eager execution")
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    g.execute(pack)
    torch.cuda.synchronize()
    rounded = (plan.workspace_bytes + 511) // 512 * 512  # torch allocates in 512-byte blocks
    assert torch.cuda.max_memory_allocated() - base <= rounded


def test_host_buffers_are_refused_with_a_hipdnn_error() -> None:
    g, t = _build(False, "band", ENGINE)
    x = {n: torch.zeros(t[n].dim, dtype=torch.bfloat16) for n in ("Q", "K", "V", "O")}
    x["Stats"] = torch.zeros(t["Stats"].dim)
    with pytest.raises(hg.HipdnnError) as err:
        g.execute({t[n]: v for n, v in x.items()})
    assert err.value.code == hg.ErrorCode.GRAPH_EXECUTION_FAILED
    assert "CUDA tensors" in str(err.value)


#: a script that runs the engine (a graph kept in a global, as scripts keep them) and the torch
#: op, then exits: every object of cudnn-frontend's is still referenced when it ends
_EXIT_SCRIPT = textwrap.dedent(
    """
    import torch
    import hipdnn_graph as hg
    import hipdnn_graph.torch as hgt

    g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)
    t = {n: g.tensor(name=n, dim=[1, 2, 128, 64]) for n in ("Q", "K", "V", "O", "dO")}
    t["Stats"] = g.tensor(name="Stats", dim=[1, 2, 128, 1], data_type=hg.DataType.FLOAT)
    grads = g.sdpa_backward(*(t[n] for n in ("Q", "K", "V", "O", "dO", "Stats")),
                            use_causal_mask=True)
    for x in grads:
        x.set_output(True)
    g.set_preferred_engine_id_ext("CUDNN_FRONTEND_ENGINE").build()
    pack = {t[n]: torch.randn(t[n].dim, device="cuda", dtype=torch.bfloat16)
            for n in ("Q", "K", "V", "O", "dO")}
    pack[t["Stats"]] = torch.rand(t["Stats"].dim, device="cuda") + 5
    pack.update({x: torch.empty(x.dim, device="cuda", dtype=torch.bfloat16) for x in grads})
    for _ in range(3):  # eager, captured, replayed
        g.execute(pack)
    q = torch.randn(1, 2, 128, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    hgt.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    torch.cuda.synchronize()
    print(g.get_plan_name())
    """
)


def test_a_script_that_ran_the_engine_exits_without_nanobind_leak_reports() -> None:
    """cudnn-frontend's nanobind extension reports every object of its types still alive at
    exit (some 40 "leaked ..." lines on stderr); the engine releases its objects first."""
    done = subprocess.run(
        [sys.executable, "-c", _EXIT_SCRIPT], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [ENGINE]
    assert [line for line in done.stderr.splitlines() if "leaked" in line] == []
