"""``hipdnn-graph convert`` and ``hipdnn-graph schema``: a graph file in the other format, and
the JSON Schema of the JSON format.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="hipdnn-graph")
    >>> add_parsers(parser.add_subparsers())
    >>> args = parser.parse_args(["convert", "g.json", "--to", "binary", "-o", "g.bin"])
    >>> args.to, args.format, args.output
    ('binary', 'hipdnn', 'g.bin')
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from .cli_common import CliError, load_graph, safe_text
from .serialization import FORMATS

__all__ = ["add_parsers", "cmd_convert", "cmd_schema"]


def cmd_convert(args: argparse.Namespace, out: TextIO) -> int:
    graph, fmt = load_graph(args.file)
    if args.to == "json":
        data = graph.to_json(format=args.format).encode()
    else:
        data = graph.serialize(format=args.format)
    if args.output == "-":
        if args.to == "json":
            out.write(data.decode() + "\n")
        else:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        return 0
    try:
        Path(args.output).write_bytes(data)
    except OSError as exc:
        raise CliError(f"cannot write '{safe_text(args.output)}': {exc.strerror or exc}") from None
    print(
        f"wrote {safe_text(args.output)} ({args.to}, {len(data)} bytes) "
        f"from {safe_text(args.file)} ({fmt})",
        file=out,
    )
    return 0


def cmd_schema(args: argparse.Namespace, out: TextIO) -> int:
    from .descriptors import json_schema

    out.write(json.dumps(json_schema(), indent=2) + "\n")
    return 0


def add_parsers(sub: Any) -> None:
    """Add ``convert`` and ``schema`` to the subparsers ``sub``."""
    p = sub.add_parser("convert", help="convert between JSON and binary")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--to", choices=("json", "binary"), required=True, help="output format")
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="hipdnn",
        help="wire format family (default: hipdnn, hipDNN's own bytes and JSON)",
    )
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output file, - for stdout")
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("schema", help="print the JSON Schema of the JSON format")
    p.set_defaults(func=cmd_schema)
