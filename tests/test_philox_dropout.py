"""Philox dropout graphs (``set_dropout(p, seed, offset)``) on the NumPy reference and the torch
math engine: one stream (hipdnn_graph.philox), the same masks bit for bit, forward and backward
with the same mask, and the gradients of torch autograd in float64 with that mask."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph as hg  # noqa: E402
from hipdnn_graph import philox  # noqa: E402
from hipdnn_graph.philox import dropout_keep_mask, dropout_keep_words  # noqa: E402
from hipdnn_graph_torch_rocm import TorchSdpaEngine  # noqa: E402
from hipdnn_graph_torch_rocm.kernels import _math_philox  # noqa: E402
from hipdnn_graph_torch_rocm.kernels import math as kmath  # noqa: E402
from hipdnn_graph_torch_rocm.kernels._math_philox import philox_keep  # noqa: E402
from hipdnn_graph_torch_rocm.kernels.call import SdpaCall  # noqa: E402

NUMPY = "NUMPY_REFERENCE_ENGINE"
MATH = "TORCH_SDPA_MATH_ENGINE"
B, H, HK, SQ, SKV, D = 2, 4, 2, 9, 11, 8
SCALE = 0.375  # exact in float32 (attn_scale_value is a float32 attribute)
F64 = hg.DataType.DOUBLE
FORMS = ["tensor", "tensor_int32", "runtime", "constant"]


def _graph(name: str = "g") -> hg.Graph:
    return hg.Graph(name=name, io_data_type=F64, intermediate_data_type=F64,
                    compute_data_type=F64)  # fmt: skip


def _scalar(g: hg.Graph, name: str, value: int, form: str) -> tuple[hg.TensorAttributes, Any]:
    """A Seed/Offset tensor in ``form`` and the variant-pack value it needs (None: none)."""
    if form == "constant":
        return g.tensor(name=name).set_value(np.int64(value)), None
    dtype = hg.DataType.INT32 if form == "tensor_int32" else hg.DataType.INT64
    t = g.tensor(name=name, dim=[1, 1, 1, 1], data_type=dtype)
    if form == "runtime":
        t.set_as_runtime_parameter()
        return t, value
    kind = np.int32 if dtype == hg.DataType.INT32 else np.int64
    return t, np.array([value], dtype=kind).reshape(1, 1, 1, 1)


def _qkv(g: hg.Graph) -> tuple[Any, Any, Any]:
    q = g.tensor(name="Q", dim=[B, H, SQ, D])
    k = g.tensor(name="K", dim=[B, HK, SKV, D])
    v = g.tensor(name="V", dim=[B, HK, SKV, D])
    return q, k, v


def _dropout(
    g: hg.Graph, p: float, seed: int, offset: int, form: str | None, bwd: bool = False
) -> tuple[Any, dict]:
    """``dropout=`` for a philox form, or (form None) the explicit mask of the same stream."""
    if form is None:
        mask = g.tensor(name="Mask", dim=[B, H, SQ, SKV], data_type=hg.DataType.BOOLEAN)
        scale = g.tensor(name="DropScale").set_value(np.float64(1 / (1 - p)))
        inv = (g.tensor(name="DropScaleInv").set_value(np.float64(1 - p)),) if bwd else ()
        return (mask, scale, *inv), {mask: dropout_keep_mask(seed, offset, p, (B, H, SQ, SKV))}
    s, s_value = _scalar(g, "Seed", seed, form)
    o, o_value = _scalar(g, "Offset", offset, form)
    pack = {t: v for t, v in ((s, s_value), (o, o_value)) if v is not None}
    return (p, s, o), pack


def forward(p: float, seed: int, offset: int, form: str | None, **kw: Any) -> tuple[hg.Graph, dict]:
    g = _graph("fwd")
    q, k, v = _qkv(g)
    dropout, pack = _dropout(g, p, seed, offset, form)
    o, stats = g.sdpa(q, k, v, attn_scale=SCALE, dropout=dropout, name="fwd", **kw)
    o.set_output(True)
    stats.set_output(True).set_data_type(F64)
    return g, {"Q": q, "K": k, "V": v, "O": o, "Stats": stats, "pack": pack}


def backward(
    p: float, seed: int, offset: int, form: str | None, **kw: Any
) -> tuple[hg.Graph, dict]:
    g = _graph("bwd")
    q, k, v = _qkv(g)
    o = g.tensor(name="O", dim=[B, H, SQ, D])
    do = g.tensor(name="dO", dim=[B, H, SQ, D])
    stats = g.tensor(name="Stats", dim=[B, H, SQ, 1])
    dropout, pack = _dropout(g, p, seed, offset, form, bwd=True)
    grads = g.sdpa_backward(q, k, v, o, do, stats, attn_scale=SCALE, dropout=dropout,
                            name="bwd", **kw)  # fmt: skip
    for grad in grads:
        grad.set_output(True)
    dq, dk, dv = grads
    return g, {"Q": q, "K": k, "V": v, "O": o, "dO": do, "Stats": stats, "dQ": dq, "dK": dk,
               "dV": dv, "pack": pack}  # fmt: skip


def _data(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "Q": rng.standard_normal((B, H, SQ, D)),
        "K": rng.standard_normal((B, HK, SKV, D)),
        "V": rng.standard_normal((B, HK, SKV, D)),
        "dO": rng.standard_normal((B, H, SQ, D)),
    }


def _torch_pack(pack: dict[Any, Any]) -> dict[Any, Any]:
    return {t: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for t, v in pack.items()}


def run(g: hg.Graph, t: dict, inputs: dict[str, np.ndarray], engine: str) -> dict[str, np.ndarray]:
    g.set_preferred_engine_id_ext(engine).build()
    assert g.get_plan_name() == engine
    pack = {t[n]: a for n, a in inputs.items() if n in t}
    pack.update(t["pack"])
    if engine != NUMPY:
        pack = _torch_pack(pack)
    out = g.run(pack)
    names = [n for n in ("O", "Stats", "dQ", "dK", "dV") if n in t and t[n] in out]
    return {n: np.asarray(out[t[n]]) for n in names}


def autograd(inputs: dict[str, np.ndarray], mask: np.ndarray, p: float, causal: bool = False):
    """O, Stats and the gradients by torch autograd in float64, with keep mask ``mask``."""
    q, k, v = (torch.tensor(inputs[n], requires_grad=True) for n in ("Q", "K", "V"))
    rep = H // HK
    s = q @ k.repeat_interleave(rep, 1).transpose(-1, -2) * SCALE
    if causal:
        s = s.masked_fill(torch.ones(SQ, SKV, dtype=torch.bool).triu(1), -torch.inf)
    stats = torch.logsumexp(s, -1, keepdim=True)
    probs = torch.softmax(s, -1) * torch.from_numpy(mask) / (1 - p)
    o = probs @ v.repeat_interleave(rep, 1)
    o.backward(torch.from_numpy(inputs["dO"]))
    return {"O": o.detach().numpy(), "Stats": stats.detach().numpy(), "dQ": q.grad.numpy(),
            "dK": k.grad.numpy(), "dV": v.grad.numpy()}  # fmt: skip


# ----- the torch stream equals the NumPy stream -----
@pytest.mark.parametrize(
    ("seed", "offset", "p", "shape"),
    [
        (42, 0, 0.5, (1, 1, 5, 7)),
        (2**63 - 5, 2**40 + 3, 0.7, (1, 2, 130, 300)),
        (-3, -7, 0.1, (2, 3, 17, 33)),
        (2**33 + 11, 17, 0.2, (2, 3, 33, 129)),
        (7, 1, 0.999, (3, 1, 4, 1)),
        # Skv a multiple of 4: every row starts at one lane (1 here), read as a slice
        (11, 5, 0.3, (2, 2, 9, 64)),
    ],
)
@pytest.mark.parametrize("route", ["philox_keep", "torch int64 (the GPUs' route)"])
def test_math_stream_equals_numpy_stream_bit_for_bit(seed, offset, p, shape, route) -> None:
    cpu = torch.device("cpu")
    words = dropout_keep_words(p)
    keep = philox_keep if route == "philox_keep" else _math_philox._keep_torch
    blocks = [((0, shape[2]), (0, shape[3])), ((1, shape[2]), (shape[3] // 2, shape[3]))]
    for rows, cols in blocks:
        want = dropout_keep_mask(seed, offset, p, shape, rows=rows, cols=cols)
        got = keep(seed, offset, words, shape, rows, cols, cpu)
        np.testing.assert_array_equal(got.numpy(), want)
        as_int64 = [torch.tensor(x % 2**64 - (x % 2**64 >= 2**63) * 2**64) for x in (seed, offset)]
        got = keep(*as_int64, words, shape, rows, cols, cpu)
        np.testing.assert_array_equal(got.numpy(), want)


def test_math_kernels_restate_the_definition_exactly() -> None:
    """Kernel modules cannot import hipdnn_graph (a torch-only machine runs them), so they
    restate the constants and the keep rule: both must equal hipdnn_graph.philox's."""
    for name in ("PHILOX_M0", "PHILOX_M1", "PHILOX_W0", "PHILOX_W1", "PHILOX_ROUNDS"):
        assert getattr(_math_philox, name) == getattr(philox, name)
    rng = np.random.default_rng(3)
    probabilities = [0.0, 1e-12, 2.0**-33, 0.1, 0.2, 0.25, 0.5, 0.7, 0.9, 1 - 2.0**-24]
    for p in [*probabilities, *rng.random(40).tolist()]:
        assert _math_philox.keep_words(p) == dropout_keep_words(p), p
    with pytest.raises(ValueError):
        _math_philox.keep_words(1.0)


