"""Whole-graph fusion engine against node-by-node eager, and single nodes against torch (issue
25 item 4): one line per case.

For each graph: ``TORCH_FUSION_ENGINE`` (its plan: compiled, or eager where build_plan
measured that faster), ``TORCH_EAGER_ENGINE`` (node by node), and the same math written
directly as a torch function, run eagerly and through ``torch.compile``; for single nodes the
engine against the torch op called directly, through ``Graph.run`` (the engine's result handed
over, as the op's own is) and ``Graph.execute`` into a caller-owned buffer, on the plan the
ranking puts first (a norm: the fusion engine where its race kept the compiled kernel, which
stores into that buffer itself) and on the eager engine (which copies its result there). Graphs run
through ``Graph.execute`` with caller-owned buffers; repeated on the same buffers, ``execute``
replays a CUDA graph of the plan's kernels, so the torch contenders are also timed replayed
from a CUDA graph ("graphed": kernel time without host time) beside their plain calls, and
the fusion plan's kernels are timed the same way ("kernels", divided by the compiled function's
graphed time: kernels against kernels, where ``execute``'s own time includes its host time).
CUDA events on a GPU (``perf_counter`` on the CPU), warm-up, median of repeats.

    python benchmarks/family_fusion.py            # the H200 shapes, bf16
    python benchmarks/family_fusion.py --quick    # fewer repeats
    python benchmarks/family_fusion.py --tiny --device cpu --backend aot_eager   # a smoke run

The graph builders here are also the example graphs of the tests (``tests/torch_family_cases.py``
loads this file).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

import hipdnn_graph as hg

BF16 = hg.DataType.BFLOAT16
EPS = 1e-5


@dataclass
class Case:
    """One benchmark graph: the graph, its input values and the same math as a torch function
    of those values (returning the graph's outputs in order)."""

    name: str
    graph: hg.Graph
    inputs: dict[hg.TensorAttributes, Any]
    outputs: list[hg.TensorAttributes]
    direct: Callable[..., Any]
    single: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def args(self) -> list[Any]:
        return list(self.inputs.values())


def _graph(name: str, io: hg.DataType) -> hg.Graph:
    return hg.Graph(name=name, io_data_type=io, intermediate_data_type=io,
                    compute_data_type=hg.DataType.FLOAT)  # fmt: skip


def _values(shapes: dict[str, tuple[list[int], list[int] | None]], dtype: Any, device: str,
            seed: int) -> dict[str, Any]:  # fmt: skip
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, (dims, strides) in shapes.items():
        v = (torch.randn(dims, generator=gen) * 0.5).to(dtype)
        if strides is not None:
            v = torch.empty_strided(dims, strides, dtype=dtype).copy_(v)
        out[name] = v.to(device)
    return out


def _torch_dtype(io: hg.DataType) -> Any:
    return {hg.DataType.BFLOAT16: torch.bfloat16, hg.DataType.HALF: torch.float16,
            hg.DataType.FLOAT: torch.float32}[io]  # fmt: skip


def rmsnorm_matmul(m: int, k: int, n: int, io: hg.DataType = BF16, device: str = "cpu",
                   seed: int = 0) -> Case:  # fmt: skip
    """RMSNorm over K (scale [1, K]) then a [K, N] projection."""
    dt = _torch_dtype(io)
    g = _graph(f"rmsnorm_matmul_{m}x{k}x{n}", io)
    x, s, w = (
        g.tensor(name="x", dim=[m, k]),
        g.tensor(name="s", dim=[1, k]),
        g.tensor(name="w", dim=[k, n]),
    )
    y, _ = g.rmsnorm(x, s, epsilon=g.tensor(name="eps").set_value(EPS),
                     forward_phase=hg.NormFwdPhase.INFERENCE, name="norm")  # fmt: skip
    c = g.matmul(y, w, name="proj")
    c.set_output(True)
    v = _values({"x": ([m, k], None), "s": ([1, k], None), "w": ([k, n], None)}, dt, device, seed)

    def direct(x: Any, s: Any, w: Any) -> Any:
        x32 = x.float()
        y = (x32 * torch.rsqrt((x32 * x32).mean(-1, keepdim=True) + EPS) * s.float()).to(x.dtype)
        return y @ w

    return Case(g.get_name(), g, {x: v["x"], s: v["s"], w: v["w"]}, [c], direct)


def conv_bias_relu(n: int, c: int, hw: int, io: hg.DataType = BF16, device: str = "cpu",
                   seed: int = 0, channels_last: bool = True) -> Case:  # fmt: skip
    """A 3x3 convolution (padding 1, C -> C channels) + per-channel bias + ReLU."""
    dt = _torch_dtype(io)
    g = _graph(f"conv3x3_bias_relu_n{n}_c{c}_{hw}x{hw}", io)

    def nhwc(dims: list[int]) -> list[int] | None:
        if not channels_last:
            return None
        _, c_, h_, w_ = dims
        return [h_ * w_ * c_, 1, w_ * c_, c_]

    xd, wd, bd = [n, c, hw, hw], [c, c, 3, 3], [1, c, 1, 1]
    x = g.tensor(name="x", dim=xd, stride=nhwc(xd) or hg.generate_strides(xd))
    w = g.tensor(name="w", dim=wd, stride=nhwc(wd) or hg.generate_strides(wd))
    b = g.tensor(name="b", dim=bd)
    y = g.conv_fprop(x, w, name="conv", pre_padding=[1, 1], post_padding=[1, 1], stride=[1, 1],
                     dilation=[1, 1])  # fmt: skip
    h = g.pointwise(y, b, mode=hg.PointwiseMode.ADD, name="bias")
    r = g.pointwise(h, mode=hg.PointwiseMode.RELU_FWD, name="relu")
    r.set_output(True)
    v = _values({"x": (xd, nhwc(xd)), "w": (wd, nhwc(wd)), "b": (bd, None)}, dt, device, seed)

    def direct(x: Any, w: Any, b: Any) -> Any:
        y = F.conv2d(x, w, None, 1, 1)
        return torch.relu(y.float() + b.float()).to(x.dtype)

    return Case(g.get_name(), g, {x: v["x"], w: v["w"], b: v["b"]}, [r], direct)


def matmul_bias_gelu(m: int, k: int, n: int, io: hg.DataType = BF16, device: str = "cpu",
                     seed: int = 0) -> Case:  # fmt: skip
    """``gelu(A @ W + bias)``."""
    dt = _torch_dtype(io)
    g = _graph(f"matmul_bias_gelu_{m}x{k}x{n}", io)
    a, w, b = (
        g.tensor(name="a", dim=[m, k]),
        g.tensor(name="w", dim=[k, n]),
        g.tensor(name="b", dim=[1, n]),
    )
    c = g.matmul(a, w, name="mm")
    h = g.pointwise(c, b, mode=hg.PointwiseMode.ADD, name="bias")
    o = g.pointwise(h, mode=hg.PointwiseMode.GELU_FWD, name="gelu")
    o.set_output(True)
    v = _values({"a": ([m, k], None), "w": ([k, n], None), "b": ([1, n], None)}, dt, device, seed)

    def direct(a: Any, w: Any, b: Any) -> Any:
        h = ((a @ w).float() + b.float()).to(a.dtype)
        return F.gelu(h.float()).to(a.dtype)

    return Case(g.get_name(), g, {a: v["a"], w: v["w"], b: v["b"]}, [o], direct)


def single_matmul(m: int, k: int, n: int, io: hg.DataType = BF16, device: str = "cpu") -> Case:
    dt = _torch_dtype(io)
    g = _graph(f"matmul_{m}x{k}x{n}", io)
    a, w = g.tensor(name="a", dim=[m, k]), g.tensor(name="w", dim=[k, n])
    c = g.matmul(a, w, name="mm")
    c.set_output(True)
    v = _values({"a": ([m, k], None), "w": ([k, n], None)}, dt, device, 1)
    return Case(g.get_name(), g, {a: v["a"], w: v["w"]}, [c], torch.matmul, single=True)


def single_conv(n: int, c: int, hw: int, io: hg.DataType = BF16, device: str = "cpu") -> Case:
    full = conv_bias_relu(n, c, hw, io, device, seed=2)
    g = _graph(f"conv3x3_n{n}_c{c}_{hw}x{hw}", io)
    xt, wt, _ = list(full.inputs)
    x = g.tensor(name="x", dim=xt.dim, stride=xt.stride)
    w = g.tensor(name="w", dim=wt.dim, stride=wt.stride)
    y = g.conv_fprop(x, w, name="conv", pre_padding=[1, 1], post_padding=[1, 1], stride=[1, 1],
                     dilation=[1, 1])  # fmt: skip
    y.set_output(True).set_dim(xt.dim).set_stride(xt.stride)
    vx, vw, _ = full.args()
    return Case(g.get_name(), g, {x: vx, w: vw}, [y], lambda x, w: F.conv2d(x, w, None, 1, 1),
                single=True)  # fmt: skip


def single_layernorm(m: int, k: int, io: hg.DataType = BF16, device: str = "cpu") -> Case:
    dt = _torch_dtype(io)
    g = _graph(f"layernorm_{m}x{k}", io)
    x, s, b = (
        g.tensor(name="x", dim=[m, k]),
        g.tensor(name="s", dim=[1, k]),
        g.tensor(name="b", dim=[1, k]),
    )
    y, _, _ = g.layernorm(x, s, b, hg.LayernormAttributes().set_name("ln")
                          .set_forward_phase(hg.NormFwdPhase.INFERENCE)
                          .set_epsilon(g.tensor(name="eps").set_value(EPS)))  # fmt: skip
    y.set_output(True)
    v = _values({"x": ([m, k], None), "s": ([1, k], None), "b": ([1, k], None)}, dt, device, 3)

    def direct(x: Any, s: Any, b: Any) -> Any:
        return F.layer_norm(x, [k], s.reshape(k), b.reshape(k), EPS)

    return Case(g.get_name(), g, {x: v["x"], s: v["s"], b: v["b"]}, [y], direct, single=True)


def cases(tiny: bool, device: str) -> list[Case]:
    """The issue's cases (``tiny``: the same graphs at toy sizes, for a CPU smoke run)."""
    if tiny:
        return [
            rmsnorm_matmul(16, 32, 24, device=device), rmsnorm_matmul(16, 8, 32, device=device),
            conv_bias_relu(2, 8, 6, device=device), matmul_bias_gelu(16, 8, 8, device=device),
            matmul_bias_gelu(8, 16, 40, device=device), single_matmul(16, 32, 32, device=device),
            single_conv(2, 8, 6, device=device), single_layernorm(16, 32, device=device),
        ]  # fmt: skip
    return [
        rmsnorm_matmul(8192, 4096, 4096, device=device),
        rmsnorm_matmul(8192, 1024, 4096, device=device),
        conv_bias_relu(32, 256, 56, device=device),
        matmul_bias_gelu(8192, 1024, 1024, device=device),
        matmul_bias_gelu(2048, 4096, 11008, device=device),
        single_matmul(8192, 4096, 4096, device=device),
        single_conv(32, 256, 56, device=device),
        single_layernorm(8192, 4096, device=device),
    ]


def median_ms(fn: Callable[[], Any], device: str, warmup: int, repeats: int, calls: int) -> float:
    """Median milliseconds per call over ``repeats`` batches of ``calls`` calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        if device.startswith("cuda"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / calls)
        else:
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            samples.append((time.perf_counter() - t0) * 1e3 / calls)
    return statistics.median(samples)


def graphed_ms(fn: Callable[[], Any], device: str, warmup: int, repeats: int, calls: int) -> float:
    """:func:`median_ms` of ``fn``'s kernels replayed from a CUDA graph (no host time), as
    repeated ``execute`` calls on the same buffers run (CUDA devices only)."""
    from hipdnn_graph_torch_rocm.replay import record_graph

    fn()
    graph = record_graph(fn, device, torch.cuda.Stream(device))
    return median_ms(graph.replay, device, warmup, repeats, calls)


def _pack(case: Case) -> dict[Any, Any]:
    device = next(iter(case.inputs.values())).device
    outs = {
        t: torch.empty_strided(t.dim, t.stride, dtype=_torch_dtype(t.data_type), device=device)
        for t in case.outputs
    }
    return {**case.inputs, **outs}


def run_case(case: Case, device: str, warmup: int, repeats: int, calls: int) -> str:
    """Build the case's plans, time every contender, and return its line."""
    g = case.graph
    if not case.single:  # measured wherever it compiles (on the CPU Inductor defers unless asked)
        g.set_preferred_engine_id_ext("TORCH_FUSION_ENGINE")
    g.build_operation_graph().create_execution_plans()
    names = g.get_engine_names()
    g.build_plans(hg.BuildPlanPolicy.ALL)
    index = {name: i for i, name in enumerate(names)}
    pack = _pack(case)
    args = case.args()
    t: dict[str, float] = {}
    for engine in ("TORCH_FUSION_ENGINE", "TORCH_EAGER_ENGINE"):
        if engine in index:
            i = index[engine]
            t[engine] = median_ms(lambda i=i: g.execute_plan_at_index(pack, None, i), device,
                                  warmup, repeats, calls)  # fmt: skip
    t["direct"] = median_ms(lambda: case.direct(*args), device, warmup, repeats, calls)
    parts = [f"{case.name:<36}"]
    eager = t["TORCH_EAGER_ENGINE"]
    cuda = device.startswith("cuda")

    def graphed(key: str, fn: Callable[[], Any]) -> str:
        """`` (graphed x.xxx)`` beside a figure on CUDA, where kernels can be replayed."""
        if not cuda:
            return ""
        t[f"{key}_graph"] = graphed_ms(fn, device, warmup, repeats, calls)
        return f" (graphed {t[f'{key}_graph']:6.3f})"

    direct_graphed = graphed("direct", lambda: case.direct(*args))
    if case.single:
        inputs = dict(case.inputs)
        t["run"] = median_ms(lambda: g.run(inputs), device, warmup, repeats, calls)
        ranked = names[0]  # what Graph.execute runs: the ranking's first plan
        ran = t[ranked]
        if ranked == "TORCH_FUSION_ENGINE":
            ranked += f"[{g._state.plans[index[ranked]].plan.choice}]"
        vs_graphed = f" (graphed {ran / t['direct_graph']:5.2f})" if cuda else ""
        parts.append(
            f"engine run {t['run']:8.3f} ms  execute on {ranked} {ran:8.3f} ms  "
            f"eager-engine {eager:8.3f} ms  torch op {t['direct']:8.3f} ms{direct_graphed}  "
            f"run/op {t['run'] / t['direct']:5.2f}  execute/op {ran / t['direct']:5.2f}"
            f"{vs_graphed}"
        )
        return "  ".join(parts)
    backend = os.environ.get("HIPDNN_GRAPH_TORCH_COMPILE_BACKEND", "inductor")
    compiled_fn = torch.compile(case.direct, fullgraph=True, dynamic=False, backend=backend)
    t["compiled"] = median_ms(lambda: compiled_fn(*args), device, warmup, repeats, calls)
    compiled_graphed = graphed("compiled", lambda: compiled_fn(*args))
    fusion = t.get("TORCH_FUSION_ENGINE", float("nan"))
    built = g._state.plans[index["TORCH_FUSION_ENGINE"]] if "TORCH_FUSION_ENGINE" in index else None
    plan = None if built is None else built.plan
    choice = getattr(plan, "choice", "refused")
    vs_graphed = ""
    if cuda and built is not None:  # the plan's kernels alone, replayed: kernels against kernels
        bound = built.binder.bind(pack, None)
        kernels = graphed_ms(lambda: plan.run_now(dict(bound)), device, warmup, repeats, calls)
        vs_graphed = f" (kernels {kernels:6.3f} ms: {kernels / t['compiled_graph']:5.2f})"
    parts.append(
        f"fusion[{choice}] {fusion:8.3f} ms  eager-engine {eager:8.3f} ms  "
        f"torch.compile {t['compiled']:8.3f} ms{compiled_graphed}  "
        f"torch eager {t['direct']:8.3f} ms{direct_graphed}  "
        f"eager/fusion {eager / fusion:5.2f}x  fusion/compile {fusion / t['compiled']:5.2f}"
        f"{vs_graphed}"
    )
    return "  ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--tiny", action="store_true", help="toy sizes (a smoke run)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--backend", help="torch.compile backend (default inductor)")
    parser.add_argument("--only", help="run the cases whose name holds this text")
    a = parser.parse_args(argv)
    if a.backend:
        os.environ["HIPDNN_GRAPH_TORCH_COMPILE_BACKEND"] = a.backend
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA or ROCm device; use --device cpu", file=sys.stderr)
        return 2
    # three warm-up calls: an execute on new buffers runs eagerly, the next captures a CUDA
    # graph, later ones replay it (hipdnn_graph_torch_rocm.replay)
    warmup, repeats, calls = (3, 3, 2) if a.quick or a.tiny else (3, 7, 5)
    device = a.device if a.device != "cuda" else f"cuda:{torch.cuda.current_device()}"
    name = torch.cuda.get_device_name() if device != "cpu" else "cpu"
    print(f"# torch {torch.__version__}, device {name}, median of {repeats} x {calls} calls")
    for case in cases(a.tiny, device):
        if a.only and a.only not in case.name:
            continue
        print(run_case(case, device, warmup, repeats, calls), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
