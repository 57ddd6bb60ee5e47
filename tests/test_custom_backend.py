"""The example third-party plugin (``examples/custom_backend``) installed into the test env.

``requirements-test.txt`` installs it (``-e ./examples/custom_backend``), so hipdnn-graph must
find it through its entry point, list it, and run a graph on it when it is preferred. Its own
test suite runs here too, as its author would run it (a separate pytest process).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg

ENGINE = "CUSTOM_NUMPY_SDPA_FWD_ENGINE"
PLUGIN_DIR = Path(__file__).resolve().parents[1] / "examples" / "custom_backend"
INSTALL_HINT = "the example plugin is not installed: pip install -r requirements-test.txt"


def test_plugin_is_listed_through_its_entry_point() -> None:
    infos = {info.name: info for info in hg.list_backends()}
    assert "custom" in infos, INSTALL_HINT
    info = infos["custom"]
    assert info.loaded, info.error
    assert info.engines == [ENGINE]
    assert info.source == "hipdnn_custom_backend:create_backend"


def test_a_graph_runs_on_the_plugin_when_preferred_by_name() -> None:
    g = hg.Graph(
        name="custom_fwd",
        io_data_type=hg.DataType.HALF,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = g.tensor(name="Q", dim=[1, 4, 32, 16])
    k = g.tensor(name="K", dim=[1, 1, 40, 16])
    v = g.tensor(name="V", dim=[1, 1, 40, 16])
    o, stats = g.sdpa(q, k, v, name="attn", use_causal_mask_bottom_right=True)
    assert stats is not None
    o.set_output(True)
    stats.set_output(True).set_data_type(hg.DataType.FLOAT)
    g.set_preferred_engine_id_ext(ENGINE).build()
    assert g.get_plan_name() == ENGINE, INSTALL_HINT

    rng = np.random.default_rng(0)
    pack: dict[Any, Any] = {
        t: rng.standard_normal(t.get_dim()).astype(np.float16) for t in (q, k, v)
    }
    results: dict[Any, np.ndarray[Any, Any]] = {
        o: np.full(o.get_dim(), np.nan, np.float16),
        stats: np.full(stats.get_dim(), np.nan, np.float32),
    }
    g.execute({**pack, **results})

    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    reference = {t: np.full_like(a, np.nan) for t, a in results.items()}
    g.execute({**pack, **reference})
    for t, got in results.items():
        assert not np.isnan(got).any()
        np.testing.assert_allclose(got.astype(np.float32), reference[t].astype(np.float32),
                                   rtol=2e-3, atol=2e-3)  # fmt: skip


def test_the_plugins_own_test_suite_passes() -> None:
    if "custom" not in {info.name for info in hg.list_backends()}:
        pytest.fail(INSTALL_HINT)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(PLUGIN_DIR / "tests")],
        cwd=PLUGIN_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
