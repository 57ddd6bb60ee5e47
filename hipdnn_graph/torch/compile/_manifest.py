"""The export directory's ``manifest.json``: its format name, its files, and the check that a
document is one (every field of the right kind, every ref made before it is read).

The format is described in docs/torch-compile.md ("Export"); :func:`check_manifest` is what
:func:`~hipdnn_graph.torch.compile.run_export` and the ``hipdnn-graph show-export`` /
``run-export`` commands trust a manifest with: whatever a file holds, it is refused here with
``INVALID_VALUE`` and the place named (``steps[2].inputs[0].uid``), never later with a
``KeyError``. Its shapes are checked before anything is allocated for them: no negative dim,
and the tensors that replaying it allocates (the model's inputs, each hipDNN step's outputs)
within :func:`~hipdnn_graph.backend.allocation.allocation_limit` (64 GiB unless
``HIPDNN_GRAPH_MAX_ALLOCATION`` says otherwise), so that a few bytes of manifest cannot ask for
terabytes; an aten step's arguments nest at most :data:`MAX_NESTING` lists deep.

Example:
    >>> doc = {"format": FORMAT, "version": 1, "graph_format": "json", "inputs": [],
    ...        "weights": {"file": "weights.pt", "refs": {}}, "steps": [], "outputs": []}
    >>> check_manifest(doc) == doc
    True
    >>> try:
    ...     check_manifest({**doc, "outputs": [{"ref": "y", "shape": [2], "dtype": "float32"}]})
    ... except HipdnnError as err:
    ...     print(err.code.name, err.message)
    INVALID_VALUE manifest: outputs[0] reads 'y', which no input, weight or earlier step makes
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch

from ...backend.allocation import LIMIT_VARIABLE, allocation_limit
from ...errors import HipdnnError
from ...types import ErrorCode

__all__ = [
    "FORMAT",
    "GRAPH_SUFFIXES",
    "MANIFEST",
    "MAX_NESTING",
    "REFERENCE",
    "WEIGHTS",
    "check_manifest",
    "read_manifest",
    "torch_dtype",
]

#: the manifest's ``format`` value; ``version`` is 1
FORMAT = "hipdnn-graph-export"
#: the file name of the manifest in an export directory
MANIFEST = "manifest.json"
#: the file of the model's parameters and buffers (``torch.save`` of ``{name: tensor}``)
WEIGHTS = "weights.pt"
#: the file of the example inputs and the model's outputs on them (NumPy ``.npz``)
REFERENCE = "reference.npz"
#: each ``graph_format`` and the suffix of its subgraph files
GRAPH_SUFFIXES = {"json": ".json", "bin": ".bin"}
#: how deep an aten step's arguments may nest lists (a traced call nests two or three)
MAX_NESTING = 32


def _refuse(where: str, what: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, f"manifest: {where} {what}")


def _kind(value: Any, where: str, kind: str) -> Any:
    """``value`` when it is of ``kind`` (``str``, ``int``, ``ints``, ``list``, ``dict``)."""
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "ints": isinstance(value, list)
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value),
        "list": isinstance(value, list),
        "dict": isinstance(value, dict),
    }[kind]
    if not ok:
        words = {"str": "a string", "int": "an integer", "ints": "a list of integers"}
        got = json.dumps(value)[:60]
        raise _refuse(where, f"must be {words.get(kind, 'a JSON ' + kind)}, got {got}")
    return value


def _fields(entry: Any, where: str, **kinds: str) -> dict[str, Any]:
    """``entry``, a JSON object holding each of ``kinds``' keys with a value of that kind."""
    _kind(entry, where, "dict")
    for key, kind in kinds.items():
        if key not in entry:
            raise _refuse(where, f"has no '{key}'")
        _kind(entry[key], f"{where}.{key}", kind)
    return dict(entry)


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype a manifest names.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a name that is no torch dtype.
    """
    dtype = getattr(torch, name, None) if name.isidentifier() else None
    if not isinstance(dtype, torch.dtype):
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"manifest: {name!r} is no torch dtype")
    return dtype


class _Bytes:
    """The bytes the tensors a manifest declares take, refused past the allocation limit."""

    def __init__(self) -> None:
        self.total = 0
        self.limit = allocation_limit()

    def add(self, entry: dict[str, Any], where: str, stride: bool = False) -> None:
        """Count ``entry``'s ``shape`` (and ``stride``: the span it addresses) of its dtype."""
        shape = _extent(entry["shape"], f"{where}.shape")
        elements, what = math.prod(shape), f"of shape {shape}"
        if stride:
            strides = _extent(entry["stride"], f"{where}.stride")
            if len(strides) != len(shape):
                raise _refuse(
                    f"{where}.stride", f"has {len(strides)} entries for {len(shape)} dims"
                )
            if elements:
                span = 1 + sum((d - 1) * s for d, s in zip(shape, strides, strict=True))
                elements = max(elements, span)
            what += f" and stride {strides}"
        self.total += elements * torch_dtype(entry["dtype"]).itemsize
        if self.total > self.limit:
            raise _refuse(
                where,
                f"{what} takes the tensors replayed to {self.total} bytes, more than the limit "
                f"of {self.limit}; set {LIMIT_VARIABLE} (bytes, or e.g. 256GiB) to raise it",
            )


def _extent(value: list[int], where: str) -> list[int]:
    """Dims or strides: none negative."""
    if any(v < 0 for v in value):
        raise _refuse(where, f"must not be negative, got {value}")
    return value


