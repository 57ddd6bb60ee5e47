"""How a backend plugin author runs the conformance kit (``hipdnn_graph.testing``).

The kit draws random valid SDPA graphs (forward, backward, and forward→backward; GQA, D ≠ Dv,
Sq ≠ Skv, masks, bias/dBias, padding, dropout masks, scale forms; FLOAT/HALF/BFLOAT16 io),
runs each on the engine under test and on ``NUMPY_REFERENCE_ENGINE``, and compares the outputs
with per-dtype tolerances. Graphs the engine refuses in ``check()`` are *skipped* with its
reason; wrong numbers, unwritten outputs, modified inputs and exceptions *fail*.

This script checks the reference engine against itself (a sanity check of the kit), then every
engine of an installed third-party plugin (for example ``examples/custom_backend/`` once it is
``pip install``-ed), or the engines named with ``--engine``.

In a plugin's own test suite the same check is one line::

    from hipdnn_graph.testing import assert_engine_conforms

    def test_conforms():
        assert_engine_conforms("MY_ENGINE", cases=30, seed=0)

Run: ``python examples/conformance.py [--cases N] [--seed S] [--engine NAME ...]``.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata

import hipdnn_graph as hg
from hipdnn_graph.backend import ENTRY_POINT_GROUP
from hipdnn_graph.testing import FEATURES, check_engine

#: the distribution whose own entry points are the built-in backends (numpy, torch)
PROJECT = "hipdnn-graph"


def built_in_sources() -> set[str]:
    """The entry points (``module:attribute``) that hipdnn-graph itself declares, exactly: a
    third-party plugin is never taken for a built-in one, whatever its package is called (the
    docs suggest names like ``hipdnn_graph_einsum``)."""
    return {
        point.value
        for point in metadata.entry_points(group=ENTRY_POINT_GROUP)
        if point.dist is not None and point.dist.name == PROJECT
    }


def third_party_engines() -> list[str]:
    """Engines of installed plugins that are not part of this project."""
    built_in = built_in_sources()
    return [
        engine
        for info in hg.list_backends()
        if info.loaded and info.source not in built_in
        for engine in info.engines
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=24, help="graphs per engine (default 24)")
    parser.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    parser.add_argument("--engine", action="append", default=[], help="engine(s) to check")
    args = parser.parse_args(argv)

    print(f"features drawn from: {', '.join(sorted(FEATURES))}")
    engines = ["NUMPY_REFERENCE_ENGINE", *(args.engine or third_party_engines())]
    ok = True
    for name in dict.fromkeys(engines):
        report = check_engine(name, cases=args.cases, seed=args.seed)
        print(report.details())
        ok = ok and report.ok
    if len(engines) == 1:
        print("no third-party engine installed (pip install -e examples/custom_backend to add one)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
