"""TORCH_SDPA_FLEX_ENGINE without a GPU: its refusals, the ranking rules, and its numbers on CPU.

On CPU the flex engine runs only with ``HIPDNN_GRAPH_TORCH_FLEX_CPU=1`` (torch's compiled CPU
FlexAttention is inference-only; with the variable set the kernel compiles FlexAttention's
reference implementation), which is what these tests use to check the modifiers, the block
masks, the base-2 log-sum-exp conversion and the given-O backward against the NumPy reference
engine in float32. Each distinct shape compiles once (a few seconds), so the shapes are tiny.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph as hg  # noqa: E402
from hipdnn_graph_torch_rocm import _ranking, create_backend  # noqa: E402
from hipdnn_graph_torch_rocm.kernels import _flex_kernel, _flex_spec, flex  # noqa: E402
from hipdnn_graph_torch_rocm.kernels import math as tm  # noqa: E402
from hipdnn_graph_torch_rocm.kernels.call import SdpaCall  # noqa: E402

pytestmark = pytest.mark.skipif(not flex.flex_available(), reason="torch has no FlexAttention")

FLEX = "TORCH_SDPA_FLEX_ENGINE"


def spec(**kw: Any) -> flex.FlexSpec:
    """A spec; the keywords of :class:`SdpaCall` (the scale 0.25 unless given) go to its call."""
    given: dict[str, Any] = {"b": 1, "h": 4, "hk": 2, "hv": 2, "sq": 32, "skv": 32, "d": 16,
                             "dv": 16, "dtype": torch.float32, "device": "cpu", "forward": False,
                             "scale": 0.25, **kw}  # fmt: skip
    fields = {f.name for f in dataclasses.fields(SdpaCall)}
    call = SdpaCall(**{key: given.pop(key) for key in list(given) if key in fields})
    return flex.FlexSpec(**given, call=call)


# ------------------------------------------------------------------------------- static rules


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"dropout_mask": True}, "cannot apply a dropout mask"),
        ({"hk": 2, "hv": 1}, "one head count (Hk=2, Hv=1)"),
        ({"h": 3, "hk": 2, "hv": 2}, "not a multiple of K/V heads"),
        ({"bias_shape": (1, 1, 1, 32, 32)}, "bias rank 5 > 4"),
        ({"device": "cuda:0", "d": 8, "dtype": torch.bfloat16}, "head dims >= 16 (D=8"),
        ({"device": "cuda:0", "dtype": torch.float64}, "not torch.float64"),
        ({"bias_shape": (1, 1, 2**16, 2**15), "forward": True}, "with 32-bit offsets"),
        (
            {"bias_shape": (1, 4, 2**15, 2**15), "dbias_shape": (1, 4, 2**15, 2**15)},
            "no split into groups of whole K/V heads",
        ),
        ({"bias_shape": (1, 4, 2**15, 2**14), "alibi": True}, "not with ALiBi"),
    ],
)
def test_static_reasons_name_the_feature(kw: dict[str, Any], needle: str) -> None:
    reason = flex.static_reason(spec(**kw), allow_cpu=True)
    assert reason is not None and needle in reason


@pytest.mark.parametrize(
    ("kw", "groups"),
    [
        ({}, 1),
        ({"bias_shape": (1, 4, 32, 32)}, 1),
        ({"h": 16, "hk": 16, "hv": 16, "bias_shape": (1, 16, 2**14, 2**14)}, 4),
        ({"h": 16, "hk": 4, "hv": 4, "bias_shape": (16, 2**14, 2**14)}, 4),  # GQA 4:1
        ({"h": 16, "hk": 8, "hv": 8, "bias_shape": (2, 16, 2**14, 2**13)}, 4),
        ({"h": 4, "hk": 2, "hv": 2, "bias_shape": (1, 4, 2**15, 2**15)}, None),  # 2**31 per half
        ({"bias_shape": (1, 1, 2**16, 2**15)}, None),  # one head: nothing to split
    ],
)
def test_head_groups_bring_each_bias_slice_below_32_bit_offsets(
    kw: dict[str, Any], groups: int | None
) -> None:
    s = spec(**kw)
    assert flex.head_groups(s) == groups
    assert (flex.static_reason(s, allow_cpu=True) is None) == (groups is not None)
    if groups is not None and groups > 1:
        part = flex.group_spec(s, groups)
        assert (part.h, part.hk, part.bias_shape[-3]) == (s.h // groups, s.hk // groups,
                                                          s.h // groups)  # fmt: skip
        assert flex.head_groups(part) == 1


@pytest.mark.parametrize("dbias_shape", [(1, 4, 32, 32), (1, 1, 32, 32)])
def test_a_bias_run_in_head_groups_matches_one_call(
    dbias_shape: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the offset limit lowered to this bias's size, the node runs as two calls over two
    heads each; O, Stats, dQ/dK/dV and dBias (per head, or summed over heads) match the
    reference math."""
    monkeypatch.setenv(flex.CPU_ENV, "1")
    monkeypatch.setattr(_flex_spec, "_MAX_BUFFER", 4096)  # the [1,4,32,32] bias: 4096 elements
    g = torch.Generator().manual_seed(7)
    q, do = (torch.randn(1, 4, 32, 16, generator=g) for _ in range(2))
    k, v = (torch.randn(1, 2, 32, 16, generator=g) for _ in range(2))
    bias = torch.randn(1, 4, 32, 32, generator=g)
    fwd = flex.kernel(spec(forward=True, bias_shape=(1, 4, 32, 32), right_bound=0))
    assert isinstance(fwd, flex.HeadGroups) and fwd.groups == 2
    assert fwd.inner.spec.h == 2 and "heads in 2 groups" in fwd.notes[-1]
    o, st = fwd.forward(q, k, v, scale=0.25, bias=bias)
    ref_o, ref_st = tm.sdpa_forward(q, k, v, SdpaCall(scale=0.25, right_bound=0), bias=bias)
    torch.testing.assert_close(o, ref_o, rtol=1e-5, atol=1e-5)
    assert st is not None
    torch.testing.assert_close(st, ref_st, rtol=1e-5, atol=1e-5)
    bwd = flex.kernel(spec(bias_shape=(1, 4, 32, 32), dbias_shape=dbias_shape, right_bound=0))
    assert isinstance(bwd, flex.HeadGroups) and bwd.backward_mode == "given"
    got = bwd.backward(q, k, v, ref_o, do, ref_st, scale=0.25, bias=bias)
    want = tm.sdpa_backward(
        q,
        k,
        v,
        ref_o,
        do,
        ref_st,
        SdpaCall(scale=0.25, dbias_shape=dbias_shape, right_bound=0),
        bias=bias,
    )
    for ours, ref in zip(got, want, strict=True):
        assert ours is not None and ref is not None and ours.shape == ref.shape
        torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-5)


