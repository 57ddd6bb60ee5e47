"""Run an export directory again: its steps in manifest order, hipDNN subgraphs on an engine
(built from their files), the aten ops between them with torch.

:func:`replay_export` says which engine ran each subgraph and keeps every value it made (the
``hipdnn-graph run-export`` command prints them); :func:`run_export` returns the model's outputs
only. The directory's format is described in docs/torch-compile.md ("Export").

Example:
    >>> import tempfile, torch
    >>> from hipdnn_graph.torch.compile import export
    >>> mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
    >>> x = torch.randn(2, 4)
    >>> with tempfile.TemporaryDirectory() as out:
    ...     _ = export(mlp, (x,), out)
    ...     done = replay_export(out, (x,), engine=None)  # the best ranked engine of each graph
    >>> len(done.engines), torch.allclose(done.outputs[0], mlp(x), atol=1e-5)
    (1, True)
"""

from __future__ import annotations

import operator
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ...descriptors import MAX_INPUT_BYTES
from ...errors import HipdnnError
from ...graph import Graph
from ...types import ErrorCode
from ._manifest import read_manifest, torch_dtype

__all__ = [
    "ExportRun",
    "dtype_name",
    "load_graph",
    "numpy_values",
    "replay_export",
    "run_export",
]


def dtype_name(dtype: torch.dtype) -> str:
    """The manifest's name of a torch dtype (``"float32"``)."""
    return str(dtype).removeprefix("torch.")


def numpy_values(t: torch.Tensor) -> Any:
    """A tensor's values as a NumPy array on the host; the types NumPy has no code for
    (bfloat16, the float8 types) as float32, which holds each of their values exactly."""
    t = t.detach().cpu()
    if t.dtype.is_floating_point and t.dtype not in (torch.float16, torch.float32, torch.float64):
        t = t.float()
    return t.numpy()


def _resolve_op(name: str) -> Any:
    """The op an aten step names: ``getitem`` or ``aten.<op>.<overload>`` (no other namespace)."""
    if name == "getitem":
        return operator.getitem
    parts = name.split(".")
    op = None
    if len(parts) == 3 and parts[0] == "aten":
        op = getattr(getattr(torch.ops.aten, parts[1], None), parts[2], None)
    if not isinstance(op, torch._ops.OpOverload):
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"manifest: {name!r} is no aten op overload")
    return op


def _decode(value: Any, env: dict[str, Any], device: torch.device) -> Any:
    if isinstance(value, list):
        return [_decode(v, env, device) for v in value]
    if isinstance(value, dict):
        if "ref" in value:
            return env[value["ref"]]
        if "dtype" in value:
            return torch_dtype(value["dtype"])
        if "device" in value:  # the traced device: the replay's
            return device
        layout = getattr(torch, str(value["torch"]), None)
        if not isinstance(layout, torch.memory_format | torch.layout):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, f"manifest: {value['torch']!r} is no torch layout"
            )
        return layout
    return value


@contextmanager
def _refused(where: str) -> Iterator[None]:
    """What torch refuses in the block (a manifest's dims, strides or arguments that do not fit
    its values) as ``INVALID_VALUE`` naming ``where``."""
    try:
        yield
    except (RuntimeError, TypeError, ValueError, IndexError) as err:
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"manifest: {where} failed: {err}") from None


def load_graph(directory: str | Path, step: dict[str, Any]) -> Graph:
    """The hipDNN graph of one ``"hipdnn"`` step of an export, read back from its file.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a file that cannot be read, is not a regular file (a
            device or pipe) or is larger than a serialized graph may be; the decoder's errors.
    """
    path = Path(directory) / step["file"]
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a device or pipe: no end to read to
            raise HipdnnError(ErrorCode.INVALID_VALUE, f"cannot read {path}: not a regular file")
        with path.open("rb") as file:
            data = file.read(MAX_INPUT_BYTES + 1)
    except OSError as err:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"cannot read {path}: {err.strerror or err}"
        ) from None
    if len(data) > MAX_INPUT_BYTES:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"{path} holds more than {MAX_INPUT_BYTES} bytes, the limit of a serialized graph",
        )
    if str(step["file"]).endswith(".bin"):
        return Graph.deserialize(data)
    return Graph.from_json(data)


@dataclass
class ExportRun:
    """What :func:`replay_export` did.

    Attributes:
        outputs: the model's outputs (its result flattened).
        engines: the engine that ran each subgraph, by subgraph number.
        values: every value made, by its ref (inputs, weights, aten results, graph outputs).
    """

    outputs: list[torch.Tensor]
    engines: dict[int, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)


def _checked_inputs(manifest: dict[str, Any], inputs: Sequence[torch.Tensor]) -> None:
    if len(inputs) != len(manifest["inputs"]):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"run_export: the model takes {len(manifest['inputs'])} inputs, got {len(inputs)}",
        )
    for number, (want, x) in enumerate(zip(manifest["inputs"], inputs, strict=True)):
        if not isinstance(x, torch.Tensor) or [list(x.shape), x.dtype] != [
            want["shape"],
            torch_dtype(want["dtype"]),
        ]:
            got = [list(x.shape), x.dtype] if isinstance(x, torch.Tensor) else type(x).__name__
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"run_export: input {number} must be a {want['dtype']} tensor of shape "
                f"{want['shape']} (the traced one), got {got}",
            )


