"""Compilable copies of hipDNN's schemas (``$HIPDNN_SCHEMAS_DIR``, by default
``../shared/reference/hipdnn_schemas``) for flatc.

hipDNN's ``graph.fbs`` includes schemas that are not in the reference folder (batchnorm,
layernorm, pointwise, ...). A family this project models has its table **reconstructed** from
hipDNN's sources in ``tests/wire/schemas/`` (each file states its evidence); flatc needs the
others to parse ``graph.fbs``, and for them only the *order* of the ``NodeAttributes`` union
members matters for the wire, so each becomes a placeholder table of the right name (and the two
``*_common.fbs`` files a placeholder enum of each name their includers use).

* :func:`write_cpp_schemas`: every reference schema verbatim, plus the placeholders. The C++
  checker is generated from this (unmodified) copy.
* :func:`write_python_schemas`: the same, except that the ``TensorValue`` union's struct members
  are declared as tables with the same single field: flatc refuses to generate Python for a
  union of structs (HIPDNN_WIRE.md A12, "Generating Python"). Python code generated from it reads
  those members as tables, so the tests read the struct bytes at the union offset by hand.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

#: the variable that points at hipDNN's schemas: a folder of ``.fbs`` files, such as
#: ``projects/hipdnn/flatbuffers_sdk/schemas`` in a checkout of ROCm/rocm-libraries
SCHEMAS_ENV = "HIPDNN_SCHEMAS_DIR"
#: set to ``1`` (``.ci/run`` does), absent schemas fail the oracle tests instead of skipping them
REQUIRE_ENV = "HIPDNN_GRAPH_REQUIRE_SCHEMAS"
#: where the schemas are when the variable is unset: the project's reference copies in the
#: ``shared/`` folder beside the checkout
DEFAULT_REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference"
DEFAULT_REFERENCE = DEFAULT_REFERENCE / "hipdnn_schemas"


def reference_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """The folder of hipDNN's schemas: ``$HIPDNN_SCHEMAS_DIR``, else :data:`DEFAULT_REFERENCE`."""
    chosen = environ.get(SCHEMAS_ENV, "").strip()
    return Path(chosen).expanduser() if chosen else DEFAULT_REFERENCE


#: hipDNN's reference schemas (``$HIPDNN_SCHEMAS_DIR``, else ``../shared/reference/hipdnn_schemas``)
REFERENCE = reference_dir()

#: schemas reconstructed from hipDNN's sources (see each file's header): they replace placeholders.
RECONSTRUCTED = Path(__file__).resolve().parent / "schemas"

_NAMESPACE = "namespace hipdnn_flatbuffers_sdk.data_objects;\n"

#: included by graph.fbs but not copied from hipDNN: file -> placeholder table (none left: every
#: family's schema is hipDNN's own or reconstructed).
PLACEHOLDER_TABLES: dict[str, str] = {}

#: included by copied schemas but not copied: file -> placeholder enums (byte) it must declare.
PLACEHOLDER_ENUMS: dict[str, list[str]] = {}

#: the TensorValue members, in union order (tags 1..8).
TENSOR_VALUE_MEMBERS = [
    "Float32Value",
    "Float16Value",
    "BFloat16Value",
    "Float8Value",
    "Int32Value",
    "Float64Value",
    "Int64Value",
    "BoolValue",
]

#: the schemas the Python oracle is generated for (flatc generates the types of these files).
PYTHON_ROOTS = [
    "data_types.fbs",
    "tensor_attributes.fbs",
    "sdpa_attributes.fbs",
    "sdpa_backward_attributes.fbs",
    "matmul_attributes.fbs",
    "convolution_fwd_attributes.fbs",
    "convolution_bwd_attributes.fbs",
    "convolution_wrw_attributes.fbs",
    "resample_fwd_attributes.fbs",
    "moe_grouped_matmul_attributes.fbs",
    "moe_grouped_matmul_bwd_attributes.fbs",
    "custom_op_attributes.fbs",
    *sorted(p.name for p in RECONSTRUCTED.glob("*.fbs")),
    "graph.fbs",
    "serialized_graph_and_plan.fbs",
]


