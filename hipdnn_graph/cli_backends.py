"""``hipdnn-graph backends``: every plugin, its engines and their load errors, and what the
command says about each engine: which SDPA graphs, in which data types, its ``check()`` accepts
on this machine.

Each engine is asked about small probe graphs (a forward feeding a backward, a forward alone, a
backward alone) in FLOAT, HALF, BFLOAT16 and DOUBLE, so that an engine that runs one direction
or some types only is reported as such rather than as unavailable.

Example:
    >>> from hipdnn_graph.backend.registry import current_registry
    >>> engine = current_registry().find_engine("NUMPY_REFERENCE_ENGINE")
    >>> availability(engine, probe_graphs())
    'available for SDPA fwd+bwd in FLOAT, HALF, BFLOAT16, DOUBLE'
"""

from __future__ import annotations

import argparse
import warnings
from typing import Any, TextIO

from .cli_common import safe_text
from .graph import Graph
from .tensor import TensorAttributes
from .types import DataType

__all__ = ["PROBE_TYPES", "add_parsers", "availability", "cmd_backends", "probe_graphs"]

#: the data types each engine is probed with
PROBE_TYPES = (DataType.FLOAT, DataType.HALF, DataType.BFLOAT16, DataType.DOUBLE)


def probe_graphs() -> dict[DataType, dict[str, Graph]]:
    """The probe graphs of every type in :data:`PROBE_TYPES`, by type then by kind
    (``"fwd+bwd"``, ``"fwd"``, ``"bwd"``)."""
    return {io: _probe_graphs(io) for io in PROBE_TYPES}


def _probe_graphs(io: DataType) -> dict[str, Graph]:
    """Small SDPA graphs in ``io``: a forward feeding a backward, a forward alone and a
    backward alone (its O and Stats are inputs), so that an engine that runs one direction
    only is reported as such."""
    graphs: dict[str, Graph] = {}
    for kind in ("fwd+bwd", "fwd", "bwd"):
        g = Graph(
            name=f"probe_{io.name.lower()}_{kind}",
            io_data_type=io,
            intermediate_data_type=DataType.FLOAT,
            compute_data_type=DataType.FLOAT,
        )
        q = g.tensor(name="Q", dim=[1, 2, 64, 64])
        k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
        outputs = []
        stats: TensorAttributes | None
        if kind == "bwd":
            o = g.tensor_like(q, "O")
            stats = g.tensor(name="Stats", dim=[1, 2, 64, 1], data_type=DataType.FLOAT)
        else:
            o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=kind == "fwd+bwd")
            outputs.append(o)
        if kind != "fwd":
            assert stats is not None
            grads = g.sdpa_backward(q, k, v, o, g.tensor_like(q, "dO"), stats, name="bwd")
            outputs.extend(grads)
        for t in outputs:
            t.set_output(True)
        g.build_operation_graph()
        graphs[kind] = g
    return graphs


def availability(engine: Any, probes: dict[DataType, dict[str, Graph]]) -> str:
    """What ``engine.check()`` accepts of ``probes``, in words.

    Args:
        engine: a registered engine.
        probes: the graphs of :func:`probe_graphs`.

    Returns:
        ``available for <what> in <types>[; <what> in <types>]``, ``<what>`` one of
        ``SDPA fwd+bwd``, ``SDPA fwd only``, ``SDPA bwd only`` and ``SDPA fwd and bwd as
        separate graphs``; or ``unavailable: <the engine's reasons>`` when it accepts none.
    """
    from .backend.contract import checked_support

    by_kind: dict[str, list[str]] = {}
    reasons: list[str] = []
    for io, graphs in probes.items():
        accepted: dict[str, bool] = {}
        for kind, graph in graphs.items():
            accepted[kind], reason = checked_support(engine, graph)
            if not accepted[kind] and reason not in reasons:
                reasons.append(reason)
        if accepted["fwd+bwd"]:
            kind = "SDPA fwd+bwd"
        elif accepted["fwd"] and accepted["bwd"]:
            kind = "SDPA fwd and bwd as separate graphs"
        elif accepted["fwd"] or accepted["bwd"]:
            kind = "SDPA fwd only" if accepted["fwd"] else "SDPA bwd only"
        else:
            continue
        by_kind.setdefault(kind, []).append(io.name)
    if by_kind:
        return "available for " + "; ".join(
            f"{kind} in {', '.join(types)}" for kind, types in by_kind.items()
        )
    return "unavailable: " + "; ".join(reasons)


def cmd_backends(args: argparse.Namespace, out: TextIO) -> int:
    from .backend.contract import engine_id
    from .backend.registry import current_registry, list_backends

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # load errors are listed below
        infos = list_backends()
    registry = current_registry()
    probes = probe_graphs()
    if not infos:
        print("no backend is registered", file=out)
    for info in infos:
        state = "loaded" if info.loaded else f"FAILED TO LOAD: {info.error}"
        print(safe_text(f"{info.name}  ({info.source})  {state}"), file=out)
        for name in info.engines:
            engine = registry.find_engine(name)
            priority = getattr(engine, "priority", "?")
            line = f"  {name}  id {engine_id(name):#018x}  priority {priority}"
            if engine is not None:
                line += f"  {availability(engine, probes)}"
            print(safe_text(line), file=out)
    return 0 if all(i.loaded for i in infos) else 1


def add_parsers(sub: Any) -> None:
    """Add ``backends`` to the subparsers ``sub``."""
    p = sub.add_parser("backends", help="list backends, engines, availability and load errors")
    p.set_defaults(func=cmd_backends)
