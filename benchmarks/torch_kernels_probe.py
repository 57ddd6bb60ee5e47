"""Probe torch's fused SDPA ops and the torch kernels on a GPU; print facts, write JSON.

Run on the device machine (no network, no pydantic needed: hipdnn_graph is never imported)::

    python3 benchmarks/torch_kernels_probe.py [--out DIR] [--quick]

Sections: environment; op schemas; measured capabilities per (device, dtype) with the error text
of each refused feature; raw facts (LSE shapes of each op's own forward, dense and varlen); the
fused wrappers' forward+backward error against a float64 reference over a feature matrix;
backward TFLOP/s of each wrapper vs the direct aten call on the same tensors; the math kernel's
TFLOP/s; host time per call. FLOPs = 2·B·H·N·(3·D + 2·Dv), N = visible (query, key) pairs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT), str(_ROOT / "backends")]  # run from a checkout, installed or not

import torch  # noqa: E402

from hipdnn_graph_torch_rocm.kernels import fused, probe  # noqa: E402
from hipdnn_graph_torch_rocm.kernels import math as tm  # noqa: E402
from hipdnn_graph_torch_rocm.kernels.call import SdpaCall  # noqa: E402

OPS = [
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_cudnn_attention_backward",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_efficient_attention_backward",
    "_flash_attention_forward",
    "_flash_attention_backward",
    "_efficient_attention_forward",
    "_efficient_attention_backward",
    "_cudnn_attention_forward",
    "_cudnn_attention_backward",
    "bmm",
]
RESULTS: dict[str, Any] = {}
DEV = "cuda"


def section(name: str) -> Any:
    def deco(fn: Any) -> Any:
        def run(*a: Any, **k: Any) -> None:
            print(f"\n===== {name} =====", flush=True)
            t0 = time.perf_counter()
            try:
                RESULTS[name] = fn(*a, **k)
            except Exception as e:  # keep going: one broken section must not lose the rest
                traceback.print_exc()
                RESULTS[name] = {"error": f"{type(e).__name__}: {e}"}
            print(f"[{name}: {time.perf_counter() - t0:.1f}s]", flush=True)

        return run

    return deco


@section("environment")
def environment() -> dict[str, Any]:
    env = {
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "capability": torch.cuda.get_device_capability() if torch.cuda.is_available() else None,
        "lowp_bmm_bf16": tm.lowp_matmul_supported("cuda", torch.bfloat16),
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except Exception:
        env["triton"] = None
    print(json.dumps(env, indent=1))
    return env


@section("schemas")
def schemas() -> dict[str, Any]:
    out = {}
    for name in OPS:
        try:
            op = getattr(torch.ops.aten, name)
            out[name] = [str(getattr(op, ov)._schema) for ov in op.overloads()]
        except Exception as e:
            out[name] = [f"missing: {e}"]
        for s in out[name]:
            print(s)
    return out


@section("capabilities")
def caps() -> dict[str, Any]:
    out = {}
    for dt in (torch.bfloat16, torch.float16):
        t0 = time.perf_counter()
        c = fused.capabilities("cuda", dt)
        out[str(dt)] = {"probe_seconds": time.perf_counter() - t0}
        for op, v in c.items():
            d = {k: (list(x) if isinstance(x, tuple) else x) for k, x in v.__dict__.items()}
            d["op"] = op.value
            out[str(dt)][op.value] = d
            print(str(dt), json.dumps(d, default=str))
        print(f"probe time {out[str(dt)]['probe_seconds']:.2f}s")
    return out


@section("raw_facts")
def raw_facts() -> dict[str, Any]:
    """Own-forward LSE shapes and alignment of the top-level SDPA ops (no wrappers)."""
    dev, dt = "cuda", torch.bfloat16
    out: dict[str, Any] = {}
    b, h, sq, skv, d = 2, 4, 72, 136, 64
    q = torch.randn(b, h, sq, d, device=dev, dtype=dt)
    k = torch.randn(b, h, skv, d, device=dev, dtype=dt)
    a = torch.ops.aten
    for name, fn in (
        ("cudnn", lambda: a._scaled_dot_product_cudnn_attention(q, k, k, None, True, 0.0, False)),
        ("flash", lambda: a._scaled_dot_product_flash_attention(q, k, k, 0.0, False)),
        ("efficient", lambda: a._scaled_dot_product_efficient_attention(q, k, k, None, True)),
    ):
        try:
            r = fn()
            out[f"{name}_sdpa_lse_shape"] = list(r[1].shape)
            out[f"{name}_sdpa_out_stride"] = list(r[0].stride())
            extra = [
                (type(x).__name__, list(x.shape), str(x.dtype), str(x.device))
                if isinstance(x, torch.Tensor)
                else x
                for x in r[2:]
            ]
            out[f"{name}_sdpa_other_outputs"] = extra
        except Exception as e:
            out[f"{name}_sdpa"] = f"{type(e).__name__}: {str(e)[:200]}"
    # varlen LSE shapes
    lens = torch.tensor([40, 72], dtype=torch.int32, device=dev)
    cu = torch.zeros(3, dtype=torch.int32, device=dev)
    cu[1:] = torch.cumsum(lens, 0)
    qp = torch.randn(112, h, d, device=dev, dtype=dt)
    try:
        r = a._flash_attention_forward(qp, qp, qp, cu, cu, 72, 72, 0.0, False, False)
        out["flash_varlen_lse_shape"] = list(r[1].shape)
        out["flash_rng_state"] = [list(r[2].shape), str(r[2].dtype), str(r[2].device)]
    except Exception as e:
        out["flash_varlen"] = f"{type(e).__name__}: {str(e)[:200]}"
    try:
        r = a._efficient_attention_forward(
            qp[None], qp[None], qp[None], None, cu, cu, 72, 72, 0.0, 0, True
        )
        out["efficient_varlen_lse_shape"] = list(r[1].shape)
        out["efficient_seed"] = [list(r[2].shape), str(r[2].dtype), str(r[2].device)]
    except Exception as e:
        out["efficient_varlen"] = f"{type(e).__name__}: {str(e)[:200]}"
    # cudnn with enable_gqa-style heads (Hk < H), direct
    try:
        kk = torch.randn(b, 1, skv, d, device=dev, dtype=dt)
        r = a._scaled_dot_product_cudnn_attention(q, kk, kk, None, True, 0.0, False)
        out["cudnn_gqa_forward"] = list(r[0].shape)
    except Exception as e:
        out["cudnn_gqa_forward"] = f"{type(e).__name__}: {str(e)[:200]}"
    print(json.dumps(out, indent=1, default=str))
    return out


def _mk(b: int, h: int, hk: int, sq: int, skv: int, d: int, dt: Any, seed: int = 0) -> Any:
    g = torch.Generator(device=DEV).manual_seed(seed)
    q = torch.randn(b, h, sq, d, device=DEV, dtype=dt, generator=g)
    k = torch.randn(b, hk, skv, d, device=DEV, dtype=dt, generator=g)
    v = torch.randn(b, hk, skv, d, device=DEV, dtype=dt, generator=g)
    do = torch.randn(b, h, sq, d, device=DEV, dtype=dt, generator=g)
    return q, k, v, do


MATRIX = {
    "none": (96, 96, {}),
    "causal_tl": (64, 160, {"right_bound": 0}),
    "causal_br": (64, 160, {"right_bound": 0, "bottom_right": True}),
    "causal_br_sq>skv": (160, 64, {"right_bound": 0, "bottom_right": True}),
    "bias": (96, 112, {"bias": (8, 96, 112)}),
    "bias+dbias": (96, 112, {"bias": (1, 8, 1, 112), "dbias_shape": (1, 8, 1, 112)}),
    "padding": (96, 112, {"seq_len_q": [96, 50], "seq_len_kv": [70, 112]}),
    "padding_causal_br": (
        96,
        112,
        {"seq_len_q": [96, 50], "seq_len_kv": [70, 112], "right_bound": 0, "bottom_right": True},
    ),
    "window_br": (64, 160, {"left_bound": 24, "right_bound": 0, "bottom_right": True}),
    "band_br": (64, 160, {"left_bound": 24, "right_bound": 8, "bottom_right": True}),
    "odd_sizes": (72, 100, {}),
    "odd_bias+dbias": (72, 100, {"bias": (1, 8, 72, 100), "dbias_shape": (1, 8, 72, 100)}),
    "odd_causal_br": (72, 100, {"right_bound": 0, "bottom_right": True}),
}


@section("accuracy")
def accuracy() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dt in (torch.bfloat16, torch.float16):
        for heads, (h, hk) in {"mha": (8, 8), "gqa4": (8, 2), "mqa": (8, 1)}.items():
            for mname, (sq, skv, feats) in MATRIX.items():
                q, k, v, do = _mk(2, h, hk, sq, skv, 64, dt)
                fixed = {key: feats[key] for key in ("bottom_right", "left_bound", "right_bound",
                                                     "dbias_shape") if key in feats}  # fmt: skip
                call = SdpaCall(0.125, **fixed)
                kw: dict[str, Any] = {}
                if "bias" in feats:
                    kw["bias"] = torch.randn(*feats["bias"], device=DEV, dtype=dt)
                for key in ("seq_len_q", "seq_len_kv"):
                    if key in feats:
                        kw[key] = torch.tensor(feats[key], device=DEV, dtype=torch.int32)
                f64 = [x.double() for x in (q, k, v, do)]
                o_ref, st_ref = tm.sdpa_forward(*f64[:3], call, **kw, compute_dtype=torch.float64)
                o_in = o_ref.to(dt)
                g_ref = tm.sdpa_backward(
                    *f64[:3], o_in.double(), f64[3], st_ref, call, **kw,
                    compute_dtype=torch.float64,
                )  # fmt: skip
                for op in fused.FusedOp:
                    key = f"{dt}|{heads}|{mname}|{op.value}"
                    reasons = {}
                    for fwd in (True, False):
                        case = fused.FusedSdpaCase.from_tensors(q, k, v, call, forward=fwd, **kw)
                        reasons[fwd] = fused.check(op, case)
                    if reasons[True] is not None and reasons[False] is not None:
                        out[key] = {"refused": reasons[False]}
                        continue
                    try:
                        res: dict[str, Any] = {}
                        fin = torch.isfinite(st_ref)
                        if reasons[True] is None:
                            o, st = fused.forward(op, q, k, v, call, **kw, check=False)
                            res["o"] = _rel(o, o_ref)
                            res["stats"] = _rel(st[fin], st_ref[fin]) if bool(fin.any()) else 0.0
                            res["stats_inf_pattern_ok"] = bool(torch.equal(torch.isinf(st), ~fin))
                        else:
                            res["forward_refused"] = reasons[True]
                        if reasons[False] is None:
                            grads = fused.backward(
                                op, q, k, v, o_in, do, st_ref.float(), call, **kw, check=False
                            )
                            names = ("dq", "dk", "dv", "dbias")
                            for n, a, b in zip(names, grads, g_ref, strict=True):
                                if b is not None and (n != "dbias" or call.dbias_shape):
                                    res[n] = _rel(a, b) if a is not None else math.inf
                        else:
                            res["backward_refused"] = reasons[False]
                        out[key] = res
                    except Exception as e:
                        out[key] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    worst: dict[str, float] = {}
    for key, r in out.items():
        nums = [x for n, x in r.items() if isinstance(x, float) and n != "stats"]
        if nums:
            worst[key] = max(nums)
        print(key, json.dumps(r, default=str))
    bad = {k: v for k, v in worst.items() if not v < 1e-2}
    print("entries with max rel err >= 1e-2:", json.dumps(bad, indent=1))
    return out


def _rel(a: Any, b: Any) -> float:
    a, b = a.double(), b.double()
    if not bool(torch.isfinite(a).all()):
        return math.inf
    return float((a - b).abs().max()) / max(float(b.abs().max()), 1e-30)


def _time(fn: Any, reps: int) -> float:
    """Milliseconds per call: ``reps`` calls back to back between two CUDA events (the GPU
    queue stays full, so host time per call is hidden when it is below the kernel time)."""
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    torch.cuda.synchronize()
    return float(s.elapsed_time(e)) / reps


def _flops(b: int, h: int, s: int, d: int, causal: bool) -> float:
    n = s * (s + 1) // 2 if causal else s * s
    return 2.0 * b * h * n * (3 * d + 2 * d)


def _bench_one(d: int, s: int, causal: bool) -> tuple[str, dict[str, Any]]:
    a = torch.ops.aten
    dt = torch.bfloat16
    b, h = 16384 // s, 2048 // d
    tag = f"D={d} S={s} B={b} H={h} causal={causal}"
    q, k, v, do = _mk(b, h, h, s, s, d, dt)
    scale = 1.0 / math.sqrt(d)
    fl = _flops(b, h, s, d, causal)
    call = SdpaCall(scale, right_bound=0 if causal else None)
    row: dict[str, Any] = {}
    reps = 10 if s <= 4096 else 5
    # direct aten: own forward, then backward on the same tensors
    try:
        o, lse, cq, ck, mq, mk, seed, off, _ = a._scaled_dot_product_cudnn_attention(
            q, k, v, None, True, 0.0, causal, False, scale=scale
        )
        ms = _time(
            lambda: a._scaled_dot_product_cudnn_attention_backward(
                do,
                q,
                k,
                v,
                o,
                lse,
                seed,
                off,
                None,
                cq,
                ck,
                mq,
                mk,
                0.0,
                causal,
                scale=scale,
            ),
            reps,
        )
        row["aten_cudnn"] = fl / ms / 1e9
        o_c, lse_c = o, lse
    except Exception as e:
        row["aten_cudnn"] = f"{type(e).__name__}: {str(e)[:150]}"
        o_c = lse_c = None
    try:
        o, lse, cq, ck, mq, mk, rng, un, _ = a._scaled_dot_product_flash_attention(
            q, k, v, 0.0, causal, False, scale=scale
        )
        ms = _time(
            lambda: a._scaled_dot_product_flash_attention_backward(
                do, q, k, v, o, lse, cq, ck, mq, mk, 0.0, causal, rng, un, scale=scale
            ),
            reps,
        )
        row["aten_flash"] = fl / ms / 1e9
    except Exception as e:
        row["aten_flash"] = f"{type(e).__name__}: {str(e)[:150]}"
    try:
        o, lse, seed, off = a._scaled_dot_product_efficient_attention(
            q, k, v, None, True, 0.0, causal, scale=scale
        )
        ms = _time(
            lambda: a._scaled_dot_product_efficient_attention_backward(
                do,
                q,
                k,
                v,
                None,
                o,
                lse,
                seed,
                off,
                0.0,
                [True, True, True, False],
                causal,
                scale=scale,
            ),
            reps,
        )
        row["aten_efficient"] = fl / ms / 1e9
    except Exception as e:
        row["aten_efficient"] = f"{type(e).__name__}: {str(e)[:150]}"
    # wrappers fed with a user O/Stats (math-free: take flash's own forward)
    try:
        o_u, st_u = fused.forward(fused.FusedOp.FLASH, q, k, v, call)
    except Exception:
        o_u = st_u = None
    if o_u is None and o_c is not None and lse_c is not None:
        o_u, st_u = o_c, lse_c.reshape(b, h, s, 1).float()
    if o_u is not None:
        o_u = o_u.contiguous()  # the user's O: a packed [B,H,S,Dv] buffer
    for op in fused.FusedOp:
        try:
            reason = fused.check(op, fused.FusedSdpaCase.from_tensors(q, k, v, call))
            if reason is not None:
                row[f"wrap_{op.value}"] = f"refused: {reason}"
                continue
            ms = _time(
                lambda op=op: fused.backward(op, q, k, v, o_u, do, st_u, call, check=False),
                reps,
            )
            row[f"wrap_{op.value}"] = fl / ms / 1e9
        except Exception as e:
            row[f"wrap_{op.value}"] = f"{type(e).__name__}: {str(e)[:150]}"
    # math kernel (S = 4k only for the exact fp32 path; both paths at 4k)
    if s <= 4096 and o_u is not None:
        for mode, mm in (("math_fp32", None), ("math_bf16_tc", dt)):
            try:
                ms = _time(
                    lambda mm=mm: tm.sdpa_backward(q, k, v, o_u, do, st_u, call, matmul_dtype=mm),
                    3,
                )
                row[mode] = fl / ms / 1e9
                ms = _time(
                    lambda mm=mm: tm.sdpa_forward(q, k, v, call, matmul_dtype=mm),
                    3,
                )
                row[mode + "_fwd"] = fl * 2 / 5 / ms / 1e9
            except Exception as e:
                row[mode] = f"{type(e).__name__}: {str(e)[:150]}"
    print(
        tag,
        json.dumps({k: (round(v, 1) if isinstance(v, float) else v) for k, v in row.items()}),
    )
    return tag, row


@section("throughput")
def throughput(quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    configs = [(128, 4096), (128, 16384)] if not quick else [(128, 4096)]
    for d, s in configs:
        for causal in (False, True):
            tag, row = _bench_one(d, s, causal)
            out[tag] = row
            torch.cuda.empty_cache()
    return out


@section("host_overhead")
def host_overhead() -> dict[str, Any]:
    """Host microseconds per call for a tiny problem (GPU work is asynchronous)."""
    a = torch.ops.aten
    q, k, v, do = _mk(1, 2, 2, 64, 64, 64, torch.bfloat16)
    o, st = fused.forward(fused.FusedOp.FLASH, q, k, v, scale=0.125)
    out = {}
    o2, lse, cq, ck, mq, mk, rng, un, _ = a._scaled_dot_product_flash_attention(
        q, k, v, 0.0, False, False, scale=0.125
    )
    calls = {
        "aten_flash_sdpa_backward": lambda: a._scaled_dot_product_flash_attention_backward(
            do, q, k, v, o2, lse, cq, ck, mq, mk, 0.0, False, rng, un, scale=0.125
        ),
    }
    for op in fused.FusedOp:
        calls[f"wrap_{op.value}_check=False"] = lambda op=op: fused.backward(
            op, q, k, v, o, do, st, scale=0.125, check=False
        )
        calls[f"wrap_{op.value}_check=True"] = lambda op=op: fused.backward(
            op, q, k, v, o, do, st, scale=0.125
        )
    for name, fn in calls.items():
        try:
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
            n = 300
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            out[name] = (t1 - t0) / n * 1e6
        except Exception as e:
            out[name] = f"{type(e).__name__}: {str(e)[:150]}"
        print(name, out[name])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip", default="", help="comma-separated sections to skip")
    args = ap.parse_args()
    skip = set(args.skip.split(",")) if args.skip else set()
    environment()
    if not torch.cuda.is_available():
        global DEV
        DEV = "cpu"
        print("no GPU: dry run of the accuracy section on CPU (every fused op refuses)")
        accuracy()
    else:
        for name, fn in (
            ("schemas", schemas),
            ("capabilities", caps),
            ("raw", raw_facts),
            ("accuracy", accuracy),
            ("host", host_overhead),
        ):
            if name not in skip:
                fn()
        if "throughput" not in skip:
            throughput(args.quick)
    RESULTS["probe_cache_keys"] = [str(k) for k in probe._CACHE]
    path = Path(args.out) / "torch_kernels_probe.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(RESULTS, indent=1, default=str))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
