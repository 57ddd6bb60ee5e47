"""The oracles of hipDNN's engine-side schemas (``engine_config.fbs``, ``engine_details.fbs``,
``knob_value.fbs``): flatc's code for the unmodified schemas, made when a test session needs it.

* C++: ``cpp/engine_checker.cpp`` (verify, unpack, pack again: hipDNN's canonical bytes), built
  once per content into the cache folder of :mod:`cpp_oracle`, with each toolchain found there.
* Python: flatc's ``--python`` output in a temporary folder, its modules added to the package
  ``hipdnn_flatbuffers_sdk.data_objects`` of ``autogen/`` (their names do not overlap).

The schemas come from the folder of hipDNN's graph schemas when it holds them (a hipDNN
checkout), else from ``hipdnn_engine_schemas`` beside it (``../shared/reference``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from cpp_oracle import CACHE, Toolchain
from schema_copies import REFERENCE

HERE = Path(__file__).resolve().parent
CHECKER = HERE / "cpp" / "engine_checker.cpp"
SCHEMAS = ("engine_config.fbs", "engine_details.fbs", "knob_value.fbs")


def engine_schema_folder() -> Path | None:
    """The folder holding hipDNN's three engine schemas, or None."""
    for folder in (REFERENCE, REFERENCE.parent / "hipdnn_engine_schemas"):
        if all((folder / name).is_file() for name in SCHEMAS):
            return folder
    return None


def _run(cmd: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(cmd, check=True, capture_output=True)


class EngineCppOracle:
    """The compiled checker of one toolchain: :meth:`repack` a blob as hipDNN's C++ would."""

    def __init__(self, tc: Toolchain, schemas: Path) -> None:
        self.toolchain = tc
        h = hashlib.sha256(CHECKER.read_bytes())
        for name in SCHEMAS:
            h.update((schemas / name).read_bytes())
        h.update(_run([tc.flatc, "--version"]).stdout + _run(["g++", "--version"]).stdout)
        target = CACHE / f"engine-{tc.name}-{h.hexdigest()[:24]}" / "engine_checker"
        if not target.is_file():
            target.parent.parent.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(dir=target.parent.parent))
            fbs = [str(schemas / name) for name in SCHEMAS]
            _run([tc.flatc, "--cpp", "--gen-object-api", "--scoped-enums", "-o", str(work), *fbs])
            include = ["-I", tc.include] if tc.include else []
            out = work / "engine_checker"
            _run(["g++", "-std=c++17", "-O0", "-I", str(work), *include, "-o", str(out),
                  str(CHECKER)])  # fmt: skip
            target.parent.mkdir(exist_ok=True)
            os.replace(out, target)
            shutil.rmtree(work, ignore_errors=True)
        self.binary = target

    def repack(self, kind: str, blob: bytes) -> bytes | None:
        """The bytes C++ writes for what it reads in ``blob`` (None: the Verifier refuses)."""
        with tempfile.NamedTemporaryFile(suffix=".bin", delete=False) as f:
            f.write(blob)
        try:
            lines = _run([str(self.binary), kind, f.name]).stdout.decode().split()
        finally:
            os.unlink(f.name)
        return bytes.fromhex(lines[1]) if lines[0] == "verified" else None


def python_modules(flatc: str, schemas: Path, folder: Path) -> Any:
    """flatc's Python code for the engine schemas, as modules of the ``autogen`` package."""
    _run([flatc, "--python", "-o", str(folder), *(str(schemas / n) for n in SCHEMAS)])
    import hipdnn_flatbuffers_sdk.data_objects as package  # type: ignore[import-not-found]

    generated = str(folder / "hipdnn_flatbuffers_sdk" / "data_objects")
    if generated not in package.__path__:
        package.__path__.append(generated)
    return package
