"""Where the flex engine refuses (no GPU, HIPDNN_GRAPH_TORCH_FLEX_CPU unset), ``build()`` decides
so without importing the engine's FlexAttention module (issue 23, item 17: about a second of the
first CPU build went into importing a kernel module whose engine then refused)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

CODE = textwrap.dedent(
    """
    import sys
    import hipdnn_graph as hg

    g = hg.Graph(io_data_type=hg.DataType.FLOAT, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)
    q = g.tensor(name="Q", dim=[1, 2, 8, 16])
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
    o.set_output(True)
    g.build()
    print(g.get_plan_name())
    print(g.get_engine_refusals()["TORCH_SDPA_FLEX_ENGINE"])
    print(sorted(m for m in sys.modules if m.startswith("hipdnn_graph_torch_rocm.kernels.")))
    """
)


@pytest.mark.skipif(torch.cuda.is_available(), reason="flex accepts graphs where a GPU is present")
def test_a_refusing_flex_engine_is_not_imported() -> None:
    env = {k: v for k, v in os.environ.items() if k != "HIPDNN_GRAPH_TORCH_FLEX_CPU"}
    done = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr
    engine, refusal, modules = done.stdout.splitlines()
    assert engine == "TORCH_SDPA_MATH_ENGINE"
    assert refusal.startswith("flex needs a CUDA or ROCm device")
    loaded = ast.literal_eval(modules)
    assert "hipdnn_graph_torch_rocm.kernels.flex" not in loaded, loaded
    assert not [m for m in loaded if m.startswith("hipdnn_graph_torch_rocm.kernels._flex_")
                and m != "hipdnn_graph_torch_rocm.kernels._flex_env"], loaded  # fmt: skip
