"""Median times of hipDNN's wire codecs on their own (no Graph bridge), with the issue targets.

The graph: the conformance kit's every-slot SDPA backward (19 tensors, one node, every flag and
optional scalar). Each codec converts a :class:`~hipdnn_graph.descriptors.WireGraph`: bytes out
(``write_graph``), bytes in (``read_graph``, every Verifier rule checked), JSON out and in.
Targets: serialize <= 150 µs, deserialize <= 200 µs, JSON each way <= 250 µs.

Run: ``python benchmarks/serialization_codec.py [--runs 2000]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable

from serialization import full_backward_graph
from timing import samples_us

from hipdnn_graph.descriptors import graph_from_json, graph_to_json, read_graph, write_graph
from hipdnn_graph.wire import graph_to_wire

TARGETS_US = {"bytes out": 150.0, "bytes in": 200.0, "JSON out": 250.0, "JSON in": 250.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    wire = graph_to_wire(full_backward_graph().to_parts())
    blob, text = write_graph(wire), graph_to_json(wire)
    assert write_graph(read_graph(blob)) == blob and graph_to_json(graph_from_json(text)) == text
    calls: dict[str, Callable[[], object]] = {
        "bytes out": lambda: write_graph(wire),
        "bytes in": lambda: read_graph(blob),
        "JSON out": lambda: graph_to_json(wire),
        "JSON in": lambda: graph_from_json(text),
    }
    load = "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    print(f"{len(wire.tensors)} tensors, {len(wire.nodes)} node(s); {len(blob)} bytes, "
          f"{len(text)} JSON characters; {args.runs} runs; {load}")  # fmt: skip
    print("| codec | median µs | best µs | target µs | |")
    print("|---|---|---|---|---|")
    for name, fn in calls.items():
        samples = samples_us(fn, args.runs, warmup=max(args.runs // 10, 20))
        median, target = statistics.median(samples), TARGETS_US[name]
        verdict = "meets" if median <= target else "MISSES"
        print(f"| {name} | {median:.1f} | {min(samples):.1f} | {target:.0f} | {verdict} |")


if __name__ == "__main__":
    main()
