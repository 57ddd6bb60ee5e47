"""The torch engines' knobs on a device: each changes what runs (run on the GPU machine).

* flex: ``flex.block_m``/``block_n``/``num_warps`` compile a kernel of their own whose forward
  takes exactly those tile options, with the default kernel's results;
* ``torch.cuda_graphs``: 0 never captures, the default captures once and replays;
* ``cudnn_fe.plan_index``: another of cuDNN's plans (its name differs), the same results; an
  index beyond cuDNN's list fails the build naming the bound;
* ``fusion.compile_mode``: the Inductor mode the fused function is compiled with.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph as hg  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm device"),
]

FLEX, MATH, CUDNN = "TORCH_SDPA_FLEX_ENGINE", "TORCH_SDPA_MATH_ENGINE", "CUDNN_FRONTEND_ENGINE"
FUSION = "TORCH_FUSION_ENGINE"


def _graph(dtype: hg.DataType = hg.DataType.BFLOAT16) -> tuple[hg.Graph, list[Any]]:
    g = hg.Graph(name="fwd", io_data_type=dtype, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    q = g.tensor(name="Q", dim=[2, 4, 256, 64])
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    o, stats = g.sdpa(q, k, v, name="attn", generate_stats=True, use_causal_mask=True)
    assert stats is not None
    o.set_output(True)
    stats.set_output(True).set_data_type(hg.DataType.FLOAT)
    return g.build_operation_graph(), [q, k, v, o, stats]


def _run(engine: str, knobs: dict[str, Any]) -> tuple[hg.Graph, list[Any]]:
    g, t = _graph()
    g.create_execution_plan_ext(engine, knobs).build_plans()
    assert g.get_plan_name() == engine
    gen = torch.Generator(device="cuda").manual_seed(0)
    ins = [torch.randn(x.get_dim(), device="cuda", generator=gen).to(torch.bfloat16)
           for x in t[:3]]  # fmt: skip
    outs = [torch.empty(t[3].get_dim(), device="cuda", dtype=torch.bfloat16),
            torch.empty(t[4].get_dim(), device="cuda", dtype=torch.float32)]  # fmt: skip
    for _ in range(3):
        g.execute(dict(zip(t, [*ins, *outs], strict=True)))
    torch.cuda.synchronize()
    return g, outs


def _plan(g: hg.Graph) -> Any:
    return g._state.active.plan  # type: ignore[union-attr]


def test_flex_tiles_compile_a_kernel_with_those_options() -> None:
    tiles = {"flex.block_m": 32, "flex.block_n": 32, "flex.num_warps": 4}
    g_default, want = _run(FLEX, {})
    g_tiled, got = _run(FLEX, tiles)
    default_kernel = _plan(g_default).steps[0].run.__self__
    tiled_kernel = _plan(g_tiled).steps[0].run.__self__
    assert tiled_kernel is not default_kernel
    assert tiled_kernel.spec.tiles == (("BLOCK_M", 32), ("BLOCK_N", 32), ("num_warps", 4))
    assert tiled_kernel._fwd_options == tiled_kernel.spec.tiles
    assert default_kernel.spec.tiles == ()
    torch.testing.assert_close(got[0], want[0], atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(got[1], want[1], atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize(("value", "captures"), [(0, 0), (-1, 1)])
def test_the_replay_knob_turns_capture_off(value: int, captures: int) -> None:
    g, _ = _run(MATH, {"torch.cuda_graphs": value})
    assert _plan(g).replay.captures == captures


@pytest.mark.skipif(importlib.util.find_spec("cudnn") is None, reason="needs cudnn-frontend")
def test_the_cudnn_plan_index_runs_another_plan() -> None:
    g0, want = _run(CUDNN, {"cudnn_fe.plan_index": 0})
    first = _plan(g0).steps[0]
    count = int(first.graph.get_execution_plan_count())
    if count < 2:
        pytest.skip(f"cuDNN offers {count} plan for this graph")
    g1, got = _run(CUDNN, {"cudnn_fe.plan_index": 1})
    second = _plan(g1).steps[0]
    assert (first.plan_index, second.plan_index) == (0, 1)
    assert second.plan_name and second.plan_name != first.plan_name
    torch.testing.assert_close(got[0], want[0], atol=2e-2, rtol=2e-2)
    g, _ = _graph()
    g.create_execution_plan_ext(CUDNN, {"cudnn_fe.plan_index": 255})
    with pytest.raises(hg.HipdnnError) as info:
        g.build_plans()
    assert info.value.code == hg.ErrorCode.GRAPH_EXECUTION_PLAN_CREATION_FAILED
    assert "Plan index 255 is out of bounds" in info.value.message


def test_the_fusion_compile_mode_reaches_inductor() -> None:
    import torch_family_cases as cases

    case = cases.fusion_examples().matmul_bias_gelu(256, 512, 256, io=hg.DataType.BFLOAT16)
    g = case.graph.build_operation_graph()
    mode = "max-autotune-no-cudagraphs"
    g.create_execution_plan_ext(FUSION, {"fusion.compile_mode": mode}).build_plans()
    assert _plan(g).backend.config.mode == mode
    assert mode in _plan(g).backend.config.describe("cuda")
