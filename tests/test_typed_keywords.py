"""The keywords of Graph.tensor(), Graph.sdpa() and Graph.sdpa_backward() are typed (issue 23,
item 17): ``mypy --strict`` flags a misspelled keyword (``use_casual_mask``) or a value of the
wrong type, and accepts every keyword the runtime tables accept."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hipdnn_graph as hg
from hipdnn_graph.graph.builders.keyword_types import (
    SdpaBackwardKeywords,
    SdpaKeywords,
    TensorKeywords,
)
from hipdnn_graph.graph.builders.sdpa_keywords import BACKWARD_KEYWORDS, FORWARD_KEYWORDS

ROOT = Path(__file__).resolve().parents[1]

SNIPPET = textwrap.dedent(
    """
    import numpy as np

    import hipdnn_graph as hg

    g = hg.Graph(io_data_type=hg.DataType.HALF)
    q = g.tensor(name="Q", dim=[1, 2, 8, 16], data_type=hg.DataType.HALF, uid=np.int64(3))
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    seed = g.tensor(name="seed", dim=[1], is_pass_by_value=True, value=7)
    o, stats = g.sdpa(q, k, v, name="fwd", use_causal_mask=True, attn_scale=0.25,
                      diagonal_band_left_bound=4, generate_stats=True, bias=None)
    assert stats is not None
    g.sdpa_backward(q, k, v, o, g.tensor_like(q, "dO"), stats, dropout=(0.1, seed, seed),
                    use_causal_mask_bottom_right=True, dBias=None)
    g.sdpa(q, k, v, use_casual_mask=True)  # line 15: misspelled
    g.sdpa(q, k, v, use_causal_mask="yes")  # line 16: wrong type
    g.sdpa_backward(q, k, v, o, q, stats, generate_stats=True)  # line 17: forward-only keyword
    g.tensor(name="X", dims=[1])  # line 18: misspelled
    g.tensor(name="X", dim=[1.5])  # line 19: not integers
    """
)


def test_keyword_types_match_the_runtime_tables() -> None:
    assert set(SdpaKeywords.__optional_keys__) == set(FORWARD_KEYWORDS)
    assert set(SdpaBackwardKeywords.__optional_keys__) == set(BACKWARD_KEYWORDS)
    assert set(TensorKeywords.__optional_keys__) == set(hg.TensorAttributes.model_fields)
    for typed in (SdpaKeywords, SdpaBackwardKeywords, TensorKeywords):
        assert not typed.__required_keys__


def test_mypy_flags_misspelled_and_mistyped_keywords(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    path = tmp_path / "keywords_snippet.py"
    path.write_text(SNIPPET)
    search = os.pathsep.join([str(ROOT), str(ROOT / "backends")])
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--show-error-codes",
         str(path)],
        capture_output=True, text=True, cwd=ROOT, timeout=600, check=False,
        env={**os.environ, "MYPYPATH": search},
    )  # fmt: skip
    errors = re.findall(rf"{re.escape(path.name)}:(\d+): error: (.*)", done.stdout)
    lines = sorted({int(line) for line, _ in errors})
    assert lines == [15, 16, 17, 18, 19], done.stdout + done.stderr
    text = done.stdout
    assert '"use_casual_mask"' in text and '"dims"' in text and '"generate_stats"' in text
