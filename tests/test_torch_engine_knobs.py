"""The torch engines' knobs on the CPU: each reaches the plan and changes what it runs (replay
capacity, the fusion engine's compile configuration); the flex tile options as the kernel's
cache key. The device side (flex tiles compiled, cuDNN plan indices, replay captures) is in
``tests/gpu/test_engine_knobs_gpu.py``."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch_family_cases as cases  # noqa: E402

import hipdnn_graph as hg  # noqa: E402
from hipdnn_graph.backend import isolated_registry, register_backend  # noqa: E402
from hipdnn_graph_torch_rocm import TorchEagerEngine, TorchFusionEngine  # noqa: E402
from hipdnn_graph_torch_rocm._engines import create_engines  # noqa: E402
from hipdnn_graph_torch_rocm.engine_knobs import flex_tiles  # noqa: E402
from hipdnn_graph_torch_rocm.replay import graphs_per_plan  # noqa: E402

MATH, FLEX = "TORCH_SDPA_MATH_ENGINE", "TORCH_SDPA_FLEX_ENGINE"
FUSION, EAGER = "TORCH_FUSION_ENGINE", "TORCH_EAGER_ENGINE"


class _Backend:
    name = "torch-knobs-test"

    def __init__(self, *engines: Any) -> None:
        self._engines = list(engines)

    def engines(self) -> list[Any]:
        return self._engines


class _Counting:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        self.calls += 1
        return gm.forward


def _sdpa() -> hg.Graph:
    f32 = hg.DataType.FLOAT
    g = hg.Graph(name="fwd", io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)
    q = g.tensor(name="Q", dim=[1, 2, 8, 4])
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
    o.set_output(True)
    return g.build_operation_graph()


def _active(g: hg.Graph) -> Any:
    return g._state.active.plan  # type: ignore[union-attr]


def test_the_engines_declare_their_knobs() -> None:
    knobs = {e.name: [k.knob_id for k in e.knobs] for e in create_engines()}
    assert knobs[FLEX] == ["torch.cuda_graphs", "flex.block_m", "flex.block_n", "flex.num_warps"]
    assert knobs[MATH] == ["torch.cuda_graphs"]
    assert [k.knob_id for k in TorchFusionEngine().knobs] == [
        "torch.cuda_graphs",
        "fusion.compile_mode",
    ]
    assert all(e.api_version == (1, 2, 0) for e in create_engines())


@pytest.mark.parametrize(("value", "capacity"), [(-1, None), (0, 0), (2, 2)])
def test_the_replay_knob_sets_the_plans_capacity(value: int, capacity: int | None) -> None:
    with isolated_registry(load_entry_points=False):
        register_backend(_Backend(*[e for e in create_engines() if e.name == MATH]))
        g = _sdpa()
        g.create_execution_plan_ext(MATH, {"torch.cuda_graphs": value}).build_plans()
        replay = _active(g).replay
        assert replay.capacity == (graphs_per_plan() if capacity is None else capacity)
        with pytest.raises(hg.HipdnnError) as info:
            g.create_execution_plan_ext(MATH, {"torch.cuda_graphs": 65})
        assert info.value.message == "Value 65 is out of range [-1, 64]"


def test_flex_tiles_are_part_of_the_kernels_cache_key() -> None:
    from hipdnn_graph_torch_rocm.kernels.flex import FlexSpec

    knobs = {"flex.block_m": 32, "flex.block_n": 64, "flex.num_warps": 4}
    tiles = flex_tiles(knobs, forward=True)
    assert tiles == (("BLOCK_M", 32), ("BLOCK_N", 64), ("num_warps", 4))
    assert flex_tiles(knobs, forward=False) == (("num_warps", 4),)
    assert flex_tiles({}, forward=True) == ()
    base = FlexSpec(b=1, h=2, hk=2, hv=2, sq=8, skv=8, d=4, dv=4, dtype=torch.float32,
                    device="cpu", forward=True)  # fmt: skip
    from dataclasses import replace

    assert replace(base, tiles=tiles) != base and hash(replace(base, tiles=tiles)) != hash(base)


def test_the_fusion_compile_mode_knob_compiles_with_that_mode() -> None:
    counter = _Counting()
    engine = TorchFusionEngine(backend=counter, autotune=False)
    with isolated_registry(load_entry_points=False):
        register_backend(_Backend(engine, TorchEagerEngine()))
        case = cases.fusion_examples().rmsnorm_matmul(8, 16, 12, io=hg.DataType.FLOAT)
        g = case.graph
        g.build_operation_graph()
        mode = "max-autotune-no-cudagraphs"
        g.create_execution_plan_ext(FUSION, {"fusion.compile_mode": mode}).build_plans()
        plan = _active(g)
        assert plan.backend.config.mode == mode and counter.calls == 1
        g.create_execution_plan_ext(FUSION).build_plans()
        assert _active(g).backend.config.mode is None and counter.calls == 2
        with pytest.raises(hg.HipdnnError) as info:
            g.create_execution_plan_ext(FUSION, {"fusion.compile_mode": "fast"})
        assert info.value.message == (
            'Value "fast" is not in the list of valid values: ["", "default", '
            '"max-autotune-no-cudagraphs"]'
        )
