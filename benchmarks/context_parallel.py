"""Context-parallel attention on W GPUs against the same op on one GPU with the whole sequence.

Run with ``torchrun --nproc_per_node=W benchmarks/context_parallel.py [--quick] [--json OUT]``
(W = 1 also runs as plain ``python benchmarks/context_parallel.py``: a process group of one).
For each total sequence length S (32k, 64k and 128k by default; ``--seqs``), bf16, B = 1,
H = 16 heads, D = 128, causal, it times forward + backward (median wall time of one call and
its backward, each rank synchronized and started together; the slowest rank counts) of:

* ``single``: :func:`hipdnn_graph.torch.scaled_dot_product_attention` on the whole sequence on
  one GPU (every rank runs it on its own GPU at the same time; no communication);
* ``cp``: :func:`hipdnn_graph.torch.distributed.context_parallel_attention` over the W ranks,
  each holding S/W tokens (zigzag layout by default);
* ``cp_local`` (W > 1): the same with every ring exchange replaced by a local copy of the same
  tensors (identical compute, no communication; its values are wrong and unused).

It prints ``speedup = single / cp``, the parallel efficiency ``speedup / W``, and the
communication share ``1 − cp_local / cp`` (the part of the step that communication adds, i.e.
what the overlap does not hide). With W = 1, ``cp`` is the op through a group of one and the
row's ``ratio = cp / single`` is the overhead of the distributed entry point (target ≤ 1.02).
Calls alternate between the variants so that clock drift hits all alike.

Before timing, a check runs ``cp`` on a short sequence (1024·W tokens) and compares its gathered
output and gradients with the op on the whole sequence in float32; the script prints the errors
and exits with status 1 when they exceed twice the op's own error in the benchmark dtype plus
5e-3.

``--profile TRACE`` then profiles one ``cp`` call and its backward at the longest sequence on
every rank (``torch.profiler``), prints per rank the time of the communication kernels (NCCL)
and the part of it that runs while a compute kernel runs on the same GPU (the overlap), and
writes rank 0's Chrome trace to ``TRACE``.

NVLink multicast stays off (``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``),
whatever the environment says.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

# Before torch loads NCCL: never NVLink multicast (NVLS) on the lent machines.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"

import torch
import torch.distributed as dist

import hipdnn_graph.torch as hgt
from hipdnn_graph.torch.distributed import (
    context_parallel_attention,
    gather_sequence,
    shard_sequence,
)
from hipdnn_graph.torch.distributed._group import local_copies


@dataclass
class Row:
    seq: int
    local_seq: int
    single_ms: float = 0.0
    cp_ms: float = 0.0
    cp_local_ms: float | None = None
    speedup: float = 0.0
    efficiency: float = 0.0
    comm_share: float | None = None
    ratio: float | None = None  # W = 1: cp (group of one) / single (plain op)
    comm_mib_per_rank: float = 0.0
    engines: list[str] = field(default_factory=list)


def init() -> tuple[int, int, torch.device]:
    """The process group (torchrun's, or one of a single process) and this rank's device."""
    if "RANK" not in os.environ:  # plain python: a group of one
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0",
                          WORLD_SIZE="1", LOCAL_RANK="0")  # fmt: skip
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:  # a smoke run of the script on CPUs
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return dist.get_rank(), dist.get_world_size(), device


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def step_ms(fn: Callable[[], None], device: torch.device, world: int) -> float:
    """One call of ``fn`` after every rank is ready; the slowest rank's milliseconds."""
    sync(device)
    if world > 1:
        dist.barrier()
    start = time.perf_counter()
    fn()
    sync(device)
    elapsed = torch.tensor([(time.perf_counter() - start) * 1e3], device=device)
    if world > 1:
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed.item())


def fwd_bwd(
    attention: Callable[..., torch.Tensor], tensors: list[torch.Tensor], **kw: Any
) -> Callable[[], None]:
    q, k, v, do = tensors

    def run() -> None:
        for t in (q, k, v):
            t.grad = None
        attention(q, k, v, is_causal=True, **kw).backward(do)

    return run


def inputs(seq: int, heads: int, dim: int, dtype: torch.dtype, device: torch.device, seed: int):
    g = torch.Generator(device=device).manual_seed(seed)
    shape = (1, heads, seq, dim)
    out = [torch.randn(shape, generator=g, device=device, dtype=dtype) for _ in range(4)]
    for t in out[:3]:
        t.requires_grad_()
    return out


