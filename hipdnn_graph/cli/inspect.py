"""``hipdnn-graph validate`` and ``hipdnn-graph show``: check a graph file, print what it holds.

Names from a file are printed with control characters escaped (see
:func:`~hipdnn_graph.cli.common.safe_text`), in the table and in the DOT or Mermaid picture.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="hipdnn-graph")
    >>> add_parsers(parser.add_subparsers())
    >>> parser.parse_args(["show", "g.json", "--dot"]).dot
    True
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import HipdnnError
from ..graph_text import describe
from .common import load_graph, safe_text, summary

if TYPE_CHECKING:  # imported where used: --help and --version load no graph code
    from ..graph import Graph

__all__ = ["add_parsers", "cmd_show", "cmd_validate"]


def cmd_validate(args: argparse.Namespace, out: TextIO) -> int:
    graph, fmt = load_graph(args.file)
    graph.validate()
    print(f"OK: {summary(graph, fmt)}", file=out)
    return 0


def _escape_names(graph: Graph) -> None:
    """Replace every name in ``graph`` (loaded only to be shown) by its :func:`safe_text`."""
    graph.set_name(safe_text(graph.get_name()))
    for tensor in graph.wire_tensors():
        tensor.set_name(safe_text(tensor.name))
    for node in graph.nodes:
        node.attributes.set_name(safe_text(node.name))


def cmd_show(args: argparse.Namespace, out: TextIO) -> int:
    graph, fmt = load_graph(args.file)
    problem: HipdnnError | None = None
    try:
        graph.validate()
    except HipdnnError as exc:  # still show what the file holds
        problem = exc
    if args.dot or args.mermaid:
        _escape_names(graph)  # a name's newline would otherwise start a line of its own
        picture = graph.to_dot() if args.dot else graph.to_mermaid()
        out.write(safe_text(picture, keep_newlines=True))
    else:
        out.write(describe(graph, fmt))
    if problem is not None:
        print(f"{problem.code.name}: {safe_text(problem.message)}", file=sys.stderr)
        return 1
    return 0


def add_parsers(sub: Any) -> None:
    """Add ``validate`` and ``show`` to the subparsers ``sub``."""
    p = sub.add_parser("validate", help="validate a graph file (JSON or binary)")
    p.add_argument("file", metavar="FILE")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("show", help="print tensors and nodes, or a DOT/Mermaid picture")
    p.add_argument("file", metavar="FILE")
    pic = p.add_mutually_exclusive_group()
    pic.add_argument("--dot", action="store_true", help="print Graphviz DOT")
    pic.add_argument("--mermaid", action="store_true", help="print a Mermaid flowchart")
    p.set_defaults(func=cmd_show)
