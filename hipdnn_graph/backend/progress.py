"""Saying that a plan build compiles: one INFO record and one progress line per compile.

A compile can take a minute (Inductor's C++ on the CPU, Triton on a GPU), so an engine that
compiles in ``build_plan`` wraps the compile in :func:`compiling`: the logger
``hipdnn_graph.engines`` gets an INFO record when it starts and one when it ends (with the
seconds and whatever the engine adds, such as a cache hit), and standard error gets one
progress line, ``hipdnn-graph: <engine> compiles graph '<name>' (<what>) ... done in 12.3 s``
(``node '<name>'`` for an engine that compiles per node),
its first half written (and flushed) before the compile, its end after. The line is on by
default; ``HIPDNN_GRAPH_PROGRESS=0`` turns it off (the log records stay).

Example:
    >>> import io
    >>> err = io.StringIO()
    >>> with compiling("MY_ENGINE", "g", "Inductor on cpu", stream=err) as note:
    ...     note.outcome = "cache hit"
    >>> err.getvalue().split(" ... ")[0]
    "hipdnn-graph: MY_ENGINE compiles graph 'g' (Inductor on cpu)"
    >>> err.getvalue().split(" ... ")[1].startswith("done in ")
    True
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TextIO

__all__ = ["PROGRESS_ENV", "CompileNote", "compiling", "progress_enabled"]

#: set to 0 (or false, no, off) to silence the progress line
PROGRESS_ENV = "HIPDNN_GRAPH_PROGRESS"

_LOG = logging.getLogger("hipdnn_graph.engines")


def progress_enabled() -> bool:
    """Whether the progress line is written (``HIPDNN_GRAPH_PROGRESS`` is not 0/false/no/off)."""
    flag = os.environ.get(PROGRESS_ENV, "").strip().lower()
    return flag not in ("0", "false", "no", "off")


@dataclass
class CompileNote:
    """What the engine adds while it compiles: ``outcome`` ends the line and the log record
    (for example ``"Inductor cache hit"``); ``seconds`` is filled when the compile ends."""

    outcome: str = ""
    seconds: float = 0.0


@contextmanager
def compiling(
    engine: str, graph: str, what: str, *, kind: str = "graph", stream: TextIO | None = None
) -> Iterator[CompileNote]:
    """Announce a compile of ``graph`` by ``engine`` (``what``: the compiler and device) for
    the duration of the ``with`` block (see the module docstring).

    Args:
        engine: the engine's name.
        graph: the name of what compiles (``<unnamed>`` when empty).
        what: the compiler and device, shown in parentheses.
        kind: what compiles: ``"graph"``, or ``"node"`` for an engine that compiles per node.
        stream: where the progress line goes (``sys.stderr`` by default).
    """
    name = graph or "<unnamed>"
    note = CompileNote()
    out = (stream or sys.stderr) if progress_enabled() else None
    _LOG.info("%s '%s': %s compiles (%s)", kind, name, engine, what)
    if out is not None:
        out.write(f"hipdnn-graph: {engine} compiles {kind} '{name}' ({what}) ... ")
        out.flush()
    start = time.perf_counter()
    failed = True
    try:
        yield note
        failed = False
    finally:
        note.seconds = time.perf_counter() - start
        ending = "failed" if failed else f"done in {note.seconds:.1f} s"
        if note.outcome and not failed:
            ending += f" ({note.outcome})"
        _LOG.info("%s '%s': %s compile %s", kind, name, engine, ending)
        if out is not None:
            out.write(ending + "\n")
            out.flush()
