"""The ``hipdnn-graph`` command line (also ``python -m hipdnn_graph``).

Subcommands::

    hipdnn-graph validate FILE                 check a serialized graph (JSON or binary)
    hipdnn-graph show FILE [--dot|--mermaid]   tensors and nodes, or a picture of the graph
    hipdnn-graph run FILE [--engine NAME] [--seed N] [--repeat N]
                                               execute on random inputs: engine, time, checksums
    hipdnn-graph backends                      plugins, engines, availability, load errors
    hipdnn-graph convert FILE --to json|binary -o OUT
    hipdnn-graph schema                        the JSON Schema of the JSON format

Files are recognised by content (hipDNN's binary graph has no file identifier): a NUL byte in
the first four bytes (the upper bytes of the FlatBuffers root offset) means binary, text that
starts like a JSON document (after an optional UTF-8 byte-order mark) means JSON, anything else
is tried as binary. At most :data:`~hipdnn_graph.descriptors.MAX_INPUT_BYTES` are read, whatever
the file is (``/dev/zero`` included). Names from a file, and file paths, are printed with
control characters escaped (``\x1b``, ``\n``), so neither can forge lines or colours on the
terminal. Exit status: 0 on success; 1 when the graph
is rejected (the message is ``<ERROR_CODE_NAME>: <message>`` on stderr); 2 for usage errors and
unreadable files.

Example:
    >>> from hipdnn_graph.cli import main
    >>> main(["--version"])
    hipdnn-graph 0.1.0
    0
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .errors import HipdnnError
from .graph import Graph
from .serialization import FORMATS
from .tensor import TensorAttributes
from .types import DiagonalAlignment

__all__ = ["CliError", "detect_format", "load_graph", "main", "safe_text"]

PROG = "hipdnn-graph"


class CliError(Exception):
    """A usage or file problem: printed as ``hipdnn-graph: error: ...`` with exit status 2."""


_UTF8_BOM = b"\xef\xbb\xbf"
#: first bytes of a JSON document: object, array, string, number, true, false, null
_JSON_STARTS = frozenset(b'{["-0123456789tfn')
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


# ----- loading -----
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


def _read_capped(path: str, limit: int) -> bytes:
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
    from .descriptors import MAX_INPUT_BYTES

    data = _read_capped(path, MAX_INPUT_BYTES)
    fmt = detect_format(data)
    if fmt == "binary":
        return Graph.deserialize(data), fmt
    return Graph.from_json(data.removeprefix(_UTF8_BOM)), fmt


def _summary(graph: Graph, fmt: str) -> str:
    nodes = " -> ".join(f"{safe_text(n.name)} ({n.get_node_type().name})" for n in graph.nodes)
    name = safe_text(graph.get_name() or "<unnamed>")
    return (
        f"graph '{name}' ({fmt}): {len(graph.wire_tensors())} tensors, "
        f"{len(graph)} node(s): {nodes or 'none'}"
    )


# ----- validate -----
def _cmd_validate(args: argparse.Namespace, out: TextIO) -> int:
    graph, fmt = load_graph(args.file)
    graph.validate()
    print(f"OK: {_summary(graph, fmt)}", file=out)
    return 0


# ----- show -----
def _fmt_list(values: Sequence[int]) -> str:
    return "[" + ",".join(map(str, values)) + "]" if values else "[]"


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


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]


def _escape_names(graph: Graph) -> None:
    """Replace every name in ``graph`` (loaded only to be shown) by its :func:`safe_text`."""
    graph.set_name(safe_text(graph.get_name()))
    for tensor in graph.wire_tensors():
        tensor.set_name(safe_text(tensor.name))
    for node in graph.nodes:
        node.attributes.set_name(safe_text(node.name))


def _cmd_show(args: argparse.Namespace, out: TextIO) -> int:
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
        print(_summary(graph, fmt), file=out)
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
                    _fmt_list(t.dim),
                    _fmt_list(t.stride),
                    t.data_type.name,
                    "yes" if t.is_virtual else "no",
                    by_value,
                ]
            )
        for line in _table(rows):
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


# ----- run -----
class _Progress:
    """A plain-text progress bar on stderr (no dependency)."""

    def __init__(self, total: int, enabled: bool, stream: TextIO, width: int = 30) -> None:
        self.total, self.enabled, self.stream, self.width = total, enabled, stream, width
        self._last = -1

    def update(self, done: int, seconds: float) -> None:
        if not self.enabled:
            return
        filled = self.width * done // self.total
        if filled == self._last and done != self.total:
            return
        self._last = filled
        bar = "#" * filled + "-" * (self.width - filled)
        rate = f"{seconds / done * 1e3:.3f} ms/run" if done else ""
        self.stream.write(f"\r[{bar}] {done}/{self.total} {rate}")
        if done == self.total:
            self.stream.write("\n")
        self.stream.flush()


def _checksum(array: np.ndarray[Any, Any]) -> str:
    values = array.astype(np.float64)
    finite = np.isfinite(values)
    bad = int(values.size - finite.sum())
    total = float(values[finite].sum())
    absolute = float(np.abs(values[finite]).sum())
    return f"sum={total:.6g} abs_sum={absolute:.6g}" + (f" non_finite={bad}" if bad else "")


def _cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    from .backend.registry import current_registry
    from .testing.inputs import (
        default_device,
        graph_outputs,
        make_inputs,
        to_device,
        to_numpy,
        workspace_for,
    )

    if args.repeat < 1:
        raise CliError("--repeat must be at least 1")
    graph, _ = load_graph(args.file)
    graph.validate()
    if args.engine:
        names = [e.name for e in current_registry().engines()]
        if args.engine not in names:
            raise CliError(
                f"no engine named '{safe_text(args.engine)}'; available: "
                f"{', '.join(names) or 'none'}"
            )
        graph.set_preferred_engine_id_ext(args.engine)
    graph.build()
    engine = graph.get_plan_name()
    if args.engine and engine != args.engine:
        reason = graph.get_engine_refusals().get(args.engine, "its plan could not be built")
        print(
            safe_text(f"GRAPH_NOT_SUPPORTED: {args.engine} cannot run this graph: {reason}"),
            file=sys.stderr,
        )
        return 1
    device: str | None = _checked_device(args.device)
    if device == "auto":
        device = default_device(current_registry().find_engine(engine))
    elif device == "numpy":
        device = None
    pack = make_inputs(graph, np.random.default_rng(args.seed))
    workspace = workspace_for(graph, device)
    sync = _synchronizer(device)
    if device:
        pack = to_device(pack, device)
    show = args.progress == "always" or (
        args.progress == "auto" and args.repeat >= 10 and sys.stderr.isatty()
    )
    progress = _Progress(args.repeat, show, sys.stderr)
    times: list[float] = []
    started = time.perf_counter()
    for i in range(args.repeat):
        t0 = time.perf_counter()
        graph.execute(pack, workspace)
        sync()
        times.append(time.perf_counter() - t0)
        progress.update(i + 1, time.perf_counter() - started)
    median = statistics.median(times)
    buffers = f"torch tensors on {device}" if device else "NumPy arrays"
    print(
        f"graph '{safe_text(graph.get_name())}': engine {safe_text(engine)}, {buffers}, "
        f"workspace {graph.get_workspace_size()} bytes",
        file=out,
    )
    print(
        f"execute: median {median * 1e3:.3f} ms, min {min(times) * 1e3:.3f} ms "
        f"over {len(times)} run(s), seed {args.seed}",
        file=out,
    )
    print("outputs:", file=out)
    rows = []
    for t in graph_outputs(graph):
        rows.append(
            [
                safe_text(t.name),
                f"uid {t.uid}",
                _fmt_list(t.dim),
                t.data_type.name,
                _checksum(to_numpy(pack[t])),
            ]
        )
    for line in _table(rows) if rows else ["  (none: the graph has no non-virtual outputs)"]:
        print(line, file=out)
    return 0


_DEVICE = re.compile(r"auto|numpy|cpu|cuda(:\d{1,4})?")


def _checked_device(device: str) -> str:
    """``device`` when it is one ``run`` can use (``auto``, ``numpy``, ``cpu``, ``cuda[:N]``).

    Raises:
        CliError: for anything else (``meta`` tensors hold no data to run on).
    """
    if _DEVICE.fullmatch(device) is None:
        raise CliError(f"bad --device {safe_text(device)!r}: use auto, numpy, cpu, cuda or cuda:N")
    return device


def _non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _synchronizer(device: str | None) -> Any:
    """A function waiting for ``device`` to finish queued work (a no-op for NumPy/CPU)."""
    if not device:
        return lambda: None
    try:
        import torch
    except ImportError:
        raise CliError("--device needs torch (pip install 'hipdnn-graph[torch]')") from None
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise CliError(f"bad --device {device!r}: {exc}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise CliError(f"--device {device}: no CUDA or ROCm device is available")
        return lambda: torch.cuda.synchronize(dev)
    return lambda: None


# ----- backends -----
def _cmd_backends(args: argparse.Namespace, out: TextIO) -> int:
    from .backend.contract import engine_id
    from .backend.registry import current_registry, list_backends
    from .cli_backends import availability, probe_graphs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # load errors are listed below
        infos = list_backends()
    registry = current_registry()
    probes = probe_graphs()
    if not infos:
        print("no backend is registered", file=out)
    for info in infos:
        state = "loaded" if info.loaded else f"FAILED TO LOAD: {info.error}"
        print(safe_text(f"{info.name}  ({info.source})  {state}"), file=out)
        for name in info.engines:
            engine = registry.find_engine(name)
            priority = getattr(engine, "priority", "?")
            line = f"  {name}  id {engine_id(name):#018x}  priority {priority}"
            if engine is not None:
                line += f"  {availability(engine, probes)}"
            print(safe_text(line), file=out)
    return 0 if all(i.loaded for i in infos) else 1


# ----- convert, schema -----
def _cmd_convert(args: argparse.Namespace, out: TextIO) -> int:
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


def _cmd_schema(args: argparse.Namespace, out: TextIO) -> int:
    from .descriptors import json_schema

    out.write(json.dumps(json_schema(), indent=2) + "\n")
    return 0


# ----- argument parsing -----
def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    from . import __version__

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Inspect, validate, convert and run serialized hipdnn-graph graphs.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("validate", help="validate a graph file (JSON or binary)")
    p.add_argument("file", metavar="FILE")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("show", help="print tensors and nodes, or a DOT/Mermaid picture")
    p.add_argument("file", metavar="FILE")
    pic = p.add_mutually_exclusive_group()
    pic.add_argument("--dot", action="store_true", help="print Graphviz DOT")
    pic.add_argument("--mermaid", action="store_true", help="print a Mermaid flowchart")
    p.set_defaults(func=_cmd_show)

    p = sub.add_parser("run", help="execute a graph on random inputs")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--engine", metavar="NAME", help="engine to run on (default: best ranked)")
    p.add_argument(
        "--seed", type=_non_negative_int, default=0, help="seed of the random inputs (default 0)"
    )
    p.add_argument("--repeat", type=int, default=1, help="executions to time (default 1)")
    p.add_argument(
        "--device",
        metavar="DEVICE",
        default="auto",
        help="buffers: torch tensors on DEVICE (cuda, cuda:1, cpu), or numpy; auto (default): "
        "cuda for torch engines when a GPU is present, else NumPy arrays",
    )
    p.add_argument(
        "--progress",
        choices=("auto", "always", "never"),
        default="auto",
        help="progress bar on stderr (auto: for 10+ repeats on a terminal)",
    )
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("backends", help="list backends, engines, availability and load errors")
    p.set_defaults(func=_cmd_backends)

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
    p.set_defaults(func=_cmd_convert)

    p = sub.add_parser("schema", help="print the JSON Schema of the JSON format")
    p.set_defaults(func=_cmd_schema)
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