def test_cpu_is_refused_unless_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(flex.CPU_ENV, raising=False)
    reason = flex.static_reason(spec())
    assert reason is not None and flex.CPU_ENV in reason
    monkeypatch.setenv(flex.CPU_ENV, "1")
    assert flex.static_reason(spec()) is None
    # captured tensors (bias, ALiBi slopes, a runtime scale) run on CPU too
    assert flex.static_reason(spec(bias_shape=(1, 4, 32, 32), alibi=True, scale=None)) is None


def test_kernel_refuses_with_value_error() -> None:
    with pytest.raises(ValueError, match="dropout mask"):
        flex.kernel(spec(dropout_mask=True))


# ------------------------------------------------------------------------------- ranking rules


def test_engine_order_puts_flex_after_the_fused_ops_and_before_math() -> None:
    names = [e.name for e in create_backend().engines()]
    assert names.index(FLEX) == names.index("TORCH_SDPA_EFFICIENT_ENGINE") + 1
    sdpa = [n for n in names if n.startswith("TORCH_SDPA_")]  # the family engines follow
    assert sdpa[-1] == "TORCH_SDPA_MATH_ENGINE"


def test_efficient_defers_to_flex_for_a_bias_only_when_flex_accepts() -> None:
    with_bias = _ranking.Features(bias=True)
    reason = _ranking.deferral("efficient", with_bias, flex_accepts=True)
    assert reason is not None
    assert reason.startswith(f"efficient defers to {FLEX}:") and "TFLOP/s" in reason
    assert _ranking.deferral("efficient", with_bias, flex_accepts=False) is None
    assert _ranking.deferral("efficient", _ranking.Features(), flex_accepts=True) is None
    for family in ("cudnn", "flash", "flex", None):
        assert _ranking.deferral(family, with_bias, flex_accepts=True) is None


