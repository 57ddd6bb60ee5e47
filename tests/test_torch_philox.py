"""Philox dropout on the fused torch engines, decided and wired without a GPU (issue 22).

Which engine takes a philox graph and why the others refuse (the stream each draws), the Seed
and Offset forms a plan hands its kernel, the CUDA generator set around the forward op and put
back (a fake generator stands in for the device's), the backward ops' seed/offset tensors, and
the torch op's draws from the generator. The GPU side is tests/gpu/test_torch_philox_gpu.py.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph as hg  # noqa: E402
from hipdnn_graph.graph.lifecycle import assign_uids  # noqa: E402
from hipdnn_graph.torch import _choice, _dropout  # noqa: E402
from hipdnn_graph_torch_rocm import ENGINES, TorchSdpaEngine  # noqa: E402
from hipdnn_graph_torch_rocm.kernels import _fused_philox, fused  # noqa: E402
from hipdnn_graph_torch_rocm.kernels._fused_philox import FusedOp  # noqa: E402
from hipdnn_graph_torch_rocm.kernels.call import SdpaCall  # noqa: E402

FAMILY = {name: op for name, op, _ in ENGINES}
CUDNN, FLASH, EFFICIENT, MATH = (
    "TORCH_SDPA_CUDNN_ENGINE",
    "TORCH_SDPA_FLASH_ENGINE",
    "TORCH_SDPA_EFFICIENT_ENGINE",
    "TORCH_SDPA_MATH_ENGINE",
)


class FakeGenerator:
    """What the code uses of ``torch.cuda.default_generators[i]``, with a call log."""

    def __init__(self, seed: int, offset: int) -> None:
        self.seed, self.offset = seed, offset
        self.log: list[tuple[str, int]] = []

    def initial_seed(self) -> int:
        return self.seed

    def get_offset(self) -> int:
        return self.offset

    def manual_seed(self, seed: int) -> None:
        self.seed, self.offset = seed, 0
        self.log.append(("manual_seed", seed))

    def set_offset(self, offset: int) -> None:
        assert offset % 4 == 0, "torch's CUDA generator refuses this"
        self.offset = offset
        self.log.append(("set_offset", offset))


@pytest.fixture
def cuda_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pretended CUDA build with one device, whose fused ops can run every test problem."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    monkeypatch.setattr(fused, "check", lambda op, p: None)


def philox_graph(
    *,
    backward: bool = False,
    seed: Any = "pass_by_value",
    offset: Any = 8,
    seed_type: hg.DataType = hg.DataType.INT64,
) -> tuple[hg.Graph, dict[str, Any]]:
    f32 = hg.DataType.FLOAT
    g = hg.Graph(name="g", io_data_type=hg.DataType.BFLOAT16, intermediate_data_type=f32,
                 compute_data_type=f32)  # fmt: skip
    q = g.tensor(name="Q", dim=[1, 2, 16, 16])
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    t: dict[str, Any] = {"Q": q, "K": k, "V": v}
    for name, how in (("Seed", seed), ("Offset", offset)):
        if how == "pass_by_value":
            t[name] = g.tensor(name=name, dim=[1], data_type=seed_type, is_pass_by_value=True)
        elif how == "tensor":
            t[name] = g.tensor(name=name, dim=[1], data_type=seed_type)
        else:
            t[name] = g.tensor(name=name, dim=[1], data_type=seed_type).set_value(how)
    drop = (0.25, t["Seed"], t["Offset"])
    if backward:
        t["O"], t["dO"] = g.tensor_like(q, "O"), g.tensor_like(q, "dO")
        t["Stats"] = g.tensor(name="Stats", dim=[1, 2, 16, 1], data_type=hg.DataType.FLOAT)
        grads = g.sdpa_backward(q, k, v, t["O"], t["dO"], t["Stats"], name="bwd", dropout=drop)
        outs = dict(zip(("dQ", "dK", "dV"), grads, strict=True))
    else:
        o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=True, dropout=drop)
        assert stats is not None
        outs = {"O": o, "Stats": stats}
    for name, out in outs.items():
        out.set_output(True)
        t[name] = out
    g.validate()
    assign_uids(g)
    return g, t


def _check(name: str, g: hg.Graph) -> Any:
    return TorchSdpaEngine(name, FAMILY[name], 1).check(g)


# ----- which engine takes a philox graph --------------------------------------------------


@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
def test_only_the_documented_stream_takes_philox_by_default(
    cuda_build: None, backward: bool
) -> None:
    g, _ = philox_graph(backward=backward)
    assert _check(EFFICIENT, g).ok
    for name, stream in ((CUDNN, "cudnn"), (FLASH, "flash")):
        support = _check(name, g)
        assert not support.ok
        assert f"philox dropout: {name} draws its mask from {stream}" in support.reason
        assert "set_preferred_engine_id_ext" in support.reason


@pytest.mark.parametrize("name", [CUDNN, FLASH])
def test_a_preferred_fused_engine_runs_philox_with_its_own_stream(
    cuda_build: None, name: str
) -> None:
    g, _ = philox_graph()
    g.set_preferred_engine_id_ext(name)
    assert _check(name, g).ok
    assert not _check(FLASH if name == CUDNN else CUDNN, g).ok  # only the preferred one


def test_streams_each_engine_records(cuda_build: None, monkeypatch: pytest.MonkeyPatch) -> None:
    engines = {name: TorchSdpaEngine(name, FAMILY[name], 1) for name in FAMILY}
    streams = {name: e.dropout_stream() for name, e in engines.items()}
    assert streams[EFFICIENT] == "hipdnn_graph.philox"
    assert streams[CUDNN].startswith("cudnn") and streams[FLASH].startswith("flash")
    assert streams["TORCH_SDPA_FLEX_ENGINE"] is None
    assert streams["TORCH_SDPA_MATH_ENGINE"] == "hipdnn_graph.philox"
    monkeypatch.setattr(torch.version, "hip", "6.4.0", raising=False)
    assert engines[EFFICIENT].dropout_stream().startswith("aotriton")
    assert engines[FLASH].dropout_stream().startswith("aotriton")


def test_rocm_efficient_is_not_the_documented_stream(
    cuda_build: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ROCm runs AOTriton for the efficient op: its mask is not hipdnn_graph.philox's."""
    monkeypatch.setattr(torch.version, "hip", "6.4.0", raising=False)
    g, _ = philox_graph()
    support = _check(EFFICIENT, g)
    assert not support.ok and "draws its mask from aotriton" in support.reason
    g.set_preferred_engine_id_ext(EFFICIENT)
    assert _check(EFFICIENT, g).ok


