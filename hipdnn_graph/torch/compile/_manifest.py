"""The export directory's ``manifest.json``: its format name, its files, and the check that a
document is one (every field of the right kind, every ref made before it is read).

The format is described in docs/torch-compile.md ("Export"); :func:`check_manifest` is what
:func:`~hipdnn_graph.torch.compile.run_export` and the ``hipdnn-graph show-export`` /
``run-export`` commands trust a manifest with: whatever a file holds, it is refused here with
``INVALID_VALUE`` and the place named (``steps[2].inputs[0].uid``), never later with a
``KeyError``.

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
from pathlib import Path
from typing import Any

from ...errors import HipdnnError
from ...types import ErrorCode

__all__ = [
    "FORMAT",
    "GRAPH_SUFFIXES",
    "MANIFEST",
    "REFERENCE",
    "WEIGHTS",
    "check_manifest",
    "read_manifest",
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

    def read_args(self, value: Any, where: str) -> None:
        """Every ``{"ref": ...}`` inside an aten step's encoded arguments."""
        if isinstance(value, list):
            for k, v in enumerate(value):
                self.read_args(v, f"{where}[{k}]")
        elif isinstance(value, dict):
            if "ref" in value:
                self.read(value["ref"], where)
            elif len(value) != 1 or not ({"dtype", "device", "torch"} & set(value)):
                raise _refuse(where, f"is no encoded argument: {json.dumps(value)[:60]}")


def _check_hipdnn(step: dict[str, Any], where: str, suffix: str, refs: _Refs) -> None:
    _fields(step, where, subgraph="int", file="str", inputs="list", outputs="list")
    _file_name(step["file"], f"{where}.file")
    if not step["file"].endswith(suffix):
        raise _refuse(
            f"{where}.file", f"must end with {suffix} (the graph_format), got {step['file']!r}"
        )
    for k, entry in enumerate(step["inputs"]):
        at = f"{where}.inputs[{k}]"
        _fields(entry, at, tensor="str", uid="int", dims="ints", **{"from": "dict"})
        refs.read(entry["from"].get("ref"), f"{at}.from")
    for k, entry in enumerate(step["outputs"]):
        at = f"{where}.outputs[{k}]"
        _fields(entry, at, ref="str", tensor="str", uid="int", shape="ints", stride="ints")
        _fields(entry, at, dtype="str")
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
    if doc.get("version") != 1:
        raise _refuse("version", f"must be 1, got {json.dumps(doc.get('version'))}")
    fmt = doc.get("graph_format")
    if fmt not in GRAPH_SUFFIXES:
        raise _refuse(
            "graph_format", f"must be one of {list(GRAPH_SUFFIXES)}, got {json.dumps(fmt)}"
        )
    _fields(doc, "the document", inputs="list", weights="dict", steps="list", outputs="list")
    refs = _Refs()
    for k, entry in enumerate(doc["inputs"]):
        _fields(entry, f"inputs[{k}]", ref="str", shape="ints", dtype="str")
        refs.make(entry["ref"], f"inputs[{k}]")
    weights = _fields(doc["weights"], "weights", file="str", refs="dict")
    _file_name(weights["file"], "weights.file")
    for ref, name in weights["refs"].items():
        _kind(name, f"weights.refs[{ref!r}]", "str")
        refs.make(ref, f"weights.refs[{ref!r}]")
    for k, step in enumerate(doc["steps"]):
        where = f"steps[{k}]"
        _fields(step, where, kind="str", name="str")
        if step["kind"] == "hipdnn":
            _check_hipdnn(step, where, GRAPH_SUFFIXES[fmt], refs)
        elif step["kind"] == "aten":
            _fields(step, where, op="str", args="list", kwargs="dict")
            refs.read_args(step["args"], f"{where}.args")
            refs.read_args(list(step["kwargs"].values()), f"{where}.kwargs")
            refs.make(step["name"], where)
        else:
            raise _refuse(f"{where}.kind", f"must be 'hipdnn' or 'aten', got {step['kind']!r}")
    for k, entry in enumerate(doc["outputs"]):
        _fields(entry, f"outputs[{k}]", ref="str", shape="ints", dtype="str")
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
    except ValueError as err:
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"{path} is not JSON: {err}") from None
    return check_manifest(doc)
