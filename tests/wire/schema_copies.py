"""Compilable copies of hipDNN's schemas for flatc: ``graph.fbs`` and the schemas beside it
(``$HIPDNN_SCHEMAS_DIR``, by default ``../shared/reference/hipdnn_schemas``) and the family
schemas ``graph.fbs`` includes (beside it in a hipDNN checkout; else in
``hipdnn_family_schemas`` beside that folder: hipDNN's files from public forks of
ROCm/rocm-libraries, which the project's reference snapshot lacks, see that folder's README).

Every schema is hipDNN's own, copied verbatim. The families whose tables the project had
reconstructed from hipDNN's sources (pointwise, the norms, batch norm, block scale, reduction,
resample backward) now come from hipDNN's real files; the reconstructions agreed with them field
for field, and their evidence is kept in ``docs/spec-families.md`` ("How the family tables were
first reconstructed").

* :func:`write_cpp_schemas`: every schema verbatim but one declaration: ``ResampleFwdAttributes.
  generate_index`` as hipDNN's newer forks declare it (``bool = null``) where the reference copy
  has ``bool = false`` (:func:`optional_generate_index`; see the family folder's README), so that
  the oracles tell a written ``false`` from an absent field, and ``Graph::Pack`` writes the field
  whenever it is set, as the project does. The C++ checker is generated from this copy.
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

#: the family schemas graph.fbs includes that the project's reference snapshot lacks (hipDNN's
#: files, from public forks): in a hipDNN checkout they sit beside graph.fbs
FAMILY_SCHEMAS = [
    "batchnorm_attributes.fbs",
    "batchnorm_backward_attributes.fbs",
    "batchnorm_inference_attributes.fbs",
    "batchnorm_inference_attributes_variance_ext.fbs",
    "block_scale_dequantize_attributes.fbs",
    "block_scale_quantize_attributes.fbs",
    "convolution_common.fbs",
    "layernorm_attributes.fbs",
    "layernorm_backward_attributes.fbs",
    "norm_common.fbs",
    "pointwise_attributes.fbs",
    "reduction_attributes.fbs",
    "resample_bwd_attributes.fbs",
    "resample_common.fbs",
    "rmsnorm_attributes.fbs",
    "rmsnorm_backward_attributes.fbs",
]
#: the folder, beside the reference folder, that holds them when the reference folder does not
FAMILY_FOLDER = "hipdnn_family_schemas"


def family_dir(reference: Path) -> Path:
    """Where the family schemas of ``reference`` are: ``reference`` itself when it holds them
    (a hipDNN checkout), else the :data:`FAMILY_FOLDER` beside it."""
    if all((reference / name).is_file() for name in FAMILY_SCHEMAS):
        return reference
    return reference.parent / FAMILY_FOLDER


#: the family schemas' folder (:func:`family_dir` of :data:`REFERENCE`)
FAMILY = family_dir(REFERENCE)

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
    *FAMILY_SCHEMAS,
    "graph.fbs",
    "serialized_graph_and_plan.fbs",
]


def missing_schemas(directory: Path, environ: Mapping[str, str] = os.environ) -> str | None:
    """Why the oracles cannot be built from ``directory``, or ``None`` when it holds every schema
    they are generated from (:data:`PYTHON_ROOTS`; the family schemas may be in the
    :data:`FAMILY_FOLDER` beside it, see :func:`family_dir`)."""
    families = family_dir(directory)
    absent = [
        name
        for name in PYTHON_ROOTS
        if not ((families if name in FAMILY_SCHEMAS else directory) / name).is_file()
    ]
    if not absent:
        return None
    where = (
        f"${SCHEMAS_ENV} = {directory}"
        if environ.get(SCHEMAS_ENV, "").strip()
        else f"{directory.resolve()}, the default, in the shared/ folder beside the checkout"
    )
    also = f" (the family schemas are looked for in {families})" if families != directory else ""
    what = "no schema" if len(absent) == len(PYTHON_ROOTS) else "not " + ", ".join(absent)
    return (
        f"hipDNN's FlatBuffers schemas are absent: {what} in {where}.{also} Set {SCHEMAS_ENV} "
        "to the schemas folder of a hipDNN checkout (projects/hipdnn/flatbuffers_sdk/schemas in "
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
    """Every ``.fbs`` file the oracles are built from (the reference folder's and the family
    schemas), sorted by name."""
    found = {p.name: p for p in REFERENCE.glob("*.fbs")}
    found.update((name, FAMILY / name) for name in FAMILY_SCHEMAS if (FAMILY / name).is_file())
    if not found:
        raise FileNotFoundError(f"hipDNN's reference schemas are not at {REFERENCE.resolve()}")
    return [found[name] for name in sorted(found)]


#: ``generate_index`` as ROCm/rocm-libraries declares it, and as its forks do
_GENERATE_INDEX = re.compile(r"\bgenerate_index\s*:\s*bool\s*=\s*(false|null)\s*;")


def optional_generate_index(text: str) -> str:
    """``resample_fwd_attributes.fbs`` with ``generate_index: bool = null`` (the forks'
    declaration), whichever of the two declarations it has."""
    out, count = _GENERATE_INDEX.subn("generate_index: bool = null;", text)
    if count != 1:
        raise AssertionError("generate_index not declared once in resample_fwd_attributes.fbs")
    return out


def write_cpp_schemas(dst: Path) -> Path:
    """hipDNN's schemas (:func:`reference_schemas`) in ``dst`` (created), with
    :func:`optional_generate_index` applied; returns ``dst``."""
    dst.mkdir(parents=True, exist_ok=True)
    for src in reference_schemas():
        shutil.copyfile(src, dst / src.name)
    resample = dst / "resample_fwd_attributes.fbs"
    resample.write_text(optional_generate_index(resample.read_text()))
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