@pytest.mark.parametrize("feature", ["padding", "band"])
def test_flash_and_efficient_defer_to_flex_for_padding_and_bands(feature: str) -> None:
    features = _ranking.Features(**{feature: True})
    for family in ("flash", "efficient"):
        reason = _ranking.deferral(family, features, flex_accepts=True)
        assert reason is not None and "TFLOP/s" in reason and FLEX in reason
        assert _ranking.deferral(family, features, flex_accepts=False) is None
    assert _ranking.deferral("cudnn", features, flex_accepts=True) is None


@pytest.mark.parametrize(
    ("accepting", "features", "best"),
    [
        ({"TORCH_SDPA_EFFICIENT_ENGINE", FLEX, "TORCH_SDPA_MATH_ENGINE"}, {"bias": True}, FLEX),
        ({"TORCH_SDPA_EFFICIENT_ENGINE", FLEX}, {}, "TORCH_SDPA_EFFICIENT_ENGINE"),
        ({"TORCH_SDPA_EFFICIENT_ENGINE", "TORCH_SDPA_MATH_ENGINE"}, {"bias": True},
         "TORCH_SDPA_EFFICIENT_ENGINE"),
        ({"TORCH_SDPA_CUDNN_ENGINE", FLEX}, {"bias": True}, "TORCH_SDPA_CUDNN_ENGINE"),
        ({"TORCH_SDPA_MATH_ENGINE"}, {"dropout_mask": True}, "TORCH_SDPA_MATH_ENGINE"),
        ({"TORCH_SDPA_FLASH_ENGINE", FLEX}, {"padding": True}, FLEX),
        ({"TORCH_SDPA_FLASH_ENGINE", FLEX}, {"band": True}, FLEX),
        ({"TORCH_SDPA_FLASH_ENGINE", FLEX}, {}, "TORCH_SDPA_FLASH_ENGINE"),
        ({"TORCH_SDPA_FLASH_ENGINE", FLEX}, {"offset_diagonal": True}, FLEX),
        ({"TORCH_SDPA_EFFICIENT_ENGINE", FLEX}, {"offset_diagonal": True}, FLEX),
        ({"TORCH_SDPA_CUDNN_ENGINE", FLEX}, {"offset_diagonal": True}, "TORCH_SDPA_CUDNN_ENGINE"),
    ],
)  # fmt: skip
def test_rank_picks_the_measured_fastest(
    accepting: set[str], features: dict[str, bool], best: str
) -> None:
    ranked = _ranking.rank(dict.fromkeys(accepting, True), _ranking.Features(**features))
    assert ranked[0] == best
    assert set(ranked) <= accepting


# ------------------------------------------------------------------- graphs on CPU vs NumPy


