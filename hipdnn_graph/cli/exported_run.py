"""``hipdnn-graph run-export``: run a directory :func:`hipdnn_graph.torch.export` wrote, every
step in order (:func:`~hipdnn_graph.torch.compile.replay_export`), and print the engine of each
hipDNN graph with a checksum of each value it made, and the model's outputs.

Each graph runs on the engine named (``--engine``; refused, exit 1, where that engine cannot run
a graph) or the best ranked one. Inputs are random (``--seed``: standard normal floats, integers
in ``[0, 8)``, random bools), from an ``.npz`` file (``--inputs``, keyed ``input_0``,
``input_1``, ...; the traced shapes; values cast within a kind) or, with ``--check``, the example
inputs the export saved; ``--check`` then compares each output with the model's saved one:
``max|got - expected| <= atol + rtol * max|expected|`` with its dtype's tolerance
(:data:`~hipdnn_graph.testing.TOLERANCES`: FLOAT ``1e-4, 1e-4``, ...; exact for integer and bool
outputs), NaNs where the model has them; any other output fails the command (exit 1).

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="hipdnn-graph")
    >>> add_parsers(parser.add_subparsers())
    >>> args = parser.parse_args(["run-export", "out", "--check"])
    >>> args.check, args.engine, args.seed, args.device, args.save
    (True, None, 0, 'cpu', None)
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import HipdnnError
from ..types import ErrorCode
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
from .exported import read_export
from .run import checksum

if TYPE_CHECKING:
    import numpy as np
    import torch

__all__ = ["add_parsers", "cmd_run_export", "compare"]

_INPUT_KEY = re.compile(r"input_(0|[1-9]\d{0,5})")


def _numpy(t: torch.Tensor) -> np.ndarray[Any, Any]:
    from ..torch.compile._replay import numpy_values

    values: np.ndarray[Any, Any] = numpy_values(t)
    return values


def compare(
    got: np.ndarray[Any, Any], expected: np.ndarray[Any, Any], dtype: str
) -> tuple[float, float]:
    """``(max|got - expected|, limit)`` with the limit of ``dtype`` (a torch dtype's name):
    ``atol + rtol * max|expected|`` of :data:`~hipdnn_graph.testing.TOLERANCES` for floating
    types, 0 for the others. A NaN where ``expected`` has none (or none where it has one) is an
    infinite difference.

    Example:
        >>> import numpy as np
        >>> diff, limit = compare(np.array([1.0, 2.00001]), np.array([1.0, 2.0]), "float32")
        >>> f"{diff:.1e} <= {limit:.1e}"
        '1.0e-05 <= 3.0e-04'
    """
    import numpy as np

    from ..testing.conformance import TOLERANCES
    from ..types import DataType

    types = {
        "float64": DataType.DOUBLE,
        "float32": DataType.FLOAT,
        "float16": DataType.HALF,
        "bfloat16": DataType.BFLOAT16,
    }
    a, b = got.astype(np.float64), expected.astype(np.float64)
    if a.shape != b.shape or (np.isnan(a) != np.isnan(b)).any():
        return float("inf"), 0.0
    same = (a == b) | np.isnan(b)  # equal, infinities included, or NaN on both sides
    with np.errstate(invalid="ignore"):  # inf - inf where both are inf: masked by ``same``
        diff = float(np.where(same, 0.0, np.abs(a - b)).max(initial=0.0))
    tol = TOLERANCES.get(types[dtype]) if dtype in types else None
    if tol is None:
        return diff, 0.0
    finite = b[np.isfinite(b)]
    return diff, tol.limit(float(np.abs(finite).max(initial=0.0)))


def _random_inputs(manifest: dict[str, Any], seed: int) -> list[torch.Tensor]:
    import torch

    from ..torch.compile._manifest import torch_dtype

    gen = torch.Generator().manual_seed(seed)
    made = []
    for i in manifest["inputs"]:
        dtype = torch_dtype(i["dtype"])
        if dtype.is_floating_point or dtype.is_complex:
            made.append(torch.randn(i["shape"], generator=gen, dtype=dtype))
        elif dtype == torch.bool:
            made.append(torch.rand(i["shape"], generator=gen) < 0.5)
        else:
            made.append(torch.randint(0, 8, i["shape"], generator=gen, dtype=dtype))
    return made


def _read_values(
    path: str, manifest: dict[str, Any], what: str, *, outputs: bool
) -> tuple[list[torch.Tensor], list[np.ndarray[Any, Any]]]:
    """The model's inputs from ``input_<i>`` of the ``.npz`` file ``path`` and, with
    ``outputs``, its outputs from ``output_<i>``; each member's header is checked (its key,
    shape and type) before its data is read.

    Raises:
        CliError: the file cannot be read (``what`` says what it was to give).
        HipdnnError: ``INVALID_TENSOR_NAME`` for another key; ``INVALID_VARIANT_PACK`` for a
            member of another shape, of values of another kind, or one missing.
    """
    import numpy as np
    import torch

    from ..torch.compile._manifest import torch_dtype
    from .npz import read_npz

    wanted = {f"input_{k}": i for k, i in enumerate(manifest["inputs"])}
    if outputs:
        wanted.update((f"output_{k}", o) for k, o in enumerate(manifest["outputs"]))
    dtypes = {key: torch_dtype(entry["dtype"]) for key, entry in wanted.items()}

    def check(key: str, shape: tuple[int, ...], dtype: Any) -> None:
        if key not in wanted:
            raise HipdnnError(
                ErrorCode.INVALID_TENSOR_NAME,
                safe_text(f"'{key}' in {path} is none of {', '.join(wanted) or 'no key'}"),
            )
        into = _numpy(torch.empty(0, dtype=dtypes[key])).dtype
        if list(shape) != wanted[key]["shape"] or not np.can_cast(dtype, into, "same_kind"):
            raise HipdnnError(
                ErrorCode.INVALID_VARIANT_PACK,
                safe_text(
                    f"{key} in {path} is {np.dtype(dtype)} of shape {list(shape)}; the "
                    f"model's {key.replace('_', ' ')} is {wanted[key]['dtype']} of shape "
                    f"{wanted[key]['shape']}"
                ),
            )

    arrays = read_npz(path, check, what)
    missing = [key for key in wanted if key not in arrays]
    if missing:
        raise HipdnnError(
            ErrorCode.INVALID_VARIANT_PACK, safe_text(f"{path} holds no {', '.join(missing)}")
        )
    inputs = [
        torch.from_numpy(np.ascontiguousarray(arrays[key])).to(dtypes[key])
        for key in wanted
        if key.startswith("input_")
    ]
    return inputs, [np.asarray(arrays[key]) for key in wanted if key.startswith("output_")]


def _checked_device(device: str) -> str:
    import torch

    checked_device(device, ("cpu",))
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise CliError(f"--device {device}: no CUDA or ROCm device is available")
    return device


def cmd_run_export(args: argparse.Namespace, out: TextIO) -> int:
    root, manifest = read_export(args.path)  # a CliError without torch
    from ..torch.compile import replay_export

    if args.engine is not None:
        check_engine_name(args.engine)
    device = _checked_device(args.device)
    reference: dict[str, Any] = manifest.get("reference") or {}
    if args.check and not reference:
        raise CliError(
            f"'{safe_text(args.path)}' saved no reference outputs (its manifest names no "
            "reference file): --check has nothing to compare with"
        )
    expected: list[np.ndarray[Any, Any]] = []
    if args.check:
        ref_file = str(root / reference["file"])
        inputs, expected = _read_values(ref_file, manifest, "the reference from", outputs=True)
        source = f"the example inputs of {safe_text(reference['file'])}"
    elif args.inputs is not None:
        inputs, _ = _read_values(args.inputs, manifest, "inputs from", outputs=False)
        source = f"inputs from {safe_text(args.inputs)}"
    else:
        inputs = _random_inputs(manifest, args.seed)
        source = f"random inputs, seed {args.seed}"
    for step in manifest["steps"]:  # every graph file readable before anything runs
        if step["kind"] == "hipdnn":
            load_graph(str(root / step["file"]))
    done = replay_export(
        root, inputs, engine=args.engine, require_engine=args.engine is not None, device=device
    )
    print(f"export '{safe_text(str(root))}': {source}, on {device}", file=out)
    for step in manifest["steps"]:
        if step["kind"] != "hipdnn":
            continue
        engine = done.engines[step["subgraph"]]
        print(
            f"graph {step['subgraph']} ({safe_text(step['file'])}): engine {safe_text(engine)}",
            file=out,
        )
        rows = [
            [
                safe_text(o["ref"]),
                fmt_list(o["shape"]),
                safe_text(o["dtype"]),
                checksum(_numpy(done.values[o["ref"]])),
            ]
            for o in step["outputs"]
        ]
        for line in table(rows):
            print(line, file=out)
    print("outputs:", file=out)
    got = [_numpy(t) for t in done.outputs]
    rows = [
        [f"output {k}", fmt_list(list(t.shape)), str(t.dtype).removeprefix("torch."), checksum(a)]
        for k, (t, a) in enumerate(zip(done.outputs, got, strict=True))
    ]
    for line in table(rows) if rows else ["  (none)"]:
        print(line, file=out)
    if args.save is not None:
        from .npz import save_npz

        save_npz(args.save, {f"output_{k}": a for k, a in enumerate(got)})
        print(f"saved {len(got)} output(s) to {safe_text(args.save)}", file=out)
    if not args.check:
        return 0
    return _check(reference["file"], done.outputs, got, expected, out)


def _check(
    name: str,
    outputs: list[torch.Tensor],
    got: list[np.ndarray[Any, Any]],
    expected: list[np.ndarray[Any, Any]],
    out: TextIO,
) -> int:
    """Print each output's difference from the model's; 1 (and why, on stderr) where one
    exceeds its limit (:func:`compare`)."""
    print(f"check against the model's outputs in {safe_text(name)}:", file=out)
    rows, failed = [], []
    for k, (t, a, e) in enumerate(zip(outputs, got, expected, strict=True)):
        dtype = str(t.dtype).removeprefix("torch.")
        diff, limit = compare(a, e, dtype)
        ok = diff <= limit
        rows.append(
            [
                f"output {k}",
                f"max|diff| {diff:.3g}",
                f"limit {limit:.3g} ({dtype})",
                "ok" if ok else "FAILED",
            ]
        )
        if not ok:
            failed.append(f"output {k} differs by {diff:.3g} (limit {limit:.3g})")
    for line in table(rows) if rows else ["  (no outputs)"]:
        print(line, file=out)
    if failed:
        print(f"check failed: {'; '.join(failed)}", file=sys.stderr)
        return 1
    print("every output is the model's within its dtype's tolerance", file=out)
    return 0


def add_parsers(sub: Any) -> None:
    """Add ``run-export`` to the subparsers ``sub``."""
    p = sub.add_parser(
        "run-export", help="run an export directory's graphs and aten steps, optionally checked"
    )
    p.add_argument("path", metavar="DIR", help="an export directory or its manifest.json")
    p.add_argument("--engine", metavar="NAME", help="engine of every graph (default: best ranked)")
    given = p.add_mutually_exclusive_group()
    given.add_argument(
        "--inputs",
        metavar="NPZ",
        help="the model's inputs: an .npz file keyed input_0, input_1, ...",
    )
    given.add_argument(
        "--check",
        action="store_true",
        help="run the saved example inputs and compare with the model's saved outputs",
    )
    p.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        help="seed of the random inputs (default 0; not used with --inputs or --check)",
    )
    p.add_argument("--save", metavar="NPZ", help="save the outputs (output_0, ...) to this .npz")
    p.add_argument(
        "--device", metavar="DEVICE", default="cpu", help="cpu (default), cuda or cuda:N"
    )
    p.set_defaults(func=cmd_run_export)
