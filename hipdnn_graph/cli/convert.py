"""``hipdnn-graph convert`` and ``hipdnn-graph schema``: a graph file in the other format, and
the JSON Schema of the JSON format.

``convert`` writes to standard output without ``-o`` (binary bytes only where standard output
is not a terminal); ``--indent N`` spreads the JSON over lines, N spaces a level, its tokens
(numbers included) as the compact form writes them.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="hipdnn-graph")
    >>> add_parsers(parser.add_subparsers())
    >>> args = parser.parse_args(["convert", "g.json", "--to", "binary", "-o", "g.bin"])
    >>> args.to, args.format, args.output, args.indent
    ('binary', 'hipdnn', 'g.bin', None)
    >>> print(indent_json('{"a":[1,{}],"b":"x,y"}', 2))
    {
      "a": [
        1,
        {}
      ],
      "b": "x,y"
    }
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from ..serialization import FORMATS
from .common import CliError, load_graph, non_negative_int, safe_text

__all__ = ["add_parsers", "cmd_convert", "cmd_schema", "indent_json"]


def indent_json(text: str, indent: int) -> str:
    """Compact JSON ``text`` (no white space outside strings) spread over lines, ``indent``
    spaces a level, as ``json.dumps(..., indent=indent)`` lays it out; every token is kept as
    written (hipDNN's number format is not Python's for every float)."""
    out: list[str] = []
    depth, i, in_string = 0, 0, False
    while i < len(text):
        char = text[i]
        if in_string:
            if char == "\\":
                out.append(text[i : i + 2])
                i += 2
                continue
            in_string = char != '"'
            out.append(char)
        elif char == '"':
            in_string = True
            out.append(char)
        elif char in "{[" and text[i + 1 : i + 2] in ("}", "]"):
            out.append(text[i : i + 2])  # an empty object or list stays on its line
            i += 1
        elif char in "{[":
            depth += 1
            out.append(char + "\n" + " " * (indent * depth))
        elif char in "}]":
            depth -= 1
            out.append("\n" + " " * (indent * depth) + char)
        elif char == ",":
            out.append(",\n" + " " * (indent * depth))
        elif char == ":":
            out.append(": ")
        else:
            out.append(char)
        i += 1
    return "".join(out)


def cmd_convert(args: argparse.Namespace, out: TextIO) -> int:
    if args.indent is not None and args.to != "json":
        raise CliError("--indent applies to JSON output (--to json) only")
    graph, fmt = load_graph(args.file)
    if args.to == "json":
        text = graph.to_json(format=args.format)
        data = (text if args.indent is None else indent_json(text, args.indent)).encode()
    else:
        data = graph.serialize(format=args.format)
    if args.output == "-":
        if args.to == "json":
            out.write(data.decode() + "\n")
        elif sys.stdout.isatty():
            raise CliError("binary output is not written to a terminal: give -o FILE or redirect")
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
    from ..descriptors import json_schema

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
    p.add_argument(
        "-o", "--output", default="-", metavar="OUT", help="output file (default -, stdout)"
    )
    p.add_argument(
        "--indent",
        type=non_negative_int,
        metavar="N",
        help="JSON over several lines, N spaces a level (default: compact, one line)",
    )
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("schema", help="print the JSON Schema of the JSON format")
    p.set_defaults(func=cmd_schema)