def check(args: argparse.Namespace, world: int, device: torch.device) -> dict[str, Any]:
    """Before timing: outputs and gradients of ``cp`` on a short sequence (1024·W tokens) against
    the op on the whole sequence in float32; passes when the errors are at most twice the op's
    own error in the benchmark dtype plus 5e-3 (the margin of the op's GPU tests)."""
    dtype = getattr(torch, args.dtype)
    seq = 1024 * world
    g = torch.Generator(device=device).manual_seed(1234)  # the same tensors on every rank
    full = [torch.randn(1, args.heads, seq, args.dim, generator=g, device=device)
            for _ in range(4)]  # fmt: skip

    def op(tensors: list[torch.Tensor], attention: Callable[..., torch.Tensor], **kw: Any):
        leaves = [t.detach().clone().requires_grad_() for t in tensors[:3]]
        out = attention(*leaves, is_causal=True, **kw)
        out.backward(tensors[3])
        return [out.detach()] + [t.grad for t in leaves]

    ref = op(full, hgt.scaled_dot_product_attention)
    low = [t.to(dtype) for t in full]
    plain = op(low, hgt.scaled_dot_product_attention)
    local = [shard_sequence(t, layout=args.layout) for t in low]
    parts = op(local, context_parallel_attention, layout=args.layout)
    cp = [gather_sequence(t, layout=args.layout) for t in parts]
    names = ("out", "dq", "dk", "dv")
    op_err = {
        n: (a.float() - r).abs().max().item() for n, a, r in zip(names, plain, ref, strict=True)
    }
    cp_err = {n: (a.float() - r).abs().max().item() for n, a, r in zip(names, cp, ref, strict=True)}
    ok = all(cp_err[n] <= 2 * op_err[n] + 5e-3 for n in names)
    return {"seq": seq, "op_error": op_err, "cp_error": cp_err, "passed": ok}


def measure_seq(seq: int, args: argparse.Namespace, world: int, rank: int, device: torch.device,
                rounds: int, warmup: int, reps: int) -> Row:  # fmt: skip
    dtype = getattr(torch, args.dtype)
    local = seq // world
    row = Row(seq, local)
    whole = inputs(seq, args.heads, args.dim, dtype, device, seed=0)
    mine = whole if world == 1 else inputs(local, args.heads, args.dim, dtype, device, 1 + rank)
    runs: dict[str, Callable[[], None]] = {
        "single": fwd_bwd(hgt.scaled_dot_product_attention, whole),
        "cp": fwd_bwd(context_parallel_attention, mine, layout=args.layout),
    }
    if world > 1:
        runs["cp_local"] = runs["cp"]
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):  # calls alternate between the variants: drift hits all alike
        for i in range(warmup + reps):
            for name, run in runs.items():
                if name == "cp_local":
                    with local_copies():
                        ms = step_ms(run, device, world)
                else:
                    ms = step_ms(run, device, world)
                if i >= warmup:
                    times[name].append(ms)
    row.single_ms = statistics.median(times["single"])
    row.cp_ms = statistics.median(times["cp"])
    row.speedup = row.single_ms / row.cp_ms
    row.efficiency = row.speedup / world
    if world > 1:
        row.cp_local_ms = statistics.median(times["cp_local"])
        row.comm_share = max(0.0, 1.0 - row.cp_local_ms / row.cp_ms)
        # per rank: K and V (io dtype) W−1 times forward and backward; dK, dV W−1 times as
        # float32 accumulators and once, finished, in the io dtype
        kv = 2 * local * args.heads * args.dim
        total = kv * dtype.itemsize * (2 * (world - 1) + 1) + kv * 4 * (world - 1)
        row.comm_mib_per_rank = total / 2**20
    else:
        row.ratio = row.cp_ms / row.single_ms
    row.engines = sorted({e.graph.get_plan_name() for e in hgt.graph_cache().values()})
    del whole, mine, runs
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def overlap_us(comm: list[tuple[float, float]], compute: list[tuple[float, float]]) -> float:
    """Microseconds of the union of ``comm`` spans that the union of ``compute`` spans covers."""
    busy, total, j = _union(compute), 0.0, 0
    for start, end in _union(comm):
        while j < len(busy) and busy[j][1] <= start:
            j += 1
        k = j
        while k < len(busy) and busy[k][0] < end:
            total += min(end, busy[k][1]) - max(start, busy[k][0])
            k += 1
    return total


