"""A compiled plan loaded in a fresh process: no planning, support check or compile step, and
its first execute against a warm one (issue 36's target: first ≤ 2× warm).

The parent process builds an SDPA-forward graph, writes its plan with
``Graph.to_compiled_plan_binary()`` and starts a fresh Python process that loads the plan with
``Graph.from_compiled_plan_binary()``, counting every engine ranking, ``Engine.check`` call,
``torch.compile`` call and engine plan build (``build_plan``, or ``deserialize_plan`` for an
engine with compiled-plan hooks: the engine making its plan object from the saved id and knobs),
then times the first execute and the median of warm ones. Both processes
make the same inputs from one seed; the child's output checksum must equal the parent's.

    python benchmarks/compiled_plans.py                 # GPU: bf16 2x16x4096x128, best engine
    python benchmarks/compiled_plans.py --engine TORCH_SDPA_FLASH_ENGINE
    python benchmarks/compiled_plans.py --small          # CPU smoke run, best CPU engine
    python benchmarks/compiled_plans.py --small --engine NUMPY_REFERENCE_ENGINE
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.backend import engine_id


def build_graph(small: bool) -> tuple[hg.Graph, list[hg.TensorAttributes]]:
    io = hg.DataType.FLOAT if small else hg.DataType.BFLOAT16
    dims = [1, 4, 512, 64] if small else [2, 16, 4096, 128]
    g = hg.Graph(name="compiled_plan_bench", io_data_type=io,
                 intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    q = g.tensor(name="Q", dim=dims)
    k = g.tensor(name="K", dim=dims)
    v = g.tensor(name="V", dim=dims)
    o, _ = g.sdpa(q, k, v, hg.SdpaAttributes().set_name("fwd").set_attn_scale(0.25))
    o.set_output(True)
    return g, [q, k, v, o]


def buffers(tensors: list[hg.TensorAttributes], device: str) -> dict[int, Any]:
    rng = np.random.default_rng(0)
    arrays = {t.get_uid(): rng.standard_normal(t.dim).astype(np.float32) for t in tensors[:3]}
    arrays[tensors[3].get_uid()] = np.zeros(tensors[3].dim, np.float32)
    if device == "cpu":
        return arrays
    import torch

    return {u: torch.from_numpy(a).to(device, torch.bfloat16) for u, a in arrays.items()}


def checksum(value: Any) -> float:
    array = value if isinstance(value, np.ndarray) else value.float().cpu().numpy()
    return float(np.round(np.abs(array).sum(), 3))


def _sync(device: str) -> None:
    if device != "cpu":
        import torch

        torch.cuda.synchronize()


def _counted() -> dict[str, int]:
    """Count engine rankings, support checks and torch.compile calls from here on."""
    from hipdnn_graph.backend.registry import current_registry
    from hipdnn_graph.graph import lifecycle

    counts = {"rankings": 0, "support_checks": 0, "compiles": 0, "plan_builds": 0}

    def counting(key: str, call: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            counts[key] += 1
            return call(*args, **kwargs)

        return wrapped

    lifecycle.rank_engines = counting("rankings", lifecycle.rank_engines)
    names = vars(lifecycle)  # checked_support is imported there by name
    names["checked_support"] = counting("support_checks", names["checked_support"])
    for engine in current_registry().engines():
        # an engine with __slots__ keeps its check(); checked_support still counts the call
        with contextlib.suppress(AttributeError):
            engine.check = counting("support_checks", engine.check)  # type: ignore[method-assign]
            engine.build_plan = counting("plan_builds", engine.build_plan)  # type: ignore[method-assign]
            if hasattr(engine, "deserialize_plan"):
                engine.deserialize_plan = counting("plan_builds", engine.deserialize_plan)
    try:
        import torch
    except ImportError:
        return counts
    torch.compile = counting("compiles", torch.compile)
    return counts


def load(path: Path, small: bool, device: str, repeats: int) -> dict[str, Any]:
    counts = _counted()
    _, tensors = build_graph(small)
    data = path.read_bytes()
    started = time.perf_counter()
    graph = hg.Graph.from_compiled_plan_binary(data)
    load_ms = 1e3 * (time.perf_counter() - started)
    by_name = {t.name: t for t in graph.tensors}
    pack = buffers([by_name[t.name] for t in tensors], device)
    workspace = None
    started = time.perf_counter()
    graph.execute(pack, workspace)
    _sync(device)
    first = time.perf_counter() - started
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        graph.execute(pack, workspace)
        _sync(device)
        times.append(time.perf_counter() - started)
    warm = statistics.median(times)
    out = pack[by_name[tensors[3].name].get_uid()]
    return {"engine": graph.get_plan_name(), "load_ms": load_ms, "first_ms": 1e3 * first,
            "warm_ms": 1e3 * warm, "ratio": first / warm, "checksum": checksum(out),
            **counts}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="CPU smoke run")
    parser.add_argument("--engine", help="the engine to plan on (default: the best ranked)")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--load", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    device = "cpu" if args.small else "cuda"
    if args.load is not None:
        print(json.dumps(load(args.load, args.small, device, args.repeats)))
        return 0
    graph, tensors = build_graph(args.small)
    graph.build_operation_graph()
    if args.engine:
        graph.create_execution_plan_ext(engine_id(args.engine))
    else:
        graph.create_execution_plans()
    graph.build_plans()
    pack = buffers(tensors, device)
    graph.execute(pack, None)
    _sync(device)
    expected = checksum(pack[tensors[3].get_uid()])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plan.bin"
        path.write_bytes(graph.to_compiled_plan_binary())
        command = [sys.executable, __file__, "--load", str(path), "--repeats", str(args.repeats)]
        child = subprocess.run(command + (["--small"] if args.small else []),
                               capture_output=True, text=True, check=False)  # fmt: skip
    if child.returncode != 0:
        print(child.stderr, file=sys.stderr)
        return 1
    r = json.loads(child.stdout.strip().splitlines()[-1])
    header = (
        "engine",
        "load ms",
        "first execute ms",
        "warm ms",
        "first/warm (target <= 2)",
        "rankings",
        "support checks",
        "compiles",
        "engine plan builds",
        "output matches",
    )
    print("| " + " | ".join(header) + " |")
    print("|---" * len(header) + "|")
    print(f"| {r['engine']} | {r['load_ms']:.2f} | {r['first_ms']:.3f} | {r['warm_ms']:.3f} "
          f"| {r['ratio']:.2f} | {r['rankings']} | {r['support_checks']} | {r['compiles']} "
          f"| {r['plan_builds']} | {r['checksum'] == expected} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