def test_flex_refuses_philox(cuda_build: None) -> None:
    g, _ = philox_graph()
    support = _check("TORCH_SDPA_FLEX_ENGINE", g)
    assert not support.ok and "philox dropout" in support.reason


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"offset": 6}, "Offset that is a multiple of 4 (torch's generator keeps offsets in "
                        "steps of 4), got 6"),
        ({"seed_type": hg.DataType.FLOAT}, "reads Seed as an INT64 or INT32 integer, got FLOAT"),
    ],
    ids=["offset_not_multiple_of_4", "float_seed"],
)  # fmt: skip
def test_fused_refusals_name_the_seed_or_offset_problem(
    cuda_build: None, kw: dict[str, Any], why: str
) -> None:
    g, _ = philox_graph(**kw)
    support = _check(EFFICIENT, g)
    assert not support.ok and why in support.reason


# ----- what a plan hands its kernel -------------------------------------------------------


@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
def test_plan_passes_seed_and_offset_and_never_replays(
    cuda_build: None, monkeypatch: pytest.MonkeyPatch, backward: bool
) -> None:
    calls: list[dict[str, Any]] = []

    def fake(op: Any, *args: Any, **kw: Any) -> Any:
        calls.append({"op": op, **kw})
        q = args[0]
        if backward:
            return q, q, q, None
        return q, torch.zeros(*q.shape[:3], 1)

    monkeypatch.setattr(fused, "backward" if backward else "forward", fake)
    g, t = philox_graph(backward=backward, seed="pass_by_value", offset=12)
    plan = TorchSdpaEngine(EFFICIENT, "efficient", 30).build_plan(g)
    assert plan.replay.capacity == 0 and "philox dropout" in (plan.replay.refusal or "")
    pack = {t[n].get_uid(): torch.zeros(t[n].dim) for n in ("Q", "K", "V")}
    if backward:
        pack.update({t[n].get_uid(): torch.zeros(t[n].dim) for n in ("O", "dO", "Stats")})
    pack[t["Seed"].get_uid()] = 2**40 + 3
    plan.execute(pack, None)
    (call,) = calls
    assert call["op"] is FusedOp.EFFICIENT
    fixed = call["call"]  # the node's call: the probability, the constant Offset, no Seed
    assert (fixed.dropout_p, fixed.dropout_seed, fixed.dropout_offset) == (0.25, None, 12)
    assert call["dropout_seed"] == 2**40 + 3  # the pass-by-value Seed: read per call
    assert "dropout_offset" not in call


