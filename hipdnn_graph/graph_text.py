"""A graph as text: the summary line and the description that ``hipdnn-graph show`` prints and
``Graph.summary()`` returns, and the helpers that make them (names with control characters
escaped, dims as ``[1,2,3]``, aligned columns).

Names are printed with control and other non-printable characters escaped (``\\x1b``,
``\\n``), so that a name read from a file cannot forge lines or colours on a terminal.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(name="neg", io_data_type=hg.DataType.FLOAT,
    ...              compute_data_type=hg.DataType.FLOAT)
    >>> y = g.pointwise(g.tensor(name="x", dim=[2, 3]), mode=hg.PointwiseMode.NEG, name="n")
    >>> _ = y.set_output(True)
    >>> g.validate()
    >>> print(describe(g), end="")
    graph 'neg': 2 tensors, 1 node(s): n (POINTWISE)
      io FLOAT, intermediate NOT_SET, compute FLOAT
    tensors:
      uid  name      dims   strides  type   virtual  by value
      -    x         [2,3]  [3,1]    FLOAT  no
      -    n::OUT_0  [2,3]  [3,1]    FLOAT  no
    nodes (in execution order):
      1. n  POINTWISE  compute FLOAT  [mode=NEG]
          in:  IN_0=x
          out: OUT_0=n::OUT_0
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .types import DiagonalAlignment

if TYPE_CHECKING:
    from .graph import Graph
    from .tensor import TensorAttributes

__all__ = ["describe", "fmt_list", "safe_text", "summary", "table"]

_UNSAFE = re.compile(
    # controls (C0, DEL, C1), line/paragraph separators, bidirectional overrides, surrogates
    r"[^\x20-\x7e\u00a0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
    r"|[\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def safe_text(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with control and other non-printable characters escaped (``\\x1b``, ``\\n``).

    Example:
        >>> safe_text("Q\\n\\x1b[31mOK: forged")
        'Q\\\\n\\\\x1b[31mOK: forged'
    """

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        if char == "\n":
            return "\n" if keep_newlines else "\\n"
        if char == "\t":
            return "\\t"
        return char.encode("unicode_escape").decode("ascii")

    return _UNSAFE.sub(escape, text)


def fmt_list(values: Sequence[int]) -> str:
    """``[1,2,3]``: dims and strides as the commands print them."""
    return "[" + ",".join(map(str, values)) + "]" if values else "[]"


def table(rows: list[list[str]]) -> list[str]:
    """``rows`` as lines of left-aligned columns, indented by two spaces."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]


def summary(graph: Graph, fmt: str | None = None) -> str:
    """One line: the graph's name, its format when read from a file (``fmt``), tensor count
    and nodes in order."""
    nodes = " -> ".join(f"{safe_text(n.name)} ({n.get_node_type().name})" for n in graph.nodes)
    name = safe_text(graph.get_name() or "<unnamed>")
    source = f" ({fmt})" if fmt else ""
    return (
        f"graph '{name}'{source}: {len(graph.wire_tensors())} tensors, "
        f"{len(graph)} node(s): {nodes or 'none'}"
    )


def _ragged_text(t: TensorAttributes) -> str:
    """``off_q#4``, with ``x32`` after it for an offset multiplier of 32; empty when dense."""
    offsets, multiplier = t.ragged_offset, t.ragged_offset_multiplier
    text = "" if offsets is None else _tensor_ref(offsets)
    return text + (f" x{multiplier}" if multiplier != 1 else "")


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


def describe(graph: Graph, fmt: str | None = None) -> str:
    """The graph's tensors (uid, name, dims, strides, type, virtual, by value; the ragged offset
    too when a tensor is packed) and its nodes in execution order with their slots and
    non-default members, after the :func:`summary` line and the graph's data types: what
    ``hipdnn-graph show`` prints."""
    a = graph.attributes
    lines = [
        summary(graph, fmt),
        f"  io {a.io_data_type.name}, intermediate {a.intermediate_data_type.name}, "
        f"compute {a.compute_data_type.name}",
        "tensors:",
    ]
    tensors = graph.wire_tensors()
    # a packed batch's tensors name their offsets tensor (and multiplier) in one more column
    ragged = any(t.ragged_offset is not None or t.ragged_offset_multiplier != 1 for t in tensors)
    rows = [["uid", "name", "dims", "strides", "type", "virtual", "by value"]]
    rows[0] += ["ragged offset"] if ragged else []
    for t in tensors:
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
                *([_ragged_text(t)] if ragged else []),
            ]
        )
    lines += table(rows)
    lines.append("nodes (in execution order):")
    for i, node in enumerate(graph.nodes, 1):
        first, *rest = _node_details(node)
        lines += [f"  {i}. {first}", *rest]
    return "\n".join(lines) + "\n"