@pytest.mark.parametrize("numpy_installed", [True, False])
def test_math_stream_chunks_give_the_same_mask(
    monkeypatch: pytest.MonkeyPatch, numpy_installed: bool
) -> None:
    shape = (2, 3, 17, 33)
    want = dropout_keep_mask(5, 6, 0.3, shape)
    monkeypatch.setattr(_math_philox, "_CHUNK_CPU", 5)
    monkeypatch.setattr(_math_philox, "HAVE_NUMPY", numpy_installed)  # False: the torch route
    torch_route = _math_philox._keep_torch
    calls: list[int] = []
    monkeypatch.setattr(_math_philox, "_keep_torch", lambda *a: calls.append(1) or torch_route(*a))
    got = philox_keep(5, 6, dropout_keep_words(0.3), shape, (0, 17), (0, 33), torch.device("cpu"))
    np.testing.assert_array_equal(got.numpy(), want)
    assert bool(calls) != numpy_installed


def test_math_kernel_blocks_do_not_change_the_mask() -> None:
    x = {n: torch.from_numpy(a) for n, a in _data().items()}
    call = SdpaCall(SCALE, dropout_p=0.3, dropout_scale=1 / 0.7, dropout_seed=11,
                    dropout_offset=6)  # fmt: skip
    whole = kmath.sdpa_forward(x["Q"], x["K"], x["V"], call, compute_dtype=torch.float64)
    rows = kmath.sdpa_forward(x["Q"], x["K"], x["V"], call, compute_dtype=torch.float64,
                              block_q=2)  # fmt: skip
    for a, b in zip(whole, rows, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-14)


