"""Median ``Graph.serialize`` / ``Graph.deserialize`` time and size (and the JSON twins), in
hipDNN's own wire formats.

The graph: one SDPA backward node with every optional slot set (scale tensor, bias and dBias,
seq_len_q/kv with padding, philox seed/offset and probability, dropout mask/scale/scale_inv),
every flag, both band bounds and bottom-right alignment: 19 tensors. Graphs are validated once
(uids assigned); each timed call converts the whole graph.

Run: ``python benchmarks/serialization.py [--runs 2000]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
from collections.abc import Callable
from typing import Any

from timing import samples_us

import hipdnn_graph as hg
from hipdnn_graph.testing import every_slot_backward_graph

B, H, S, D = 2, 8, 1024, 64
#: medians to meet (hipDNN's own wire): serialize 150, deserialize 200, JSON each way 250 µs
TARGETS_US = {"serialize": 150.0, "deserialize": 200.0, "to_json": 250.0, "from_json": 250.0}
CUDNN_FRONTEND_SERIALIZE_US = 2000.0  # MEASURED.md: ~2 ms for cudnn-frontend's serialize


def full_backward_graph() -> hg.Graph:
    """The conformance kit's every-slot SDPA-backward graph, validated, with uids assigned."""
    g = every_slot_backward_graph(B, H, S, D)
    g.build_operation_graph()
    return g


def _load() -> str:
    try:
        return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:  # not available on this platform
        return "load average unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    g = full_backward_graph()
    blob, text = g.serialize(), g.to_json()
    assert hg.Graph.deserialize(blob).serialize() == blob, "round trip must be lossless"
    before = _load()
    calls: list[tuple[str, Callable[[], Any], int]] = [
        ("serialize", g.serialize, len(blob)),
        ("deserialize", lambda: hg.Graph.deserialize(blob), len(blob)),
        ("to_json", g.to_json, len(text)),
        ("from_json", lambda: hg.Graph.from_json(text), len(text)),
        ("key", g.key, 8),
    ]
    rows = []
    for name, fn, size in calls:
        samples = samples_us(fn, args.runs, warmup=max(args.runs // 10, 20))
        p10, _, _, _, _, _, _, _, p90 = statistics.quantiles(samples, n=10)
        rows.append((name, statistics.median(samples), min(samples), p10, p90, size))
    print(f"SDPA backward, every optional slot set ({len(g.tensors)} tensors), {args.runs} runs")
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs")
    print(f"before: {before}; after: {_load()}")
    print("| operation | median µs | best µs | p10 / p90 µs | bytes |")
    print("|---|---|---|---|---|")
    for name, us, best, p10, p90, size in rows:
        print(f"| {name} | {us:.1f} | {best:.1f} | {p10:.1f} / {p90:.1f} | {size} |")
    for name, us, *_ in rows[:4]:
        target = TARGETS_US[name]
        verdict = "meets" if us <= target else "MISSES"
        print(f"{name}: {us:.1f} µs {verdict} the <= {target:.0f} µs target")
    print(f"(cudnn-frontend's serialize: ~{CUDNN_FRONTEND_SERIALIZE_US:.0f} µs)")


if __name__ == "__main__":
    main()
