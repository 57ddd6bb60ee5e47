"""``CUDNN_FRONTEND_ENGINE`` on the GPU: issue 26's figures, from one run.

Run on a CUDA machine with ``nvidia-cudnn-frontend``:
``python benchmarks/cudnn_frontend_engine.py [--quick] [--json OUT]``. bf16, D = 128, H = 16,
B·Sq = 16k query tokens (the configurations of ``benchmarks/torch_flex.py``). For each backward
configuration it prints TFLOP/s of

* ``graph.execute`` on ``CUDNN_FRONTEND_ENGINE`` (preferred by name; repeated calls on the same
  buffers replay a captured CUDA graph) and the same plan run eagerly (replay refused),
* cudnn-frontend called directly (a cuDNN graph written here against its Python API, executed
  with a ``{tensor: buffer}`` pack, as its users call it), and the ratio of times,
* ``graph.execute`` on ``TORCH_SDPA_FLEX_ENGINE`` (the engine ranked best before), and
* which engine the default ranking now picks.

Then, at S = 1k (causal, B = 16): ``graph.execute`` of the backward on the default engine
against the fastest aten fused backward called directly (``benchmarks/torch_backend.py``'s
``direct_aten``), the issue's "≤ 1.02×" figure.

FLOPs = 2·B·H·N·(3·D + 2·Dv), N = visible (query, key) pairs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_memory import config_memory
from torch_flex import CONFIGS, FLEX, TOKENS, D, H, _graph, _visible, interleaved

import hipdnn_graph as hg

ENGINE = "CUDNN_FRONTEND_ENGINE"
BF16 = torch.bfloat16
NAMES = [f"padding75_{s}k" for s in (1, 4, 16)] + [f"bias_dbias_{s}k" for s in (1, 4, 16)]
QUICK = ["padding75_4k", "bias_dbias_16k"]


def _inputs(t: dict[str, hg.TensorAttributes], sq: int, skv: int, b: int, opt: dict) -> dict:
    torch.manual_seed(0)
    x = {n: torch.randn(t[n].dim, device="cuda", dtype=BF16) for n in ("Q", "K", "V", "dO")}
    x["O"] = torch.randn(t["O"].dim, device="cuda", dtype=BF16)
    x["Stats"] = torch.randn(t["Stats"].dim, device="cuda").abs() + math.log(skv)
    if "Bias" in t:
        x["Bias"] = torch.randn(t["Bias"].dim, device="cuda", dtype=BF16)
    if "SEQ_LEN_Q" in t:
        for n, s in (("SEQ_LEN_Q", sq), ("SEQ_LEN_KV", skv)):
            x[n] = torch.full((b, 1, 1, 1), int(opt["pad"] * s), dtype=torch.int32, device="cuda")
    return x


def direct_cudnn(x: dict[str, Any], opt: dict[str, Any], outs: dict[str, Any]) -> Any:
    """The same backward written directly against cudnn-frontend's Python API."""
    import cudnn

    handle = cudnn.create_handle()
    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
    g = cudnn.pygraph(
        io_data_type=cudnn.data_type.BFLOAT16,
        intermediate_data_type=cudnn.data_type.FLOAT,
        compute_data_type=cudnn.data_type.FLOAT,
        handle=handle,
    )
    ts = {n: g.tensor_like(x[n]) for n in ("Q", "K", "V", "O", "dO", "Stats")}
    kw: dict[str, Any] = {"attn_scale": 1 / math.sqrt(D)}
    if "Bias" in x:
        ts["Bias"] = g.tensor_like(x["Bias"])
        ts["dBias"] = g.tensor_like(outs["dBias"])
        kw.update(bias=ts["Bias"], dBias=ts["dBias"])
    if "SEQ_LEN_Q" in x:
        ts["SEQ_LEN_Q"], ts["SEQ_LEN_KV"] = (
            g.tensor_like(x["SEQ_LEN_Q"]),
            g.tensor_like(x["SEQ_LEN_KV"]),
        )
        kw.update(use_padding_mask=True, seq_len_q=ts["SEQ_LEN_Q"], seq_len_kv=ts["SEQ_LEN_KV"])
    dq, dk, dv = g.sdpa_backward(ts["Q"], ts["K"], ts["V"], ts["O"], ts["dO"], ts["Stats"], **kw)
    for name, ct in (("dQ", dq), ("dK", dk), ("dV", dv)):
        ct.set_output(True).set_dim(list(outs[name].shape)).set_stride(list(outs[name].stride()))
    if "dBias" in ts:
        ts["dBias"].set_output(True)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    ws = torch.empty(g.get_workspace_size(), device="cuda", dtype=torch.uint8)
    pack = {ts[n]: x[n] for n in ts if n in x}
    pack.update({dq: outs["dQ"], dk: outs["dK"], dv: outs["dV"]})
    if "dBias" in ts:
        pack[ts["dBias"]] = outs["dBias"]
    return lambda: g.execute(pack, ws, handle=handle)