def test_device_tensor_seed_reaches_the_kernel_as_given(
    cuda_build: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(
        fused, "backward", lambda op, *a, **kw: seen.append(kw) or (a[0],) * 3 + (None,)
    )
    g, t = philox_graph(backward=True, seed="tensor", offset="tensor")
    plan = TorchSdpaEngine(CUDNN, "cudnn", 10).build_plan(g)
    pack = {t[n].get_uid(): torch.zeros(t[n].dim) for n in ("Q", "K", "V", "O", "dO", "Stats")}
    seed, offset = torch.tensor([5]), torch.tensor([16])
    pack.update({t["Seed"].get_uid(): seed, t["Offset"].get_uid(): offset})
    plan.execute(pack, None)
    assert seen[0]["dropout_seed"] is seed and seen[0]["dropout_offset"] is offset  # not read


# ----- the generator around the forward op, and the backward's tensors --------------------


def test_generator_is_set_for_the_op_and_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = FakeGenerator(seed=99, offset=40)
    monkeypatch.setattr(_fused_philox, "_generator", lambda device: gen)
    inside: list[tuple[int, int]] = []
    with _fused_philox.generator_at(FusedOp.FLASH, torch.device("cuda:0"), 2**64 - 1, 2**63):
        inside.append((gen.seed, gen.offset))
    assert inside == [(2**64 - 1, 2**63)]
    assert (gen.seed, gen.offset) == (99, 40)
    cuda = torch.device("cuda:0")
    with (
        pytest.raises(RuntimeError, match="boom"),
        _fused_philox.generator_at(FusedOp.FLASH, cuda, -1, 4),
    ):
        assert gen.seed == 2**64 - 1  # a negative int64 seed is its unsigned pattern
        raise RuntimeError("boom")
    assert (gen.seed, gen.offset) == (99, 40)
    with pytest.raises(fused.FusedUnsupportedError, match="philox offset 6 is not a multiple"), \
            _fused_philox.generator_at(FusedOp.FLASH, cuda, 1, 6):  # fmt: skip
        pass
    assert gen.log[-2:] == [("manual_seed", 99), ("set_offset", 40)]


@pytest.mark.parametrize("op", list(FusedOp))
def test_fused_forward_runs_the_op_at_the_graph_seed(
    monkeypatch: pytest.MonkeyPatch, op: FusedOp
) -> None:
    gen = FakeGenerator(seed=1, offset=0)
    monkeypatch.setattr(_fused_philox, "_generator", lambda device: gen)
    monkeypatch.setattr(fused, "_guard", _case_of_the_call)
    seen: list[Any] = []

    def op_call(p: Any, c: Any, q: Any, k: Any, v: Any, *args: Any) -> Any:
        seen.append((gen.seed, gen.offset, p.call.dropout_p))
        return q, q

    monkeypatch.setitem(fused._fused_ops.FORWARD, op, op_call)
    q = torch.zeros(1, 1, 4, 8)
    fused.forward(op, q, q, q, SdpaCall(scale=1.0, dropout_p=0.5, dropout_offset=12),
                  dropout_seed=torch.tensor([7]))  # fmt: skip
    assert seen == [(7, 12, 0.5)] and (gen.seed, gen.offset) == (1, 0)
    seen.clear()
    fused.forward(op, q, q, q, scale=1.0)  # no dropout: the generator is left alone
    assert seen == [(1, 0, 0.0)] and len(gen.log) == 4


def test_backward_tensors_in_each_ops_form() -> None:
    cpu = torch.device("cpu")
    s, o = _fused_philox.backward_rng(FusedOp.EFFICIENT, cpu, 2**64 - 1, torch.tensor([8]))
    assert (s.device.type, s.dtype, s.dim(), int(s), int(o)) == ("cpu", torch.int64, 0, -1, 8)
    seed = torch.tensor([3], dtype=torch.int64)
    s, o = _fused_philox.backward_rng(FusedOp.CUDNN, cpu, seed, 20)
    assert s.dtype == torch.int64 and s.dim() == 0 and int(o) == 20
    assert s.data_ptr() == seed.data_ptr()  # a device tensor is passed on, never read
    state, unused = _fused_philox.backward_rng(FusedOp.FLASH, cpu, 2**63 + 5, 24)
    assert state.dtype == torch.uint64 and state.shape == (2,) and unused.dtype == torch.uint64
    assert state.view(torch.int64).tolist() == [-(2**63) + 5, 24]


def test_backward_seed_tensor_is_filled_once_per_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    fills: list[int] = []

    def fill(value: Any, device: Any) -> torch.Tensor:
        fills.append(int(value))
        return torch.tensor(int(value), dtype=torch.int64)

    class Stream:
        def __init__(self, handle: int) -> None:
            self.cuda_stream = handle

    stream, capturing = [Stream(1)], [False]
    monkeypatch.setattr(_fused_philox, "_device_i64", fill)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: stream[0])
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    monkeypatch.setattr(_fused_philox, "_SEEDS", {})
    cuda = torch.device("cuda:0")
    s1, o1 = _fused_philox.backward_rng(FusedOp.CUDNN, cuda, 7, 8)
    s2, o2 = _fused_philox.backward_rng(FusedOp.CUDNN, cuda, 7, 12)
    assert s2 is s1 and int(s1) == 7 and (int(o1), int(o2)) == (8, 12)
    assert fills == [7, 8, 12]  # the seed filled once, each offset every call
    assert int(_fused_philox.backward_rng(FusedOp.CUDNN, cuda, 9, 4)[0]) == 9  # a new seed
    stream[0] = Stream(2)  # another stream: its own fill, ordered before its own reads
    s3, _ = _fused_philox.backward_rng(FusedOp.CUDNN, cuda, 7, 8)
    assert s3 is not s1 and int(s3) == 7
    capturing[0] = True  # inside a CUDA graph capture: filled every time, never kept
    n = len(fills)
    s4, _ = _fused_philox.backward_rng(FusedOp.CUDNN, cuda, 7, 8)
    s5, _ = _fused_philox.backward_rng(FusedOp.CUDNN, cuda, 7, 8)
    assert s4 is not s5 and len(fills) == n + 4
    seed = torch.tensor([3], dtype=torch.int64)  # a tensor seed is passed on as before
    assert _fused_philox.backward_rng(FusedOp.CUDNN, cuda, seed, 4)[0] is not None


