"""A compiled plan loaded in a fresh process: no planning, support check or compile step, and
its first execute against a warm one (issue 36's target: first ≤ 2× warm).

The parent process builds an SDPA-forward graph, writes its plan with
``Graph.to_compiled_plan_binary()`` and starts a fresh Python process that loads the plan with
``Graph.from_compiled_plan_binary()``, counting every engine ranking, ``Engine.check`` call,
``torch.compile`` call and engine plan build (``build_plan``, or ``deserialize_plan`` for an
engine with compiled-plan hooks: the engine making its plan object from the saved id and knobs),
then times the first execute and the median of warm ones (loading warms a plan on torch
tensors, so its kernels are loaded before the first execute: "plan ready ms" includes that run).
Both processes make the same inputs from one seed; the child's output checksum must equal the
parent's. A second fresh process plans the same graph itself (ranking or the named engine,
``build_plans``) as the baseline: what loading the compiled plan saves, and what a first
execute costs anyway there.

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


def _replace_everywhere(original: Any, replacement: Any) -> None:
    """Put ``replacement`` wherever a loaded hipdnn_graph module holds ``original`` by name
    (functions are imported by name from module to module)."""
    for name, module in list(sys.modules.items()):
        if name.startswith("hipdnn_graph") and module is not None:
            names = vars(module)
            for attr, value in list(names.items()):
                if value is original:
                    names[attr] = replacement


def _counted() -> dict[str, int]:
    """Count engine rankings, support checks (``checked_support`` and ``Engine.check`` calls),
    ``torch.compile`` calls and engine plan builds from here on."""
    import hipdnn_graph.graph  # noqa: F401  (every module that ranks or checks, loaded)
    from hipdnn_graph.backend.contract import checked_support
    from hipdnn_graph.backend.registry import current_registry
    from hipdnn_graph.graph.engine_plans import rank_engines

    counts = {"rankings": 0, "support_checks": 0, "compiles": 0, "plan_builds": 0}

    def counting(key: str, call: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            counts[key] += 1
            return call(*args, **kwargs)

        return wrapped

    _replace_everywhere(rank_engines, counting("rankings", rank_engines))
    _replace_everywhere(checked_support, counting("support_checks", checked_support))
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


def _plan(graph: hg.Graph, engine: str | None) -> None:
    graph.build_operation_graph()
    if engine:
        graph.create_execution_plan_ext(engine_id(engine))
    else:
        graph.create_execution_plans()
    graph.build_plans()


def child(path: Path | None, engine: str | None, small: bool, repeats: int) -> dict[str, Any]:
    """In a fresh process: load the plan at ``path`` (None: plan the graph here, the baseline),
    then time the first execute and the warm ones, counting as :func:`_counted` says."""
    device = "cpu" if small else "cuda"
    counts = _counted()
    graph, tensors = build_graph(small)
    started = time.perf_counter()
    if path is not None:
        graph = hg.Graph.from_compiled_plan_binary(path.read_bytes())
    else:
        _plan(graph, engine)
    ready_ms = 1e3 * (time.perf_counter() - started)
    by_name = {t.name: t for t in graph.tensors}
    pack = buffers([by_name[t.name] for t in tensors], device)
    started = time.perf_counter()
    graph.execute(pack, None)
    _sync(device)
    first = time.perf_counter() - started
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        graph.execute(pack, None)
        _sync(device)
        times.append(time.perf_counter() - started)
    warm = statistics.median(times)
    out = pack[by_name[tensors[3].name].get_uid()]
    return {"engine": graph.get_plan_name(), "ready_ms": ready_ms, "first_ms": 1e3 * first,
            "warm_ms": 1e3 * warm, "ratio": first / warm, "checksum": checksum(out),
            **counts}  # fmt: skip


def _fresh(args: argparse.Namespace, *extra: str) -> dict[str, Any]:
    command = [sys.executable, __file__, "--repeats", str(args.repeats), *extra]
    command += ["--small"] if args.small else []
    command += ["--engine", args.engine] if args.engine else []
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


HEADER = (
    "engine",
    "plan",
    "plan ready ms",
    "first execute ms",
    "warm ms",
    "first/warm (target <= 2)",
    "rankings",
    "support checks",
    "compiles",
    "engine plan builds",
    "output matches",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="CPU smoke run")
    parser.add_argument("--engine", help="the engine to plan on (default: the best ranked)")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--load", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--build-here", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.load is not None or args.build_here:
        print(json.dumps(child(args.load, args.engine, args.small, args.repeats)))
        return 0
    device = "cpu" if args.small else "cuda"
    graph, tensors = build_graph(args.small)
    _plan(graph, args.engine)
    pack = buffers(tensors, device)
    graph.execute(pack, None)
    _sync(device)
    expected = checksum(pack[tensors[3].get_uid()])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plan.bin"
        path.write_bytes(graph.to_compiled_plan_binary())
        loaded = _fresh(args, "--load", str(path))
    built = _fresh(args, "--build-here")
    print("| " + " | ".join(HEADER) + " |")
    print("|---" * len(HEADER) + "|")
    for how, r in (("compiled plan loaded", loaded), ("planned in the process", built)):
        print(f"| {r['engine']} | {how} | {r['ready_ms']:.2f} | {r['first_ms']:.3f} "
              f"| {r['warm_ms']:.3f} | {r['ratio']:.2f} | {r['rankings']} "
              f"| {r['support_checks']} | {r['compiles']} | {r['plan_builds']} "
              f"| {r['checksum'] == expected} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
