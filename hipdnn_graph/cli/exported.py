"""``hipdnn-graph show-export``: a directory that :func:`hipdnn_graph.torch.export` wrote (or
its ``manifest.json``), shown: the model's inputs, each hipDNN graph (its file, name and nodes,
where each input comes from, its outputs and what reads them), the model's outputs and a census
of the ops left to aten (outside hipDNN). :func:`read_export` finds and checks the manifest for
``run-export`` too (:mod:`~hipdnn_graph.cli.exported_run`). Both need torch.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="hipdnn-graph")
    >>> add_parsers(parser.add_subparsers())
    >>> parser.parse_args(["show-export", "out/manifest.json"]).path
    'out/manifest.json'
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any, TextIO

from ..errors import HipdnnError
from ..types import ErrorCode
from .common import CliError, fmt_list, load_graph, read_capped, safe_text, table

__all__ = ["add_parsers", "cmd_show_export", "read_export"]

_MANIFEST = "manifest.json"  # the export format's name for it (checked against the module's)
#: the manifest is JSON of a few entries per op: far below this many bytes
_MAX_MANIFEST_BYTES = 64 << 20


def read_export(path: str) -> tuple[Path, dict[str, Any]]:
    """The export directory ``path`` names (it, or the directory of the ``manifest.json`` it
    names) and its checked manifest.

    Raises:
        CliError: ``path`` does not exist, is neither a directory nor a ``manifest.json``, holds
            no ``manifest.json``, or cannot be read; or torch is not installed.
        HipdnnError: ``INVALID_VALUE`` for a manifest that is not JSON or not an export's.
    """
    try:
        from ..torch.compile._manifest import MANIFEST, check_manifest
    except ImportError:
        raise CliError(
            "export directories need torch (pip install 'hipdnn-graph[torch]')"
        ) from None
    assert MANIFEST == _MANIFEST
    given = Path(path)
    if given.is_dir():
        root, file = given, given / MANIFEST
        if not file.exists():
            raise CliError(
                f"'{safe_text(path)}' holds no {MANIFEST}: not a directory "
                "hipdnn_graph.torch.export wrote"
            )
    elif given.name == MANIFEST or not given.exists():
        root, file = given.parent, given
    else:
        raise CliError(f"'{safe_text(path)}' is neither an export directory nor its {MANIFEST}")
    data = read_capped(str(file), _MAX_MANIFEST_BYTES)
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:  # RecursionError: arrays nested too deep
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"{safe_text(str(file))} is not JSON: {exc}"
        ) from None
    return root, check_manifest(doc)


def _source(origin: dict[str, Any], manifest: dict[str, Any]) -> str:
    """Where a value comes from, in words."""
    kind = origin.get("kind")
    if kind == "input":
        return f"input {origin.get('input')}"
    if kind == "weight":
        return f"weight {origin.get('weight')}"
    if kind == "subgraph":
        return f"graph {origin.get('subgraph')} output {origin.get('output')}"
    steps = manifest["steps"]
    step = origin.get("step")
    if kind == "aten" and isinstance(step, int) and 0 <= step < len(steps):
        return f"aten step {step} ({steps[step]['op']})"
    return f"'{origin.get('ref')}'"


def _readers(manifest: dict[str, Any]) -> dict[str, list[str]]:
    """Each ref and what reads it, in words."""
    readers: dict[str, list[str]] = {}
    for k, step in enumerate(manifest["steps"]):
        if step["kind"] == "hipdnn":
            for i in step["inputs"]:
                readers.setdefault(i["from"]["ref"], []).append(f"graph {step['subgraph']}")
        else:
            text = json.dumps([step["args"], step["kwargs"]])
            for ref in re.findall(r'\{"ref": ("(?:[^"\\]|\\.)*")\}', text):
                readers.setdefault(json.loads(ref), []).append(f"aten step {k} ({step['op']})")
    for k, o in enumerate(manifest["outputs"]):
        readers.setdefault(o["ref"], []).append(f"output {k}")
    return readers


def cmd_show_export(args: argparse.Namespace, out: TextIO) -> int:
    root, manifest = read_export(args.path)
    steps = manifest["steps"]
    graphs = [s for s in steps if s["kind"] == "hipdnn"]
    aten = [s for s in steps if s["kind"] == "aten"]
    print(
        f"export '{safe_text(str(root))}': {len(graphs)} hipDNN graph(s), {len(aten)} aten "
        f"step(s), graph format {manifest['graph_format']}",
        file=out,
    )
    print("inputs:", file=out)
    rows = [
        [f"input {k}", safe_text(i["ref"]), fmt_list(i["shape"]), safe_text(i["dtype"])]
        for k, i in enumerate(manifest["inputs"])
    ]
    for line in table(rows) if rows else ["  (none)"]:
        print(line, file=out)
    refs = manifest["weights"]["refs"]
    print(f"weights: {len(refs)} in {safe_text(manifest['weights']['file'])}", file=out)
    readers = _readers(manifest)
    for step in graphs:
        graph, _ = load_graph(str(root / step["file"]))
        nodes = ", ".join(f"{safe_text(n.name)} ({n.get_node_type().name})" for n in graph.nodes)
        name = safe_text(graph.get_name() or "<unnamed>")
        print(
            f"graph {step['subgraph']}: {safe_text(step['file'])} '{name}', "
            f"{len(graph.nodes)} node(s): {nodes or 'none'}",
            file=out,
        )
        rows = [
            [
                "in",
                f"{safe_text(i['tensor'])} (uid {i['uid']})",
                fmt_list(i["dims"]),
                "<- " + safe_text(_source(i["from"], manifest)),
            ]
            for i in step["inputs"]
        ]
        rows += [
            [
                "out",
                f"{safe_text(o['tensor'])} (uid {o['uid']})",
                fmt_list(o["shape"]),
                f"{safe_text(o['dtype'])} -> "
                + (safe_text(", ".join(readers.get(o["ref"], []))) or "unused"),
            ]
            for o in step["outputs"]
        ]
        for line in table(rows):
            print(line, file=out)
    print("outputs:", file=out)
    rows = [
        [
            f"output {k}",
            fmt_list(o["shape"]),
            safe_text(o["dtype"]),
            "<- " + safe_text(_source(o, manifest)),
        ]
        for k, o in enumerate(manifest["outputs"])
    ]
    for line in table(rows) if rows else ["  (none)"]:
        print(line, file=out)
    census: dict[str, int] = {}
    for step in aten:
        census[step["op"]] = census.get(step["op"], 0) + 1
    print(f"outside hipDNN: {len(aten)} aten step(s)", file=out)
    rows = [[safe_text(op), str(n)] for op, n in census.items()]
    for line in table(rows) if rows else []:
        print(line, file=out)
    reference = manifest.get("reference")
    if reference is not None:
        print(
            f"reference: {safe_text(reference['file'])} (the example inputs and the model's "
            "outputs; run-export --check compares with them)",
            file=out,
        )
    return 0


def add_parsers(sub: Any) -> None:
    """Add ``show-export`` to the subparsers ``sub``."""
    p = sub.add_parser(
        "show-export", help="show an export directory: its graphs, how they connect, aten ops"
    )
    p.add_argument("path", metavar="DIR", help="an export directory or its manifest.json")
    p.set_defaults(func=cmd_show_export)
