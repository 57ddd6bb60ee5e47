"""(c) The spec's two example documents (HIPDNN_WIRE.md B8.1, B8.2) and their anchors (A11).

``data/b8_*.json`` are the documents in compact canonical form (their SHA-256 is checked against
the spec's in test_wire_oracles.py, and the anchors against hipDNN's ``Graph::Pack``).
"""

from __future__ import annotations

import hashlib

import pytest
from cpp_oracle import CppOracle
from hipdnn_cases import b8, b8_desc
from test_wire_oracles import ANCHORS

import hipdnn_graph as hg


@pytest.mark.parametrize("number", [1, 2])
def test_json_text_writes_back_identical(number: int) -> None:
    text = b8(number)
    assert hg.Graph.from_json(text).to_json() == text
    assert hg.Graph.from_json(text, format="hipdnn").to_json(format="hipdnn") == text


@pytest.mark.parametrize("number", [1, 2])
def test_json_text_serializes_to_the_anchor(number: int) -> None:
    _, size, digest = ANCHORS[number]
    blob = hg.Graph.from_json(b8(number)).serialize()
    assert (len(blob), hashlib.sha256(blob).hexdigest()) == (size, digest)


@pytest.mark.parametrize("number", [1, 2])
def test_anchor_bytes_read_as_the_json_text(cpp: CppOracle, number: int) -> None:
    blob = cpp.pack(b8_desc(number))  # the anchor, from hipDNN's generated code
    g = hg.Graph.deserialize(blob)
    assert g.to_json() == b8(number)
    assert g.serialize() == blob


def test_json_reader_accepts_whitespace_and_any_key_order() -> None:
    import json

    text = b8(2)
    doc = json.loads(text)
    shuffled = json.dumps(
        {k: doc[k] for k in sorted(doc, reverse=True)}, indent=2, ensure_ascii=True
    )
    assert hg.Graph.from_json(shuffled).to_json() == text


def test_example_data_files_are_what_the_oracle_writes(cpp_oracles: list[CppOracle]) -> None:
    # examples/data/*.bin and *.hdgp are hipDNN-made (tests/wire/make_example_data.py): every
    # C++ oracle this machine builds writes them byte for byte, and the JSON beside them is B8.1
    from make_example_data import EXAMPLES, SOURCE, made_by

    assert SOURCE.read_text(encoding="utf-8").rstrip("\n") == b8(1)
    for cpp in cpp_oracles:
        for name, data in made_by(cpp).items():
            assert (EXAMPLES / name).read_bytes() == data, (cpp.toolchain.name, name)
