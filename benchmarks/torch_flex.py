"""FlexAttention configurations of issue 14: ``graph.execute`` vs flex called directly.

Run on a GPU machine: ``python benchmarks/torch_flex.py [--quick] [--json OUT]`` (also run by
``benchmarks/torch_backend.py --flex``). bf16, D = 128, H = 16, B·Sq = 16k query tokens. Each
configuration prints, from one run:

* the engine the default ranking picks for the backward graph, its build time (compilation
  included: ``build_plans()``), the flex kernel's backward mode (``given``: flex's backward
  operator reads the graph's O and Stats; ``recompute``: the forward is recomputed),
* TFLOP/s of ``graph.execute`` (backward only; O and Stats computed once beforehand),
* TFLOP/s of FlexAttention called directly through autograd on the same tensors, the backward
  taken as (forward + backward) − forward (issue 14's method; gradients cleared before each
  call, so no accumulation is timed), and the ratio of times ``execute / direct``,
* TFLOP/s of ``TORCH_SDPA_MATH_ENGINE`` on the same graph where it fits (S ≤ 4k),
* whether ``execute`` ran as a replayed CUDA graph (the plan captured one: ``replayed``),
* in the mode column, which gradients the kernel stores straight into the caller's buffers
  (``stores dq/dk/dv``; otherwise they are copied after it), and below the row the kernel's
  notes (why a faster path was not taken).

The bias is bf16 (``bias_fp32_*``: FLOAT, the direct call then with two backward pipeline
stages, as flex's defaults do not fit an H200) and dBias FLOAT. A bias of 2³¹ elements or more
(S = 16k) crashes a direct flex call, so there O and Stats come from four direct calls over four
heads each and only ``graph.execute`` is timed.

FLOPs = 2·B·H·N·(3·D + 2·Dv), N = visible (query, key) pairs (padding and bands counted).

Times: CUDA events, medians over rounds of back-to-back calls (``interleaved``).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_memory import config_memory

import hipdnn_graph as hg

BF16 = torch.bfloat16
H, D, TOKENS = 16, 128, 16384
FLEX = "TORCH_SDPA_FLEX_ENGINE"
MATH = "TORCH_SDPA_MATH_ENGINE"

#: name -> (Sq, Skv, node keywords, options)
CONFIGS: dict[str, tuple[int, int, dict[str, Any], dict[str, Any]]] = {
    **{f"bias_dbias_{s // 1024}k": (s, s, {}, {"bias": True}) for s in (1024, 4096, 16384)},
    **{f"bias_fp32_dbias_{s // 1024}k": (s, s, {}, {"bias": True, "bias_fp32": True})
       for s in (1024, 4096)},
    **{f"padding75_{s // 1024}k": (s, s, {}, {"pad": 0.75}) for s in (1024, 4096, 16384)},
    **{f"band256_{s // 1024}k": (s, s, {"diagonal_band_left_bound": 256,
                                        "diagonal_band_right_bound": 256}, {})
       for s in (1024, 4096, 16384)},
    "alibi_causal_4k": (4096, 4096, {"use_alibi_mask": True, "use_causal_mask": True}, {}),
    "causal_br_2k_4k": (2048, 4096, {"use_causal_mask_bottom_right": True}, {}),
}  # fmt: skip
QUICK = ["bias_dbias_4k", "padding75_4k", "band256_16k", "alibi_causal_4k", "causal_br_2k_4k"]


def interleaved(fns: dict[str, Callable[[], Any]], calls: int = 5, rounds: int = 7) -> dict:
    """Median milliseconds per call of each function (rounds of back-to-back calls in turn)."""
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {n: [] for n in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            samples[name].append(start.elapsed_time(end) / calls)
    return {n: statistics.median(v) for n, v in samples.items()}


def _graph(sq: int, skv: int, b: int, kw: dict[str, Any], opt: dict[str, Any]) -> tuple:
    g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    t = {
        "Q": g.tensor(name="Q", dim=[b, H, sq, D]),
        "K": g.tensor(name="K", dim=[b, H, skv, D]),
        "V": g.tensor(name="V", dim=[b, H, skv, D]),
        "O": g.tensor(name="O", dim=[b, H, sq, D]),
        "dO": g.tensor(name="dO", dim=[b, H, sq, D]),
        "Stats": g.tensor(name="Stats", dim=[b, H, sq, 1], data_type=hg.DataType.FLOAT),
    }
    kw = dict(kw)
    if opt.get("bias"):
        t["Bias"] = g.tensor(name="Bias", dim=[1, H, sq, skv])  # bf16, as issue 14 measured
        if opt.get("bias_fp32"):
            t["Bias"].set_data_type(hg.DataType.FLOAT)
        t["dBias"] = g.tensor(name="dBias", dim=[1, H, sq, skv], data_type=hg.DataType.FLOAT)
        kw.update(bias=t["Bias"], dBias=t["dBias"])
    if opt.get("pad"):
        for n in ("SEQ_LEN_Q", "SEQ_LEN_KV"):
            t[n] = g.tensor(name=n, dim=[b, 1, 1, 1], data_type=hg.DataType.INT32)
        kw.update(use_padding_mask=True, seq_len_q=t["SEQ_LEN_Q"], seq_len_kv=t["SEQ_LEN_KV"])
    t["dQ"], t["dK"], t["dV"] = g.sdpa_backward(
        t["Q"], t["K"], t["V"], t["O"], t["dO"], t["Stats"], **kw
    )
    for n in ("dQ", "dK", "dV", "dBias"):
        if n in t:
            t[n].set_output(True)
    return g, t


def _visible(sq: int, skv: int, b: int, kw: dict[str, Any], opt: dict[str, Any]) -> int:
    if opt.get("pad"):
        n = int(opt["pad"] * sq)
        return b * n * int(opt["pad"] * skv)
    left = kw.get("diagonal_band_left_bound")
    right = kw.get("diagonal_band_right_bound")
    causal = kw.get("use_causal_mask") or kw.get("use_causal_mask_bottom_right")
    window = hg.MaskWindow(
        left_bound=left, right_bound=0 if causal else right,
        bottom_right=bool(kw.get("use_causal_mask_bottom_right")),
    )  # fmt: skip
    return b * hg.backend.visible_pairs(sq, skv, window)


def _mods(sq: int, skv: int, b: int, kw: dict[str, Any], opt: dict[str, Any], x: dict) -> tuple:
    """score_mod and block mask of the same problem, written directly against flex's API."""
    from torch.nn.attention.flex_attention import create_block_mask

    slopes = torch.pow(2.0, -8.0 * (torch.arange(H, device="cuda") + 1.0) / H)
    bias = x.get("Bias")

    def score_mod(s: Any, bb: Any, h: Any, q: Any, k: Any) -> Any:
        if bias is not None:
            s = s + bias[0, h, q, k]
        if kw.get("use_alibi_mask"):
            s = s + slopes[h] * (k - q)
        return s

    lq = x.get("SEQ_LEN_Q")
    lk = x.get("SEQ_LEN_KV")
    off = skv - sq if kw.get("use_causal_mask_bottom_right") else 0

    def mask_mod(bb: Any, h: Any, q: Any, k: Any) -> Any:
        ok = q >= 0
        if lq is not None and lk is not None:
            ok = ok & (q < lq.view(-1)[bb]) & (k < lk.view(-1)[bb])
        if kw.get("use_causal_mask") or kw.get("use_causal_mask_bottom_right"):
            ok = ok & (k <= q + off)
        if "diagonal_band_left_bound" in kw:
            ok = ok & (k >= q - kw["diagonal_band_left_bound"])
            ok = ok & (k <= q + kw["diagonal_band_right_bound"])
        return ok

    bm = create_block_mask(mask_mod, b if lq is not None else None, None, sq, skv, device="cuda")
    return score_mod, bm


