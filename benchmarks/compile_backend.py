"""``torch.compile(backend="hipdnn")`` against eager and Inductor (issue 38's targets): a
ResNet-style CNN block stack (conv, batch norm, ReLU, residual) and a GPT-2 block stack
(layer norm, attention, GELU MLP, residuals), one training step each (forward + backward), and
the share of their matmul/conv/attention FLOPs that ran inside hipDNN graphs (the census).

One line per model and backend: median step time, its ratio to eager and to Inductor, and
the FLOPs share. CUDA events on a GPU (``perf_counter`` on the CPU), warm-up, median of repeats.

    python benchmarks/compile_backend.py                # GPU, bf16, the issue's shapes
    python benchmarks/compile_backend.py --small        # CPU smoke: tiny shapes, fp32, no Inductor
    python benchmarks/compile_backend.py --verbose      # also the ops left to aten, with reasons
    python benchmarks/compile_backend.py --prefer TORCH_EAGER_ENGINE   # no fusion-plan compiles
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

import hipdnn_graph.torch.compile as hgc


class ConvBlock(torch.nn.Module):
    """conv3x3 -> BN -> ReLU -> conv3x3 -> BN, plus the input, -> ReLU (ResNet's basic block)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(channels)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(h)))


class GPT2Block(torch.nn.Module):
    """GPT-2's block: pre-norm causal self-attention and a tanh-GELU MLP, with residuals."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.ln2 = torch.nn.LayerNorm(dim)
        self.fc = torch.nn.Linear(dim, 4 * dim)
        self.out = torch.nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        qkv = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, s, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


@dataclass(frozen=True)
class Workload:
    name: str
    model: Callable[[], torch.nn.Module]
    input_shape: tuple[int, ...]


def _stack(block: Callable[[], torch.nn.Module], count: int) -> Callable[[], torch.nn.Module]:
    return lambda: torch.nn.Sequential(*(block() for _ in range(count)))


def workloads(small: bool) -> list[Workload]:
    if small:
        return [
            Workload("resnet_blocks", _stack(lambda: ConvBlock(8), 2), (2, 8, 8, 8)),
            Workload("gpt2_blocks", _stack(lambda: GPT2Block(32, 2), 2), (2, 16, 32)),
        ]
    return [
        Workload("resnet_blocks", _stack(lambda: ConvBlock(64), 4), (32, 64, 56, 56)),
        Workload("gpt2_blocks", _stack(lambda: GPT2Block(768, 12), 4), (8, 1024, 768)),
    ]


def _timer(device: torch.device) -> Callable[[Callable[[], Any]], float]:
    def timed(step: Callable[[], Any]) -> float:
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end))
        t0 = time.perf_counter()
        step()
        return (time.perf_counter() - t0) * 1e3

    return timed


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Time every workload on every backend; returns one record per line printed."""
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    timed = _timer(device)
    records = []
    for work in workloads(args.small):
        if args.models and work.name not in args.models:
            continue
        torch.manual_seed(0)
        model = work.model().to(device=device, dtype=dtype)
        x = torch.randn(work.input_shape, device=device, dtype=dtype, requires_grad=True)
        times: dict[str, float] = {}
        for backend in args.backends:
            torch._dynamo.reset()
            hgc.reset_census()
            if backend == "eager":
                fn: Callable[..., torch.Tensor] = model
            elif backend == "hipdnn":
                options = {"prefer": args.prefer} if args.prefer else None
                fn = torch.compile(model, backend=hgc.compile_backend, options=options)
            else:
                fn = torch.compile(model, backend=backend)

            def step(fn: Callable[..., torch.Tensor] = fn, x: torch.Tensor = x) -> None:
                fn(x).float().square().mean().backward()

            for _ in range(args.warmup):
                step()
            times[backend] = statistics.median(timed(step) for _ in range(args.repeats))
            record = {"model": work.name, "backend": backend, "ms": times[backend]}
            if backend == "hipdnn":
                record["flops_share"] = hgc.census().flops_fraction()
                record["aten_ops"] = hgc.census().aten_ops()
            records.append(record)
        for record in records:
            if record["model"] != work.name:
                continue
            ratios = [
                f"{record['ms'] / times[b]:.2f}x {b}" for b in ("eager", "inductor") if b in times
            ]
            share = (
                f"  hipDNN FLOPs {100 * record['flops_share']:.1f} %"
                if "flops_share" in record
                else ""
            )
            head = f"{work.name:14s} {record['backend']:8s} {record['ms']:9.3f} ms"
            print(f"{head}  {'  '.join(ratios)}{share}")
            if args.verbose and "aten_ops" in record:
                for op, why in record["aten_ops"].items():
                    print(f"    aten: {op}: {why}")
    return records


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="CPU smoke run: tiny shapes, fp32")
    parser.add_argument("--device", default=None)
    parser.add_argument("--dtype", default=None, help="bfloat16 (GPU default) or float32")
    parser.add_argument("--backends", default=None, help="comma-separated: eager,inductor,hipdnn")
    parser.add_argument("--models", default=None, help="comma-separated: resnet_blocks,gpt2_blocks")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--prefer", default=None, help="engine ranked first for the subgraphs")
    parser.add_argument("--verbose", action="store_true", help="list the ops left to aten")
    args = parser.parse_args(argv)
    args.device = args.device or ("cpu" if args.small else "cuda")
    args.dtype = args.dtype or ("float32" if args.small else "bfloat16")
    default_backends = "eager,hipdnn" if args.small else "eager,inductor,hipdnn"
    args.backends = (args.backends or default_backends).split(",")
    args.models = args.models.split(",") if args.models else None
    args.repeats = args.repeats or (3 if args.small else 20)
    args.warmup = args.warmup or (2 if args.small else 3)
    return args


if __name__ == "__main__":
    run(parse())
