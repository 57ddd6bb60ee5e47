"""``hipdnn-graph backends``: every plugin, its engines and their load errors, and what the
command says about each engine: which node families, in which data types, its ``check()``
accepts on this machine.

Each engine is asked about the probe graphs (:mod:`~hipdnn_graph.cli.probes`) of the families
it declares (its ``node_types``; all of them when it declares none): attention as a forward
feeding a backward, a forward alone and a backward alone, and one small graph of every other
family, in FLOAT, HALF, BFLOAT16 and DOUBLE, so that an engine that runs one direction, some
families or some types only is reported as such rather than as unavailable.

Example:
    >>> from hipdnn_graph.backend.registry import current_registry
    >>> engine = current_registry().find_engine("NUMPY_REFERENCE_ENGINE")
    >>> text = availability(engine, probe_graphs())
    >>> text.startswith("available for SDPA fwd+bwd, CONVOLUTION_FPROP, CONVOLUTION_DGRAD")
    True
    >>> text.endswith("RESAMPLE_BWD in FLOAT, HALF, BFLOAT16, DOUBLE")
    True
"""

from __future__ import annotations

import argparse
import warnings
from typing import TYPE_CHECKING, Any, TextIO

from ..types import DataType
from .common import safe_text

if TYPE_CHECKING:  # imported where used: --help and --version load no graph code
    from ..graph import Graph

__all__ = ["PROBE_TYPES", "add_parsers", "availability", "cmd_backends", "probe_graphs"]

#: the data types each engine is probed with
PROBE_TYPES = (DataType.FLOAT, DataType.HALF, DataType.BFLOAT16, DataType.DOUBLE)


def probe_graphs() -> dict[DataType, dict[str, Graph]]:
    """The probe graphs of every type in :data:`PROBE_TYPES`, by type then by what they probe
    (:func:`~hipdnn_graph.cli.probes.probe_graphs`)."""
    from . import probes as cli_probes

    return cli_probes.probe_graphs(PROBE_TYPES)


def _asked(engine: Any, graph: Graph) -> bool:
    """Whether ``engine`` is asked about ``graph``: it declares every family the graph holds
    (or declares none)."""
    from ..backend.contract import engine_node_types

    try:
        declared = engine_node_types(engine)
    except Exception:  # a broken declaration: ask, and let checked_support say why it fails
        return True
    return declared is None or all(n.get_node_type() in declared for n in graph.nodes)


def _sdpa_words(accepted: dict[str, bool]) -> str | None:
    """The attention probes ``engine`` accepted in one type, in words (``None``: none)."""
    if accepted.get("SDPA fwd+bwd"):
        return "SDPA fwd+bwd"
    fwd, bwd = accepted.get("SDPA fwd", False), accepted.get("SDPA bwd", False)
    if fwd and bwd:
        return "SDPA fwd and bwd as separate graphs"
    if fwd or bwd:
        return "SDPA fwd only" if fwd else "SDPA bwd only"
    return None


def availability(engine: Any, probes: dict[DataType, dict[str, Graph]]) -> str:
    """What ``engine.check()`` accepts of ``probes``, in words.

    Args:
        engine: a registered engine.
        probes: the graphs of :func:`probe_graphs`.

    Returns:
        ``available for <what> in <types>[; <what> in <types>]``, ``<what>`` a comma-separated
        list of families accepted in the same types: ``SDPA fwd+bwd``, ``SDPA fwd only``,
        ``SDPA bwd only`` or ``SDPA fwd and bwd as separate graphs`` for attention, a
        :class:`NodeType` name for the others (``<name>+POINTWISE`` where the engine takes the
        family only when a pointwise node follows it, as a fusing engine does); or
        ``unavailable: <the engine's reasons>`` when it accepts none.
    """
    from ..backend.contract import checked_support
    from . import probes as cli_probes

    types_of: dict[str, list[str]] = {}  # what -> the types it is accepted in
    reasons: list[str] = []

    def accepts(graph: Graph | None) -> bool:
        if graph is None or not _asked(engine, graph):
            return False
        ok, reason = checked_support(engine, graph)
        if not ok and reason not in reasons:
            reasons.append(reason)
        return ok

    for io, graphs in probes.items():
        words = [_sdpa_words({w: accepts(graphs.get(w)) for w in cli_probes.SDPA_PROBES})]
        for family in cli_probes.probe_families():
            if accepts(graphs.get(family)):
                words.append(family)
            elif accepts(graphs.get(cli_probes.chained(family))):
                words.append(cli_probes.chained(family))
        for what in words:
            if what is not None:
                types_of.setdefault(what, []).append(io.name)
    if types_of:
        by_types: dict[str, list[str]] = {}  # the types -> the families accepted in them
        for what, types in types_of.items():
            by_types.setdefault(", ".join(types), []).append(what)
        return "available for " + "; ".join(
            f"{', '.join(whats)} in {types}" for types, whats in by_types.items()
        )
    if not reasons:
        return "unavailable: it declares no family that has a probe graph"
    return "unavailable: " + "; ".join(reasons)


def cmd_backends(args: argparse.Namespace, out: TextIO) -> int:
    from ..backend.contract import engine_id
    from ..backend.registry import current_registry, list_backends

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
