"""Loading a script of ``benchmarks/`` in a test as ``python benchmarks/NAME.py`` runs it: the
script's folder first on ``sys.path`` (its shared timing modules import from there) and the
module registered under its name (dataclasses look their module up in ``sys.modules``).

Example (in a test, with pytest's ``monkeypatch``):
    module = load_benchmark("torch_op_dropout", monkeypatch)
    rows = module.main(["--smoke"])
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The module of ``benchmarks/<name>.py``, executed; ``sys.path`` and ``sys.modules`` are
    restored when the test ends."""
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module
