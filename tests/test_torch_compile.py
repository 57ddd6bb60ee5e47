"""``torch.compile(model, backend="hipdnn")`` on the CPU (docs/torch-compile.md).

Small models only: Dynamo and AOTAutograd take most of each test's time.
"""

from __future__ import annotations

import logging
import tomllib
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from compile_models import Block, make_mlp, trains_as_eager  # noqa: E402

import hipdnn_graph.torch.compile as hgc  # noqa: E402
from hipdnn_graph import ErrorCode, HipdnnError  # noqa: E402
from hipdnn_graph.torch.compile import _partition  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    torch._dynamo.reset()
    hgc.reset_census()


def test_mlp_inference_matches_eager_and_runs_in_hipdnn_graphs() -> None:
    mlp, x = make_mlp(), torch.randn(4, 8)
    with torch.no_grad():
        got = torch.compile(mlp, backend=hgc.compile_backend)(x)
        want = mlp(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    c = hgc.census()
    assert c.hipdnn_ops() == ["aten.addmm.default", "aten.gelu.default"]
    assert {r.graph for r in c.rows} == {"inference"}
    placed = {(r.op, r.placement, r.why) for r in c.rows}
    assert ("aten.addmm.default", "hipdnn", "matmul") in placed
    assert ("aten.gelu.default", "hipdnn", "pointwise") in placed
    assert ("aten.t.default", "aten", "no hipDNN family expresses it") in placed
    # the weights' transposes run in aten first; linear, GELU, linear are then one graph
    assert [r.subgraph for r in c.rows if r.placement == "hipdnn"] == [0, 0, 0]
    assert c.flops_fraction() == 1.0


def test_transformer_block_forward_and_backward_match_eager() -> None:
    torch.manual_seed(0)
    block = Block()
    x = torch.randn(2, 5, 16, requires_grad=True)
    trains_as_eager(block, x)
    c = hgc.census()
    families = {(r.graph, r.why) for r in c.rows if r.placement == "hipdnn"}
    assert families == {
        ("forward", "layernorm"),
        ("forward", "matmul"),
        ("forward", "sdpa"),
        ("forward", "pointwise"),
        ("backward", "pointwise"),
        ("backward", "matmul"),
        ("backward", "sdpa_backward"),
        ("backward", "layernorm_backward"),
        ("backward", "reduction"),  # the linear layers' bias gradients
    }
    assert c.flops_fraction() == 1.0  # every matmul and attention FLOP in hipDNN graphs
    sums = {(r.placement, r.why) for r in c.rows if r.op == "aten.sum.dim_IntList"}
    assert sums == {("hipdnn", "reduction")}


@pytest.mark.parametrize(
    ("dtype", "tol"), [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)], ids=["fp32", "bf16"]
)
def test_transformer_block_inference(dtype: torch.dtype, tol: float) -> None:
    torch.manual_seed(0)
    block, x = Block().to(dtype), torch.randn(2, 5, 16, dtype=dtype)
    with torch.no_grad():
        got = torch.compile(block, backend=hgc.compile_backend)(x)
        want = block(x)
    assert got.dtype == dtype
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    c = hgc.census()
    assert {r.why for r in c.rows if r.placement == "hipdnn"} == {
        "layernorm",
        "matmul",
        "sdpa",
        "pointwise",
    }
    assert c.flops_fraction() == 1.0


def test_conv_block_forward_and_backward_match_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1, bias=False),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.Conv2d(8, 4, 3, stride=2, padding=1),  # 9 -> 5: dgrad's dims come from FX
    )
    x = torch.randn(2, 3, 9, 9, requires_grad=True)
    trains_as_eager(model, x)
    c = hgc.census()
    rows = [(r.graph, r.placement, r.why) for r in c.rows if "convolution" in r.op]
    assert sorted(rows) == sorted(
        [("forward", "hipdnn", "convolution")] * 2
        + [("backward", "hipdnn", "convolution_backward")] * 5  # dX, dW of each; one dBias
    )
    norms = {(r.graph, r.op, r.placement, r.why) for r in c.rows if "batch_norm" in r.op}
    assert norms == {
        ("forward", "aten._native_batch_norm_legit_functional.default", "hipdnn", "batchnorm"),
        ("backward", "aten.native_batch_norm_backward.default", "hipdnn", "batchnorm_backward"),
    }
    assert c.flops_fraction() == 1.0


def test_unsupported_op_and_dtype_stay_in_aten() -> None:
    class Odd(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(torch.cumsum(self.lin(x), dim=-1))

    torch.manual_seed(0)
    model, x = Odd(), torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend=hgc.compile_backend)(x), model(x))
    c = hgc.census()
    assert c.aten_ops() == {
        "aten.t.default": "no hipDNN family expresses it",
        "aten.cumsum.default": "no hipDNN family expresses it",
    }
    assert c.hipdnn_ops() == ["aten.addmm.default", "aten.relu.default"]

    torch._dynamo.reset()
    hgc.reset_census()
    model64, x64 = Odd().double(), x.double()
    with torch.no_grad():
        torch.testing.assert_close(
            torch.compile(model64, backend=hgc.compile_backend)(x64), model64(x64)
        )
    assert hgc.census().aten_ops()["aten.relu.default"] == (
        "a torch.float64 tensor (subgraphs take float32, float16, bfloat16)"
    )


