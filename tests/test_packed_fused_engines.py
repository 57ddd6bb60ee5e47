"""The flash and efficient engines on packed (ragged) SDPA graphs, on the CPU: which engine
accepts which packed graph and the exact refusals (the device faked: CUDA reported available,
the probe's capabilities given), the log-sum-exp conversions between the graph's Stats and the
kernels' layouts, and whole graphs run through the fused plan with fake variable-length kernels
(the math kernel in float64 behind the aten ops' signatures and LSE layouts) against the math
engine: one kernel call per node, empty sequences, GQA, inputs never written, results in the
caller's buffers, the math step for calls the kernel's causal alignment does not serve.
The real kernels: tests/gpu/test_packed_engines_gpu.py."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg

torch = pytest.importorskip("torch")

from hipdnn_graph.backend import SdpaProblem  # noqa: E402
from hipdnn_graph.backend.contract import checked_support  # noqa: E402
from hipdnn_graph.backend.registry import current_registry  # noqa: E402
from hipdnn_graph_torch_rocm import _packed_fused  # noqa: E402
from hipdnn_graph_torch_rocm.kernels import fused  # noqa: E402
from hipdnn_graph_torch_rocm.kernels.call import SdpaCall  # noqa: E402
from hipdnn_graph_torch_rocm.kernels.varlen import (  # noqa: E402
    varlen_math_backward,
    varlen_math_forward,
)
from hipdnn_graph_torch_rocm.kernels.varlen_lse import (  # noqa: E402
    TokenIndex,
    dense_stats_read,
    dense_stats_write,
    from_kernel_lse,
    to_kernel_lse,
)

FLASH, EFFICIENT, MATH = (
    "TORCH_SDPA_FLASH_ENGINE", "TORCH_SDPA_EFFICIENT_ENGINE", "TORCH_SDPA_MATH_ENGINE"
)  # fmt: skip
H, HK, D, S = 4, 2, 8, 8
#: per sequence (Sq, Skv): Sq > Skv, Sq < Skv, equal, no queries, no keys, a single query
LENGTHS = [(5, 3), (2, 7), (6, 6), (0, 4), (3, 0), (1, 4)]
SQUARE = [(5, 5), (2, 2), (0, 0), (8, 8)]
IO = {"fp16": hg.DataType.HALF, "bf16": hg.DataType.BFLOAT16, "fp32": hg.DataType.FLOAT}
CAPS = {
    fused.FusedOp.FLASH: fused.OpCaps(
        op=fused.FusedOp.FLASH, available=True, gqa_native=True, causal_alignment="bottom_right",
        varlen=True, varlen_lse="tokens", varlen_causal=True,
    ),
    fused.FusedOp.EFFICIENT: fused.OpCaps(
        op=fused.FusedOp.EFFICIENT, available=True, lse_pad=32, varlen=True,
        varlen_lse="tokens", varlen_causal=True, dv_ne_d=True,
        mask_types=(("top_left", 1), ("bottom_right", 2)),
    ),
    fused.FusedOp.CUDNN: fused.OpCaps(op=fused.FusedOp.CUDNN, available=True),
}  # fmt: skip


@pytest.fixture
def device(monkeypatch: pytest.MonkeyPatch) -> dict[fused.FusedOp, fused.OpCaps]:
    """A faked device: CUDA available, the probe's capabilities ``CAPS`` (a copy to edit)."""
    caps = dict(CAPS)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(fused, "capabilities", lambda device, dtype: caps)
    return caps


