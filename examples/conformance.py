"""How a backend plugin author runs the conformance kit (``hipdnn_graph.testing``).

The kit draws random valid SDPA graphs (forward, backward, and forward→backward; GQA, D ≠ Dv,
Sq ≠ Skv, masks, bias/dBias, padding, dropout masks, scale forms; FLOAT/HALF/BFLOAT16 io),
runs each on the engine under test and on ``NUMPY_REFERENCE_ENGINE``, and compares the outputs
with per-dtype tolerances. Graphs the engine refuses in ``check()`` are *skipped* with its
reason; wrong numbers, unwritten outputs, modified inputs and exceptions *fail*.

This script checks the reference engine against itself (a sanity check of the kit), then every
engine of an installed third-party plugin, or the engines named with ``--engine``. With none
installed it checks the example plugin of ``examples/custom_backend/``, registered for this run
only. The example engine runs forward graphs with some features, so it is checked on what it
runs (the ``SUPPORTED_KINDS`` and ``SUPPORTED_FEATURES`` its package declares); other engines on
``--kinds`` and ``--features`` (default: every kind and feature). An engine checked on graphs it
refuses would pass nothing: narrow the draw to what it runs.

In a plugin's own test suite the same check is one line::

    from hipdnn_graph.testing import assert_engine_conforms

    def test_conforms():
        assert_engine_conforms("MY_ENGINE", cases=30, seed=0)

Run: ``python examples/conformance.py [--cases N] [--seed S] [--engine NAME ...]
[--kinds fwd,bwd] [--features gqa,causal]``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import hipdnn_graph as hg
from hipdnn_graph.backend import ENTRY_POINT_GROUP, isolated_registry
from hipdnn_graph.testing import FEATURES, KINDS, check_engine

#: the example plugin's package folder
EXAMPLE_PLUGIN = Path(__file__).resolve().parent / "custom_backend"

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


def example_draws() -> dict[str, dict[str, Any]]:
    """What to draw for the example plugin's engine: the kinds and features it runs (an
    installed copy too old to declare them gets every kind and feature)."""
    sys.path.insert(0, str(EXAMPLE_PLUGIN))
    import hipdnn_custom_backend as example

    kinds = getattr(example, "SUPPORTED_KINDS", KINDS)
    return {
        example.ENGINE_NAME: {
            "kinds": kinds,
            "features": getattr(example, "SUPPORTED_FEATURES", None),
        }
    }


@contextmanager
def example_plugin_registered() -> Iterator[list[str]]:
    """The example plugin registered in a registry of this run only; yields its engines."""
    sys.path.insert(0, str(EXAMPLE_PLUGIN))
    from hipdnn_custom_backend import create_backend

    with isolated_registry() as registry:
        backend = registry.register(create_backend())
        yield [engine.name for engine in backend.engines()]


def _names(text: str | None, known: Any, what: str) -> tuple[str, ...] | None:
    if text is None:
        return None
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(known)})")
    return names


def check(engines: list[str], args: argparse.Namespace) -> bool:
    """Check each engine; print its report. True when no case failed."""
    draws = example_draws()
    kinds = _names(args.kinds, KINDS, "kinds")
    features = _names(args.features, sorted(FEATURES), "features")
    ok = True
    for name in dict.fromkeys(engines):
        draw: dict[str, Any] = {"kinds": kinds or KINDS, "features": features}
        if kinds is None and features is None:
            draw = draws.get(name, draw)
        report = check_engine(name, cases=args.cases, seed=args.seed, **draw)
        print(report.details())
        if not report.passed and report.skipped:
            print(f"  ({name} refused every graph drawn: narrow the draw to what it runs with "
                  "--kinds and --features)")  # fmt: skip
        ok = ok and report.ok
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=24, help="graphs per engine (default 24)")
    parser.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    parser.add_argument("--engine", action="append", default=[], help="engine(s) to check")
    parser.add_argument(
        "--kinds", help=f"graph kinds to draw, comma-separated ({', '.join(KINDS)})"
    )
    parser.add_argument("--features", help="features graphs may use, comma-separated")
    args = parser.parse_args(argv)

    print(f"features drawn from: {', '.join(sorted(FEATURES))}")
    reference = "NUMPY_REFERENCE_ENGINE"
    plugins = args.engine or third_party_engines()
    if plugins:
        return 0 if check([reference, *plugins], args) else 1
    print(f"no third-party plugin installed: checking the example plugin {EXAMPLE_PLUGIN.name}/, "
          "registered for this run only")  # fmt: skip
    with example_plugin_registered() as example:
        return 0 if check([reference, *example], args) else 1


if __name__ == "__main__":
    sys.exit(main())
