"""hipDNN's JSON (HIPDNN_WIRE.md part B) against an independent writer of it (``hipdnn_json``).

For every hipDNN case, ``to_json()`` of the graph read from hipDNN's canonical bytes is the text
the spec prescribes (keys, nulls, enum spellings, float layout, escapes), and ``from_json`` of
that text writes hipDNN's canonical bytes (C6).
"""

from __future__ import annotations

import pytest
from cpp_oracle import CppOracle
from hipdnn_cases import MODELLED, b8, b8_desc
from hipdnn_json import format_double, hipdnn_json

import hipdnn_graph as hg


def test_independent_writer_gives_the_spec_documents() -> None:
    assert hipdnn_json(b8_desc(1)) == b8(1)
    assert hipdnn_json(b8_desc(2)) == b8(2)


@pytest.mark.parametrize(
    "value,text",
    [
        (1.0, "1.0"),
        (0.125, "0.125"),
        (0.10000000149011612, "0.10000000149011612"),
        (1e-05, "1e-05"),
        (0.0001, "0.0001"),
        (100.0, "100.0"),
        (1e15, "1e+15"),
        (2.0**50, "1.125899906842624e+15"),
        (999999986991104.0, "999999986991104.0"),
        (1e16, "1e+16"),
        (-0.0, "-0.0"),
        (-2.5e-7, "-2.5e-07"),
    ],
)
def test_float_layout_follows_b2(value: float, text: str) -> None:
    assert format_double(value) == text


@pytest.mark.parametrize("case", sorted(MODELLED))
def test_to_json_writes_hipdnn_json(cpp: CppOracle, case: str) -> None:
    desc = MODELLED[case]()
    assert hg.Graph.deserialize(cpp.pack(desc)).to_json() == hipdnn_json(desc)


@pytest.mark.parametrize("case", sorted(MODELLED))
def test_from_json_reads_hipdnn_json(cpp: CppOracle, case: str) -> None:
    desc = MODELLED[case]()
    text = hipdnn_json(desc)
    assert hg.Graph.from_json(text).serialize() == cpp.pack(desc)
    assert hg.Graph.from_json(text).to_json() == text