# ----- graphs: explicit mask of the same stream, autograd, NumPy == math -----
@pytest.mark.parametrize("engine", [NUMPY, MATH])
@pytest.mark.parametrize("form", FORMS)
def test_forward_equals_the_explicit_mask_graph_and_autograd(engine: str, form: str) -> None:
    p, seed, offset = 0.25, 2**40 + 9, 3
    if form == "tensor_int32":
        seed = -123457  # an INT32 value is sign-extended: the key is 2**64 - 123457
    x = _data()
    got = run(*forward(p, seed, offset, form), x, engine)
    explicit = run(*forward(p, seed, offset, None), x, engine)
    for name in ("O", "Stats"):
        np.testing.assert_array_equal(got[name], explicit[name])
    want = autograd(x, dropout_keep_mask(seed, offset, p, (B, H, SQ, SKV)), p)
    np.testing.assert_allclose(got["O"], want["O"], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(got["Stats"], want["Stats"], rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("engine", [NUMPY, MATH])
@pytest.mark.parametrize("form", FORMS)
def test_backward_equals_the_explicit_mask_graph_and_autograd(engine: str, form: str) -> None:
    p, seed, offset = 0.375, 123456789, 2**33 + 1  # p exact in float32 (a float32 attribute)
    if form == "tensor_int32":
        offset = 2**31 - 2
    x = _data(1)
    want = autograd(x, dropout_keep_mask(seed, offset, p, (B, H, SQ, SKV)), p)
    inputs = {**x, "O": want["O"], "Stats": want["Stats"]}
    got = run(*backward(p, seed, offset, form), inputs, engine)
    explicit = run(*backward(p, seed, offset, None), inputs, engine)
    for name in ("dQ", "dK", "dV"):
        np.testing.assert_array_equal(got[name], explicit[name])
        np.testing.assert_allclose(got[name], want[name], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("engine", [NUMPY, MATH])
def test_forward_then_backward_graphs_share_the_mask_with_a_causal_mask(engine: str) -> None:
    p, seed, offset = 0.4375, 99, 1
    x = _data(2)
    fwd = run(*forward(p, seed, offset, "tensor", use_causal_mask=True), x, engine)
    inputs = {**x, "O": fwd["O"], "Stats": fwd["Stats"]}
    bwd = run(*backward(p, seed, offset, "tensor", use_causal_mask=True), inputs, engine)
    want = autograd(x, dropout_keep_mask(seed, offset, p, (B, H, SQ, SKV)), p, causal=True)
    for name, got in (("O", fwd["O"]), *((n, bwd[n]) for n in ("dQ", "dK", "dV"))):
        np.testing.assert_allclose(got, want[name], rtol=1e-10, atol=1e-12)


def test_numpy_and_math_engines_agree() -> None:
    p, seed, offset = 0.5, 2**64 - 3, 2**63 + 5  # unsigned 64-bit values as Python ints
    x = _data(3)
    ref = run(*forward(p, seed, offset, "runtime"), x, NUMPY)
    got = run(*forward(p, seed, offset, "runtime"), x, MATH)
    np.testing.assert_allclose(got["O"], ref["O"], rtol=1e-12, atol=1e-14)
    # int64 tensors holding the same 64 bits (negative values) draw the same mask
    g, tensors = forward(p, seed - 2**64, offset - 2**64, "tensor")
    for engine in (NUMPY, MATH):
        again = run(g, tensors, x, engine)["O"]
        np.testing.assert_allclose(again, ref["O"], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("engine", [NUMPY, MATH])
def test_same_inputs_same_outputs_other_seed_or_offset_other_outputs(engine: str) -> None:
    x = _data(4)
    first = run(*forward(0.3, 5, 8, "runtime"), x, engine)["O"]
    np.testing.assert_array_equal(run(*forward(0.3, 5, 8, "runtime"), x, engine)["O"], first)
    assert not np.array_equal(run(*forward(0.3, 6, 8, "runtime"), x, engine)["O"], first)
    assert not np.array_equal(run(*forward(0.3, 5, 9, "runtime"), x, engine)["O"], first)


def test_one_plan_reads_new_seed_values_each_call() -> None:
    g, t = forward(0.3, 5, 8, "tensor")
    g.set_preferred_engine_id_ext(MATH).build()
    pack = {t[n]: torch.from_numpy(a) for n, a in _data(5).items() if n in t}
    seed_t, offset_t = list(t["pack"])
    seed = torch.tensor([[[[5]]]])
    pack.update({seed_t: seed, offset_t: torch.tensor([[[[8]]]])})
    first = g.run(pack)[t["O"]].clone()
    seed.fill_(6)
    second = g.run(pack)[t["O"]]
    assert not torch.equal(first, second)
    want = run(*forward(0.3, 6, 8, "tensor"), _data(5), NUMPY)["O"]
    np.testing.assert_allclose(second.numpy(), want, rtol=1e-12, atol=1e-14)


def test_execution_leaves_the_seed_buffers_untouched() -> None:
    g, t = forward(0.3, 5, 8, "tensor")
    data = _data(6)
    for engine in (NUMPY, MATH):
        before = {k: np.array(v, copy=True) for k, v in t["pack"].items()}
        run(g, t, data, engine)
        for k, v in t["pack"].items():
            np.testing.assert_array_equal(v, before[k])


# ----- what is refused, and bad values -----
def _refusals(g: hg.Graph) -> dict[str, str]:
    g.validate()
    reasons = {NUMPY: ""}
    from hipdnn_graph_numpy_reference import create_backend as numpy_backend

    support = numpy_backend().engines()[0].check(g)
    reasons[NUMPY] = "" if support.ok else support.reason
    support = TorchSdpaEngine(MATH, None, 500).check(g)
    reasons[MATH] = "" if support.ok else support.reason
    return reasons


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("float_seed", "philox dropout reads Seed as an INT64 or INT32 integer, got FLOAT"),
        ("no_offset", "philox dropout needs a Seed and an Offset; Offset is not set"),
        ("dropout_scale", "philox dropout scales by 1/(1-p)"),
    ],
)
def test_both_engines_refuse_what_the_stream_cannot_define(change: str, reason: str) -> None:
    g = _graph()
    q, k, v = _qkv(g)
    seed = g.tensor(name="Seed", dim=[1], data_type=hg.DataType.INT64)
    offset = g.tensor(name="Offset", dim=[1], data_type=hg.DataType.INT64)
    attrs = hg.SdpaAttributes().set_name("fwd").set_attn_scale(SCALE)
    if change == "float_seed":
        seed.set_data_type(hg.DataType.FLOAT)
    attrs.set_dropout(0.2, seed, None if change == "no_offset" else offset)
    if change == "dropout_scale":
        attrs.set_dropout_scale(g.tensor(name="S").set_value(1.25))
    o, _ = g.sdpa(q, k, v, attrs)
    o.set_output(True)
    for engine, why in _refusals(g).items():
        assert why.startswith(f"node 'fwd': {reason}"), engine


@pytest.mark.parametrize("engine", [NUMPY, MATH])
@pytest.mark.parametrize("bad", [1.5, True, "7"])
def test_a_runtime_seed_that_is_not_an_integer_is_an_invalid_variant_pack(engine, bad) -> None:
    g, t = forward(0.3, 5, 8, "runtime")
    seed = next(k for k in t["pack"] if k.name == "Seed")
    t["pack"][seed] = bad
    with pytest.raises(hg.HipdnnError) as err:
        run(g, t, _data(), engine)
    assert err.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