def _flex_call(q: Any, k: Any, v: Any, **kw: Any) -> Any:
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention(q, k, v, **kw)


def _compiled(fn: Callable[..., Any], tag: str) -> Callable[..., Any]:
    """``torch.compile`` of a copy of ``fn`` with its own code object (dynamo's cache and its
    recompile limit are per code object: one shared compile would fall back to eager)."""
    import types

    code = fn.__code__.replace(co_name=f"{fn.__name__}_{tag}")
    return torch.compile(types.FunctionType(code, fn.__globals__, code.co_name))


def row(name: str, with_math: bool) -> dict[str, Any]:
    sq, skv, kw, opt = CONFIGS[name]
    b = max(1, TOKENS // sq)
    g, t = _graph(sq, skv, b, kw, opt)
    t0 = time.perf_counter()
    g.build()
    build_s = time.perf_counter() - t0
    torch.manual_seed(0)
    x = {n: torch.randn(t[n].dim, device="cuda", dtype=BF16) for n in ("Q", "K", "V", "dO")}
    if "Bias" in t:
        dtype = torch.float32 if opt.get("bias_fp32") else BF16
        x["Bias"] = torch.randn(t["Bias"].dim, device="cuda", dtype=dtype)
    if "SEQ_LEN_Q" in t:
        for n, s in (("SEQ_LEN_Q", sq), ("SEQ_LEN_KV", skv)):
            x[n] = torch.full((b, 1, 1, 1), int(opt["pad"] * s), dtype=torch.int32, device="cuda")
    score_mod, bm = _mods(sq, skv, b, kw, opt, x)
    cflex, cflex_grad = _compiled(_flex_call, name), _compiled(_flex_call, name + "_g")
    # flex indexes a captured tensor with 32-bit offsets: a direct call with a bias of 2**31
    # elements or more crashes the device (illegal memory access); O and Stats then come from
    # four calls over four heads each, and the direct backward is not measured
    direct = "Bias" not in x or x["Bias"].numel() < 2**31
    groups = 1 if direct else 4
    parts = []
    for i in range(groups):
        hs = slice(i * H // groups, (i + 1) * H // groups)
        xi = {**x, "Bias": x["Bias"][:, hs]} if "Bias" in x else x
        sm_i, bm_i = (score_mod, bm) if direct else _mods(sq, skv, b, kw, opt, xi)
        with torch.no_grad():
            parts.append(cflex(x["Q"][:, hs], x["K"][:, hs], x["V"][:, hs], score_mod=sm_i,
                               block_mask=bm_i, return_lse=True))  # fmt: skip
    o, lse = (torch.cat(list(t), 1) for t in zip(*parts, strict=True))
    x["O"] = o
    x["Stats"] = lse.float().unsqueeze(-1).masked_fill(torch.isinf(lse).unsqueeze(-1), math.inf)
    outs = {n: torch.empty(t[n].dim, device="cuda", dtype=BF16) for n in ("dQ", "dK", "dV")}
    if "dBias" in t:
        outs["dBias"] = torch.empty(t["dBias"].dim, device="cuda")
    pack = {**{t[n]: v for n, v in x.items() if n in t}, **{t[n]: v for n, v in outs.items()}}
    by_name = {x_.name: v for x_, v in pack.items()}

    def pack_for(other: hg.Graph) -> dict[Any, Any]:
        return {x_: by_name[x_.name] for x_ in other.graph_tensors() if x_.name in by_name}

    leaves = [x[n].detach().requires_grad_(True) for n in ("Q", "K", "V")]
    bias_leaf = x["Bias"].detach().requires_grad_(True) if "Bias" in x else None
    if bias_leaf is not None:
        x["Bias"] = bias_leaf  # the direct call's score_mod reads it
        score_mod, bm = _mods(sq, skv, b, kw, opt, x)

    def direct_fwd() -> Any:
        with torch.no_grad():
            return cflex(*leaves, score_mod=score_mod, block_mask=bm)

    # an fp32 bias: flex's default backward tiles need more shared memory than an H200 has
    # (262144 > 232448 bytes); two pipeline stages fit, as the engine finds at build time
    opts = {"kernel_options": {"bwd_num_stages": 2}} if opt.get("bias_fp32") else {}

    def direct_fwd_bwd() -> Any:
        for leaf in (*leaves, bias_leaf):  # fresh gradients: no accumulation kernels timed
            if leaf is not None:
                leaf.grad = None
        out = cflex_grad(*leaves, score_mod=score_mod, block_mask=bm, **opts)
        out.backward(x["dO"])

    fns: dict[str, Callable[[], Any]] = {"execute": lambda: g.execute(pack)}
    if direct:
        fns.update(fwd=direct_fwd, fwd_bwd=direct_fwd_bwd)
    forced = None
    if g.get_plan_name() != FLEX:  # the default engine, and flex forced, side by side
        forced, _ = _graph(sq, skv, b, kw, opt)
        forced.set_preferred_engine_id_ext(FLEX).build()
        fns["flex_engine"] = lambda: forced.execute(pack_for(forced))
    ms = interleaved(fns)
    flops = 2.0 * H * _visible(sq, skv, b, kw, opt) * (3 * D + 2 * D)
    direct_ms = ms["fwd_bwd"] - ms["fwd"] if direct else math.nan
    plan = g._state.active.plan  # type: ignore[union-attr]
    kernel = getattr(plan.steps[0].run, "__self__", None)
    r: dict[str, Any] = {
        "config": name, "B": b, "Sq": sq, "Skv": skv, "engine": g.get_plan_name(),
        "build_s": build_s, "backward_mode": getattr(kernel, "backward_mode", ""),
        "notes": list(getattr(kernel, "notes", [])),
        "stored_in_place": list(getattr(kernel, "stored_in_place", ())),
        "execute_ms": ms["execute"], "execute_tflops": flops / ms["execute"] / 1e9,
        "direct_ms": direct_ms, "direct_tflops": flops / direct_ms / 1e9,
        "ratio": ms["execute"] / direct_ms, "cuda_graphs": plan.replay.captures,
    }  # fmt: skip
    if forced is not None:
        fp = forced._state.active.plan  # type: ignore[union-attr]
        fk = getattr(fp.steps[0].run, "__self__", None)
        fe = ms["flex_engine"]
        r.update(flex_engine_ms=fe, flex_engine_tflops=flops / fe / 1e9,
                 flex_engine_mode=getattr(fk, "backward_mode", ""),
                 flex_engine_ratio=fe / direct_ms)  # fmt: skip
    if with_math and sq <= 4096:
        g.set_preferred_engine_id_ext(MATH).build()
        math_ms = interleaved({"math": lambda: g.execute(pack)}, calls=2, rounds=3)["math"]
        r.update(
            math_ms=math_ms, math_tflops=flops / math_ms / 1e9, vs_math=math_ms / ms["execute"]
        )
    return r


def run(quick: bool, with_math: bool = True, only: list[str] | None = None) -> list[dict]:
    """Measure the configurations (``only`` these, or the QUICK ones) and print the table."""
    names = only or (QUICK if quick else list(CONFIGS))
    rows = []
    print("| config | B | engine | mode | build s | execute TFLOP/s | flex direct TFLOP/s | "
          "execute/direct | math TFLOP/s | execute vs math | replayed |")  # fmt: skip
    print("|---" * 11 + "|")
    for name in names:
        with config_memory(name, torch) as mem:
            try:
                r = row(name, with_math)
            except Exception as e:  # report and go on: one failing configuration is a finding
                r = {"config": name, "error": f"{type(e).__name__}: {str(e)[:300]}"}
        r.update(mem)
        rows.append(r)
        if "error" in r:
            print(f"| {name} | error: {r['error']} |", flush=True)
            continue
        maths = (f"{r['math_tflops']:.0f} | {r['vs_math']:.1f}x" if "math_tflops" in r
                 else "— | —")  # fmt: skip
        mode = r["backward_mode"] + (f", stores {'/'.join(r['stored_in_place'])}"
                                     if r["stored_in_place"] else "")  # fmt: skip
        print(f"| {name} | {r['B']} | {r['engine']} | {mode} | {r['build_s']:.1f} "
              f"| {r['execute_tflops']:.0f} | {r['direct_tflops']:.0f} | {r['ratio']:.3f} | "
              f"{maths} | {'yes' if r['cuda_graphs'] else 'no'} |", flush=True)  # fmt: skip
        for note in r["notes"]:
            print(f"#   {name}: {note}", flush=True)
        if "flex_engine_tflops" in r:
            print(f"| {name} (flex forced) | {r['B']} | {FLEX} | {r['flex_engine_mode']} | — | "
                  f"{r['flex_engine_tflops']:.0f} | {r['direct_tflops']:.0f} | "
                  f"{r['flex_engine_ratio']:.3f} | — | — |", flush=True)  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    parser.add_argument("--no-math", action="store_true", help="skip the math engine")
    parser.add_argument("--only", help="comma-separated configuration names")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    rows = run(args.quick, not args.no_math, args.only.split(",") if args.only else None)
    if args.json:
        Path(args.json).write_text(json.dumps({"flex": rows, "torch": torch.__version__}, indent=1))


if __name__ == "__main__":
    main()