def row(name: str) -> dict[str, Any]:
    sq, skv, kw, opt = CONFIGS[name]
    b = max(1, TOKENS // sq)
    r: dict[str, Any] = {"config": name, "B": b}
    g, t = _graph(sq, skv, b, kw, opt)
    if "dBias" in t:  # cuDNN's dBias is stored in the io type
        t["dBias"].set_data_type(hg.DataType.BFLOAT16)
    g.build()
    r["default_engine"] = g.get_plan_name()
    r["refusal"] = g.get_engine_refusals().get(ENGINE, "")
    g.set_preferred_engine_id_ext(ENGINE).build()
    x = _inputs(t, sq, skv, b, opt)
    outs = {n: torch.empty(t[n].dim, device="cuda", dtype=BF16) for n in ("dQ", "dK", "dV")}
    if "dBias" in t:
        outs["dBias"] = torch.empty(t["dBias"].dim, device="cuda", dtype=BF16)
    pack = {**{t[n]: v for n, v in x.items() if n in t}, **{t[n]: v for n, v in outs.items()}}
    fns = {"execute": lambda: g.execute(pack)}
    if g.get_plan_name() != ENGINE:
        r["error"] = f"{ENGINE} refused: {r['refusal']}"
        return r
    eager_g, eager_t = _graph(sq, skv, b, kw, opt)
    if "dBias" in eager_t:
        eager_t["dBias"].set_data_type(hg.DataType.BFLOAT16)
    eager_g.set_preferred_engine_id_ext(ENGINE).build()
    eager_g._state.active.plan.replay.refuse("benchmark: eager")  # type: ignore[union-attr]
    eager_pack = {eager_t[n]: v for n, v in x.items() if n in eager_t}
    eager_pack.update({eager_t[n]: v for n, v in outs.items()})
    fns["eager"] = lambda: eager_g.execute(eager_pack)
    try:
        # into the same outputs: at 16k a second dBias would be 8 GiB more
        fns["direct"] = direct_cudnn(x, opt, outs)
    except Exception as exc:
        r["direct_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    flex_g, flex_t = _graph(sq, skv, b, kw, opt)
    flex_g.set_preferred_engine_id_ext(FLEX).build()
    if flex_g.get_plan_name() == FLEX:
        flex_pack = {flex_t[n]: v for n, v in x.items() if n in flex_t}
        flex_pack.update({flex_t[n]: torch.empty_like(v) for n, v in outs.items() if n != "dBias"})
        if "dBias" in flex_t:
            flex_pack[flex_t["dBias"]] = torch.empty(flex_t["dBias"].dim, device="cuda")
        fns["flex"] = lambda: flex_g.execute(flex_pack)
    ms = interleaved(fns)
    flops = 2.0 * H * _visible(sq, skv, b, kw, opt) * (3 * D + 2 * D)
    for key, value in ms.items():
        r[f"{key}_tflops"] = flops / value / 1e9
    if "direct" in ms:
        r["execute_over_direct"] = ms["execute"] / ms["direct"]
    return r


def host_bound_1k() -> dict[str, Any]:
    """Causal backward at S = 1k: execute on the default engine vs the fastest aten backward."""
    from torch_backend import direct_aten

    b, s = 16, 1024
    g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    names = ("Q", "K", "V", "O", "dO")
    t = {n: g.tensor(name=n, dim=[b, H, s, D]) for n in names}
    t["Stats"] = g.tensor(name="Stats", dim=[b, H, s, 1], data_type=hg.DataType.FLOAT)
    grads = g.sdpa_backward(*(t[n] for n in (*names[:3], "O", "dO", "Stats")),
                            use_causal_mask=True)  # fmt: skip
    for x_ in grads:
        x_.set_output(True)
    g.build()
    torch.manual_seed(0)
    x = {n: torch.randn(b, H, s, D, device="cuda", dtype=BF16) for n in ("Q", "K", "V", "dO")}
    o, lse = torch.ops.aten._scaled_dot_product_flash_attention(
        x["Q"], x["K"], x["V"], 0.0, True, False, scale=1 / math.sqrt(D)
    )[:2]
    x["O"], x["Stats"] = o, lse.unsqueeze(-1).float()
    outs = [torch.empty_like(x["Q"]) for _ in range(3)]
    pack = {**{t[n]: x[n] for n in t}, **dict(zip(grads, outs, strict=True))}
    ops = direct_aten(x["Q"], x["K"], x["V"], x["dO"], True, 1 / math.sqrt(D), o=o)
    ms = interleaved({"execute": lambda: g.execute(pack), **ops})
    fastest = min((n for n in ms if n != "execute"), key=lambda n: ms[n])
    flops = 2.0 * H * b * hg.backend.visible_pairs(s, s, hg.MaskWindow(right_bound=0)) * 5 * D
    return {
        "engine": g.get_plan_name(),
        "execute_ms": ms["execute"],
        "execute_tflops": flops / ms["execute"] / 1e9,
        "fastest_aten": fastest,
        "aten_ms": ms[fastest],
        "execute_over_aten": ms["execute"] / ms[fastest],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    rows = []
    print("| config | B | default engine | execute TFLOP/s | eager execute | direct cudnn-frontend "
          "| execute/direct | flex engine |")  # fmt: skip
    print("|---" * 8 + "|")
    for name in QUICK if args.quick else NAMES:
        with config_memory(name, torch) as mem:
            try:
                r = row(name)
            except Exception as exc:  # a failing configuration is a finding: report, go on
                r = {"config": name, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        r.update(mem)
        rows.append(r)
        if "error" in r:
            print(f"| {name} | error: {r['error']} |", flush=True)
            continue
        print(f"| {name} | {r['B']} | {r['default_engine']} | {r['execute_tflops']:.0f} | "
              f"{r.get('eager_tflops', math.nan):.0f} | {r.get('direct_tflops', math.nan):.0f} | "
              f"{r.get('execute_over_direct', math.nan):.3f} | "
              f"{r.get('flex_tflops', math.nan):.0f} |", flush=True)  # fmt: skip
    h = host_bound_1k()
    print(f"S=1k causal backward: {h['engine']} execute {h['execute_ms'] * 1e3:.1f} us "
          f"({h['execute_tflops']:.0f} TFLOP/s), fastest aten ({h['fastest_aten']}) "
          f"{h['aten_ms'] * 1e3:.1f} us: {h['execute_over_aten']:.3f}x")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "host_1k": h}, indent=1))


if __name__ == "__main__":
    main()