def _graph(io: hg.DataType, backward: bool, mask: str = "none", lengths: Any = None,
           dense_kv: bool = False) -> tuple[hg.Graph, dict[str, Any]]:  # fmt: skip
    """A packed forward (O packed, Stats dense) or backward graph over ``B`` sequences."""
    b = len(lengths or LENGTHS)
    g = hg.Graph(name="packed", io_data_type=io, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    offs = {n: g.tensor(name=n, dim=[b + 1, 1, 1, 1], data_type=hg.DataType.INT32)
            for n in ("off_q", "off_kv")}  # fmt: skip

    def token(name: str, heads: int, side: str, packed: bool = True) -> hg.TensorAttributes:
        t = g.tensor(name=name, dim=[b, heads, S, D], stride=[S * heads * D, D, heads * D, 1])
        return t.set_ragged_offset(offs[side]).set_ragged_offset_multiplier(heads * D) if packed \
            else t  # fmt: skip

    q = token("Q", H, "off_q")
    k, v = (token(n, HK, "off_kv", not dense_kv) for n in "KV")
    flags: dict[str, Any] = {"none": {}, "top_left": {"use_causal_mask": True},
             "bottom_right": {"use_causal_mask_bottom_right": True}}[mask]  # fmt: skip
    t: dict[str, Any] = {"Q": q, "K": k, "V": v, **offs}
    if not backward:
        o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=True, attn_scale=0.3, **flags)
        assert stats is not None
        o.set_output(True).set_stride([S * H * D, D, H * D, 1]).set_ragged_offset(offs["off_q"])
        o.set_ragged_offset_multiplier(H * D)
        stats.set_output(True).set_data_type(hg.DataType.FLOAT)
        t.update(O=o, Stats=stats)
        return g, t
    o, do = token("O", H, "off_q"), token("dO", H, "off_q")
    stats = g.tensor(name="Stats", dim=[b, H, S, 1], data_type=hg.DataType.FLOAT)
    grads = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", attn_scale=0.3, **flags)
    for name, x, heads, side in zip(("dQ", "dK", "dV"), grads, (H, HK, HK),
                                    ("off_q", "off_kv", "off_kv"), strict=True):  # fmt: skip
        x.set_output(True).set_stride([S * heads * D, D, heads * D, 1])
        x.set_ragged_offset(offs[side]).set_ragged_offset_multiplier(heads * D)
        t[name] = x
    t.update(O=o, dO=do, Stats=stats)
    return g, t


def _engines() -> dict[str, Any]:
    return {e.name: e for e in current_registry().engines()}


# ----- which engine accepts which packed graph --------------------------------------------------


@pytest.mark.parametrize("backward", [False, True], ids=["fwd", "bwd"])
@pytest.mark.parametrize("mask", ["none", "top_left", "bottom_right"])
def test_flash_and_efficient_accept_packed_half_graphs(
    device: Any, backward: bool, mask: str
) -> None:
    g, _ = _graph(hg.DataType.HALF, backward, mask)
    g.validate()
    engines = _engines()
    for name in (FLASH, EFFICIENT, MATH):
        assert checked_support(engines[name], g) == (True, ""), name


def test_float32_packed_graphs_go_to_efficient_not_flash(device: Any) -> None:
    g, _ = _graph(hg.DataType.FLOAT, False, "bottom_right")
    g.validate()
    engines = _engines()
    assert checked_support(engines[FLASH], g) == (
        False, "node 'fwd': flash runs float16/bfloat16 only, not float32"
    )  # fmt: skip
    assert checked_support(engines[EFFICIENT], g) == (True, "")
    g.build()
    assert g.get_plan_name() == EFFICIENT  # cuDNN refuses packed graphs; flash float32


def test_cudnn_and_flex_still_refuse_packed_graphs_by_name(device: Any) -> None:
    g, _ = _graph(hg.DataType.HALF, False)
    g.validate()
    engines = _engines()
    for name, op in (("TORCH_SDPA_CUDNN_ENGINE", "cudnn"), ("TORCH_SDPA_FLEX_ENGINE", "flex")):
        assert checked_support(engines[name], g) == (
            False,
            "does not support packed (ragged) tensors: Q has ragged offsets off_q (the "
            f"{op} kernels' variable-length path is not wired to graphs yet; "
            "TORCH_SDPA_FLASH_ENGINE, TORCH_SDPA_EFFICIENT_ENGINE and TORCH_SDPA_MATH_ENGINE "
            "run packed graphs)",
        )
    g.build()
    assert g.get_plan_name() == FLASH