def missing_schemas(directory: Path, environ: Mapping[str, str] = os.environ) -> str | None:
    """Why the oracles cannot be built from ``directory``, or ``None`` when it holds every schema
    they are generated from (:data:`PYTHON_ROOTS` but the reconstructed ones, which live here)."""
    needed = [name for name in PYTHON_ROOTS if not (RECONSTRUCTED / name).is_file()]
    absent = [name for name in needed if not (directory / name).is_file()]
    if not absent:
        return None
    where = (
        f"${SCHEMAS_ENV} = {directory}"
        if environ.get(SCHEMAS_ENV, "").strip()
        else f"{directory.resolve()}, the default, in the shared/ folder beside the checkout"
    )
    what = "no schema" if len(absent) == len(needed) else "not " + ", ".join(absent)
    return (
        f"hipDNN's FlatBuffers schemas are absent: {what} in {where}. Set {SCHEMAS_ENV} to the "
        "schemas folder of a hipDNN checkout (projects/hipdnn/flatbuffers_sdk/schemas in "
        f"ROCm/rocm-libraries) to run the wire oracles; {REQUIRE_ENV}=1 makes this a failure"
    )


def verdict(reason: str | None, environ: Mapping[str, str] = os.environ) -> tuple[str, str | None]:
    """``("run", None)`` when nothing is missing (``reason`` is ``None``), else
    ``("skip", reason)``, or ``("fail", reason)`` when ``$HIPDNN_GRAPH_REQUIRE_SCHEMAS`` is set
    to a true value (CI: the oracles never skip there)."""
    if reason is None:
        return "run", None
    required = environ.get(REQUIRE_ENV, "").strip().lower() not in ("", "0", "false", "no")
    return ("fail" if required else "skip"), reason


def schemas_verdict(environ: Mapping[str, str] = os.environ) -> tuple[str, str | None]:
    """:func:`verdict` on hipDNN's schemas (:func:`reference_dir`, :func:`missing_schemas`)."""
    return verdict(missing_schemas(reference_dir(environ), environ), environ)


def reference_schemas() -> list[Path]:
    """The ``.fbs`` files of the reference folder, sorted by name."""
    found = sorted(REFERENCE.glob("*.fbs"))
    if not found:
        raise FileNotFoundError(f"hipDNN's reference schemas are not at {REFERENCE.resolve()}")
    return found


def _placeholder(body: str) -> str:
    return "// placeholder written by tests/wire/schema_copies.py (not a hipDNN file)\n" + (
        _NAMESPACE + body
    )


def _write_placeholders(dst: Path) -> None:
    # only where the schemas folder lacks the file: a full hipDNN checkout has them all
    for name, table in PLACEHOLDER_TABLES.items():
        if not (dst / name).exists():
            (dst / name).write_text(_placeholder(f"table {table} {{}}\n"))
    for name, enums in PLACEHOLDER_ENUMS.items():
        if not (dst / name).exists():
            body = "".join(f"enum {e} : byte {{ {e}_PLACEHOLDER = 0 }}\n" for e in enums)
            (dst / name).write_text(_placeholder(body))


def reconstructed_schemas() -> list[Path]:
    """The reconstructed ``.fbs`` files, sorted by name."""
    return sorted(RECONSTRUCTED.glob("*.fbs"))


def write_cpp_schemas(dst: Path) -> Path:
    """hipDNN's schemas verbatim, the reconstructed ones and placeholders for the rest, in
    ``dst`` (created); returns ``dst``."""
    dst.mkdir(parents=True, exist_ok=True)
    for src in reference_schemas():
        shutil.copyfile(src, dst / src.name)
    _write_placeholders(dst)
    for src in reconstructed_schemas():
        shutil.copyfile(src, dst / src.name)
    return dst


def structs_as_tables(text: str) -> str:
    """``tensor_attributes.fbs`` with each TensorValue struct member declared as a table."""
    out = text
    for member in TENSOR_VALUE_MEMBERS:
        out, count = re.subn(rf"\bstruct {member} \{{", f"table {member} {{", out)
        if count != 1:
            raise AssertionError(f"struct {member} not found once in tensor_attributes.fbs")
    return out


def write_python_schemas(dst: Path) -> Path:
    """The copy the Python oracle is generated from (see the module doc), in ``dst``."""
    write_cpp_schemas(dst)
    path = dst / "tensor_attributes.fbs"
    path.write_text(structs_as_tables(path.read_text()))
    return dst
