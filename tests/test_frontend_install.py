"""hipdnn_graph.frontend.install(): ``import hipdnn_frontend`` runs hipDNN-style code unchanged,
and a real hipDNN wheel is never shadowed. Each case runs in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent / "scripts" / "hipdnn_sdpa_script.py"


def _python(
    code: str, tmp_path: Path, extra_path: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env_path = str(extra_path) if extra_path is not None else ""
    prelude = f"import sys; sys.path.insert(0, {env_path!r})\n" if env_path else ""
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )


def test_unchanged_hipdnn_script_runs_after_install(tmp_path: Path) -> None:
    code = f"""
        import runpy
        import hipdnn_graph.frontend
        print("active:", hipdnn_graph.frontend.install())
        runpy.run_path({str(SCRIPT)!r}, run_name="__main__")
    """
    done = _python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "active: hipdnn_graph.frontend"
    assert lines[1].startswith("forward OK ")
    assert lines[2:4] == ["serialization OK", lines[3]] and lines[3].startswith("backward OK ")
    assert lines[4] == "errors OK"


def test_install_is_idempotent_and_maps_the_submodule(tmp_path: Path) -> None:
    done = _python(
        """
        import hipdnn_graph.frontend as f
        print(f.install(), f.install())
        import hipdnn_frontend, hipdnn_frontend.hipdnn_frontend_python as ext
        from hipdnn_frontend.hipdnn_frontend_python import _get_data_ptr
        print(hipdnn_frontend is f, ext is f.hipdnn_frontend_python, _get_data_ptr(7))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["hipdnn_graph.frontend"] * 2 + ["True", "True", "7"]


def test_without_install_hipdnn_frontend_is_not_importable(tmp_path: Path) -> None:
    done = _python("import hipdnn_graph.frontend\nimport hipdnn_frontend", tmp_path)
    assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr


@pytest.mark.parametrize("imported_first", [False, True])
def test_a_real_installation_is_never_shadowed(tmp_path: Path, imported_first: bool) -> None:
    wheel = tmp_path / "site"
    (wheel / "hipdnn_frontend").mkdir(parents=True)
    (wheel / "hipdnn_frontend" / "__init__.py").write_text("REAL = True\n")
    first = "import hipdnn_frontend\n" if imported_first else ""
    done = _python(
        first
        + """
import hipdnn_graph.frontend as f
print(f.install())
import hipdnn_frontend
print(getattr(hipdnn_frontend, "REAL", False))
""",
        tmp_path,
        extra_path=wheel,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["hipdnn_frontend", "True"]


def test_importing_the_module_stays_light(tmp_path: Path) -> None:
    done = _python(
        """
        import sys
        import hipdnn_graph.frontend as f
        f.install()
        f.Graph(); f.create_handle(); f.Tensor.create([1], f.DataType.FLOAT)
        print("torch" in sys.modules)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]


@pytest.mark.parametrize("imported_first", [False, True])
def test_a_bare_folder_in_the_working_directory_is_no_installation(
    tmp_path: Path, imported_first: bool
) -> None:
    # A folder named hipdnn_frontend without __init__.py (a namespace package once the working
    # directory is on sys.path, as with `python -c`) is not hipDNN's wheel.
    (tmp_path / "hipdnn_frontend").mkdir()
    first = "import hipdnn_frontend\n" if imported_first else ""
    done = _python(
        first
        + """
import hipdnn_graph.frontend as f
print(f.install())
import hipdnn_frontend
print(hipdnn_frontend is f, hipdnn_frontend.Graph().validate().is_good())
""",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["hipdnn_graph.frontend", "True", "True"]