def _load_weights(root: Path, manifest: dict[str, Any], device: torch.device) -> dict[str, Any]:
    file = root / manifest["weights"]["file"]
    try:
        weights = torch.load(file, weights_only=True, map_location=device)
    except Exception as err:  # whatever torch.load refused, named
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"cannot load {file}: {err}") from None
    refs = manifest["weights"]["refs"]
    if not isinstance(weights, dict) or not all(
        isinstance(weights.get(n), torch.Tensor) for n in refs.values()
    ):
        missing = sorted(set(refs.values()) - set(weights if isinstance(weights, dict) else ()))
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"{file} lacks the tensors {missing}")
    return {ref: weights[name] for ref, name in refs.items()}


def _run_graph(
    root: Path,
    step: dict[str, Any],
    env: dict[str, Any],
    engine: str | None,
    require_engine: bool,
) -> str:
    """Build and run one subgraph on ``env``'s values; returns the engine that ran it."""
    graph = load_graph(root, step)
    if engine is not None:
        graph.set_preferred_engine_id_ext(engine)
    graph.build()
    ran = str(graph.get_plan_name())
    if require_engine and engine is not None and ran != engine:
        reason = graph.get_engine_refusals().get(engine, "its plan could not be built")
        raise HipdnnError(
            ErrorCode.GRAPH_NOT_SUPPORTED,
            f"subgraph {step['subgraph']} ({step['file']}): {engine} cannot run it: {reason}",
        )
    by_uid = {t.get_uid(): t for t in graph.tensors}
    pack = {}
    for i in step["inputs"]:
        where = f"the input '{i['tensor']}' (uid {i['uid']}) of {step['file']}"
        if i["uid"] not in by_uid:
            raise HipdnnError(ErrorCode.INVALID_VALUE, f"manifest: {where} is not in the graph")
        with _refused(f"{where}: its value"):
            pack[by_uid[i["uid"]]] = env[i["from"]["ref"]].view(i["dims"])
    results = graph.run(pack)  # torch tensors in, torch tensors out, whatever the engine
    for o in step["outputs"]:  # the shape, strides and type the traced model had
        where = f"the output '{o['tensor']}' (uid {o['uid']}) of {step['file']}"
        if by_uid.get(o["uid"]) not in results:
            raise HipdnnError(ErrorCode.INVALID_VALUE, f"manifest: {where} is no graph output")
        result = results[by_uid[o["uid"]]]
        with _refused(where):
            like = torch.empty_strided(
                o["shape"], o["stride"], dtype=torch_dtype(o["dtype"]), device=result.device
            )
            env[o["ref"]] = like.copy_(result.reshape(o["shape"]))
    return ran


def replay_export(
    directory: str | Path,
    inputs: Sequence[torch.Tensor],
    *,
    engine: str | None = "NUMPY_REFERENCE_ENGINE",
    require_engine: bool = False,
    device: str | torch.device = "cpu",
) -> ExportRun:
    """Run an exported model: its steps in manifest order, hipDNN subgraphs built from their
    files and run (on ``engine`` where it can, the best ranked engine where ``engine`` is
    ``None``), aten ops with torch.

    Args:
        directory: an export directory (:func:`~hipdnn_graph.torch.compile.export`).
        inputs: the model's inputs, of the traced shapes and types.
        engine: the engine preferred for every subgraph; ``None``: the best ranked one.
        require_engine: refuse a subgraph ``engine`` cannot run instead of running it on
            another engine.
        device: where the weights and inputs are put (and the aten steps' devices).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a directory whose manifest is not an export's (see
            :func:`~hipdnn_graph.torch.compile.check_manifest`), weights it lacks, or inputs of
            another count, shape or type than traced; ``GRAPH_NOT_SUPPORTED`` for a subgraph
            ``engine`` cannot run under ``require_engine``; the errors of loading, building or
            running a graph.
    """
    root = Path(directory)
    manifest = read_manifest(root)
    _checked_inputs(manifest, inputs)
    where = torch.device(device)
    env: dict[str, Any] = _load_weights(root, manifest, where)
    env.update((i["ref"], x.to(where)) for i, x in zip(manifest["inputs"], inputs, strict=True))
    engines: dict[int, str] = {}
    for number, step in enumerate(manifest["steps"]):
        if step["kind"] == "aten":
            args = _decode(step["args"], env, where)
            kwargs = {k: _decode(v, env, where) for k, v in step["kwargs"].items()}
            with _refused(f"aten step {number} ({step['op']})"):
                env[step["name"]] = _resolve_op(step["op"])(*args, **kwargs)
        else:
            engines[step["subgraph"]] = _run_graph(root, step, env, engine, require_engine)
    return ExportRun([env[o["ref"]] for o in manifest["outputs"]], engines, env)


def run_export(
    directory: str | Path,
    inputs: Sequence[torch.Tensor],
    *,
    engine: str = "NUMPY_REFERENCE_ENGINE",
) -> list[torch.Tensor]:
    """The model's outputs (flattened) from :func:`replay_export` of ``directory`` with
    ``engine`` preferred for every subgraph; raises as it does."""
    return replay_export(directory, inputs, engine=engine).outputs