def test_fused_backward_hands_the_op_its_rng_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fused, "_guard", _case_of_the_call)
    seen: list[Any] = []

    def op_call(*args: Any) -> Any:
        seen.append((args[0].call.dropout_p, args[-1]))
        return args[2], args[3], args[4], None

    monkeypatch.setitem(fused._fused_ops.BACKWARD, FusedOp.EFFICIENT, op_call)
    q = torch.zeros(1, 1, 4, 8)
    call = SdpaCall(scale=1.0, dropout_p=0.1)
    fused.backward(FusedOp.EFFICIENT, q, q, q, q, q, q, call, dropout_seed=9, dropout_offset=4)
    ((p, (s, o)),) = seen
    assert p == 0.1 and (int(s), int(o)) == (9, 4)
    with pytest.raises(ValueError, match="needs a seed and an offset"):
        fused.backward(FusedOp.EFFICIENT, q, q, q, q, q, q, call)


def _case_of_the_call(op: Any, check: bool, q: Any, k: Any, v: Any, call: Any, *rest: Any) -> Any:
    """``fused._guard`` stood in for: a case that carries the call, no caps, no empty rows."""
    return SimpleNamespace(call=call), None, None


# ----- the torch op's draws -----------------------------------------------------------------


def test_op_draws_like_torch_and_advances_by_the_engines_increment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gen = FakeGenerator(seed=123, offset=64)
    monkeypatch.setattr(_dropout, "_cuda_generator", lambda device: gen)
    cuda = torch.device("cuda", 0)
    assert _dropout.draw(cuda) == (123, 64)
    assert gen.log == []  # reading the draw moves nothing
    _dropout.advance(cuda, 64, CUDNN, (8, 12, 1024, 1024))
    assert gen.offset == 64 + 100663296
    _dropout.advance(cuda, 64, FLASH, (8, 12, 1024, 1024))
    assert gen.offset == 64 + 3072
    _dropout.advance(cuda, 64, "TORCH_SDPA_MATH_ENGINE", (1, 1, 3, 3))
    assert gen.offset == 64 + 12  # 9 counters, rounded up to 4 as torch rounds
    gen.seed = 2**64 - 2
    assert _dropout.draw(cuda) == (-2, 76)  # the graph's Seed is INT64


