"""Validation time of very large graphs: one forward node and N backward nodes reading its O and
Stats (the denial-of-service graph of issue 11, item 2, where 65,536 nodes took 150 s).

Each graph is built through the public API, then validated twice: the first time infers every
output (the cost a fresh graph pays), the second only checks. Times are CPU seconds of this
process (``time.process_time``), so other processes on the machine matter less.

Run:  .venv/bin/python benchmarks/validate_scale.py [--nodes 1024 8192 65536]

Prints, per graph size: first and second validation in seconds and in µs per node.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import hipdnn_graph as hg


def build(nodes: int) -> hg.Graph:
    """One forward node and ``nodes - 1`` backward nodes."""
    g = hg.Graph(
        name="many",
        io_data_type=hg.DataType.BFLOAT16,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q, k, v = (g.tensor(name=n, dim=[1, 2, 8, 16]) for n in "QKV")
    o, stats = g.sdpa(q, k, v, name="fwd")
    assert stats is not None
    do = g.tensor(name="dO", dim=[1, 2, 8, 16])
    for i in range(nodes - 1):
        g.sdpa_backward(q, k, v, o, do, stats, name=f"bwd{i}")
    return g


def cpu_seconds(g: hg.Graph) -> float:
    start = time.process_time()
    g.validate()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1024, 8192, 65536])
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]} on {platform.machine()} ({platform.processor()})")
    print(f"{'nodes':>8} {'first s':>9} {'µs/node':>9} {'second s':>9} {'µs/node':>9}")
    for n in args.nodes:
        g = build(n)
        first, second = cpu_seconds(g), cpu_seconds(g)
        per_first, per_second = first / n * 1e6, second / n * 1e6
        print(f"{n:>8} {first:>9.3f} {per_first:>9.1f} {second:>9.3f} {per_second:>9.1f}")


if __name__ == "__main__":
    main()
