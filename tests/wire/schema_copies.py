"""Compilable copies of hipDNN's schemas (``../shared/reference/hipdnn_schemas``) for flatc.

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

import re
import shutil
from pathlib import Path

#: hipDNN's reference schemas (shared/ lies beside the worktree in every checkout).
REFERENCE = Path(__file__).resolve().parents[2] / ".." / "shared" / "reference" / "hipdnn_schemas"

#: schemas reconstructed from hipDNN's sources (see each file's header): they replace placeholders.
RECONSTRUCTED = Path(__file__).resolve().parent / "schemas"

_NAMESPACE = "namespace hipdnn_flatbuffers_sdk.data_objects;\n"

#: included by graph.fbs but not copied from hipDNN: file -> placeholder table.
PLACEHOLDER_TABLES = {
    "batchnorm_attributes.fbs": "BatchnormAttributes",
    "batchnorm_backward_attributes.fbs": "BatchnormBackwardAttributes",
    "batchnorm_inference_attributes.fbs": "BatchnormInferenceAttributes",
    "batchnorm_inference_attributes_variance_ext.fbs": "BatchnormInferenceAttributesVarianceExt",
    "layernorm_attributes.fbs": "LayernormAttributes",
    "layernorm_backward_attributes.fbs": "LayernormBackwardAttributes",
    "rmsnorm_attributes.fbs": "RMSNormAttributes",
    "rmsnorm_backward_attributes.fbs": "RMSNormBackwardAttributes",
    "block_scale_dequantize_attributes.fbs": "BlockScaleDequantizeAttributes",
    "block_scale_quantize_attributes.fbs": "BlockScaleQuantizeAttributes",
    "reduction_attributes.fbs": "ReductionAttributes",
    "resample_bwd_attributes.fbs": "ResampleBwdAttributes",
}

#: included by copied schemas but not copied: file -> placeholder enums (byte) it must declare.
PLACEHOLDER_ENUMS = {
    "convolution_common.fbs": ["ConvMode"],
    "resample_common.fbs": ["ResampleMode", "PaddingMode"],
}

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
    *sorted(p.name for p in RECONSTRUCTED.glob("*.fbs")),
    "graph.fbs",
    "serialized_graph_and_plan.fbs",
]


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
    for name, table in PLACEHOLDER_TABLES.items():
        (dst / name).write_text(_placeholder(f"table {table} {{}}\n"))
    for name, enums in PLACEHOLDER_ENUMS.items():
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
