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


def _graph() -> hg.Graph:
    return hg.Graph(
        name="p",
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )


def test_concepts_page_states_the_pass_by_value_rule_of_each_family() -> None:
    import numpy as np

    page = _one_line((DOCS / "concepts.md").read_text())
    assert "Which slots take one is each family's rule" in page
    # attention: only its scalar slots
    g = _graph()
    q = g.tensor(name="Q", dim=[1, 1, 4, 8])
    k = g.tensor_like(q, "K").set_is_pass_by_value(True)
    g.sdpa(q, k, g.tensor_like(q, "V"), name="fwd", generate_stats=False)
    try:
        g.validate()
    except hg.HipdnnError as exc:
        assert (
            "only the scalar slots (Attn_scale, Dropout_scale, Dropout_scale_inv, Seed, Offset)"
            in exc.message
        )
    else:
        raise AssertionError("a pass-by-value K validated")
    # normalizations: EPSILON must be pass-by-value
    g = _graph()
    x, scale = g.tensor(name="x", dim=[2, 4]), g.tensor(name="s", dim=[1, 4])
    g.rmsnorm(
        x, scale, epsilon=g.tensor(name="eps", dim=[1]), forward_phase=hg.NormFwdPhase.INFERENCE
    )
    try:
        g.validate()
    except hg.HipdnnError as exc:
        assert exc.message.endswith("must be a pass-by-value tensor")
    else:
        raise AssertionError("an EPSILON that is not pass-by-value validated")
    # pointwise: the page's example scales by the constant
    g = _graph()
    x = g.tensor(name="x", dim=[2, 3])
    c = g.tensor(hg.TensorAttributes(name="c").set_value(2.0))
    y = g.pointwise(x, c, mode=hg.PointwiseMode.MUL).set_output(True)
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    out = g.run({x: np.arange(6, dtype=np.float32).reshape(2, 3)})[y]
    np.testing.assert_array_equal(out, 2 * np.arange(6, dtype=np.float32).reshape(2, 3))
