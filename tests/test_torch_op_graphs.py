"""hipdnn_graph.torch._graphs: the cached forward/backward graphs, their arguments and cache.

Every result is compared with the independent float64 autograd reference
(``tests/sdpa_autograd_reference.py``) on both CPU engines.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sdpa_autograd_reference import reference_backward, reference_forward  # noqa: E402

import hipdnn_graph as hg  # noqa: E402
from hipdnn_graph.torch import GraphCache, graph_cache  # noqa: E402
from hipdnn_graph.torch._graphs import sdpa_backward, sdpa_forward  # noqa: E402

ENGINES = [None, "NUMPY_REFERENCE_ENGINE", "TORCH_SDPA_MATH_ENGINE"]
B, H, HK, SQ, SKV, D, DV = 2, 4, 2, 6, 9, 8, 4

# (our keywords, the reference's keywords); scale 0.5 is exact in float32.
FEATURES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "plain": ({}, {}),
    "causal_top_left": ({"is_causal": True}, {"right_bound": 0}),
    "causal_bottom_right": (
        {"is_causal": True, "diagonal_alignment": "bottom_right"},
        {"right_bound": 0, "bottom_right": True},
    ),
    "band": ({"left_bound": 2, "right_bound": 1}, {"left_bound": 2, "right_bound": 1}),
    "band_bottom_right": (
        {
            "left_bound": 3,
            "right_bound": 0,
            "diagonal_alignment": hg.DiagonalAlignment.BOTTOM_RIGHT,
        },
        {"left_bound": 3, "right_bound": 0, "bottom_right": True},
    ),
    "padding": (
        {"seq_len_q": [4, 6], "seq_len_kv": torch.tensor([9, 3])},
        {"seq_len_q": np.array([4, 6]), "seq_len_kv": np.array([9, 3])},
    ),
    "alibi": ({"alibi": True}, {"alibi": True}),
}


def _inputs(seed: int = 0, dtype: Any = None) -> tuple[Any, Any, Any, Any]:
    g = torch.Generator().manual_seed(seed)
    dtype = dtype or torch.float64
    q = torch.randn(B, H, SQ, D, generator=g, dtype=dtype)
    k = torch.randn(B, HK, SKV, D, generator=g, dtype=dtype)
    v = torch.randn(B, HK, SKV, DV, generator=g, dtype=dtype)
    do = torch.randn(B, H, SQ, DV, generator=g, dtype=dtype)
    return q, k, v, do


def _close(actual: Any, expected: Any, tol: float = 1e-9) -> None:
    a = actual.detach().double().numpy() if isinstance(actual, torch.Tensor) else actual
    np.testing.assert_allclose(a, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("feature", list(FEATURES))
def test_forward_and_backward_match_the_reference(feature: str, engine: str | None) -> None:
    ours, ref = FEATURES[feature]
    q, k, v, do = _inputs()
    o, stats = sdpa_forward(q, k, v, scale=0.5, engine=engine, **ours)
    ro, rstats = reference_forward(q, k, v, scale=0.5, **ref)
    assert o.dtype == torch.float64 and o.shape == (B, H, SQ, DV)
    assert stats.shape == (B, H, SQ, 1)
    _close(o, ro)
    finite = np.isfinite(rstats)
    _close(stats.numpy()[finite], rstats[finite])
    dq, dk, dv, dbias = sdpa_backward(q, k, v, o, do, stats, scale=0.5, engine=engine, **ours)
    rdq, rdk, rdv, _ = reference_backward(q, k, v, ro, do, rstats, scale=0.5, **ref)
    assert dbias is None
    for got, want in ((dq, rdq), (dk, rdk), (dv, rdv)):
        _close(got, want)


@pytest.mark.parametrize("engine", ENGINES)
def test_bias_and_dbias_reduced_to_the_requested_shape(engine: str | None) -> None:
    q, k, v, do = _inputs(1)
    bias = torch.randn(1, H, SQ, SKV, dtype=torch.float64)
    o, stats = sdpa_forward(q, k, v, attn_mask=bias, scale=0.5, engine=engine)
    ro, rstats = reference_forward(q, k, v, scale=0.5, bias=bias.numpy())
    _close(o, ro)
    *grads, dbias = sdpa_backward(
        q, k, v, o, do, stats, attn_mask=bias, scale=0.5, engine=engine, dbias_shape=(H, 1, SKV)
    )
    *rgrads, rdbias = reference_backward(
        q, k, v, ro, do, rstats, scale=0.5, bias=bias.numpy(), dbias_shape=(1, H, 1, SKV)
    )
    assert dbias is not None and dbias.shape == (H, 1, SKV)
    _close(dbias, rdbias.reshape(H, 1, SKV))
    for got, want in zip(grads, rgrads, strict=True):
        _close(got, want)


def test_bool_mask_keeps_true_pairs_and_broadcasts() -> None:
    q, k, v, _ = _inputs(2)
    keep = torch.rand(SQ, SKV, generator=torch.Generator().manual_seed(3)) > 0.3
    keep[:, 0] = True  # every row sees a key
    o, _ = sdpa_forward(q, k, v, attn_mask=keep.expand(B, 1, SQ, SKV), scale=0.5)
    expected = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=keep, enable_gqa=True, scale=0.5
    )
    _close(o, expected.numpy())


def test_dropout_mask_and_scale_reach_both_graphs() -> None:
    q, k, v, do = _inputs(4)
    mask = (torch.rand(B, H, SQ, SKV, generator=torch.Generator().manual_seed(5)) > 0.25).double()
    kw: dict[str, Any] = {"dropout_mask": mask, "dropout_scale": 1 / 0.75}
    o, stats = sdpa_forward(q, k, v, scale=0.5, **kw)
    ro, rstats = reference_forward(q, k, v, scale=0.5, dropout_mask=mask.numpy(),
                                   dropout_scale=1 / 0.75)  # fmt: skip
    _close(o, ro)
    grads = sdpa_backward(q, k, v, o, do, stats, scale=0.5, **kw)[:3]
    rgrads = reference_backward(q, k, v, ro, do, rstats, scale=0.5, dropout_mask=mask.numpy(),
                                dropout_scale=1 / 0.75)[:3]  # fmt: skip
    for got, want in zip(grads, rgrads, strict=True):
        _close(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_low_precision_outputs_keep_the_input_dtype_and_stats_are_float32(dtype: Any) -> None:
    q, k, v, do = _inputs(6, dtype)
    o, stats = sdpa_forward(q, k, v, is_causal=True)
    assert o.dtype == dtype and stats.dtype == torch.float32
    ro, _ = reference_forward(q, k, v, scale=D**-0.5, right_bound=0)
    tol = 2e-6 if dtype == torch.float32 else 3e-2
    _close(o, ro, tol)
    dq, dk, dv, _ = sdpa_backward(q, k, v, o, do, stats, is_causal=True)
    assert (dq.dtype, dk.dtype, dv.dtype) == (dtype, dtype, dtype)


def test_non_contiguous_inputs_and_stats_is_the_log_sum_exp() -> None:
    q, k, v, _ = _inputs(7)
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)  # [B, S, H, D] memory, as in transformers
    o, stats = sdpa_forward(qt, k, v, scale=0.5)
    scores = 0.5 * q @ k.repeat_interleave(H // HK, dim=1).transpose(-1, -2)
    _close(stats, torch.logsumexp(scores, dim=-1, keepdim=True).numpy())
    _close(o, reference_forward(q, k, v, scale=0.5)[0])


def test_inputs_are_never_written() -> None:
    q, k, v, do = _inputs(8)
    bias = torch.randn(1, 1, SQ, SKV, dtype=torch.float64)
    before = [t.clone() for t in (q, k, v, do, bias)]
    o, stats = sdpa_forward(q, k, v, attn_mask=bias)
    o_before, stats_before = o.clone(), stats.clone()
    sdpa_backward(q, k, v, o, do, stats, attn_mask=bias, dbias_shape=bias.shape)
    for t, b in zip((q, k, v, do, bias, o, stats), (*before, o_before, stats_before), strict=True):
        assert torch.equal(t, b)


# ----- errors -----
def _err(code: hg.ErrorCode, match: str, fn: Any, *args: Any, **kw: Any) -> None:
    with pytest.raises(hg.HipdnnError, match=match) as info:
        fn(*args, **kw)
    assert info.value.code == code


def test_bad_arguments_raise_clear_invalid_value_errors() -> None:
    q, k, v, do = _inputs(9)
    bad = hg.ErrorCode.INVALID_VALUE
    _err(bad, "query must be a torch.Tensor", sdpa_forward, q.numpy(), k, v)
    _err(bad, "key must be rank-4", sdpa_forward, q, k[0], v)
    _err(bad, "value dtype torch.float32 differs", sdpa_forward, q, k, v.float())
    _err(bad, "query dtype torch.int64 is not supported", sdpa_forward, q.long(), k, v)
    _err(bad, r"key heads \(3\) must divide query heads \(4\)", sdpa_forward, q,
         torch.randn(B, 3, SKV, D, dtype=torch.float64), v)  # fmt: skip
    _err(bad, "key is on meta but query is on cpu", sdpa_forward, q, k.to("meta"), v)
    _err(bad, "attn_mask must be bool or floating point", sdpa_forward, q, k, v,
         attn_mask=torch.zeros(SQ, SKV, dtype=torch.int64))  # fmt: skip
    _err(bad, "attn_mask must have rank ≤ 4", sdpa_forward, q, k, v,
         attn_mask=torch.zeros(1, 1, 1, SQ, SKV, dtype=torch.float64))  # fmt: skip
    _err(bad, "diagonal_alignment must be", sdpa_forward, q, k, v, diagonal_alignment="middle")
    _err(bad, "scale must be a finite number", sdpa_forward, q, k, v, scale=float("nan"))
    _err(bad, "left_bound must be an integer", sdpa_forward, q, k, v, left_bound=1.5)
    _err(bad, "dropout_scale needs a dropout_mask", sdpa_forward, q, k, v, dropout_scale=2.0)
    _err(bad, r"seq_len_q must have one length per batch \(2\), got 3", sdpa_forward, q, k, v,
         seq_len_q=[1, 2, 3])  # fmt: skip
    _err(bad, "seq_len_kv must hold integers", sdpa_forward, q, k, v,
         seq_len_kv=torch.tensor([1.0, 2.0]))  # fmt: skip
    o, stats = sdpa_forward(q, k, v)
    _err(bad, "dbias_shape needs a floating-point attn_mask", sdpa_backward, q, k, v, o, do,
         stats, dbias_shape=(1, 1, SQ, SKV))  # fmt: skip
    _err(bad, "stats must be a torch.Tensor", sdpa_backward, q, k, v, o, do, None)


def test_graph_rules_surface_as_hipdnn_errors() -> None:
    q, k, v, _ = _inputs(10)
    with pytest.raises(hg.HipdnnError) as info:  # the node's own rule: head dims must match
        sdpa_forward(q, k[..., :4], v)
    assert info.value.code == hg.ErrorCode.INVALID_VALUE
    assert "head_dim mismatch between Q and K: 8 vs 4" in str(info.value)


def test_forced_engine_must_exist_and_apply() -> None:
    q, k, v, _ = _inputs(11)
    known = r"engine 'NO_SUCH' is not registered; registered engines: .*NUMPY_REFERENCE_ENGINE"
    with pytest.raises(hg.NotSupportedError, match=known):
        sdpa_forward(q, k, v, engine="NO_SUCH")
    with pytest.raises(hg.NotSupportedError, match="engine 'TORCH_SDPA_FLASH_ENGINE' cannot run"):
        sdpa_forward(q, k, v, engine="TORCH_SDPA_FLASH_ENGINE")
    with pytest.raises(hg.HipdnnError, match="engine must be an engine name"):
        sdpa_forward(q, k, v, engine=3)  # type: ignore[arg-type]


# ----- the cache -----
def test_cache_hits_never_rebuild_and_every_graph_change_is_a_new_entry() -> None:
    cache = graph_cache()
    cache.clear()
    q, k, v, _ = _inputs(12)
    sdpa_forward(q, k, v)
    assert cache.info()[:2] == (0, 1)
    sdpa_forward(q + 1, k, v)  # same shapes, strides, dtypes, flags: a hit
    assert cache.info()[:2] == (1, 1)
    sdpa_forward(q, k, v, is_causal=True)
    sdpa_forward(q.transpose(1, 2).contiguous().transpose(1, 2), k, v)  # other strides
    sdpa_forward(q.float(), k.float(), v.float())
    sdpa_forward(q, k, v, engine="NUMPY_REFERENCE_ENGINE")
    assert cache.info()[:2] == (1, 5) and len(cache) == 5


def test_cache_is_bounded_lru_and_resizable() -> None:
    built: list[str] = []
    cache: GraphCache[str] = GraphCache(2)
    for key in ("a", "b", "a", "c", "b"):
        cache.get_or_build(key, lambda key=key: built.append(key) or key)  # type: ignore[func-returns-value]
    assert built == ["a", "b", "c", "b"]  # "b" was evicted by "c" ("a" was used more recently)
    assert cache.info() == (1, 4, 2, 2)
    cache.resize(1)
    assert len(cache) == 1 and cache.get_or_build("b", lambda: "rebuilt") == "b"
    for bad in (0, -1, 1.5, True):
        with pytest.raises(hg.HipdnnError, match="Graph cache size must be a positive integer"):
            cache.resize(bad)  # type: ignore[arg-type]
    cache.clear()
    assert cache.info() == (0, 0, 1, 0)


def test_a_get_then_get_or_build_counts_one_hit_per_lookup_that_finds() -> None:
    cache: GraphCache[str] = GraphCache(4)
    assert cache.get("k") is None and cache.info()[:2] == (0, 0)  # a miss of get() is not counted
    assert cache.get_or_build("k", lambda: "v") == "v" and cache.info()[:2] == (0, 1)
    assert cache.get("k") == "v" and cache.get_or_build("k", lambda: "x") == "v"
    assert cache.peek("k") == "v" and cache.info()[:2] == (2, 1)


def test_the_ops_memo_tables_are_bounded() -> None:
    from hipdnn_graph.torch._cached import MEMO_LIMIT, remember

    table: dict[int, int] = {}
    for key in range(MEMO_LIMIT + 1):
        assert remember(table, key, -key) == -key
    assert len(table) == MEMO_LIMIT + 1
    assert remember(table, -1, 1) == 1 and table == {-1: 1}  # past the limit: afresh


def test_failed_build_stores_nothing() -> None:
    cache: GraphCache[str] = GraphCache(4)

    def fail() -> str:
        raise hg.HipdnnError(hg.ErrorCode.INVALID_VALUE, "boom")

    with pytest.raises(hg.HipdnnError, match="boom"):
        cache.get_or_build("k", fail)
    assert len(cache) == 0 and cache.get_or_build("k", lambda: "ok") == "ok"


def test_threads_share_the_cache_and_get_correct_results() -> None:
    graph_cache().clear()
    inputs = [_inputs(20 + i) for i in range(4)]
    results: dict[int, Any] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            q, k, v, _ = inputs[i]
            for _ in range(3):
                results[i] = sdpa_forward(q, k, v, scale=0.5)[0]
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i, (q, k, v, _) in enumerate(inputs):
        _close(results[i], reference_forward(q, k, v, scale=0.5)[0])
    assert len(graph_cache()) == 1


def test_importing_hipdnn_graph_does_not_import_torch() -> None:
    code = (
        "import sys, hipdnn_graph; assert 'torch' not in sys.modules; "
        "import hipdnn_graph.torch; assert 'torch' in sys.modules; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_one_bool_mask_is_converted_once_and_again_after_an_in_place_change() -> None:
    q, k, v, _ = _inputs(13)
    keep = torch.ones(B, 1, SQ, SKV, dtype=torch.bool)
    a, _ = sdpa_forward(q, k, v, attn_mask=keep, scale=0.5)
    keep[:, :, :, 1:] = False  # the same object, changed in place: a new conversion
    b, _ = sdpa_forward(q, k, v, attn_mask=keep, scale=0.5)
    c, _ = sdpa_forward(q, k, v, attn_mask=keep.clone(), scale=0.5)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=keep, scale=0.5, enable_gqa=True
    )
    assert not torch.allclose(a, b)
    _close(b, ref.numpy())
    _close(c, ref.numpy())


@pytest.mark.usefixtures("example_plugin")
def test_no_engine_for_the_problem_is_a_not_supported_error() -> None:
    from hipdnn_custom_backend import create_backend

    graph_cache().clear()
    q, k, v, _ = _inputs(14)
    with hg.backend.isolated_registry(load_entry_points=False):
        hg.register_backend(create_backend())  # an engine without bias support
        with pytest.raises(hg.NotSupportedError, match="an additive bias is not implemented"):
            sdpa_forward(q, k, v, attn_mask=torch.zeros(SQ, SKV, dtype=torch.float64))
    graph_cache().clear()


class _FailingPlan:
    engine_name = "FAILS_ON_RUN_ENGINE"
    workspace_size = 0

    def execute(self, variant_pack: Any, workspace: Any) -> None:
        raise RuntimeError("this engine runs on no device here")


class _FailingEngine:
    """Accepts every graph and fails when it runs, as a GPU engine does on CPU tensors."""

    name = "FAILS_ON_RUN_ENGINE"
    priority = 0
    array_kind = "torch"

    def check(self, graph: Any) -> Any:
        return hg.backend.Support.yes()

    def workspace_size(self, graph: Any) -> int:
        return 0

    def build_plan(self, graph: Any) -> _FailingPlan:
        return _FailingPlan()


class _FailingBackend:
    name = "failing"

    def engines(self) -> list[Any]:
        return [_FailingEngine()]


def test_cpu_tensors_fall_through_an_engine_that_fails_to_run_them() -> None:
    from hipdnn_graph_numpy_reference import create_backend as numpy_backend

    graph_cache().clear()
    q, k, v, do = _inputs(15)
    with hg.backend.isolated_registry(load_entry_points=False):
        hg.register_backend(_FailingBackend())
        hg.register_backend(numpy_backend())
        o, stats = sdpa_forward(q, k, v, scale=0.5)  # ranked first: FAILS_ON_RUN, then NumPy
        _close(o, reference_forward(q, k, v, scale=0.5)[0])
        (entry,) = graph_cache().values()
        assert entry.graph.get_plan_name() == "NUMPY_REFERENCE_ENGINE"
        sdpa_forward(q, k, v, scale=0.5)  # a hit runs the engine that worked
        assert graph_cache().info()[:2] == (1, 1)
        dq = sdpa_backward(q, k, v, o, do, stats, scale=0.5)[0]
        _close(dq, reference_backward(q, k, v, o, do, stats, scale=0.5)[0])
        with pytest.raises(hg.HipdnnError, match="FAILS_ON_RUN_ENGINE failed during execute: "
                           "RuntimeError: this engine runs on no device here") as info:  # fmt: skip
            sdpa_forward(q, k, v, engine="FAILS_ON_RUN_ENGINE")  # forced: no fall-through
        assert info.value.code == hg.ErrorCode.GRAPH_EXECUTION_FAILED
    graph_cache().clear()


def test_the_op_ranks_the_aten_cudnn_engine_first_unless_the_call_prefers_another() -> None:
    """The op's graphs prefer TORCH_SDPA_CUDNN_ENGINE (pre-bound launcher, direct aten call)
    over CUDNN_FRONTEND_ENGINE, which Graph users get first; where it refuses (here: no CUDA),
    ranking goes on as usual."""
    import hipdnn_graph as hg
    from hipdnn_graph.backend import engine_id
    from hipdnn_graph.torch._graphs import OP_DEFAULT_ENGINE, _build

    def graph() -> hg.Graph:
        g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
        q = g.tensor(name="Q", dim=[1, 1, 8, 8])
        o, stats = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=True)
        assert stats is not None
        o.set_output(True)
        stats.set_output(True)
        return g

    assert OP_DEFAULT_ENGINE == "TORCH_SDPA_CUDNN_ENGINE"
    g = graph()
    _build(g, None, forced=False)
    assert g.get_preferred_engine_id_ext() == engine_id(OP_DEFAULT_ENGINE)
    assert g.get_plan_name() != OP_DEFAULT_ENGINE  # refused without CUDA; ranking went on
    g = graph()
    _build(g, "TORCH_SDPA_MATH_ENGINE", forced=False)
    assert g.get_preferred_engine_id_ext() == engine_id("TORCH_SDPA_MATH_ENGINE")