def _file_name(name: str, where: str) -> None:
    """A plain file name inside the directory (no folder, no ``..``)."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise _refuse(where, f"must name a file in the export directory, got {name!r}")


class _Refs:
    """The refs made so far; a read of another one is refused."""

    def __init__(self) -> None:
        self.made: set[str] = set()

    def make(self, ref: str, where: str) -> None:
        if ref in self.made:
            raise _refuse(where, f"makes '{ref}' again")
        self.made.add(ref)

    def read(self, ref: Any, where: str) -> None:
        _kind(ref, where, "str")
        if ref not in self.made:
            raise _refuse(where, f"reads '{ref}', which no input, weight or earlier step makes")

    def read_args(self, value: Any, where: str, depth: int = 0) -> None:
        """Every ``{"ref": ...}`` inside an aten step's encoded arguments."""
        if isinstance(value, list):
            if depth > MAX_NESTING:
                raise _refuse(where, f"nests lists more than {MAX_NESTING} deep")
            for k, v in enumerate(value):
                self.read_args(v, f"{where}[{k}]", depth + 1)
        elif isinstance(value, dict):
            if "ref" in value:
                self.read(value["ref"], where)
            elif len(value) != 1 or not ({"dtype", "device", "torch"} & set(value)):
                raise _refuse(where, f"is no encoded argument: {json.dumps(value)[:60]}")


def _check_hipdnn(step: dict[str, Any], where: str, suffix: str, refs: _Refs, made: _Bytes) -> None:
    _fields(step, where, subgraph="int", file="str", inputs="list", outputs="list")
    _file_name(step["file"], f"{where}.file")
    if not step["file"].endswith(suffix):
        raise _refuse(
            f"{where}.file", f"must end with {suffix} (the graph_format), got {step['file']!r}"
        )
    for k, entry in enumerate(step["inputs"]):
        at = f"{where}.inputs[{k}]"
        _fields(entry, at, tensor="str", uid="int", dims="ints", **{"from": "dict"})
        _extent(entry["dims"], f"{at}.dims")
        refs.read(entry["from"].get("ref"), f"{at}.from")
    for k, entry in enumerate(step["outputs"]):
        at = f"{where}.outputs[{k}]"
        _fields(entry, at, ref="str", tensor="str", uid="int", shape="ints", stride="ints")
        _fields(entry, at, dtype="str")
        made.add(entry, at, stride=True)
        refs.make(entry["ref"], at)


def check_manifest(doc: Any) -> dict[str, Any]:
    """A copy of ``doc`` when it is an export manifest (version 1) whose every ref is made
    before it is read; its subgraph files are plain names in the directory with the graph
    format's suffix.

    Raises:
        HipdnnError: ``INVALID_VALUE``, ``manifest: <where> <what is wrong>``.
    """
    _kind(doc, "the document", "dict")
    if doc.get("format") != FORMAT:
        raise _refuse("format", f"must be {FORMAT!r}, got {json.dumps(doc.get('format'))}")
    version = doc.get("version")
    if type(version) is not int or version != 1:  # true and 1.0 are no version 1
        raise _refuse("version", f"must be 1, got {json.dumps(doc.get('version'))}")
    fmt = doc.get("graph_format")
    if fmt not in GRAPH_SUFFIXES:
        raise _refuse(
            "graph_format", f"must be one of {list(GRAPH_SUFFIXES)}, got {json.dumps(fmt)}"
        )
    _fields(doc, "the document", inputs="list", weights="dict", steps="list", outputs="list")
    refs, made = _Refs(), _Bytes()
    for k, entry in enumerate(doc["inputs"]):
        _fields(entry, f"inputs[{k}]", ref="str", shape="ints", dtype="str")
        made.add(entry, f"inputs[{k}]")
        refs.make(entry["ref"], f"inputs[{k}]")
    weights = _fields(doc["weights"], "weights", file="str", refs="dict")
    _file_name(weights["file"], "weights.file")
    for ref, name in weights["refs"].items():
        _kind(name, f"weights.refs[{ref!r}]", "str")
        refs.make(ref, f"weights.refs[{ref!r}]")
    subgraphs: dict[int, str] = {}
    for k, step in enumerate(doc["steps"]):
        where = f"steps[{k}]"
        _fields(step, where, kind="str", name="str")
        if step["kind"] == "hipdnn":
            _check_hipdnn(step, where, GRAPH_SUFFIXES[fmt], refs, made)
            if step["subgraph"] in subgraphs:
                raise _refuse(
                    f"{where}.subgraph",
                    f"{step['subgraph']} is {subgraphs[step['subgraph']]}'s too",
                )
            subgraphs[step["subgraph"]] = where
        elif step["kind"] == "aten":
            _fields(step, where, op="str", args="list", kwargs="dict")
            refs.read_args(step["args"], f"{where}.args")
            refs.read_args(list(step["kwargs"].values()), f"{where}.kwargs")
            refs.make(step["name"], where)
        else:
            raise _refuse(f"{where}.kind", f"must be 'hipdnn' or 'aten', got {step['kind']!r}")
    for k, entry in enumerate(doc["outputs"]):
        _fields(entry, f"outputs[{k}]", ref="str", shape="ints", dtype="str")
        _extent(entry["shape"], f"outputs[{k}].shape")
        torch_dtype(entry["dtype"])
        refs.read(entry["ref"], f"outputs[{k}]")
    if "reference" in doc:
        reference = _fields(doc["reference"], "reference", file="str")
        _file_name(reference["file"], "reference.file")
    return dict(doc)


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """The checked manifest of the export ``directory``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a directory without a readable ``manifest.json``, a
            file that is not JSON, or a document :func:`check_manifest` refuses.
    """
    path = Path(directory) / MANIFEST
    try:
        doc = json.loads(path.read_bytes())
    except OSError as err:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"no export manifest at {path}: {err.strerror or err}"
        ) from None
    except (ValueError, RecursionError) as err:  # RecursionError: arrays nested too deep
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"{path} is not JSON: {err}") from None
    return check_manifest(doc)