def test_op_take_draws_and_advances_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A remembered call takes its pair and moves the generator on before it launches (as
    torch's fused ops take their Philox state): the pair of draw, the offset of advance."""
    gen = FakeGenerator(seed=2**64 - 2, offset=64)
    monkeypatch.setattr(_dropout, "_cuda_generator", lambda device: gen)
    cuda = torch.device("cuda", 0)
    assert _dropout.take(cuda, 3072) == (-2, 64)
    assert gen.log == [("set_offset", 64 + 3072)]
    assert _dropout.take(cuda, 12) == (-2, 64 + 3072)
    torch.manual_seed(5)
    cpu = _dropout.take(torch.device("cpu"), 12)
    torch.manual_seed(5)
    assert cpu == _dropout.draw(torch.device("cpu"))  # the CPU: one draw, offset 0


def test_op_cpu_draw_uses_torchs_cpu_generator() -> None:
    torch.manual_seed(5)
    first = _dropout.draw(torch.device("cpu"))
    second = _dropout.draw(torch.device("cpu"))
    torch.manual_seed(5)
    assert _dropout.draw(torch.device("cpu")) == first != second
    assert first[1] == 0 and 0 <= first[0] < 2**62


def test_op_picks_the_fused_op_torch_would(monkeypatch: pytest.MonkeyPatch) -> None:
    q = torch.zeros(1, 2, 4, 8)
    seen: list[bool] = []

    def choice(q: Any, k: Any, v: Any, *args: Any, backend: int = 0, **kw: Any) -> int:
        seen.append(q.requires_grad and k.requires_grad and v.requires_grad)
        return backend

    for backend, want in ((1, FLASH), (2, EFFICIENT), (3, CUDNN), (0, MATH), (-1, None)):

        def fake(*a: Any, b: int = backend, **kw: Any) -> int:
            return choice(*a, backend=b, **kw)

        monkeypatch.setattr(torch, "_fused_sdp_choice", fake)
        _choice.clear_choices()
        assert _choice.choose_engine(q, q, q, None, 0.1, True, None, False, training=True) == want
    assert all(seen) and not q.requires_grad  # asked as for training; the caller's untouched
    _choice.clear_choices()


def test_op_asks_torchs_choice_once_per_call_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[Any, ...]] = []

    def fake(q: Any, k: Any, v: Any, mask: Any, p: float, causal: bool, **kw: Any) -> int:
        asked.append((tuple(q.shape), mask is None, p, causal))
        return 3 if q.shape[2] == 4 else 2

    monkeypatch.setattr(torch, "_fused_sdp_choice", fake)
    _choice.clear_choices()
    q, q8 = torch.zeros(1, 2, 4, 8), torch.zeros(1, 2, 8, 8)
    mask = torch.zeros(1, 1, 4, 4)
    choose = _choice.choose_engine
    assert [choose(q, q, q, None, 0.1, True, None, False) for _ in range(3)] == [CUDNN] * 3
    assert len(asked) == 1  # remembered
    assert choose(q8, q8, q8, None, 0.1, True, None, False) == EFFICIENT  # a new shape
    assert choose(q, q, q, mask, 0.1, False, None, False) == CUDNN  # a mask, not causal
    assert choose(q.transpose(2, 3).contiguous().transpose(2, 3), q, q, None, 0.1, True, None,
                  False) == CUDNN  # fmt: skip
    assert len(asked) == 4  # new strides: asked again
    flash = torch.backends.cuda.flash_sdp_enabled()
    try:
        torch.backends.cuda.enable_flash_sdp(not flash)  # a switch torch's choice reads
        choose(q, q, q, None, 0.1, True, None, False)
        assert len(asked) == 5
        with torch.no_grad():  # grad mode is read too
            choose(q, q, q, None, 0.1, True, None, False)
        assert len(asked) == 6
    finally:
        torch.backends.cuda.enable_flash_sdp(flash)
    choose(q, q, q, None, 0.1, True, None, False)
    assert len(asked) == 6  # back to a remembered combination
    _choice.clear_choices()


def test_op_state_round_trip() -> None:
    state = _dropout.pack_state(2**64 - 1, 2**40, CUDNN)
    assert state.device.type == "cpu" and state.dtype == torch.int64
    assert _dropout.unpack_state(state) == (-1, 2**40, CUDNN)
    assert _dropout.unpack_state(_dropout.pack_state(0, 4, FLASH))[2] == FLASH