def test_graph_that_fails_to_build_runs_in_aten(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(gm: object, prefer: object = None) -> object:
        raise HipdnnError(ErrorCode.GRAPH_NOT_SUPPORTED, "no engine applies")

    monkeypatch.setattr(_partition, "lower", refuse)
    mlp, x = make_mlp(), torch.randn(2, 8)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(mlp, backend=hgc.compile_backend)(x), mlp(x))
    c = hgc.census()
    assert c.hipdnn_ops() == []
    assert (
        c.aten_ops()["aten.gelu.default"] == "its hipDNN graph failed to build: no engine applies"
    )
    assert c.flops_fraction() == 0.0


def test_graph_that_fails_at_run_time_falls_back(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from hipdnn_graph.torch.compile._lowering import Lowered

    def broken(self: object, args: object) -> object:
        raise HipdnnError(ErrorCode.INVALID_VARIANT_PACK, "buffer mismatch")

    monkeypatch.setattr(Lowered, "run", broken)
    mlp, x = make_mlp(), torch.randn(2, 8)
    with caplog.at_level(logging.WARNING, logger="hipdnn_graph.compile"), torch.no_grad():
        torch.testing.assert_close(torch.compile(mlp, backend=hgc.compile_backend)(x), mlp(x))
    assert "hipDNN subgraph failed at run time, aten runs it: buffer mismatch" in caplog.text


def test_census_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    mlp = make_mlp()
    with caplog.at_level(logging.DEBUG, logger="hipdnn_graph.compile"), torch.no_grad():
        torch.compile(mlp, backend=hgc.compile_backend)(torch.randn(2, 8))
    (message,) = [r.getMessage() for r in caplog.records if r.name == "hipdnn_graph.compile"]
    lines = message.splitlines()
    assert lines[0] == "hipdnn compile census:"
    assert lines[1].split() == ["graph", "op", "placed", "count", "why"]
    assert lines[2].split() == [
        *("inference", "aten.t.default", "aten", "2"),
        *("no", "hipDNN", "family", "expresses", "it"),
    ]
    assert hgc.census().table() == "\n".join(lines[1:])


def test_backend_by_name_through_the_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name comes from pyproject's ``torch_dynamo_backends`` entry point, found by torch's own
    discovery (an installed copy of the metadata, as pip would write it)."""
    from torch._dynamo.backends import registry

    points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert points["torch_dynamo_backends"] == {
        "hipdnn": "hipdnn_graph.torch.compile:compile_backend"
    }
    info = tmp_path / "hipdnn_graph_compile_probe-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: hipdnn-graph-compile-probe\nVersion: 0.0\n"
    )
    lines = [f"{k} = {v}" for k, v in points["torch_dynamo_backends"].items()]
    (info / "entry_points.txt").write_text("[torch_dynamo_backends]\n" + "\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # also invalidates importlib's caches
    monkeypatch.delitem(registry._BACKENDS, "hipdnn", raising=False)
    monkeypatch.delitem(registry._COMPILER_FNS, "hipdnn", raising=False)
    registry._lazy_import.cache_clear()  # torch discovers entry points once per process
    registry._discover_entrypoint_backends.cache_clear()
    assert registry.lookup_backend("hipdnn") is hgc.compile_backend
    mlp, x = make_mlp(), torch.randn(2, 8)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(mlp, backend="hipdnn")(x), mlp(x))
    assert hgc.census().hipdnn_ops() == ["aten.addmm.default", "aten.gelu.default"]
    registry._lazy_import.cache_clear()
    registry._discover_entrypoint_backends.cache_clear()


def test_attention_through_the_custom_op_where_torch_kernels_keep_rng_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Off the CPU, SDPA goes through ``hipdnn_graph::sdpa_fwd`` / ``sdpa_bwd`` (their own hipDNN
    graphs); here the CPU is made to route the same way, to run that path."""
    from hipdnn_graph.torch.compile import _attention

    monkeypatch.setattr(_attention, "routes_to_op", lambda q: True)
    torch.manual_seed(0)
    block = Block()
    x = torch.randn(2, 5, 16, requires_grad=True)
    trains_as_eager(block, x)
    c = hgc.census()
    attention = [(r.graph, r.op, r.placement, r.why) for r in c.rows if "sdpa" in r.op]
    assert attention == [
        ("forward", "hipdnn_graph.sdpa_fwd.default", "hipdnn", "sdpa"),
        ("backward", "hipdnn_graph.sdpa_bwd.default", "hipdnn", "sdpa_backward"),
    ]
    assert not any("scaled_dot_product" in r.op for r in c.rows)
    assert c.flops_fraction() == 1.0
