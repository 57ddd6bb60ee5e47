"""GPU suite: hipDNN's own small SDPA benchmark graph files (``tests/benchmark_graph_corpus.py``)
on every torch SDPA engine, against the NumPy reference on the same inputs: relative error
≤ 1e-2, no NaN. A file an engine cannot run exactly must be refused by its ``check()`` (the test
then skips with the refusal as its reason). ``sample_sdpa_backward.json`` declares Stats
``[B, H, Sq]`` (rank 3), which every engine must read as ``[B, H, Sq, 1]``.
"""

from __future__ import annotations

from typing import Any

import benchmark_graph_corpus as corpus
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph as hg  # noqa: E402
from hipdnn_graph.testing import graph_outputs, make_inputs, to_device, to_numpy  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]

ENGINES = [
    "CUDNN_FRONTEND_ENGINE",
    "TORCH_SDPA_CUDNN_ENGINE",
    "TORCH_SDPA_FLASH_ENGINE",
    "TORCH_SDPA_EFFICIENT_ENGINE",
    "TORCH_SDPA_FLEX_ENGINE",
    "TORCH_SDPA_MATH_ENGINE",
]
FILES = [
    f
    for f in corpus.FILES
    if corpus.runnable(f) and corpus.doc(f)["nodes"][0]["type"].startswith("Sdpa")
]


def _rel(out: np.ndarray[Any, Any], ref: np.ndarray[Any, Any]) -> float:
    assert not np.isnan(out).any(), "NaN in output"
    ref = ref.astype(np.float64)
    denom = float(np.linalg.norm(ref))
    return float(np.linalg.norm(out.astype(np.float64) - ref)) / (denom if denom > 0 else 1.0)


@pytest.mark.parametrize("rel", FILES)
@pytest.mark.parametrize("engine", ENGINES)
def test_engine_runs_hipdnns_file_as_the_numpy_reference(engine: str, rel: str) -> None:
    g = hg.Graph.from_json(corpus.text(rel))
    g.validate()
    outputs = graph_outputs(g)
    pack = make_inputs(g, np.random.default_rng(11))
    inputs = {t: v for t, v in pack.items() if t not in outputs}
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    reference = g.run(inputs)
    g.set_preferred_engine_id_ext(engine).build()
    if g.get_plan_name() != engine:
        reason = g.get_engine_refusals().get(engine, "ranked below another engine")
        pytest.skip(f"{engine} refuses: {reason}")
    got = g.run(to_device(inputs, "cuda"))
    for tensor in outputs:
        assert _rel(to_numpy(got[tensor]), np.asarray(reference[tensor])) <= 1e-2, tensor.name
