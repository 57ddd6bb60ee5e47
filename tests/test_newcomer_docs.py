"""What a newcomer reads matches what the library does (issue 41 items 16 and 23): quoted error
text is real output, and the pages present the whole library."""

from __future__ import annotations

import re
from pathlib import Path

import hipdnn_graph as hg

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_interop_page_quotes_the_real_unknown_kind_error() -> None:
    page = _one_line((DOCS / "interop.md").read_text())
    quoted = re.search(r"`(hipDNN node \"bwd\" has kind [^`]*)`", page)
    assert quoted is not None
    head, tail = quoted.group(1).split(", …, ")
    text = (ROOT / "examples" / "data" / "hipdnn_sdpa_bwd.json").read_text()
    try:
        hg.Graph.from_json(text.replace("SdpaBackwardAttributes", "ConcatenateAttributes"))
    except hg.HipdnnError as exc:
        assert exc.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT
        message = exc.message
    else:
        raise AssertionError("an unknown node kind was read")
    assert message.startswith(head + ", ") and message.endswith(", " + tail)
    assert message.count(" (") == 23 and "the list naming all 23 kinds" in page
