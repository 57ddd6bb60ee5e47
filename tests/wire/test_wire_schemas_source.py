"""Where the oracles find hipDNN's schemas, and what happens when they are absent: the oracle
tests skip with one reason (a clone without ``../shared`` beside it), or fail where
``HIPDNN_GRAPH_REQUIRE_SCHEMAS=1`` says they must run (``.ci/run``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from schema_copies import (
    DEFAULT_REFERENCE,
    FAMILY_FOLDER,
    FAMILY_SCHEMAS,
    PYTHON_ROOTS,
    REQUIRE_ENV,
    SCHEMAS_ENV,
    family_dir,
    reference_dir,
    schemas_verdict,
)

ROOT = Path(__file__).resolve().parents[2]
#: a test of the file that reads the schemas directly, and one that needs the C++ oracle
NODES = [
    "tests/wire/test_wire_oracles.py::test_field_tables_are_hipdnn_schemas_slot_order",
    "tests/wire/test_wire_oracles.py::test_spec_anchor_bytes_are_hipdnn_graph_pack",
]


def _schemas(folder: Path) -> Path:
    folder.mkdir()
    for name in PYTHON_ROOTS:
        (folder / name).write_text("// a schema\n")
    return folder


def test_the_variable_chooses_the_folder(tmp_path: Path) -> None:
    assert reference_dir({}) == DEFAULT_REFERENCE
    assert reference_dir({SCHEMAS_ENV: "  "}) == DEFAULT_REFERENCE
    assert reference_dir({SCHEMAS_ENV: str(tmp_path)}) == tmp_path
    assert ROOT.parent / "shared" / "reference" / "hipdnn_schemas" == DEFAULT_REFERENCE


def test_verdict_runs_skips_or_fails(tmp_path: Path) -> None:
    present = {SCHEMAS_ENV: str(_schemas(tmp_path / "schemas"))}
    assert schemas_verdict(present) == ("run", None)
    assert schemas_verdict({**present, REQUIRE_ENV: "1"}) == ("run", None)

    absent = {SCHEMAS_ENV: str(tmp_path / "nowhere")}
    action, reason = schemas_verdict(absent)
    assert action == "skip" and reason is not None
    assert f"no schema in ${SCHEMAS_ENV} = {tmp_path / 'nowhere'}." in reason
    assert "Set HIPDNN_SCHEMAS_DIR to the schemas folder of a hipDNN checkout" in reason
    default = schemas_verdict({SCHEMAS_ENV: ""})[1] if not DEFAULT_REFERENCE.is_dir() else None
    assert default is None or "the default, in the shared/ folder beside the checkout" in default
    for value in ("1", "yes", "true"):
        assert schemas_verdict({**absent, REQUIRE_ENV: value}) == ("fail", reason)
    for value in ("", "0", "false", "no"):
        assert schemas_verdict({**absent, REQUIRE_ENV: value}) == ("skip", reason)

    (tmp_path / "partial").mkdir()
    (tmp_path / "partial" / "graph.fbs").write_text("// only this one\n")
    _, partial = schemas_verdict({SCHEMAS_ENV: str(tmp_path / "partial")})
    assert partial is not None and "not data_types.fbs," in partial and "graph.fbs," not in partial


def test_family_schemas_sit_beside_graph_fbs_or_in_their_folder(tmp_path: Path) -> None:
    """A hipDNN checkout holds the family schemas beside graph.fbs; the project's reference copy
    keeps them in hipdnn_family_schemas beside hipdnn_schemas (../shared/reference)."""
    checkout = _schemas(tmp_path / "checkout")
    assert family_dir(checkout) == checkout
    assert schemas_verdict({SCHEMAS_ENV: str(checkout)}) == ("run", None)

    reference = tmp_path / "reference" / "hipdnn_schemas"
    reference.parent.mkdir()
    _schemas(reference)
    families = reference.parent / FAMILY_FOLDER
    families.mkdir()
    for name in FAMILY_SCHEMAS:
        (families / name).write_text((reference / name).read_text())
    (reference / "pointwise_attributes.fbs").unlink()  # graph.fbs's folder lacks one family
    assert family_dir(reference) == families
    assert schemas_verdict({SCHEMAS_ENV: str(reference)}) == ("run", None)

    (families / "reduction_attributes.fbs").unlink()
    _, reason = schemas_verdict({SCHEMAS_ENV: str(reference)})
    assert reason is not None and "not reduction_attributes.fbs in" in reason
    assert f"(the family schemas are looked for in {families})" in reason


def _pytest(env: dict[str, str], *nodes: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in (SCHEMAS_ENV, REQUIRE_ENV)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *nodes],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**base, **env},
        timeout=600,
    )


def test_absent_schemas_skip_with_one_reason_or_fail_when_required(tmp_path: Path) -> None:
    nowhere = {SCHEMAS_ENV: str(tmp_path / "nowhere")}
    skipped = _pytest(nowhere, *NODES)
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    lines = [line for line in skipped.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(lines) == 1, skipped.stdout  # one line, one reason, for every oracle test
    assert re.match(r"SKIPPED \[3\] tests/wire/conftest\.py:\d+: hipDNN's FlatBuffers", lines[0])
    assert "3 skipped" in skipped.stdout

    failed = _pytest({**nowhere, REQUIRE_ENV: "1"}, *NODES)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "hipDNN's FlatBuffers schemas are absent" in failed.stdout
    assert "3 errors" in failed.stdout and "skipped" not in failed.stdout


@pytest.mark.skipif(not DEFAULT_REFERENCE.is_dir(), reason="no ../shared beside the checkout")
def test_the_variable_points_the_oracles_elsewhere(tmp_path: Path) -> None:
    moved = tmp_path / "hipdnn" / "flatbuffers_sdk" / "schemas"
    shutil.copytree(DEFAULT_REFERENCE, moved)
    for name in FAMILY_SCHEMAS:  # a hipDNN checkout: the family schemas beside graph.fbs
        shutil.copyfile(family_dir(DEFAULT_REFERENCE) / name, moved / name)
    done = _pytest({SCHEMAS_ENV: str(moved), REQUIRE_ENV: "1"}, NODES[0])
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr


def test_ci_requires_the_schemas() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert re.search(rf"^export {REQUIRE_ENV}=1$", script, re.M), script