def test_dense_keys_and_padding_masks_are_refused_with_reasons(device: Any) -> None:
    engines = _engines()
    g, _ = _graph(hg.DataType.HALF, False, dense_kv=True)
    g.validate()
    assert checked_support(engines[FLASH], g) == (
        False,
        "node 'fwd': flash's variable-length kernels take packed tokens, but K 'K' is dense "
        "(TORCH_SDPA_MATH_ENGINE runs it)",
    )
    assert checked_support(engines[MATH], g) == (True, "")
    g, _ = _graph(hg.DataType.HALF, False)
    lens = [g.tensor(name=n, dim=[len(LENGTHS), 1, 1, 1], data_type=hg.DataType.INT32)
            for n in ("sq", "skv")]  # fmt: skip
    g.nodes[0].attributes.set_padding_mask(True).set_seq_len_q(lens[0]).set_seq_len_kv(lens[1])
    g.validate()
    assert checked_support(engines[EFFICIENT], g) == (
        False,
        "node 'fwd': efficient's variable-length kernels run each packed sequence whole; a "
        "padding mask (SEQ_LEN_Q/SEQ_LEN_KV) within packed sequences runs on "
        "TORCH_SDPA_MATH_ENGINE",
    )


def test_the_ops_own_rules_refuse_with_their_reasons(device: Any) -> None:
    device[fused.FusedOp.FLASH] = fused.OpCaps(op=fused.FusedOp.FLASH, available=True)
    g, _ = _graph(hg.DataType.BFLOAT16, True)
    g.validate()
    assert checked_support(_engines()[FLASH], g) == (
        False, "node 'bwd': flash has no working varlen (padding) path on this device"
    )  # fmt: skip
    g, _ = _graph(hg.DataType.BFLOAT16, False)
    g.nodes[0].attributes.set_sliding_window_length(4)
    g.validate()
    assert checked_support(_engines()[EFFICIENT], g) == (
        False,
        "node 'fwd': efficient: sliding-window/band masks with padding are not verified",
    )


def _choice(op: str, mask: str, backward: bool = False) -> _packed_fused.PackedFusedChoice:
    g, _ = _graph(hg.DataType.HALF, backward, mask)
    g.validate()
    return _packed_fused.packed_fused_choice(op, SdpaProblem.from_node(g.nodes[0]))


def test_a_causal_alignment_the_kernel_lacks_runs_only_on_square_calls(device: Any) -> None:
    """flash's causal is bottom-right: top-left is one only where every Sq == Skv; the
    efficient forward with a bottom-right mask the probe found wrong likewise."""
    assert _choice("flash", "bottom_right") == _packed_fused.PackedFusedChoice(None, True)
    assert _choice("flash", "top_left") == _packed_fused.PackedFusedChoice(None, False)
    assert _choice("efficient", "top_left") == _packed_fused.PackedFusedChoice(None, True)
    assert _choice("efficient", "bottom_right") == _packed_fused.PackedFusedChoice(None, False)
    assert _choice("efficient", "bottom_right", True) == _packed_fused.PackedFusedChoice(None)
    device[fused.FusedOp.EFFICIENT] = fused.OpCaps(
        op=fused.FusedOp.EFFICIENT, available=True, varlen=True, varlen_causal=True,
        mask_types=(("bottom_right", 2),),
    )  # fmt: skip
    assert _choice("efficient", "top_left", True) == _packed_fused.PackedFusedChoice(None, False)


# ----- the log-sum-exp layouts ------------------------------------------------------------------