def profile(seq: int, args: argparse.Namespace, world: int, rank: int, device: torch.device,
            trace: str) -> dict[str, float]:  # fmt: skip
    """One profiled ``cp`` call and backward: communication kernel time and its overlap."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    dtype = getattr(torch, args.dtype)
    mine = inputs(seq // world, args.heads, args.dim, dtype, device, 1 + rank)
    run = fwd_bwd(context_parallel_attention, mine, layout=args.layout)
    for _ in range(2):
        step_ms(run, device, world)
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step_ms(run, device, world)
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    spans: dict[str, list[tuple[float, float]]] = {"comm": [], "compute": []}
    for e in kernels:
        kind = "comm" if "nccl" in e.name.lower() else "compute"
        spans[kind].append((e.time_range.start, e.time_range.end))
    comm = sum(end - start for start, end in _union(spans["comm"]))
    hidden = overlap_us(spans["comm"], spans["compute"])
    busy = sum(end - start for start, end in _union(spans["compute"]))
    if rank == 0:
        prof.export_chrome_trace(trace)
    return {"rank": rank, "seq": seq, "comm_kernel_ms": comm / 1e3, "overlapped_ms": hidden / 1e3,
            "compute_kernel_ms": busy / 1e3,
            "overlap": hidden / comm if comm else 1.0}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqs", help="total sequence lengths (default 32768,65536,131072)")
    parser.add_argument("--quick", action="store_true", help="32k only, one round, fewer reps")
    parser.add_argument("--json", help="also write the rows as JSON to this path (rank 0)")
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--layout", default="zigzag", choices=["zigzag", "contiguous"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=5, help="timed calls per variant and round")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument(
        "--profile", metavar="TRACE", help="profile one cp call at the longest S; rank 0's trace"
    )
    args = parser.parse_args(argv)
    default = "32768" if args.quick else "32768,65536,131072"
    seqs = [int(s) for s in (args.seqs or default).split(",")]
    rounds, reps, warmup = (1, 3, 1) if args.quick else (args.rounds, args.reps, args.warmup)
    rank, world, device = init()
    for s in seqs:
        if s % (2 * world if args.layout == "zigzag" else world):
            parser.error(f"sequence {s} is not divisible by the {args.layout} layout's chunks")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (smoke run)"
    lead = rank == 0
    if lead:
        print(f"# {world} x {name}, torch {torch.__version__}, Python "
              f"{platform.python_version()}; {args.dtype}, B=1, H={args.heads}, D={args.dim}, "
              f"causal, {args.layout}; forward+backward, median of {rounds} round(s) x {reps}; "
              f"NCCL_NVLS_ENABLE={os.environ['NCCL_NVLS_ENABLE']}")  # fmt: skip
    verdict = check(args, world, device)
    if lead:
        print(f"# check at S={verdict['seq']} against the op in float32: max error of cp "
              + ", ".join(f"{n} {e:.2e}" for n, e in verdict["cp_error"].items())
              + "; of the op in " + args.dtype + " "
              + ", ".join(f"{n} {e:.2e}" for n, e in verdict["op_error"].items())
              + (": passed" if verdict["passed"] else ": FAILED"), flush=True)  # fmt: skip
        print("| S | S/W | 1 GPU ms | W GPUs ms | no-comm ms | speedup | efficiency | "
              "comm share | W=1 ratio | MiB/rank | engines |")  # fmt: skip
        print("|" + "---|" * 11, flush=True)
    rows = []
    for seq in seqs:
        row = measure_seq(seq, args, world, rank, device, rounds, warmup, reps)
        rows.append(row)
        if lead:
            local = "-" if row.cp_local_ms is None else f"{row.cp_local_ms:.2f}"
            share = "-" if row.comm_share is None else f"{100 * row.comm_share:.1f}%"
            ratio = "-" if row.ratio is None else f"{row.ratio:.3f}"
            print(f"| {row.seq} | {row.local_seq} | {row.single_ms:.2f} | {row.cp_ms:.2f} | "
                  f"{local} | {row.speedup:.2f} | {row.efficiency:.2f} | {share} | {ratio} | "
                  f"{row.comm_mib_per_rank:.1f} | {', '.join(row.engines)} |",
                  flush=True)  # fmt: skip
    profiles: list[dict[str, float]] = []
    if args.profile:
        mine = profile(max(seqs), args, world, rank, device, args.profile)
        profiles = [{}] * world
        dist.all_gather_object(profiles, mine)  # every rank's figures, for rank 0 to print
        if lead:
            for p in profiles:
                print(f"# profile S={p['seq']} rank {p['rank']}: communication kernels "
                      f"{p['comm_kernel_ms']:.2f} ms, {100 * p['overlap']:.1f}% of it under "
                      f"compute kernels; compute kernels {p['compute_kernel_ms']:.2f} ms",
                      flush=True)  # fmt: skip
    if lead and args.json:
        meta = {"device": name, "world": world, "torch": torch.__version__,
                "python": platform.python_version(), "dtype": args.dtype, "heads": args.heads,
                "dim": args.dim, "layout": args.layout, "causal": True, "rounds": rounds,
                "reps": reps, "warmup": warmup, "quick": args.quick,
                "nccl_nvls_enable": os.environ["NCCL_NVLS_ENABLE"]}  # fmt: skip
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "check": verdict, "rows": [asdict(r) for r in rows],
                       "profile": profiles}, f,
                      indent=2)  # fmt: skip
    dist.destroy_process_group()
    return 0 if verdict["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
