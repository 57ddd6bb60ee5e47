"""``hipdnn-graph validate`` and ``hipdnn-graph show``: check a graph file, print what it holds.

Names from a file are printed with control characters escaped (see
:func:`~hipdnn_graph.cli_common.safe_text`), in the table and in the DOT or Mermaid picture.

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

from .cli_common import fmt_list, load_graph, safe_text, summary, table
from .errors import HipdnnError
from .types import DiagonalAlignment

if TYPE_CHECKING:  # imported where used: --help and --version load no graph code
    from .graph import Graph
    from .tensor import TensorAttributes

__all__ = ["add_parsers", "cmd_show", "cmd_validate"]


def cmd_validate(args: argparse.Namespace, out: TextIO) -> int:
    graph, fmt = load_graph(args.file)
    graph.validate()
    print(f"OK: {summary(graph, fmt)}", file=out)
    return 0


def _tensor_ref(t: TensorAttributes) -> str:
    name = safe_text(t.name or "(unnamed)")
    return f"{name}#{t.uid}" if t.uid is not None else name


#: members _node_details shows in its own way (attention's flags and scalars)
_SHOWN = frozenset(
    {
        "causal_mask", "causal_mask_bottom_right", "alibi_mask", "padding_mask",
        "attn_scale_value", "dropout_probability", "left_bound", "right_bound",
        "generate_stats", "diagonal_alignment",
    }
)  # fmt: skip


def _node_details(node: Any) -> list[str]:
    a = node.attributes
    flags = [
        f
        for f in ("causal_mask", "causal_mask_bottom_right", "alibi_mask", "padding_mask")
        if getattr(a, f, False)
    ]
    for field in ("attn_scale_value", "dropout_probability", "left_bound", "right_bound"):
        value = getattr(a, field, None)
        if value is not None:
            flags.append(f"{field}={value}")
    if getattr(a, "generate_stats", None) is not None:
        flags.append(f"generate_stats={a.generate_stats}")
    alignment = getattr(a, "diagonal_alignment", None)
    if alignment is not None and int(alignment) != 0:
        flags.append(f"diagonal_alignment={DiagonalAlignment(alignment).name}")
    for scalar in node.spec.scalars:  # the other families' members, in their table's order
        value = getattr(a, scalar.name, None)
        if scalar.name in _SHOWN or value is None or value == scalar.default:
            continue
        flags.append(f"{scalar.name}={getattr(value, 'name', value)}")
    ins = " ".join(f"{s.name}={_tensor_ref(t)}" for s, t in sorted(a.inputs.items()))
    outs = " ".join(f"{s.name}={_tensor_ref(t)}" for s, t in sorted(a.outputs.items()))
    return [
        f"{safe_text(node.name)}  {node.get_node_type().name}  compute "
        f"{a.compute_data_type.name}" + (f"  [{', '.join(flags)}]" if flags else ""),
        f"      in:  {ins}",
        f"      out: {outs}",
    ]


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
        a = graph.attributes
        print(summary(graph, fmt), file=out)
        print(
            f"  io {a.io_data_type.name}, intermediate {a.intermediate_data_type.name}, "
            f"compute {a.compute_data_type.name}",
            file=out,
        )
        print("tensors:", file=out)
        rows = [["uid", "name", "dims", "strides", "type", "virtual", "by value"]]
        for t in graph.wire_tensors():
            by_value = (
                safe_text(f"value={t.value!r}")
                if t.value is not None
                else "runtime"
                if t.is_pass_by_value
                else ""
            )
            rows.append(
                [
                    "-" if t.uid is None else str(t.uid),
                    safe_text(t.name),
                    fmt_list(t.dim),
                    fmt_list(t.stride),
                    t.data_type.name,
                    "yes" if t.is_virtual else "no",
                    by_value,
                ]
            )
        for line in table(rows):
            print(line, file=out)
        print("nodes (in execution order):", file=out)
        for i, node in enumerate(graph.nodes, 1):
            lines = _node_details(node)
            print(f"  {i}. {lines[0]}", file=out)
            for line in lines[1:]:
                print(line, file=out)
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