def test_lse_layouts_round_trip_and_pad_with_inf() -> None:
    lengths = [3, 0, 1, 2]
    idx = TokenIndex.of(lengths, device="cpu")
    assert idx.batch.tolist() == [0, 0, 0, 2, 3, 3] and idx.position.tolist() == [0, 1, 2, 0, 0, 1]
    thd = torch.arange(12.0).reshape(6, 2)  # [Tq, H]
    tokens = to_kernel_lse(thd, "tokens", idx, width=3)
    assert tokens.shape == (2, 6) and tokens.is_contiguous() and tokens[1, 3] == 7.0
    batch = to_kernel_lse(thd.half(), "batch", idx, width=32)
    assert batch.shape == (4, 2, 32) and batch.dtype == torch.float32
    assert batch[0, 1, :3].tolist() == [1.0, 3.0, 5.0] and math.isinf(batch[0, 1, 3])
    assert torch.isinf(batch[1]).all() and batch[3, 0, :2].tolist() == [8.0, 10.0]
    for layout, kernel in (("tokens", tokens), ("batch", batch)):
        assert torch.equal(from_kernel_lse(kernel, layout, idx), thd)
    with pytest.raises(ValueError, match=r"LSE width 2 is below the longest sequence \(3\)"):
        to_kernel_lse(thd, "batch", idx, width=2)
    with pytest.raises(ValueError, match="unknown LSE layout 'rows'; one of tokens, batch"):
        from_kernel_lse(thd, "rows", idx)
    dense = torch.full((4, 2, 5, 1), -1.0)
    dense_stats_write(dense, thd, idx)
    assert torch.isinf(dense[0, :, 3:]).all() and torch.isinf(dense[1]).all()
    assert dense[2, :, 0, 0].tolist() == [6.0, 7.0]
    assert torch.equal(dense_stats_read(dense, idx), thd)


# ----- whole graphs through fake variable-length kernels ----------------------------------------


