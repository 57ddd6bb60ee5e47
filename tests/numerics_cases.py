"""Feature configurations and the runner of the engine numerics suite (``test_numerics_suite.py``).

Everything goes through the public graph API: a :class:`Case` becomes a graph (``fwd``: one SDPA
forward node; ``bwd``: one SDPA backward node fed with O and Stats; ``fwd_bwd``: a forward node
whose O and Stats feed a backward node), the graph is built with the engine under test preferred
(``set_preferred_engine_id_ext(engine)``, and ``get_plan_name()`` must be that engine), every
output buffer is poisoned with NaN, and after ``execute`` every output must be fully written,
every input bitwise unchanged, and the results must match the float64 torch-autograd reference
of ``sdpa_autograd_reference.py`` (which shares no code with any engine).

Tolerances (:data:`TOLERANCE`), as ``max|engine − reference| / max(1, max|reference|)`` per
output, with ``+inf`` Stats of keyless rows required at exactly the same places:

============  =========  ===========  ===================================================
io type       compute    tolerance    why (worst seen over all cases, both engines)
============  =========  ===========  ===================================================
DOUBLE        DOUBLE     1e-12        float64 rounding only (1e-15)
DOUBLE        FLOAT      1e-5         float32 compute (9e-7)
FLOAT         either     1e-5         float32 storage and compute (7e-7)
HALF          either     3e-3         outputs rounded to 11 bits, bwd reads O rounded (8e-4)
BFLOAT16      either     2.5e-2       outputs rounded to 8 bits, bwd reads O rounded (9e-3)
============  =========  ===========  ===================================================

Stats are stored as FLOAT (hipDNN's type), except in DOUBLE-io graphs where they are declared
DOUBLE so that float64 runs are checked to float64 precision. The reference is always evaluated
on the inputs *after* rounding them to the io type, so the tolerance only covers what the engine
does, not the input quantisation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
from sdpa_autograd_reference import reference_backward, reference_forward

import hipdnn_graph as hg

DT = hg.DataType
MODES = ("fwd", "bwd", "fwd_bwd")
NP_TYPE: dict[DT, Any] = {
    DT.FLOAT: np.float32,
    DT.DOUBLE: np.float64,
    DT.HALF: np.float16,
    DT.BFLOAT16: ml_dtypes.bfloat16,
}
TOLERANCE: dict[tuple[DT, DT], float] = {
    (DT.DOUBLE, DT.DOUBLE): 1e-12,
    (DT.DOUBLE, DT.FLOAT): 1e-5,
    (DT.FLOAT, DT.FLOAT): 1e-5,
    (DT.FLOAT, DT.DOUBLE): 1e-5,
    (DT.HALF, DT.FLOAT): 3e-3,
    (DT.HALF, DT.DOUBLE): 3e-3,
    (DT.BFLOAT16, DT.FLOAT): 2.5e-2,
    (DT.BFLOAT16, DT.DOUBLE): 2.5e-2,
}
#: exactly representable in float32, so engines that keep scales in float32 lose nothing
SCALE_VALUE = 0.375
DROPOUT_P = 0.2
DROPOUT_SCALE = 1.25  # 1 / (1 - p)


def stats_type(io: DT) -> DT:
    """Stats are FLOAT (hipDNN's type), DOUBLE in float64 graphs so they lose nothing."""
    return DT.DOUBLE if io == DT.DOUBLE else DT.FLOAT


@dataclass(frozen=True)
class Case:
    """One feature configuration.

    Shapes: Q ``[b,h,sq,d]``, K ``[b,hk,skv,d]``, V ``[b,hv,skv,dv]``.
    """

    name: str
    b: int = 2
    h: int = 4
    hk: int | None = None
    hv: int | None = None
    sq: int = 12
    skv: int = 12
    d: int = 8
    dv: int | None = None
    causal: bool = False
    causal_bottom_right: bool = False
    left_bound: int | None = None
    right_bound: int | None = None
    bottom_right_band: bool = False
    sliding_window: int | None = None
    #: bias shape (dBias has the same shape in backward graphs)
    bias: tuple[int, ...] | None = None
    dbias: bool = True
    #: per-batch valid lengths (padding mask)
    seq_len_q: tuple[int, ...] | None = None
    seq_len_kv: tuple[int, ...] | None = None
    #: dropout mask shape, e.g. ``(b, 1, sq, skv)``
    dropout: tuple[int, ...] | None = None
    #: "value" (attn_scale float), "tensor" (constant pass-by-value tensor), "runtime"
    #: (runtime pass-by-value tensor given in the pack), "default" (1/sqrt(D))
    scale: str = "value"
    alibi: bool = False
    #: memory layout of Q, K, V, O, dO and the gradients: "bhsd" (packed) or "bshd"
    #: (dims stay [B,H,S,D], strides [S·H·D, D, H·D, 1], as in most training code)
    layout: str = "bhsd"
    seed: int = 0
    notes: str = field(default="", compare=False)

    @property
    def heads_k(self) -> int:
        return self.hk or self.h

    @property
    def heads_v(self) -> int:
        return self.hv or self.h

    @property
    def dim_v(self) -> int:
        return self.dv or self.d

    def scale_number(self) -> float:
        return 1 / math.sqrt(self.d) if self.scale == "default" else SCALE_VALUE

    def window(self) -> dict[str, Any]:
        """The mask keywords of the reference, derived here independently of the graph code."""
        bottom_right, left, right = False, self.left_bound, self.right_bound
        if self.causal:
            right = 0
        if self.causal_bottom_right:
            bottom_right, right = True, 0
        if self.bottom_right_band:
            bottom_right = True
        if self.sliding_window is not None:
            left = self.sliding_window
        return {"bottom_right": bottom_right, "left_bound": left, "right_bound": right}


#: the feature configurations (about one per feature of HIPDNN_SPEC.md §6, plus combinations)
CASES: list[Case] = [
    Case("plain"),
    Case("gqa_hk_ne_hv", h=4, hk=2, hv=1),
    Case("mqa", h=4, hk=1, hv=1),
    Case("d_ne_dv", d=8, dv=12),
    Case("sq_ne_skv", sq=10, skv=15),
    Case("bias_full", bias=(2, 4, 12, 12)),
    Case("bias_heads", bias=(1, 4, 12, 12), sq=12, skv=12),
    Case("bias_batch_row", bias=(2, 1, 1, 12)),
    Case("bias_2d", bias=(12, 12)),
    Case("bias_no_dbias", bias=(1, 1, 12, 12), dbias=False),
    Case("causal_top_left", sq=12, skv=16, causal=True),
    Case("causal_bottom_right", sq=10, skv=16, causal_bottom_right=True),
    Case("band_top_left", left_bound=3, right_bound=2),
    Case("band_bottom_right", sq=9, skv=14, left_bound=4, right_bound=1, bottom_right_band=True),
    Case("sliding_window", sliding_window=4, causal=True),
    Case("padding", seq_len_q=(7, 12), seq_len_kv=(9, 5)),
    Case("dropout", dropout=(2, 1, 12, 12)),
    Case("scale_tensor", scale="tensor"),
    Case("scale_runtime", scale="runtime"),
    Case("scale_default", scale="default"),
    Case("alibi", alibi=True, causal=True),
    Case(
        "fully_masked_rows",
        sq=12,
        skv=6,
        causal_bottom_right=True,
        notes="bottom-right causal with Sq > Skv: the first 6 query rows see no key",
    ),
    Case("padding_empty_batch", seq_len_q=(12, 5), seq_len_kv=(0, 8), causal=True),
    # long enough for several query blocks, so block edges and skipped key blocks are exercised
    Case("long_causal", b=1, h=2, sq=200, skv=200, d=16, causal=True),
    Case(
        "long_band_padding_gqa",
        b=2,
        h=4,
        hk=1,
        hv=2,
        sq=150,
        skv=230,
        left_bound=40,
        right_bound=10,
        bottom_right_band=True,
        seq_len_q=(150, 97),
        seq_len_kv=(230, 180),
        bias=(1, 4, 150, 230),
    ),
    Case("bshd_layout", h=4, hk=2, hv=2, sq=12, skv=15, causal=True, layout="bshd"),
    Case("long_sliding_window", b=1, h=2, sq=260, skv=260, sliding_window=50, causal=True),
    Case(
        "everything",
        h=4,
        hk=2,
        hv=1,
        sq=10,
        skv=13,
        dv=6,
        bias=(1, 4, 10, 13),
        seq_len_q=(10, 6),
        seq_len_kv=(11, 13),
        dropout=(2, 4, 10, 13),
        scale="runtime",
        alibi=True,
        left_bound=5,
        right_bound=0,
    ),
]
CASES_BY_NAME = {c.name: c for c in CASES}


_LAYOUT_SLOTS = frozenset({"Q", "K", "V", "O", "dO", "dQ", "dK", "dV"})


def layout_strides(dim: list[int], layout: str) -> list[int]:
    """Strides of a ``[B,H,S,D]`` tensor stored in ``layout``."""
    _, h, s, d = dim
    return [s * h * d, d, h * d, 1] if layout == "bshd" else [h * s * d, s * d, d, 1]


def in_layout(array: np.ndarray[Any, Any], layout: str) -> np.ndarray[Any, Any]:
    """The same values, stored in ``layout``."""
    if layout != "bshd":
        return array
    return np.ascontiguousarray(array.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)


@dataclass
class Built:
    graph: hg.Graph
    tensors: dict[str, hg.TensorAttributes]
    inputs: list[str]
    outputs: list[str]


def _attributes(case: Case, g: hg.Graph, t: dict[str, hg.TensorAttributes], obj: Any) -> Any:
    """Apply the case's features to an SdpaAttributes or SdpaBackwardAttributes."""
    backward = isinstance(obj, hg.SdpaBackwardAttributes)
    if case.causal:
        obj.set_causal_mask(True)
    if case.causal_bottom_right:
        obj.set_causal_mask_bottom_right(True)
    if case.left_bound is not None:
        obj.set_diagonal_band_left_bound(case.left_bound)
    if case.right_bound is not None:
        obj.set_diagonal_band_right_bound(case.right_bound)
    if case.bottom_right_band:
        obj.set_diagonal_alignment(hg.DiagonalAlignment.BOTTOM_RIGHT)
    if case.sliding_window is not None:
        obj.set_sliding_window_length(case.sliding_window)
    if case.alibi:
        obj.set_alibi_mask(True)
    if case.bias is not None:
        obj.set_bias(t["Bias"])
        if backward and case.dbias:
            obj.set_dbias(t["dBias"])
    if case.seq_len_q is not None:
        obj.set_padding_mask(True).set_seq_len_q(t["SeqLenQ"]).set_seq_len_kv(t["SeqLenKV"])
    if case.dropout is not None:
        if backward:
            obj.set_dropout(t["DropoutMask"], t["DropoutScale"], t["DropoutScaleInv"])
        else:
            obj.set_dropout(t["DropoutMask"], t["DropoutScale"])
    if case.scale == "value":
        obj.set_attn_scale(SCALE_VALUE)
    elif case.scale in ("tensor", "runtime"):
        obj.set_attn_scale(t["Scale"])
    return obj


def build(case: Case, mode: str, io: DT, compute: DT, engine: str) -> Built:
    """Declare the case's graph for ``mode``, prefer ``engine`` and build it."""
    g = hg.Graph(
        name=f"{case.name}_{mode}",
        io_data_type=io,
        intermediate_data_type=stats_type(io),
        compute_data_type=compute,
    )
    b, h, sq, skv, d = case.b, case.h, case.sq, case.skv, case.d

    def data(name: str, dim: list[int]) -> hg.TensorAttributes:
        return g.tensor(name=name, dim=dim, stride=layout_strides(dim, case.layout))

    t: dict[str, hg.TensorAttributes] = {
        "Q": data("Q", [b, h, sq, d]),
        "K": data("K", [b, case.heads_k, skv, d]),
        "V": data("V", [b, case.heads_v, skv, case.dim_v]),
    }
    inputs = ["Q", "K", "V"]
    if case.bias is not None:
        t["Bias"] = g.tensor(name="Bias", dim=list(case.bias))
        inputs.append("Bias")
        if mode != "fwd" and case.dbias:
            t["dBias"] = g.tensor(name="dBias", dim=list(case.bias))
    if case.seq_len_q is not None:
        for n in ("SeqLenQ", "SeqLenKV"):
            t[n] = g.tensor(name=n, dim=[b, 1, 1, 1], data_type=DT.INT32)
            inputs.append(n)
    if case.dropout is not None:
        t["DropoutMask"] = g.tensor(name="DropoutMask", dim=list(case.dropout))
        t["DropoutScale"] = g.tensor(hg.TensorAttributes(name="DropoutScale"))
        t["DropoutScale"].set_value(DROPOUT_SCALE)
        t["DropoutScaleInv"] = g.tensor(hg.TensorAttributes(name="DropoutScaleInv"))
        t["DropoutScaleInv"].set_value(1 - DROPOUT_P)
        inputs.append("DropoutMask")
    if case.scale == "tensor":
        t["Scale"] = g.tensor(hg.TensorAttributes(name="Scale").set_value(SCALE_VALUE))
    elif case.scale == "runtime":
        t["Scale"] = g.tensor(
            name="Scale", dim=[1], stride=[1], data_type=DT.FLOAT, is_pass_by_value=True
        )
        inputs.append("Scale")

    outputs: list[str] = []
    if mode in ("fwd", "fwd_bwd"):
        fwd = _attributes(case, g, t, hg.SdpaAttributes().set_name("fwd"))
        o, stats = g.sdpa(t["Q"], t["K"], t["V"], fwd.set_generate_stats(True))
        assert stats is not None
        t["O"], t["Stats"] = o, stats
        stats.set_data_type(stats_type(io))
        o.set_output(True)
        outputs.append("O")
        if mode == "fwd":
            stats.set_output(True)
            outputs.append("Stats")
    else:
        t["O"] = data("O", [b, h, sq, case.dim_v])
        t["Stats"] = g.tensor(name="Stats", dim=[b, h, sq, 1], data_type=stats_type(io))
        inputs += ["O", "Stats"]
    if mode in ("bwd", "fwd_bwd"):
        t["dO"] = data("dO", [b, h, sq, case.dim_v])
        inputs.append("dO")
        bwd = _attributes(case, g, t, hg.SdpaBackwardAttributes().set_name("bwd"))
        dq, dk, dv = g.sdpa_backward(t["Q"], t["K"], t["V"], t["O"], t["dO"], t["Stats"], bwd)
        t["dQ"], t["dK"], t["dV"] = dq, dk, dv
        outputs += ["dQ", "dK", "dV"]
        if "dBias" in t:
            t["dBias"].set_output(True)
            outputs.append("dBias")
        for n in ("dQ", "dK", "dV"):
            t[n].set_output(True)
    output_dims = {
        "O": [b, h, sq, case.dim_v],
        "dQ": [b, h, sq, d],
        "dK": [b, case.heads_k, skv, d],
        "dV": [b, case.heads_v, skv, case.dim_v],
    }
    for n in outputs:
        if n in _LAYOUT_SLOTS:
            t[n].set_stride(layout_strides(output_dims[n], case.layout))
    g.set_preferred_engine_id_ext(engine)
    g.build([hg.HeuristicMode.FALLBACK])
    return Built(g, t, inputs, outputs)


def make_inputs(case: Case, mode: str, io: DT) -> dict[str, Any]:
    """Random inputs, already rounded to the io type (runtime scale as a Python float)."""
    rng = np.random.default_rng(case.seed)
    dtype = NP_TYPE[io]

    def rnd(*shape: int, scale: float = 1.0) -> Any:
        return (rng.standard_normal(shape) * scale).astype(dtype)

    b, h, sq, skv = case.b, case.h, case.sq, case.skv
    x: dict[str, Any] = {
        "Q": rnd(b, h, sq, case.d),
        "K": rnd(b, case.heads_k, skv, case.d),
        "V": rnd(b, case.heads_v, skv, case.dim_v),
        "dO": rnd(b, h, sq, case.dim_v),
    }
    if case.bias is not None:
        x["Bias"] = rnd(*case.bias, scale=0.5)
    if case.seq_len_q is not None:
        assert case.seq_len_kv is not None
        x["SeqLenQ"] = np.array(case.seq_len_q, np.int32).reshape(b, 1, 1, 1)
        x["SeqLenKV"] = np.array(case.seq_len_kv, np.int32).reshape(b, 1, 1, 1)
    if case.dropout is not None:
        x["DropoutMask"] = (rng.random(case.dropout) >= DROPOUT_P).astype(dtype)
    if case.scale == "runtime":
        x["Scale"] = SCALE_VALUE
    if mode == "bwd":
        o, stats = reference_forward(x["Q"], x["K"], x["V"], **_reference_kwargs(case, x))
        x["O"] = o.astype(dtype)
        x["Stats"] = stats.astype(NP_TYPE[stats_type(io)])
    return x


def _reference_kwargs(case: Case, x: dict[str, Any]) -> dict[str, Any]:
    kw: dict[str, Any] = {"scale": case.scale_number(), "alibi": case.alibi, **case.window()}
    if case.bias is not None:
        kw["bias"] = x["Bias"]
    if case.seq_len_q is not None:
        kw["seq_len_q"], kw["seq_len_kv"] = x["SeqLenQ"], x["SeqLenKV"]
    if case.dropout is not None:
        kw["dropout_mask"], kw["dropout_scale"] = x["DropoutMask"], DROPOUT_SCALE
    return kw


def expected(case: Case, mode: str, x: dict[str, Any]) -> dict[str, np.ndarray[Any, Any]]:
    """float64 reference values of every output of the graph."""
    kw = _reference_kwargs(case, x)
    want: dict[str, np.ndarray[Any, Any]] = {}
    if mode in ("fwd", "fwd_bwd"):
        want["O"], want["Stats"] = reference_forward(x["Q"], x["K"], x["V"], **kw)
    if mode in ("bwd", "fwd_bwd"):
        dbias_shape = case.bias if case.bias is not None and case.dbias else None
        dq, dk, dv, dbias = reference_backward(
            x["Q"], x["K"], x["V"], None, x["dO"], None, dbias_shape=dbias_shape, **kw
        )
        want.update({"dQ": dq, "dK": dk, "dV": dv})
        if dbias_shape is not None:
            assert dbias is not None
            want["dBias"] = dbias
    return want


def compare(name: str, got: Any, want: np.ndarray[Any, Any], tolerance: float) -> None:
    """Assert ``got`` matches ``want`` within ``tolerance`` (relative to max(1, max|want|))."""
    got64 = np.asarray(got).astype(np.float64)
    assert got64.shape == want.shape, f"{name}: shape {got64.shape} != {want.shape}"
    assert not np.isnan(got64).any(), f"{name}: NaN left in the output (not written, or 0/0)"
    inf_got, inf_want = np.isinf(got64), np.isinf(want)
    assert np.array_equal(inf_got, inf_want), f"{name}: +inf at different places"
    if inf_want.any():
        assert np.array_equal(got64[inf_got], want[inf_want]), f"{name}: inf signs differ"
    finite = ~inf_want
    if not finite.any():
        return
    err = float(np.abs(got64[finite] - want[finite]).max())
    bound = tolerance * max(1.0, float(np.abs(want[finite]).max()))
    assert err <= bound, f"{name}: max error {err:.3e} > {bound:.3e}"


def check_exact_zeros(case: Case, mode: str, results: dict[str, np.ndarray[Any, Any]]) -> None:
    """Padded query rows, padded key rows and keyless query rows must be exactly zero."""
    if mode == "fwd":
        return
    for bi in range(case.b):
        lq = case.seq_len_q[bi] if case.seq_len_q is not None else case.sq
        lkv = case.seq_len_kv[bi] if case.seq_len_kv is not None else case.skv
        assert not results["dQ"][bi, :, lq:].any(), f"dQ rows >= seq_len_q[{bi}] not zero"
        assert not results["dK"][bi, :, lkv:].any(), f"dK rows >= seq_len_kv[{bi}] not zero"
        assert not results["dV"][bi, :, lkv:].any(), f"dV rows >= seq_len_kv[{bi}] not zero"
    if case.causal_bottom_right and case.sq > case.skv and case.seq_len_q is None:
        keyless = case.sq - case.skv
        assert not results["dQ"][:, :, :keyless].any(), "dQ of keyless rows not zero"


def run_case(case: Case, mode: str, io: DT, compute: DT, engine: str) -> None:
    """Build, execute on ``engine`` and check one configuration (raises AssertionError)."""
    built = build(case, mode, io, compute, engine)
    g, t = built.graph, built.tensors
    assert g.get_plan_name() == engine
    x = make_inputs(case, mode, io)
    given = {n: in_layout(x[n], case.layout) if n in _LAYOUT_SLOTS else x[n] for n in built.inputs}
    pack: dict[Any, Any] = {t[n]: given[n] for n in built.inputs}
    snapshot = {n: np.asarray(given[n]).tobytes() for n in built.inputs}
    results: dict[str, np.ndarray[Any, Any]] = {}
    for n in built.outputs:
        dtype = NP_TYPE[stats_type(io) if n == "Stats" else io]
        results[n] = np.full(t[n].get_dim(), np.nan, dtype)
        if n in _LAYOUT_SLOTS:
            results[n] = in_layout(results[n], case.layout)
        pack[t[n]] = results[n]
    workspace = np.empty(g.get_workspace_size(), np.uint8) if g.get_workspace_size() else None
    g.execute(pack, workspace)
    for n in built.inputs:
        assert np.asarray(given[n]).tobytes() == snapshot[n], f"input {n} was modified"
    want = expected(case, mode, x)
    assert set(results) <= set(want), (sorted(want), sorted(results))
    tolerance = TOLERANCE[(io, compute)]
    for n in built.outputs:
        compare(n, results[n], want[n], tolerance)
    check_exact_zeros(case, mode, results)