def _graph(backward: bool, case: dict[str, Any]) -> tuple[hg.Graph, dict[str, Any]]:
    b, h, hk, sq, skv, d, dv = case["dims"]
    g = hg.Graph(name="g", io_data_type=hg.DataType.FLOAT,
                 intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    t: dict[str, Any] = {
        "Q": g.tensor(name="Q", dim=[b, h, sq, d]),
        "K": g.tensor(name="K", dim=[b, hk, skv, d]),
        "V": g.tensor(name="V", dim=[b, hk, skv, dv]),
    }
    kw = dict(case.get("kw", {}))
    if "bias" in case:
        t["Bias"] = g.tensor(name="Bias", dim=list(case["bias"]))
        kw["bias"] = t["Bias"]
    if "lens" in case:
        for name in ("SEQ_LEN_Q", "SEQ_LEN_KV"):
            t[name] = g.tensor(name=name, dim=[b, 1, 1, 1], data_type=hg.DataType.INT32)
        kw.update(use_padding_mask=True, seq_len_q=t["SEQ_LEN_Q"], seq_len_kv=t["SEQ_LEN_KV"])
    if backward:
        t["O"] = g.tensor(name="O", dim=[b, h, sq, dv])
        t["dO"] = g.tensor(name="dO", dim=[b, h, sq, dv])
        t["Stats"] = g.tensor(name="Stats", dim=[b, h, sq, 1])
        if "dbias" in case:
            t["dBias"] = g.tensor(name="dBias", dim=list(case["dbias"]))
            kw["dBias"] = t["dBias"]
        t["dQ"], t["dK"], t["dV"] = g.sdpa_backward(
            t["Q"], t["K"], t["V"], t["O"], t["dO"], t["Stats"], name="bwd", **kw
        )
        outs = ("dQ", "dK", "dV", "dBias") if "dbias" in case else ("dQ", "dK", "dV")
    else:
        t["O"], t["Stats"] = g.sdpa(t["Q"], t["K"], t["V"], name="fwd", generate_stats=True, **kw)
        outs = ("O", "Stats")
    for name in outs:
        t[name].set_output(True)
    return g, t


def _inputs(t: dict[str, Any], case: dict[str, Any], seed: int) -> dict[Any, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = {t[n]: rng.standard_normal(t[n].dim).astype(np.float32)
            for n in ("Q", "K", "V", "Bias", "dO") if n in t}  # fmt: skip
    if "lens" in case:
        for name, lens in zip(("SEQ_LEN_Q", "SEQ_LEN_KV"), case["lens"], strict=True):
            data[t[name]] = np.array(lens, dtype=np.int32).reshape(-1, 1, 1, 1)
    return data


CASES: dict[str, dict[str, Any]] = {
    "gqa_causal_br": {"dims": (1, 4, 2, 24, 40, 16, 16),
                      "kw": {"use_causal_mask_bottom_right": True}},
    "mqa_band_dv": {"dims": (1, 4, 1, 40, 40, 16, 24),
                    "kw": {"diagonal_band_left_bound": 6, "diagonal_band_right_bound": 3}},
    "padding_causal": {"dims": (2, 2, 2, 24, 32, 16, 16), "lens": ([24, 9], [32, 0]),
                       "kw": {"use_causal_mask_bottom_right": True}},
    "rows_without_keys": {"dims": (1, 2, 2, 40, 16, 16, 16),
                          "kw": {"use_causal_mask_bottom_right": True}},
}  # fmt: skip
CASES["bias_alibi"] = {"dims": (2, 4, 4, 24, 24, 16, 16), "bias": (2, 1, 24, 24),
                      "kw": {"use_alibi_mask": True, "use_causal_mask": True}}  # fmt: skip
CASES["bias_dbias_gqa"] = {"dims": (2, 4, 2, 24, 32, 16, 16), "bias": (1, 4, 24, 32),
                          "dbias": (1, 4, 24, 32), "kw": {"use_causal_mask": True}}  # fmt: skip


def _check(backward: bool, case: dict[str, Any], seed: int) -> None:
    g, t = _graph(backward, case)
    g.set_preferred_engine_id_ext(FLEX).build()
    assert g.get_plan_name() == FLEX, g.get_engine_refusals()
    data = _inputs(t, case, seed)
    if backward:
        fwd, ft = _graph(False, case)
        fwd.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
        ran = fwd.run({ft[n]: data[t[n]] for n in ft if n in t and t[n] in data})
        data[t["O"]], data[t["Stats"]] = ran[ft["O"]], ran[ft["Stats"]]
    got = g.run({k: torch.from_numpy(v) for k, v in data.items()})
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    ref = g.run(data)
    for key, want in ref.items():
        out = got[key].numpy()
        finite = np.isfinite(want)
        assert np.array_equal(np.isfinite(out), finite), f"{key.name}: +inf rows differ"
        np.testing.assert_allclose(out[finite], want[finite], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list(CASES))
def test_flex_matches_numpy_on_cpu(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(flex.CPU_ENV, "1")
    _check(False, CASES[name], 1)
    _check(True, CASES[name], 2)


def test_gradients_land_in_the_callers_buffers_through_execute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``execute`` hands the caller's dQ, dK, dV and dBias buffers to the kernel, which writes
    them in place (no copy by the engine afterwards); the values match the NumPy engine's."""
    monkeypatch.setenv(flex.CPU_ENV, "1")
    case = CASES["bias_dbias_gqa"]
    g, t = _graph(True, case)
    g.set_preferred_engine_id_ext(FLEX).build()
    data = _inputs(t, case, 3)
    fwd, ft = _graph(False, case)
    fwd.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    ran = fwd.run({ft[n]: data[t[n]] for n in ft if n in t and t[n] in data})
    data[t["O"]], data[t["Stats"]] = ran[ft["O"]], ran[ft["Stats"]]
    outs = {t[n]: torch.full(t[n].dim, math.nan) for n in ("dQ", "dK", "dV", "dBias")}
    copies: list[Any] = []
    real_copy = torch.Tensor.copy_

    def counting_copy(self: Any, src: Any, *args: Any, **kw: Any) -> Any:
        if any(self is out for out in outs.values()):
            copies.append(src)
        return real_copy(self, src, *args, **kw)

    monkeypatch.setattr(torch.Tensor, "copy_", counting_copy)
    g.execute({**{k: torch.from_numpy(v) for k, v in data.items()}, **outs})
    monkeypatch.undo()
    assert copies == []  # the engine copied nothing into the gradients: the kernel wrote them
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    ref = g.run(data)
    for key, out in outs.items():
        np.testing.assert_allclose(out.numpy(), ref[key], rtol=1e-4, atol=1e-5)


def test_dropout_mask_is_refused_by_flex_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(flex.CPU_ENV, "1")
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    q = g.tensor(name="Q", dim=[1, 2, 16, 16])
    mask = g.tensor(name="M", dim=[1, 2, 16, 16])
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"),
                  dropout=(mask, g.tensor(name="S").set_value(2.0)))  # fmt: skip
    o.set_output(True)
    g.build()
    assert g.get_plan_name() == "TORCH_SDPA_MATH_ENGINE"
    assert "cannot apply a dropout mask" in g.get_engine_refusals()[FLEX]


# ------------------------------------------------------------------- compile once, never again


def test_kernels_are_compiled_once_per_process_and_never_in_a_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(flex.CPU_ENV, "1")
    s = spec(forward=True, b=1, h=2, hk=2, hv=2, sq=16, skv=16, right_bound=0)
    k1 = flex.kernel(s)
    assert flex.kernel(s) is k1
    assert k1.build_seconds > 0
    q = torch.randn(1, 2, 16, 16)
    o1, st1 = k1.forward(q, q, q, scale=0.25)  # one tensor three times: copied, no recompile
    o2, st2 = k1.forward(q, q.clone(), q.clone(), scale=0.25)
    assert torch.equal(o1, o2) and st1 is not None and st2 is not None
    # a contiguous view with another stride on its dim of size 1 (a head slice): copied
    wide = torch.cat([q, torch.randn(1, 2, 16, 16)], 1)
    o3, _ = k1.forward(wide[:, :2], q.clone(), q.clone(), scale=0.25)
    assert wide[:, :2].stride()[0] == 1024 and torch.equal(o3, o1)
    ref_o, ref_st = tm.sdpa_forward(q, q, q, SdpaCall(scale=0.25, right_bound=0))
    torch.testing.assert_close(o1, ref_o, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(st1, ref_st, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="recompile"):  # another dtype would need a compile
        k1.forward(q.double(), q.double(), q.double(), scale=0.25)


def test_given_backward_reads_the_given_stats() -> None:
    """Stats shifted by c scale every gradient's softmax by exp(-c): the backward reads them."""
    k = flex.FlexKernel(spec(b=1, h=2, hk=2, hv=2, sq=16, skv=16))
    assert k.backward_mode == "given" and not k.notes
    g = torch.Generator().manual_seed(0)
    q, kk, v, do = (torch.randn(1, 2, 16, 16, generator=g) for _ in range(4))
    o, st = tm.sdpa_forward(q, kk, v, scale=0.25)
    for shift in (0.0, math.log(2.0)):
        got = k.backward(q, kk, v, o, do, st + shift, scale=0.25)
        want = tm.sdpa_backward(q, kk, v, o, do, st + shift, scale=0.25)
        for a, b in zip(got[:3], want[:3], strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_bias_of_another_type_than_qkv_runs_without_recompiling() -> None:
    """A FLOAT bias on bf16 Q/K/V (as graphs declare it): the build warms up with that type."""
    s = spec(forward=True, dtype=torch.bfloat16, bias_shape=(1, 4, 32, 32),
             bias_dtype=torch.float32, right_bound=0)  # fmt: skip
    k = flex.FlexKernel(s)
    g = torch.Generator().manual_seed(5)
    q = torch.randn(1, 4, 32, 16, generator=g)
    kv = torch.randn(1, 2, 32, 16, generator=g)
    bias = torch.randn(1, 4, 32, 32, generator=g)
    bf = torch.bfloat16
    o, st = k.forward(q.to(bf), kv.to(bf), kv.to(bf), scale=0.25, bias=bias)
    ref_o, ref_st = tm.sdpa_forward(
        q.to(bf).float(),
        kv.to(bf).float(),
        kv.to(bf).float(),
        SdpaCall(scale=0.25, right_bound=0),
        bias=bias,
    )
    torch.testing.assert_close(o.float(), ref_o, rtol=2e-2, atol=2e-2)
    assert st is not None
    torch.testing.assert_close(st, ref_st, rtol=1e-3, atol=1e-3)


def test_forward_falls_back_to_expanded_heads_when_gqa_does_not_compile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = _flex_kernel._forward_body

    def no_gqa(*args: Any) -> Any:
        if args[-1][2]:  # cfg = (features, scale, enable_gqa, want_lse)
            raise RuntimeError("pretend GQA does not compile")
        return original(*args)

    monkeypatch.setattr(_flex_kernel, "_forward_body", no_gqa)
    k = flex.FlexKernel(spec(forward=True, sq=24, right_bound=0))
    assert k.notes[-1].startswith("K/V heads expanded")
    g = torch.Generator().manual_seed(6)
    q, kv = torch.randn(1, 4, 24, 16, generator=g), torch.randn(1, 2, 32, 16, generator=g)
    o, st = k.forward(q, kv, kv, scale=0.25)
    ref_o, ref_st = tm.sdpa_forward(q, kv, kv, SdpaCall(scale=0.25, right_bound=0))
    torch.testing.assert_close(o, ref_o, rtol=1e-5, atol=1e-5)
    assert st is not None
    torch.testing.assert_close(st, ref_st, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_compiled_cpu_forward_without_stats_matches_math() -> None:
    """torch's compiled (inductor) CPU FlexAttention, used for forwards that need no Stats."""
    k = flex.FlexKernel(spec(forward=True, want_stats=False, right_bound=0, bias_shape=(32, 32)))
    g = torch.Generator().manual_seed(4)
    q = torch.randn(1, 4, 32, 16, generator=g)
    kv = torch.randn(1, 2, 32, 16, generator=g)
    bias = torch.randn(32, 32, generator=g)
    o, st = k.forward(q, kv, kv, scale=0.25, bias=bias)
    assert st is None
    ref, _ = tm.sdpa_forward(q, kv, kv, SdpaCall(scale=0.25, right_bound=0), bias=bias)
    torch.testing.assert_close(o, ref, rtol=1e-4, atol=1e-5)


def test_dbias_through_the_given_o_backward_matches_autograd() -> None:
    """A learnable bias: flex's backward reads the given O and Stats and returns dBias (its
    modifiers index the bias with torch's mod_index, whose gradient flex lowers)."""
    s = spec(bias_shape=(1, 4, 32, 32), dbias_shape=(1, 4, 32, 32), h=4, hk=4, hv=4)
    kernel = flex.FlexKernel(s)
    assert kernel.backward_mode == "given", kernel.notes
    g = torch.Generator().manual_seed(1)
    q, k, v, do = (torch.randn(1, 4, 32, 16, generator=g) for _ in range(4))
    bias = torch.randn(1, 4, 32, 32, generator=g)
    qr, kr, vr, br = (x.clone().requires_grad_() for x in (q, k, v, bias))
    scores = qr @ kr.transpose(-1, -2) * 0.25 + br
    o = torch.softmax(scores, -1) @ vr
    o.backward(do)
    lse = torch.logsumexp(scores, -1, keepdim=True).detach()
    got = kernel.backward(q, k, v, o.detach(), do, lse, scale=0.25, bias=bias)  # fmt: skip
    for ours, ref in zip(got, (qr.grad, kr.grad, vr.grad, br.grad), strict=True):
        assert ours is not None and ref is not None
        assert float((ours - ref).abs().max() / ref.abs().max()) < 1e-5
    # each gradient is written straight into a caller's buffer of the declared type and layout
    # (fp32 here); any other buffer (another layout, another type) gets a new tensor
    dense = [torch.full(x.shape, math.nan) for x in (q, k, v, bias)]
    strided = torch.full((1, 4, 32, 64), math.nan)[..., ::2]
    outs = dict(zip(("dq_out", "dk_out", "dv_out", "dbias_out"), dense, strict=True))
    for kw, in_place in ((outs, True), ({**outs, "dbias_out": strided}, False),
                         ({**outs, "dbias_out": dense[3].double()}, False)):  # fmt: skip
        again = kernel.backward(q, k, v, o.detach(), do, lse, scale=0.25, bias=bias, **kw)
        assert all(a is b for a, b in zip(again[:3], dense[:3], strict=True))
        assert (again[3] is kw["dbias_out"]) == in_place
        for a, b in zip(again, got, strict=True):
            assert a is not None and b is not None and torch.equal(a, b)
    assert torch.isnan(strided).all()


def test_a_backward_that_compiles_nowhere_raises_naming_every_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The build tries every way (given O with flex's tiles, two and one pipeline stages and
    small tiles, then recomputed with flex's tiles and small ones) and its error lists each."""

    def refuse(self: Any, body: Any, suffix: str) -> Any:
        raise RuntimeError("no kernel here")

    monkeypatch.setattr(flex.FlexKernel, "_compile_as", refuse)
    s = spec(bias_shape=(1, 4, 32, 32), dbias_shape=(1, 4, 32, 32), h=4, hk=4, hv=4,
             bias_dtype=torch.float32)  # fmt: skip
    with pytest.raises(RuntimeError, match="flex backward did not compile") as info:
        flex.FlexKernel(s)
    text = str(info.value)
    assert "given (torch.float32, {}): RuntimeError: no kernel here" in text
    assert "given (torch.float32, {'num_stages': 2}):" in text
    assert "given (torch.float32, {'num_stages': 1}):" in text
    assert "given (torch.float32, {'BLOCK_M1': 32" in text
    assert "recompute (torch.float32, {}):" in text
    assert "recompute (torch.float32, {'BLOCK_M1': 32" in text
    assert text.count(" | ") == 5  # six attempts
