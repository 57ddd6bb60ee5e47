"""``hipdnn-graph run``: execute a graph file on the engine ranked first or the one named, on
the inputs of an ``.npz`` file (``--inputs``, by tensor name or uid; see
:mod:`~hipdnn_graph.cli.npz`) or random ones; print the engine, the time and a checksum of each
output, and save the outputs to an ``.npz`` file (``--save``).

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="hipdnn-graph")
    >>> add_parsers(parser.add_subparsers())
    >>> args = parser.parse_args(["run", "g.json", "--repeat", "3"])
    >>> args.repeat, args.seed, args.device, args.inputs, args.save
    (3, 0, 'auto', None, None)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from .common import (
    CliError,
    check_engine_name,
    checked_device,
    fmt_list,
    load_graph,
    non_negative_int,
    safe_text,
    table,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = ["add_parsers", "checksum", "cmd_run"]


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


def checksum(array: np.ndarray[Any, Any]) -> str:
    """``sum=<s> abs_sum=<a>`` over the finite values, and how many are not finite."""
    import numpy as np

    values = array.astype(np.float64)
    finite = np.isfinite(values)
    bad = int(values.size - finite.sum())
    total = float(values[finite].sum())
    absolute = float(np.abs(values[finite]).sum())
    return f"sum={total:.6g} abs_sum={absolute:.6g}" + (f" non_finite={bad}" if bad else "")


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    import numpy as np

    from ..backend.registry import current_registry
    from ..testing.inputs import (
        default_device,
        graph_outputs,
        make_inputs,
        to_device,
        to_numpy,
        workspace_for,
    )
    from . import npz as cli_npz

    if args.repeat < 1:
        raise CliError("--repeat must be at least 1")
    graph, _ = load_graph(args.file)
    graph.validate()
    given = None
    if args.inputs is not None:  # checked before a plan is built (which may compile)
        graph.build_operation_graph()  # gives every tensor its uid
        given = cli_npz.inputs_from(cli_npz.load_npz(args.inputs, graph), graph)
    if args.engine:
        check_engine_name(args.engine)
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
    # never ``meta``: its tensors hold no data to run on
    device: str | None = checked_device(args.device, ("auto", "numpy", "cpu"))
    if device == "auto":
        device = default_device(current_registry().find_engine(engine))
    elif device == "numpy":
        device = None
    pack = given if given is not None else make_inputs(graph, np.random.default_rng(args.seed))
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
    source = f"inputs from {safe_text(args.inputs)}" if args.inputs else f"seed {args.seed}"
    print(
        f"execute: median {median * 1e3:.3f} ms, min {min(times) * 1e3:.3f} ms "
        f"over {len(times)} run(s), {source}",
        file=out,
    )
    print("outputs:", file=out)
    rows = []
    for t in graph_outputs(graph):
        rows.append(
            [
                safe_text(t.name),
                f"uid {t.uid}",
                fmt_list(t.dim),
                t.data_type.name,
                checksum(to_numpy(pack[t])),
            ]
        )
    for line in table(rows) if rows else ["  (none: the graph has no non-virtual outputs)"]:
        print(line, file=out)
    if args.save is not None:
        saved = {key: to_numpy(pack[t]) for key, t in cli_npz.output_keys(graph).items()}
        cli_npz.save_npz(args.save, saved)
        print(f"saved {len(saved)} output(s) to {safe_text(args.save)}", file=out)
    return 0


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


def add_parsers(sub: Any) -> None:
    """Add ``run`` to the subparsers ``sub``."""
    p = sub.add_parser("run", help="execute a graph on given or random inputs")
    p.add_argument("file", metavar="FILE")
    p.add_argument(
        "--inputs",
        metavar="NPZ",
        help="the inputs, a NumPy .npz file keyed by tensor name or uid (default: random inputs)",
    )
    p.add_argument("--save", metavar="NPZ", help="save the outputs to this .npz file")
    p.add_argument("--engine", metavar="NAME", help="engine to run on (default: best ranked)")
    p.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        help="seed of the random inputs (default 0; not used with --inputs)",
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
    p.set_defaults(func=cmd_run)