class FakeKernels:
    """The aten variable-length ops' contracts on the CPU: the math kernel in float64, the
    LSE in the layout the capabilities name (NaN in the padding a kernel leaves unwritten,
    -inf/NaN on rows without keys, as an unguarded kernel could write them)."""

    def __init__(self, layout: str) -> None:
        self.layout = layout
        self.calls: list[str] = []

    @staticmethod
    def _call(scale: float, causal: bool, bottom_right: bool) -> SdpaCall:
        if not causal:
            return SdpaCall(scale=scale)
        return SdpaCall(scale=scale, right_bound=0, bottom_right=bottom_right)

    def _forward(self, q: Any, k: Any, v: Any, cu_q: Any, cu_kv: Any, max_q: int,
                 call: SdpaCall, layout: str, width: int) -> tuple[Any, Any]:  # fmt: skip
        assert q.stride(-1) == 1 and k.stride(-1) == 1 and cu_q.dtype == torch.int32
        qd, kd, vd = (x.double() for x in (q, k, v))
        o, stats = varlen_math_forward(qd, kd, vd, cu_q, cu_kv, call, compute_dtype=torch.float64)
        empty = torch.isinf(stats[:, :, 0])
        o[empty] = float("nan")
        lse = stats[:, :, 0].masked_fill(empty, -math.inf).float()
        idx = TokenIndex.of(torch.diff(cu_q).tolist(), "cpu")
        if layout == "tokens":
            return o.to(q.dtype), lse.t().contiguous()
        out = torch.full((len(idx.lengths), q.shape[1], width), float("nan"))
        out[idx.batch, :, idx.position] = lse
        return o.to(q.dtype), out

    def _backward(self, do: Any, q: Any, k: Any, v: Any, o: Any, lse: Any, cu_q: Any,
                  cu_kv: Any, call: SdpaCall, layout: str,
                  width: int) -> tuple[Any, ...]:  # fmt: skip
        idx = TokenIndex.of(torch.diff(cu_q).tolist(), "cpu")
        if layout == "tokens":
            assert lse.shape == (q.shape[1], q.shape[0]) and lse.is_contiguous()
        else:
            assert lse.shape == (len(idx.lengths), q.shape[1], width)
            assert torch.isinf(lse).sum() >= lse.numel() - q.shape[0] * q.shape[1]
        stats = from_kernel_lse(lse, layout, idx).double()[..., None]
        qd, kd, vd, od, dod = (x.double() for x in (q, k, v, o, do))
        grads = varlen_math_backward(qd, kd, vd, od, dod, stats, cu_q, cu_kv, call,
                                     compute_dtype=torch.float64)  # fmt: skip
        grads[0][torch.isinf(stats[:, :, 0])] = float("nan")  # rows a kernel may leave unwritten
        return tuple(g.to(q.dtype) for g in grads)

    def flash_forward(self, q: Any, k: Any, v: Any, cu_q: Any, cu_kv: Any, max_q: int,
                      max_kv: int, *, scale: float, causal: bool) -> tuple[Any, ...]:  # fmt: skip
        self.calls.append("flash_forward")
        lengths = torch.diff(cu_q).tolist()
        assert max_q == max(lengths)
        if max_q == 1 and 0 in lengths:  # never flash's one-query-per-sequence GQA swap
            assert k.shape[1] == q.shape[1]
        o, lse = self._forward(q, k, v, cu_q, cu_kv, max_q, self._call(scale, causal, True),
                               self.layout, max_q)  # fmt: skip
        return o, lse, (torch.zeros(2), torch.zeros(()))

    def flash_backward(self, do: Any, q: Any, k: Any, v: Any, o: Any, lse: Any, rng: Any,
                       cu_q: Any, cu_kv: Any, max_q: int, max_kv: int, *, scale: float,
                       causal: bool) -> tuple[Any, ...]:  # fmt: skip
        self.calls.append("flash_backward")
        return self._backward(do, q, k, v, o, lse, cu_q, cu_kv, self._call(scale, causal, True),
                              self.layout, max_q)  # fmt: skip

    def efficient_forward(self, q: Any, k: Any, v: Any, cu_q: Any, cu_kv: Any, max_q: int,
                          max_kv: int, *, scale: float,
                          mask_type: int) -> tuple[Any, ...]:  # fmt: skip
        self.calls.append("efficient_forward")
        assert k.shape[1] == q.shape[1]  # GQA expanded for the efficient kernel
        call = self._call(scale, mask_type != 0, mask_type == 2)
        return self._forward(q, k, v, cu_q, cu_kv, max_q, call, "batch", -(-max_q // 32) * 32)

    def efficient_backward(self, do: Any, q: Any, k: Any, v: Any, o: Any, lse: Any, cu_q: Any,
                           cu_kv: Any, max_q: int, max_kv: int, *, scale: float,
                           mask_type: int) -> tuple[Any, ...]:  # fmt: skip
        self.calls.append("efficient_backward")
        call = self._call(scale, mask_type != 0, mask_type == 2)
        return self._backward(do, q, k, v, o, lse, cu_q, cu_kv, call, "batch",
                              -(-max_q // 32) * 32)  # fmt: skip


@pytest.fixture
def kernels(device: Any, monkeypatch: pytest.MonkeyPatch) -> FakeKernels:
    fake = FakeKernels("tokens")
    for name in ("flash_forward", "flash_backward", "efficient_forward", "efficient_backward"):
        op, direction = name.split("_")
        monkeypatch.setattr(_packed_fused, f"{op}_varlen_{direction}", getattr(fake, name))
    return fake


def _tokens(lengths: list[int]) -> Any:
    return torch.tensor(np.cumsum([0, *lengths]), dtype=torch.int32).reshape(-1, 1, 1, 1)


def _inputs(io: hg.DataType, lengths: Any, backward: bool, seed: int = 0) -> dict[str, Any]:
    dtype = {hg.DataType.HALF: torch.float16, hg.DataType.BFLOAT16: torch.bfloat16,
             hg.DataType.FLOAT: torch.float32}[io]  # fmt: skip
    gen = torch.Generator().manual_seed(seed)
    tq, tkv = sum(a for a, _ in lengths), sum(b for _, b in lengths)
    a = {
        "Q": torch.randn(tq + 2, H, D, generator=gen).to(dtype),  # 2 tokens no sequence holds
        "K": torch.randn(tkv, HK, D, generator=gen).to(dtype),
        "V": torch.randn(tkv, HK, D, generator=gen).to(dtype),
        "off_q": _tokens([x for x, _ in lengths]),
        "off_kv": _tokens([y for _, y in lengths]),
    }
    if backward:
        a["dO"] = torch.randn(tq, H, D, generator=gen).to(dtype)
    return a  # fmt: skip


def _run(engine: str, io: hg.DataType, mask: str, lengths: Any, backward: bool) -> dict[str, Any]:
    """Run the forward (and the backward fed its O and Stats) on ``engine``; the results."""
    g, t = _graph(io, False, mask, lengths)
    g.set_preferred_engine_id_ext(engine).build()
    assert g.get_plan_name() == engine
    a = _inputs(io, lengths, backward)
    copies = {k: v.clone() for k, v in a.items()}
    o = torch.full_like(a["Q"], 7.0)
    stats = torch.full((len(lengths), H, S, 1), float("nan"))
    pack = {t[n]: a[n] for n in ("Q", "K", "V", "off_q", "off_kv")}
    g.execute({**pack, t["O"]: o, t["Stats"]: stats}, None)
    for name, value in copies.items():
        assert torch.equal(a[name], value), name  # inputs are never written
    out = {"O": o, "Stats": stats}
    if backward:
        gb, tb = _graph(io, True, mask, lengths)
        gb.set_preferred_engine_id_ext(engine).build()
        tq = a["dO"].shape[0]
        feed = {tb[n]: a[n] for n in ("Q", "K", "V", "off_q", "off_kv", "dO")}
        feed.update({tb["O"]: o[:tq], tb["Stats"]: stats})
        results = gb.run(feed)
        out.update({n: results[tb[n]] for n in ("dQ", "dK", "dV")})
    return out


def _close(got: Any, want: Any, name: str) -> None:
    got, want = got.double(), want.double()
    assert torch.equal(torch.isinf(got), torch.isinf(want)), name
    finite = torch.isfinite(want)
    assert not torch.isnan(got).any(), name
    torch.testing.assert_close(got[finite], want[finite], rtol=2e-2, atol=2e-2, msg=name)


def _close_results(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Every result of a forward + backward :func:`_run` as :func:`_close` compares it."""
    for name in ("O", "Stats", "dQ", "dK", "dV"):
        _close(got[name], want[name], name)


@pytest.mark.parametrize(
    ("engine", "io", "mask"),
    [(FLASH, "fp16", "bottom_right"), (FLASH, "bf16", "none"), (EFFICIENT, "fp32", "top_left"),
     (EFFICIENT, "fp16", "none")],
)  # fmt: skip
def test_fused_plan_matches_the_math_engine(
    kernels: FakeKernels, engine: str, io: str, mask: str
) -> None:
    want = _run(MATH, IO[io], mask, LENGTHS, backward=True)
    got = _run(engine, IO[io], mask, LENGTHS, backward=True)
    op = "flash" if engine == FLASH else "efficient"
    assert kernels.calls == [f"{op}_forward", f"{op}_backward"]  # one launch per node
    tq = sum(a for a, _ in LENGTHS)
    assert (got["O"][tq:] == 7.0).all()  # tokens past the last sequence are left as they were
    _close_results(got, want)
    assert (got["O"][13:16] == 0).all() and torch.isinf(got["Stats"][4, :, :3]).all()  # Skv = 0
    assert (got["dK"][16:20] == 0).all()  # the keys of the sequence without queries


def test_batch_lse_layout_on_flash(kernels: FakeKernels, device: Any) -> None:
    """ROCm's flash keeps its LSE per sequence ``[B, H, max_q]``."""
    device[fused.FusedOp.FLASH] = CAPS[fused.FusedOp.FLASH].__class__(
        **{**CAPS[fused.FusedOp.FLASH].__dict__, "varlen_lse": "batch"}
    )
    kernels.layout = "batch"
    want = _run(MATH, IO["bf16"], "bottom_right", LENGTHS, backward=True)
    got = _run(FLASH, IO["bf16"], "bottom_right", LENGTHS, backward=True)
    _close_results(got, want)


def test_the_alignment_the_kernel_lacks_runs_the_math_step_unless_square(
    kernels: FakeKernels,
) -> None:
    """flash with a top-left causal mask: a call with Sq != Skv somewhere goes to the math
    step (no kernel call), a call whose sequences are all square runs the kernel."""
    want = _run(MATH, IO["fp16"], "top_left", LENGTHS, backward=True)
    got = _run(FLASH, IO["fp16"], "top_left", LENGTHS, backward=True)
    assert kernels.calls == []
    _close_results(got, want)
    want = _run(MATH, IO["fp16"], "top_left", SQUARE, backward=True)
    got = _run(FLASH, IO["fp16"], "top_left", SQUARE, backward=True)
    assert kernels.calls == ["flash_forward", "flash_backward"]
    _close_results(got, want)


def test_forward_and_backward_in_one_graph_keep_stats_private(kernels: FakeKernels) -> None:
    g = hg.Graph(io_data_type=hg.DataType.HALF, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    off = g.tensor(name="off", dim=[3, 1, 1, 1], data_type=hg.DataType.INT32)
    q, k, v, do = (g.tensor(name=n, dim=[2, H, S, D], stride=[S * H * D, D, H * D, 1])
                   for n in ("Q", "K", "V", "dO"))  # fmt: skip
    for x in (q, k, v, do):
        x.set_ragged_offset(off).set_ragged_offset_multiplier(H * D)
    o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=True, use_causal_mask_bottom_right=True)
    assert stats is not None
    grads = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", use_causal_mask_bottom_right=True)
    for x in (o, *grads):
        x.set_output(True).set_stride([S * H * D, D, H * D, 1]).set_ragged_offset(off)
        x.set_ragged_offset_multiplier(H * D)
    gen = torch.Generator().manual_seed(1)
    arrays = {x: torch.randn(9, H, D, generator=gen).half() for x in (q, k, v, do)}
    arrays[off] = _tokens([6, 3])
    results = {}
    for engine in (MATH, FLASH):
        g.set_preferred_engine_id_ext(engine).build()
        assert g.get_plan_name() == engine
        results[engine] = g.run(arrays)
    assert kernels.calls == ["flash_forward", "flash_backward"]
    for x in (o, *grads):
        _close(results[FLASH][x], results[MATH][x], x.name)


def test_single_query_sequences_beside_an_empty_one_take_expanded_heads_on_flash(
    kernels: FakeKernels,
) -> None:
    lengths = [(1, 3), (0, 2), (1, 1)]
    want = _run(MATH, IO["fp16"], "bottom_right", lengths, backward=True)
    got = _run(FLASH, IO["fp16"], "bottom_right", lengths, backward=True)
    assert kernels.calls == ["flash_forward", "flash_backward"]
    _close_results(got, want)


def test_element_offsets_starting_past_zero_in_a_longer_buffer(kernels: FakeKernels) -> None:
    """The layouts the math engine reads serve the fused path too: offsets in elements
    (multiplier 1), starting at token 2, in buffers longer than the last sequence, with a
    token stride wider than H·D (a padded row)."""
    width = H * D + 8  # each token's row padded by 8 elements
    g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    off = g.tensor(name="off", dim=[4, 1, 1, 1], data_type=hg.DataType.INT64)
    q, k, v = (g.tensor(name=n, dim=[3, H, S, D], stride=[S * width, D, width, 1]) for n in "QKV")
    for x in (q, k, v):
        x.set_ragged_offset(off)  # multiplier 1: element offsets
    o, _ = g.sdpa(q, k, v, name="fwd", generate_stats=False, use_causal_mask_bottom_right=True)
    o.set_output(True).set_stride([S * width, D, width, 1]).set_ragged_offset(off)
    gen = torch.Generator().manual_seed(2)
    tokens = [2, 7, 8, 14]  # sequences of 5, 1 and 6 tokens after 2 no sequence holds
    arrays = {x: torch.randn(16 * width, generator=gen).bfloat16() for x in (q, k, v)}
    arrays[off] = torch.tensor(tokens, dtype=torch.int64).reshape(4, 1, 1, 1) * width
    results = {}
    for engine in (MATH, FLASH):
        g.set_preferred_engine_id_ext(engine).build()
        assert g.get_plan_name() == engine
        out = torch.full((16 * width,), 3.0, dtype=torch.bfloat16)
        g.execute({**arrays, o: out}, None)
        results[engine] = out.view(16, width)
    assert kernels.calls == ["flash_forward"]
    got, want = results[FLASH], results[MATH]
    assert (got[:2] == 3.0).all() and (got[14:] == 3.0).all() and (got[:, H * D :] == 3.0).all()
    _close(got[2:14, : H * D], want[2:14, : H * D], "O")
