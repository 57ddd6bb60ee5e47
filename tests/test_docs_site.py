"""The built documentation site (issue 11, item 14): it works offline (the Mermaid script is
served with the site, Material never fetches one from a CDN), the API reference lists every
enum member, and no page cites a file the repository does not have.

The site is built once, with ``mkdocs build --strict``, into a temporary folder.
"""

from __future__ import annotations

import functools
import html
import http.server
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hipdnn_graph as hg

ROOT = Path(__file__).resolve().parents[1]
MERMAID_JS = ROOT / "docs" / "javascripts" / "mermaid.min.js"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


def _pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def test_mermaid_is_served_with_the_site(site: Path) -> None:
    if not MERMAID_JS.is_file():
        pytest.skip("docs/javascripts/mermaid.min.js is fetched by `make docs`")
    served = site / "javascripts" / "mermaid.min.js"
    assert served.read_bytes() == MERMAID_JS.read_bytes()
    # the script defines the global that Material checks before it would load one from a CDN
    assert 'globalThis["mermaid"] =' in served.read_text()
    with_diagrams = [p for p in _pages(site) if 'class="mermaid"' in p.read_text()]
    assert len(with_diagrams) >= 2  # the home page and Concepts at least
    for page in with_diagrams:
        text = page.read_text()
        scripts = re.findall(r'<script src="([^"]+)"', text)
        assert any(s.endswith("javascripts/mermaid.min.js") for s in scripts), page.name


def _hook() -> Any:
    spec = importlib.util.spec_from_file_location("docs_hook", ROOT / "docs/hooks/hipdnn_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_the_script_diagrams_show_their_source(site: Path) -> None:
    """Built without npm (no docs/javascripts/mermaid.min.js), no page loads a script the site
    lacks or leaves Material to fetch Mermaid from a CDN: each diagram is a code block of its
    source under a note that says why."""
    if MERMAID_JS.is_file():
        pytest.skip("docs/javascripts/mermaid.min.js is here: the diagrams are drawn")
    pages = _pages(site)
    for page in pages:
        text = page.read_text()
        assert 'class="mermaid"' not in text, page.name
        assert not re.search(r'<script src="[^"]*mermaid\.min\.js"', text), page.name
    noted = [p for p in pages if "shown as its Mermaid source" in p.read_text()]
    assert {p.parent.name for p in noted} >= {site.name, "concepts"}
    assert all("flowchart LR" in p.read_text() for p in noted)


def test_the_hook_turns_mermaid_fences_into_source_blocks() -> None:
    hook = _hook()
    page = (
        'Text\n\n```mermaid\n--8<-- "docs/diagrams/x.mmd"\n```\n\n    ``` mermaid\n    a\n    ```\n'
    )
    out = hook.mermaid_as_source(page)
    assert "```mermaid" not in out and "``` mermaid" not in out
    assert out.count('```text title="Mermaid source"') == 2
    assert '!!! note "Diagram source"\n    This diagram is shown as its Mermaid source' in out
    assert '    !!! note "Diagram source"\n        This diagram' in out  # keeps the indent
    config = {"extra_javascript": ["javascripts/other.js", "javascripts/mermaid.min.js"]}
    assert hook.without_mermaid_script(config)["extra_javascript"] == ["javascripts/other.js"]


def test_make_builds_the_docs_without_npm(tmp_path: Path) -> None:
    """The Mermaid rule of the Makefile, run where no npm is on the PATH: a note, no failure,
    no file (the docs hook then shows the diagrams as source)."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("mkdir", "tar", "mv", "sh", "cat", "rm"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    shutil.copyfile(ROOT / "Makefile", tmp_path / "Makefile")
    done = subprocess.run(
        [make, "docs/javascripts/mermaid.min.js"],
        cwd=tmp_path,
        env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "note: npm is not installed: the docs show the Mermaid diagrams as source" in done.stdout
    assert not (tmp_path / "docs" / "javascripts" / "mermaid.min.js").exists()


@pytest.fixture()
def served(site: Path) -> Iterator[str]:
    """The built site over HTTP on the loopback interface (pages load scripts by URL)."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_browser_draws_the_diagrams_without_the_network(site: Path, served: str) -> None:
    """Material replaces each ``pre.mermaid`` by a ``div.mermaid`` holding the drawing once the
    Mermaid script ran; without a script (this machine reaches no CDN) no such div appears."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None or not MERMAID_JS.is_file():
        pytest.skip("needs chromium and docs/javascripts/mermaid.min.js")
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000",
         "--dump-dom", f"{served}/index.html"],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count('<div class="mermaid">') == 1, done.stdout[-3000:]


def test_no_page_loads_anything_from_the_network(site: Path) -> None:
    for page in _pages(site):
        text = page.read_text()
        remote = re.findall(r'<(?:script|link)[^>]+(?:src|href)="(https?:[^"]+)"', text)
        assert remote == [], (page.relative_to(site), remote)


@pytest.mark.parametrize(
    "enum",
    [
        hg.ErrorCode,
        hg.DataType,
        hg.HeuristicMode,
        hg.BuildPlanPolicy,
        hg.DiagonalAlignment,
        hg.NodeType,
    ],
)
def test_api_reference_lists_every_enum_member(site: Path, enum: type) -> None:
    text = (site / "api" / "types" / "index.html").read_text()
    for member in enum:  # type: ignore[attr-defined]
        anchor = f'id="hipdnn_graph.types.{enum.__name__}.{member.name}"'
        assert anchor in text, member
        assert f"{member.name} = {member.value}" in html.unescape(re.sub(r"<[^>]+>", "", text))


def test_no_page_cites_a_file_missing_from_the_repository(site: Path) -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    names = {Path(p).name for p in tracked}
    missing = {}
    for page in _pages(site):
        text = html.unescape(re.sub(r"<[^>]+>", " ", page.read_text()))
        for cited in set(re.findall(r"\b[\w.-]+\.md\b", text)):
            if cited not in names:
                missing.setdefault(cited, []).append(str(page.relative_to(site)))
    assert missing == {}


def test_graph_reference_page_shows_every_public_graph_method(site: Path) -> None:
    # build, run, execute, serialize, to_json, get_plan_name and every family's builder were
    # missing from the page (issue 41 item 16): each public member of Graph has its entry
    page = (site / "api" / "graph" / "index.html").read_text()
    documented = set(re.findall(r'id="hipdnn_graph\.[\w.]+\.(\w+)"', page))
    public = {name for name in dir(hg.Graph) if not name.startswith("_")}
    assert public - documented == set()
    for name in ("build", "run", "execute", "serialize", "to_json", "get_plan_name", "summary"):
        assert name in documented
