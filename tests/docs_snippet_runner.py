"""Run a docs snippet as ``python SNIPPET`` would, then run every graph it built.

``python tests/docs_snippet_runner.py SNIPPET REPORT`` runs ``SNIPPET`` as ``__main__`` (its
stdout, stderr and exit status are the script's own), noting every ``hipdnn_graph.Graph`` it
creates. Then each graph that validates and has nodes is built, preferring the NumPy reference
(``NUMPY_REFERENCE_ENGINE``, so that no engine compiles), and executed on
:func:`hipdnn_graph.testing.make_inputs`; what happened to each is written to ``REPORT`` as JSON:
``[{"graph": name, "outcome": "ran" | "refused" | "invalid" | "empty", "detail": text}]``
(``detail``: the engine that ran it, or the error's code and message). Nothing is printed, so
the snippet's stdout stays what the pages show.

Example (``tests/test_docs.py`` runs every snippet so)::

    python tests/docs_snippet_runner.py docs/snippets/matmul.py report.json
    # report.json: [{"graph": "mm", "outcome": "ran", "detail": "NUMPY_REFERENCE_ENGINE"}, ...]
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path
from typing import Any

import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.testing import make_inputs

#: the engine preferred when a snippet's graph is run (it compiles nothing)
PREFERRED = "NUMPY_REFERENCE_ENGINE"


def run_snippet(path: Path) -> list[hg.Graph]:
    """Run ``path`` as ``__main__`` (``sys.argv`` and ``sys.path[0]`` as ``python path`` sets
    them) and return the graphs it created, in creation order."""
    made: list[hg.Graph] = []
    original = hg.Graph.__init__

    def noting(self: hg.Graph, *args: Any, **keywords: Any) -> None:
        original(self, *args, **keywords)
        made.append(self)

    sys.argv = [str(path)]
    sys.path[0] = str(path.parent)
    hg.Graph.__init__ = noting  # type: ignore[method-assign]
    try:
        runpy.run_path(str(path), run_name="__main__")
    finally:
        hg.Graph.__init__ = original  # type: ignore[method-assign]
    return made


def run_graph(graph: hg.Graph) -> dict[str, str]:
    """Build ``graph`` (preferring :data:`PREFERRED`) and execute it on random inputs."""
    name = graph.get_name()
    try:
        graph.validate()
    except hg.HipdnnError as err:
        return {"graph": name, "outcome": "invalid", "detail": f"{err.code.name}: {err.message}"}
    if not graph.nodes:
        return {"graph": name, "outcome": "empty", "detail": ""}
    try:
        graph.set_preferred_engine_id_ext(PREFERRED).build()
        graph.execute(make_inputs(graph, np.random.default_rng(0)))
    except hg.HipdnnError as err:
        return {"graph": name, "outcome": "refused", "detail": f"{err.code.name}: {err.message}"}
    return {"graph": name, "outcome": "ran", "detail": graph.get_plan_name()}


def main(snippet: str, report: str) -> None:
    graphs = run_snippet(Path(snippet).resolve())
    Path(report).write_text(json.dumps([run_graph(g) for g in graphs], indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:3])
