"""Host overhead of ``graph.execute`` for a tiny graph on ``NUMPY_REFERENCE_ENGINE``.

The graph: one SDPA backward node, fp32, ``B=1, H=1, S=16, D=16`` (so the arithmetic is
negligible and what is measured is the path around it). Prints the median µs (and 10th/90th
percentiles) of:

- ``graph.execute``: the whole call (issue 4's target: ≤ 50 µs), without a mask and causal;
- the variant-pack binder alone (checks shapes, strides, dtypes, aliasing; converts buffers);
- the plan alone (the engine's ``execute`` on an already bound pack);
- the math the plan calls (``sdpa_math.presized_backward``'s function: checks done at build
  time) and ``sdpa_math.sdpa_backward`` (all checks per call), called directly;

so that ``execute ≈ frontend (binder + dispatch) + engine glue + math`` (the pieces timed apart
add up to less than the whole: caches are warmer when one piece runs in a loop). With
``--profile`` it also prints where the time goes inside ``graph.execute`` (cProfile, own time).

Run: ``.venv/bin/python benchmarks/numpy_overhead.py [--runs 3000] [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
from timing import samples_us

import hipdnn_graph as hg
from hipdnn_graph_numpy_reference.sdpa_math import presized_backward, sdpa_backward

ENGINE = "NUMPY_REFERENCE_ENGINE"
B, H, S, D = 1, 1, 16, 16
TARGET_US = 50.0


def tiny_graph(causal: bool = False) -> tuple[hg.Graph, dict[Any, Any], dict[str, Any]]:
    g = hg.Graph(
        name="tiny_bwd",
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    t = {n: g.tensor(name=n, dim=[B, H, S, D]) for n in ("Q", "K", "V", "O", "dO")}
    t["Stats"] = g.tensor(name="Stats", dim=[B, H, S, 1])
    grads = g.sdpa_backward(
        t["Q"], t["K"], t["V"], t["O"], t["dO"], t["Stats"], name="bwd", use_causal_mask=causal
    )
    for grad in grads:
        grad.set_output(True)
    g.set_preferred_engine_id_ext(ENGINE).build()
    assert g.get_plan_name() == ENGINE
    rng = np.random.default_rng(0)
    arrays = {n: rng.standard_normal(t[n].get_dim()).astype(np.float32) for n in t}
    arrays["Stats"] = np.abs(arrays["Stats"]) + np.float32(np.log(S))
    pack: dict[Any, Any] = {t[n]: a for n, a in arrays.items()}
    pack.update({grad: np.empty((B, H, S, D), np.float32) for grad in grads})
    return g, pack, arrays


def timed(fn: Callable[[], Any], runs: int) -> tuple[float, float, float]:
    """Median, 10th and 90th percentile of ``fn``'s wall time, in µs."""
    samples = samples_us(fn, runs, warmup=max(50, runs // 10))
    deciles = statistics.quantiles(samples, n=10)
    return statistics.median(samples), deciles[0], deciles[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    g, pack, arrays = tiny_graph()
    g_causal, pack_causal, _ = tiny_graph(causal=True)
    # the lifecycle's prepared plan (internals, read here only to time the pieces apart)
    built = g._state.active
    assert built is not None
    bound = built.binder.bind(pack, None, built.workspace_size)
    scale = D**-0.5
    inputs = [arrays[n] for n in ("Q", "K", "V", "O", "dO", "Stats")]
    presized = presized_backward(inputs[0].shape, inputs[1].shape, inputs[2].shape, scale=scale)
    assert presized is not None

    rows = [
        ("graph.execute (total)", lambda: g.execute(pack)),
        ("graph.execute (causal)", lambda: g_causal.execute(pack_causal)),
        ("  variant-pack binder", lambda: built.binder.bind(pack, None, 0)),
        ("  plan.execute (engine + math)", lambda: built.plan.execute(bound, None)),
        ("    presized_backward's run", lambda: presized(*inputs)),
        ("    sdpa_math.sdpa_backward", lambda: sdpa_backward(
            *inputs, scale=scale, compute_dtype=np.float32)),
    ]  # fmt: skip
    print(f"{ENGINE}, SDPA backward B={B} H={H} S={S} D={D} fp32, {args.runs} runs")
    print(f"| {'what':<32} | median µs | p10 µs | p90 µs |")
    print(f"|{'-' * 34}|-----------|--------|--------|")
    medians = {}
    for label, fn in rows:
        median, p10, p90 = timed(fn, args.runs)
        medians[label.strip()] = median
        print(f"| {label:<32} | {median:9.1f} | {p10:6.1f} | {p90:6.1f} |")
    total = medians["graph.execute (total)"]
    worst = max(total, medians["graph.execute (causal)"])
    math_us = medians["presized_backward's run"]
    glue = medians["plan.execute (engine + math)"] - math_us
    frontend = total - medians["plan.execute (engine + math)"]
    print(
        f"frontend (binder + dispatch) ≈ {frontend:.1f} µs, engine glue ≈ {glue:.1f} µs, "
        f"math {math_us:.1f} µs ({100 * math_us / total:.0f}% of execute); "
        f"target ≤ {TARGET_US:.0f} µs (plain and causal): {'ok' if worst <= TARGET_US else 'MISS'}"
    )
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.runs):
            g.execute(pack)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
