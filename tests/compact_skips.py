"""A pytest plugin for ``make test``: skipped tests print no progress character, and the summary
sums the skips up by reason, one line each, instead of a line per test location.

On a machine without a GPU over a thousand tests (``tests/gpu``, the wire oracles without
hipDNN's schemas) skip; with the plugin the progress stays one line per test file (``.`` for a
pass, ``F``/``E`` for a failure) and the end of the run reads, for example::

    ==================== skipped tests, by reason ====================
    1326 skipped: needs a CUDA or ROCm device (13 files)

Enable it with ``pytest -p compact_skips`` (``tests/`` is on pytest's ``pythonpath``). Expected
failures (``xfail``) are reported as usual.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

#: how many reasons the summary lists; the rest are counted on one line
MOST = 20


def _reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


def _is_skip(report: pytest.TestReport) -> bool:
    return report.skipped and not hasattr(report, "wasxfail")


def pytest_report_teststatus(report: pytest.TestReport) -> tuple[str, str, str] | None:
    """A skip counts as skipped but prints no ``s`` in the progress line."""
    if _is_skip(report):
        return "skipped", "", "SKIPPED"
    return None


def summary_lines(reports: list[pytest.TestReport]) -> list[str]:
    """One line per skip reason, most frequent first: count, reason, how many files."""
    counts: Counter[str] = Counter()
    files: defaultdict[str, set[str]] = defaultdict(set)
    for report in reports:
        if _is_skip(report):
            reason = _reason(report)
            counts[reason] += 1
            files[reason].add(report.nodeid.split("::", 1)[0])
    lines = []
    for reason, count in counts.most_common(MOST):
        n = len(files[reason])
        lines.append(f"{count} skipped: {reason} ({n} file{'s' if n != 1 else ''})")
    rest = counts.most_common()[MOST:]
    if rest:
        lines.append(f"{sum(c for _, c in rest)} skipped for {len(rest)} other reasons (-rs)")
    return lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The skips, summed up by reason."""
    lines = summary_lines(terminalreporter.stats.get("skipped", []))
    if lines:
        terminalreporter.section("skipped tests, by reason")
        for line in lines:
            terminalreporter.write_line(line)
