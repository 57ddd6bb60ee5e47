"""A checker of hipDNN graph blobs compiled from flatc's C++ code for hipDNN's schemas exactly as
they are: every ``.fbs`` file of :func:`schema_copies.reference_schemas` copied unchanged (the
C++ oracle's copy edits one default, see ``schema_copies.write_cpp_schemas``), no object API.

``cpp/export_checker.cpp`` verifies each file with ``flatbuffers::Verifier`` (default options,
no identifier, as hipDNN does) and prints the graph's tensors and nodes; :func:`read_files` runs
it. Built once per content into ``$TMPDIR/hipdnn-graph-wire-oracle/``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from cpp_oracle import CACHE, Toolchain
from schema_copies import reference_schemas

SOURCE = Path(__file__).resolve().parent / "cpp" / "export_checker.cpp"


def _run(cmd: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(cmd, check=True, capture_output=True)


def build(tc: Toolchain) -> Path:
    """The checker binary for ``tc``, compiled on first use."""
    h = hashlib.sha256(SOURCE.read_bytes())
    for p in reference_schemas():
        h.update(p.name.encode() + p.read_bytes())
    h.update(_run([tc.flatc, "--version"]).stdout + _run(["g++", "--version"]).stdout)
    target = CACHE / f"export-{tc.name}-{h.hexdigest()[:24]}" / "export_checker"
    if target.is_file():
        return target
    target.parent.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=target.parent.parent))
    schemas = work / "schemas"
    schemas.mkdir()
    for src in reference_schemas():  # verbatim
        shutil.copyfile(src, schemas / src.name)
    gen = work / "gen"
    _run(
        [tc.flatc, "--cpp", "--scoped-enums", "-o", str(gen), *sorted(map(str, schemas.iterdir()))]
    )
    include = ["-I", tc.include] if tc.include else []
    binary = work / "export_checker"
    _run(["g++", "-std=c++17", "-O0", "-I", str(gen), *include, "-o", str(binary), str(SOURCE)])
    target.parent.mkdir(exist_ok=True)
    os.replace(binary, target)  # atomic: a parallel build loses nothing
    shutil.rmtree(work, ignore_errors=True)
    return target


def read_files(checker: Path, files: list[Path]) -> list[dict[str, Any]]:
    """Each file as the checker reads it: ``{"verified": bool, "name", "tensors", "nodes"}``,
    names decoded from hex."""
    out = _run([str(checker), *map(str, files)]).stdout.decode().splitlines()
    docs = [json.loads(line) for line in out]
    for doc in docs:
        if doc["verified"]:
            doc["name"] = bytes.fromhex(doc["name"]).decode()
            for item in doc["tensors"] + doc["nodes"]:
                item["name"] = bytes.fromhex(item["name"]).decode()
    return docs
