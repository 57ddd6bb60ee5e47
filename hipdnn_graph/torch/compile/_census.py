"""The census: where each aten op of each compiled graph went (a hipDNN graph or aten), and why.

Every graph the backend compiles adds one :class:`CensusRow` per op; :func:`census` returns
them all since the last :func:`reset_census`, and the backend logs each graph's table at DEBUG
on the logger ``hipdnn_graph.compile``.

Example:
    >>> from hipdnn_graph.torch.compile import Census, CensusRow
    >>> c = Census([CensusRow("forward", "aten.mm.default", "hipdnn", "matmul", 0, 64),
    ...             CensusRow("forward", "aten.view.default", "aten", "no family", None, 0)])
    >>> c.hipdnn_ops(), c.flops_fraction()
    (['aten.mm.default'], 1.0)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

__all__ = ["LOGGER", "Census", "CensusRow", "census", "record", "reset_census"]

#: the census's DEBUG log
LOGGER = logging.getLogger("hipdnn_graph.compile")


@dataclass(frozen=True)
class CensusRow:
    """One op of one compiled graph.

    Attributes:
        graph: ``"forward"``, ``"backward"`` or ``"inference"`` (AOTAutograd's graph kinds).
        op: the aten op, as ``aten.mm.default``.
        placement: ``"hipdnn"`` (inside a hipDNN graph) or ``"aten"`` (run by torch).
        why: the family that expresses it, or the reason it stayed in aten.
        subgraph: the index of its hipDNN subgraph (``None`` in aten).
        flops: its matmul, convolution or attention FLOPs (0 for other ops).
    """

    graph: str
    op: str
    placement: str
    why: str
    subgraph: int | None
    flops: int


@dataclass
class Census:
    """Rows of the census with the summaries the docs and benchmarks print."""

    rows: list[CensusRow] = field(default_factory=list)

    def hipdnn_ops(self) -> list[str]:
        """The ops placed in hipDNN graphs, in order of appearance, each once."""
        return list(dict.fromkeys(r.op for r in self.rows if r.placement == "hipdnn"))

    def aten_ops(self) -> dict[str, str]:
        """The ops left to aten, each with its (first) reason."""
        out: dict[str, str] = {}
        for r in self.rows:
            if r.placement == "aten":
                out.setdefault(r.op, r.why)
        return out

    def flops_fraction(self) -> float:
        """The share of matmul/conv/attention FLOPs inside hipDNN graphs (1.0 when there are
        none)."""
        total = sum(r.flops for r in self.rows)
        inside = sum(r.flops for r in self.rows if r.placement == "hipdnn")
        return inside / total if total else 1.0

    def table(self) -> str:
        """A text table: graph, op, placement, count, reason."""
        counts: dict[tuple[str, str, str, str], int] = {}
        for r in self.rows:
            key = (r.graph, r.op, r.placement, r.why)
            counts[key] = counts.get(key, 0) + 1
        head = ("graph", "op", "placed", "count", "why")
        lines = [(g, op, p, str(n), why) for (g, op, p, why), n in counts.items()]
        widths = [max(len(row[i]) for row in [head, *lines]) for i in range(4)]
        return "\n".join(
            "  ".join(cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True))
            + "  "
            + row[4]
            for row in [head, *lines]
        )


_ROWS: list[CensusRow] = []


def record(rows: list[CensusRow]) -> None:
    """Add one compiled graph's rows and log its table."""
    _ROWS.extend(rows)
    if LOGGER.isEnabledFor(logging.DEBUG):
        LOGGER.debug("hipdnn compile census:\n%s", Census(rows).table())


def census() -> Census:
    """Every row recorded since the last :func:`reset_census` (a copy)."""
    return Census(list(_ROWS))


def reset_census() -> None:
    """Forget the rows recorded so far."""
    _ROWS.clear()
