"""What the ``hipdnn-graph`` subcommands share: reading a graph file whatever its format, text
made safe for the terminal, and the summary line and tables they print.

How a file's format is recognised and how much of it is read is said in
:mod:`hipdnn_graph.cli`'s docstring (the command's documentation).

Example:
    >>> detect_format(b'{"name": "g"}'), detect_format(b"\\x10\\0\\0\\0")
    ('json', 'binary')
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ..graph_text import fmt_list, safe_text, summary, table

if TYPE_CHECKING:  # imported where used: --help and --version load no graph code
    from ..graph import Graph

__all__ = [
    "PROG",
    "CliError",
    "check_engine_name",
    "checked_device",
    "detect_format",
    "fmt_list",
    "load_graph",
    "non_negative_int",
    "read_capped",
    "safe_text",
    "summary",
    "table",
]

PROG = "hipdnn-graph"


class CliError(Exception):
    """A usage or file problem: printed as ``hipdnn-graph: error: ...`` with exit status 2."""


_UTF8_BOM = b"\xef\xbb\xbf"
#: first bytes of a JSON document: object, array, string, number, true, false, null
_JSON_STARTS = frozenset(b'{["-0123456789tfn')


def detect_format(data: bytes) -> str:
    """``"json"`` for text that starts like a JSON document (after an optional UTF-8
    byte-order mark and white space), ``"binary"`` otherwise.

    hipDNN's serialized graph has no file identifier: it starts with a little-endian root offset,
    whose upper bytes are NUL for any graph (JSON text never holds a NUL byte).
    """
    if b"\0" in data[:4]:
        return "binary"
    head = data.removeprefix(_UTF8_BOM).lstrip()[:1]
    if head and head[0] in _JSON_STARTS:
        return "json"
    return "binary"


def read_capped(path: str, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of ``path`` (``st_size`` says nothing for devices and pipes).

    Raises:
        CliError: the file cannot be read, is a directory, or holds more than ``limit`` bytes.
    """
    if Path(path).is_dir():
        raise CliError(f"'{safe_text(path)}' is a directory, not a graph file")
    try:
        with open(path, "rb") as file:
            data = file.read(limit + 1)
    except OSError as exc:
        raise CliError(f"cannot read '{safe_text(path)}': {exc.strerror or exc}") from None
    if len(data) > limit:
        raise CliError(
            f"'{safe_text(path)}' holds more than {limit} bytes; serialized graphs are limited "
            f"to {limit} bytes"
        )
    return data


def load_graph(path: str) -> tuple[Graph, str]:
    """Read a serialized graph from ``path``, detecting its format.

    Raises:
        CliError: the file cannot be read or is too large.
        HipdnnError: ``UNSUPPORTED_GRAPH_FORMAT`` / ``INVALID_VALUE`` from the decoders.
    """
    from ..descriptors import MAX_INPUT_BYTES
    from ..graph import Graph

    data = read_capped(path, MAX_INPUT_BYTES)
    fmt = detect_format(data)
    if fmt == "binary":
        return Graph.deserialize(data), fmt
    return Graph.from_json(data.removeprefix(_UTF8_BOM)), fmt


def check_engine_name(name: str) -> None:
    """Refuse an ``--engine`` that names no registered engine.

    Raises:
        CliError: ``no engine named '<name>'; available: ...``.

    Example:
        >>> check_engine_name("NUMPY_REFERENCE_ENGINE")
    """
    from ..backend.registry import current_registry

    names = [e.name for e in current_registry().engines()]
    if name not in names:
        raise CliError(
            f"no engine named '{safe_text(name)}'; available: {', '.join(names) or 'none'}"
        )


def checked_device(device: str, names: tuple[str, ...]) -> str:
    """``device`` when it is one of ``names`` or ``cuda[:N]``.

    Raises:
        CliError: ``bad --device '<device>': use <names>, cuda or cuda:N``.

    Example:
        >>> checked_device("cuda:1", ("cpu",))
        'cuda:1'
    """
    if device not in names and re.fullmatch(r"cuda(:\d{1,4})?", device) is None:
        raise CliError(
            f"bad --device {safe_text(device)!r}: use {', '.join(names)}, cuda or cuda:N"
        )
    return device


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value
