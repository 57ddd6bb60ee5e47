"""The ``hipdnn-graph`` command line (also ``python -m hipdnn_graph``).

Subcommands::

    hipdnn-graph validate FILE                 check a serialized graph (JSON or binary)
    hipdnn-graph show FILE [--dot|--mermaid]   tensors and nodes, or a picture of the graph
    hipdnn-graph run FILE [--inputs X.npz] [--save OUT.npz] [--engine NAME] [--seed N]
                     [--repeat N]              execute on given (.npz, by tensor name or uid) or
                                               random inputs: engine, time, checksums, outputs
    hipdnn-graph backends                      plugins, engines, the families each runs here
    hipdnn-graph convert FILE --to json|binary [--indent N] [-o OUT]
                                               the other format, to stdout without -o
    hipdnn-graph schema                        the JSON Schema of the JSON format
    hipdnn-graph show-export DIR               an export directory (hipdnn_graph.torch.export):
                                               its graphs, how they connect, the aten census
    hipdnn-graph run-export DIR [--engine NAME] [--inputs X.npz | --check] [--seed N]
                     [--save OUT.npz] [--device DEV]
                                               run its steps: each graph's engine, the outputs;
                                               --check: against the model's saved outputs

Files are recognised by content (hipDNN's binary graph has no file identifier): a NUL byte in
the first four bytes (the upper bytes of the FlatBuffers root offset) means binary, text that
starts like a JSON document (after an optional UTF-8 byte-order mark) means JSON, anything else
is tried as binary (hipDNN's ``HDGP`` container included). At most
:data:`~hipdnn_graph.descriptors.MAX_INPUT_BYTES` are read, whatever the file is (``/dev/zero``
included). Names from a file, and file paths, are printed with
control characters escaped (``\x1b``, ``\n``), so neither can forge lines or colours on the
terminal. Exit status: 0 on success; 1 when the graph
is rejected (the message is ``<ERROR_CODE_NAME>: <message>`` on stderr); 2 for usage errors and
unreadable files. ``--version`` and ``--help`` load no graph code (a tenth of a second).

Example:
    >>> from hipdnn_graph.cli import main
    >>> main(["--version"])
    hipdnn-graph 0.1.0
    0
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ..errors import HipdnnError
from . import backends, convert, exported, exported_run, inspect, run
from .common import PROG, CliError, detect_format, load_graph, safe_text

__all__ = ["CliError", "detect_format", "load_graph", "main", "safe_text"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Inspect, validate, convert and run serialized hipdnn-graph graphs.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in (inspect, run, exported, exported_run, backends, convert):  # --help's order
        group.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (never raises for bad input).

    Args:
        argv: arguments without the program name (default: ``sys.argv[1:]``).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exc:  # --help, --version, usage errors
        return int(exc.code) if isinstance(exc.code, int) else 2
    out = sys.stdout
    try:
        return int(args.func(args, out))
    except HipdnnError as exc:
        print(f"{exc.code.name}: {safe_text(exc.message)}", file=sys.stderr)
        return 1
    except CliError as exc:
        print(f"{PROG}: error: {safe_text(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:  # never a traceback for the user
        print(
            f"{PROG}: internal error: {type(exc).__name__}: {safe_text(str(exc))}", file=sys.stderr
        )
        return 3
