"""The example third-party plugin (``examples/custom_backend``), installed for these tests only.

The ``example_plugin`` fixture installs it for the test's own process (its ``.dist-info`` and
source folder on ``sys.path``, see ``tests/example_plugin.py``), never into the user's
environment; hipdnn-graph must find it through its entry point, list it, and run a graph on it
when it is preferred. Its own test suite runs here too, as its author would run it (a separate
pytest process, the plugin installed the same way through ``PYTHONPATH``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from example_plugin import PLUGIN_DIR

import hipdnn_graph as hg

ENGINE = "CUSTOM_NUMPY_SDPA_FWD_ENGINE"
INSTALL_HINT = "the example plugin was not found through its entry point"
REQUIREMENTS = Path(__file__).resolve().parents[1] / "requirements-test.txt"

pytestmark = pytest.mark.usefixtures("example_plugin")


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


def test_the_plugins_own_test_suite_passes(example_plugin: list[Path]) -> None:
    if "custom" not in {info.name for info in hg.list_backends()}:
        pytest.fail(INSTALL_HINT)
    path = [str(p) for p in example_plugin] + [p for p in [os.environ.get("PYTHONPATH")] if p]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": os.pathsep.join(path)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(PLUGIN_DIR / "tests")],
        cwd=PLUGIN_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_the_test_requirements_leave_the_plugin_out_of_the_users_environment() -> None:
    # issue 41 item 22: `make test` installed it, so every refusal list, log and `backends`
    # listing of the user's environment showed it; the fixture installs it for tests alone
    lines = [line.split("#")[0].strip() for line in REQUIREMENTS.read_text().splitlines()]
    assert not [line for line in lines if "custom_backend" in line]
