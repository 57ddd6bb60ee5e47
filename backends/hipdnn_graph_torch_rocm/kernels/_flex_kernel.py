"""The compiled FlexAttention forward or backward of one :class:`~._flex_spec.FlexSpec`,
:class:`FlexKernel`: built (compiled, warmed up and checked) once, then called often without
compiling. Part of :mod:`.flex`, which describes the kernels and caches them per spec.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

import torch

from . import _flex_blocks as blocks
from . import _flex_mods as mods
from ._flex_compiled import (
    GRAPHS,
    _backward_body,
    _forward_body,
    _padding_blocks_body,
    distinct,
    fresh,
    kernel_options,
    no_recompile,
    row_major,
    trace_graphs,
)
from ._flex_inplace import disagreement, stores_into_destinations
from ._flex_spec import FlexSpec, dims4
from ._fused_common import reduce_to
from .call import SdpaInputs

__all__ = ["FlexKernel"]

Tensor = torch.Tensor


@dataclass
class FlexKernel:
    """The compiled forward or backward of one :class:`FlexSpec` (built once, called often).

    Attributes:
        backward_mode: ``"given"`` (flex's backward operator reads the given O and Stats) or
            ``"recompute"`` (the forward is recomputed through autograd); ``""`` for forwards.
        build_seconds: wall time of the compilation and warm-up run.
        notes: why the given-O path was not taken, when it was not.
        stored_in_place: the gradients (``"dq"``, ``"dk"``, ``"dv"``) the given-O backward's
            kernel stores straight into their destination buffers, with no copy kernel after it
            (:mod:`._flex_inplace`); empty where the build kept the copies (see ``notes``).
    """

    spec: FlexSpec
    backward_mode: str = ""
    build_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    stored_in_place: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        t0 = time.perf_counter()
        self._building = True
        s = self.spec
        self._dev = torch.device(s.device)
        self._f = s.features
        self._tag = f"flex_{next(_TAGS)}"
        self._graphs = self._tag  # the key of the backward's traced modifiers in GRAPHS
        self._gqa = s.hk != s.h
        scale = s.call.scale
        self._scale = 1.0 if scale is None else float(scale)
        self._scale_t = (
            torch.ones((), dtype=torch.float32, device=self._dev) if scale is None else None
        )
        self._slopes = _alibi_slopes(s.h, self._dev) if s.call.alibi else None
        self._len_q: Tensor | None = None
        self._len_kv: Tensor | None = None
        if s.padding:
            self._len_q = torch.full((s.b,), s.sq, dtype=torch.int32, device=self._dev)
            self._len_kv = torch.full((s.b,), s.skv, dtype=torch.int32, device=self._dev)
        self._mask_mod = mods.mask_mod(self._f, self._len_q, self._len_kv)
        cpu = self._dev.type == "cpu"
        inductor = not cpu or (s.forward and not s.want_stats)
        self._backend = "inductor" if inductor else "aot_eager"
        self._padding_blocks: Callable[..., tuple[Tensor, ...]] | None = None
        if s.padding:
            self._padding_blocks = self._closed_form_blocks()
        self._static_mask = None if s.padding else self._make_block_mask()
        warm = self._warm_inputs()
        self._expand_kv = False
        self._fwd_options: tuple[tuple[str, Any], ...] = ()  # forward tiles ((): flex's own)
        if s.forward:
            self._build_forward(warm)
        else:
            self._options = kernel_options(*warm[:3])
            self._build_backward(warm)
        self._building = False
        self.build_seconds = time.perf_counter() - t0

    # ----- build helpers -----
    def _compile(self, body: Callable[..., Any]) -> Callable[..., Any]:
        return self._compile_as(body, "")

    def _compile_as(self, body: Callable[..., Any], suffix: str) -> Callable[..., Any]:
        return torch.compile(
            fresh(body, self._tag + suffix), backend=self._backend, fullgraph=True, dynamic=False
        )

    def _closed_form_blocks(self) -> Callable[..., tuple[Tensor, ...]] | None:
        """The padding block mask's construction from the lengths (:mod:`._flex_blocks`),
        compiled on GPU and checked against ``create_block_mask`` on two sets of lengths; None
        (``create_block_mask`` on every call, slower) where it does not compile or differs."""
        s = self.spec
        assert self._len_q is not None and self._len_kv is not None
        build = _padding_blocks_body
        try:
            if self._dev.type != "cpu":
                build = self._compile(_padding_blocks_body)
            for lq, lk in _probe_lengths(s):
                self._len_q.copy_(torch.tensor(lq))
                self._len_kv.copy_(torch.tensor(lk))
                got = self._block_mask_of(build(self._len_q, self._len_kv, self._f))
                if not _same_blocks(got, self._created_block_mask()):
                    raise ValueError(f"differs from create_block_mask for lengths {lq}, {lk}")
        except Exception as e:
            self.notes.append(f"padding block mask from create_block_mask: {_why(e)}")
            return None
        return build

    def _block_mask_of(self, parts: Sequence[Tensor]) -> Any:
        return blocks.as_block_mask(self.spec.sq, self.spec.skv, parts, self._mask_mod)

    def _make_block_mask(self) -> Any:
        build = self._padding_blocks
        if build is None:
            return self._created_block_mask()
        with no_recompile(self._building):
            return self._block_mask_of(build(self._len_q, self._len_kv, self._f))

    def _created_block_mask(self) -> Any:
        from torch.nn.attention.flex_attention import create_block_mask

        s = self.spec
        b = s.b if s.padding else None
        return create_block_mask(self._mask_mod, b, None, s.sq, s.skv, device=str(self._dev))

    def _warm_inputs(self) -> list[Any]:
        s, dev, dt = self.spec, self._dev, self.spec.dtype
        g = torch.Generator(device="cpu").manual_seed(0)

        def rn(*shape: int) -> Tensor:
            return torch.randn(*shape, generator=g).to(device=dev, dtype=dt)

        q, k, v = rn(s.b, s.h, s.sq, s.d), rn(s.b, s.hk, s.skv, s.d), rn(s.b, s.hv, s.skv, s.dv)
        o, do = rn(s.b, s.h, s.sq, s.dv), rn(s.b, s.h, s.sq, s.dv)
        stats = torch.zeros(s.b, s.h, s.sq, 1, dtype=torch.float32, device=dev)
        bias = None
        if s.bias_shape is not None:
            bias = rn(*s.bias_shape).to(s.bias_dtype or dt)
        return [q, k, v, o, do, stats, bias]

    def _warm_lens(self) -> dict[str, Tensor]:
        s = self.spec
        if not s.padding:
            return {}
        return {
            "seq_len_q": torch.full((s.b, 1, 1, 1), s.sq, dtype=torch.int32, device=self._dev),
            "seq_len_kv": torch.full((s.b, 1, 1, 1), s.skv, dtype=torch.int32, device=self._dev),
        }

    def _build_forward(self, warm: list[Any]) -> None:
        """Native GQA first; where flex's forward does not compile with it (seen on the H200 for
        GQA/MQA with Sq = 96 and a causal or window mask), K/V heads are expanded instead. Where
        the default tiles need more shared memory than the device has (seen on the H200 with an
        fp32 bias on bf16 inputs), smaller tiles are tried."""
        kw = {"scale": self._scale, "bias": warm[6], **self._warm_lens()}
        layouts = (False, True) if self._gqa else (False,)
        choices = (self.spec.tiles,) if self.spec.tiles else ((), _SMALL_FWD_TILES)
        attempts = [(expand, tiles) for expand in layouts for tiles in choices]
        for n, (expand, tiles) in enumerate(attempts, start=1):
            self._expand_kv, self._fwd_options = expand, tiles
            try:
                self._fwd = self._compile(_forward_body)
                self.forward(*warm[:3], **kw)
            except Exception as e:
                if n == len(attempts):
                    raise
                self.notes.append(f"forward (expand={expand}, {dict(tiles)}): {_why(e)}")
                continue
            if expand:
                self.notes.append("K/V heads expanded: flex's GQA forward did not compile")
            if tiles:
                self.notes.append(f"smaller forward tiles: {dict(tiles)}")
            return

    def _kv(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        if not self._expand_kv:
            return k, v
        g = self.spec.h // self.spec.hk
        return k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)

    def _build_backward(self, warm: list[Any]) -> None:
        q, k, v, o, do, stats, bias = warm
        kw = {"scale": self._scale, "bias": bias, **self._warm_lens()}
        s = self.spec
        base = {**self._options, **dict(s.tiles)}
        attempts: list[tuple[str, dict[str, Any]]]
        if s.dbias_shape is None:
            grad_dtype = None
            attempts = [("given", {}), ("recompute", {})]
        else:  # the bias buffer keeps its type; tiles shrink where flex's defaults do not fit
            grad_dtype = self._bias_dtype
            attempts = [("given", tiles) for tiles in _BACKWARD_TILES]
            attempts += [("recompute", tiles) for tiles in (_BACKWARD_TILES[0], _SMALL_TILES)]
        for mode, extra in attempts:
            self._options = {**base, **extra}
            # a recomputed forward's autograd backward takes its tiles from the forward's options
            self._fwd_options = tuple(extra.items())
            try:
                self.backward_mode = mode
                if mode == "given":
                    self._prepare_given(bias)
                else:
                    self._expand_kv = False
                    self._fwd = self._compile(_forward_body)
                self.backward(q, k, v, o, do, stats, **kw)
                if extra:
                    self.notes.append(f"backward tiles {extra}: flex's defaults did not fit")
                if mode == "given" and self._backend == "inductor":
                    self._store_in_place(warm, kw)
                return
            except Exception as e:  # record why, try the next way
                self.notes.append(f"{mode} ({grad_dtype}, {extra}): {_why(e)}")
        raise RuntimeError("flex backward did not compile: " + " | ".join(self.notes))

    def _prepare_given(self, bias: Tensor | None, suffix: str = "") -> None:
        """Trace the modifiers (under a key of their own: dynamo takes a traced graph into one
        compiled body only) and compile the backward body."""
        s = self.spec
        bc = self._bias(bias, s.dbias_shape is not None)
        score_bufs = [x for x in (bc, self._slopes, self._scale_t) if x is not None]
        mask_bufs = [x for x in (self._len_q, self._len_kv) if x is not None]
        names = (bc is not None, self._slopes is not None, self._scale_t is not None)
        self._graphs = self._tag + suffix
        GRAPHS[self._graphs] = trace_graphs(self._f, score_bufs, mask_bufs, names, s.dtype,
                                            self._dev)  # fmt: skip
        self._bwd = self._compile_as(_backward_body, suffix)

    def _store_in_place(self, warm: list[Any], kw: dict[str, Any]) -> None:
        """Compile the backward body again with the gradients stored straight into their
        destinations (:mod:`._flex_inplace`) and keep it where it agrees with the copying body
        on the warm inputs (:func:`~._flex_inplace.disagreement`: dQ, dK and dV bit for bit
        where the copying body repeats its bits, dBias within its atomic sums' run-to-run
        variation, measured over :data:`_PROBE_RUNS` runs of the copying body); else keep the
        copying body and say why in the notes."""
        q, k, v, o, do, stats, bias = warm
        s = self.spec
        shapes = [(s.b, s.h, s.sq, s.d), (s.b, s.hk, s.skv, s.d), (s.b, s.hv, s.skv, s.dv)]
        dtypes = s.grad_dtypes[:3] if s.grad_dtypes else (s.dtype,) * 3

        def run(fill: float) -> list[Tensor | None]:
            outs = [torch.full(sh, fill, dtype=dt, device=self._dev)
                    for sh, dt in zip(shapes, dtypes, strict=True)]  # fmt: skip
            db_out = None
            if s.dbias_shape is not None:
                db_out = torch.full(s.dbias_shape, fill, dtype=torch.float32, device=self._dev)
            got = self.backward(q, k, v, o, do, stats, **kw, dq_out=outs[0], dk_out=outs[1],
                                dv_out=outs[2], dbias_out=db_out)  # fmt: skip
            return [*outs, got[3]]

        copying, graphs = self._bwd, self._graphs
        fills = iter(_PROBE_FILLS)
        try:
            expected = [run(next(fills)) for _ in range(_PROBE_RUNS)]
            self._prepare_given(bias, "_stores")
            with stores_into_destinations() as stored:
                got = [run(next(fills)) for _ in range(_PROBE_RUNS - 1)]
            why = disagreement(expected, got, ("dq", "dk", "dv", "dbias"), atomic=("dbias",))
        except Exception as e:
            self._keep_copying(copying, graphs, _why(e))
            return
        if why is not None:
            self._keep_copying(copying, graphs, why)
            return
        if not stored:
            self._keep_copying(copying, graphs, "no destination fits")
            return
        GRAPHS.pop(graphs, None)  # the copying body's modifiers: no longer called
        self.stored_in_place = tuple(stored)

    def _keep_copying(self, body: Callable[..., Any], graphs: str, why: str) -> None:
        if self._graphs != graphs:
            GRAPHS.pop(self._graphs, None)
        self._bwd, self._graphs = body, graphs
        self.notes.append(f"gradients copied after the kernel: {why}")

    # ----- per-call helpers -----
    def _block_mask(self, seq_len_q: Tensor | None, seq_len_kv: Tensor | None) -> Any:
        if not self.spec.padding:
            return self._static_mask
        s = self.spec
        assert self._len_q is not None and self._len_kv is not None
        for buf, given, full in ((self._len_q, seq_len_q, s.sq), (self._len_kv, seq_len_kv, s.skv)):
            if given is None:
                buf.fill_(full)
            else:
                buf.copy_(given.reshape(-1).to(device=buf.device).clamp(0, full))
        return self._make_block_mask()

    def _bias(self, bias: Tensor | None, grad: bool) -> Tensor | None:
        f = self._f
        if bias is None or f.bias_dims is None:
            return None
        c = mods.compact_bias(bias, f.bias_dims)
        if grad:  # a buffer of the declared type, as the backward was compiled for
            return c.detach().to(self._bias_dtype).contiguous().requires_grad_(True)
        return c.contiguous()

    @property
    def _bias_dtype(self) -> torch.dtype:
        return self.spec.bias_dtype or self.spec.dtype

    def _destinations(
        self, outs: Sequence[Tensor | None], device: torch.device
    ) -> tuple[Tensor | None, ...]:
        """Where the given-O backward writes dQ, dK, dV and dBias itself: each caller's buffer
        that has the layout the backward was compiled for (declared type, dense rows), else a
        new tensor; None for dBias that is returned to be summed over broadcast dims."""
        s = self.spec
        same = s.dbias_shape is not None and dims4(s.dbias_shape) == dims4(s.bias_shape)
        shapes = [(s.b, s.h, s.sq, s.d), (s.b, s.hk, s.skv, s.d), (s.b, s.hv, s.skv, s.dv),
                  s.dbias_shape if same else None]  # fmt: skip
        dests: list[Tensor | None] = []
        for i, (shape, out) in enumerate(zip(shapes, outs, strict=True)):
            if shape is None:
                dests.append(None)
                continue
            dtype = s.grad_dtypes[i] if s.grad_dtypes else (torch.float32 if i == 3 else s.dtype)
            fits = (
                out is not None
                and out.dtype == dtype
                and out.device == device
                and tuple(out.shape) == shape
                and out.stride() == row_major(shape)
            )
            dests.append(out if fits else torch.empty(shape, dtype=dtype, device=device))
        return tuple(dests)

    def _set_scale(self, given: float | None) -> None:
        """A runtime scale into the kernel's scale buffer (a spec with a fixed scale has none).

        Raises:
            ValueError: the spec leaves the scale open and none was given.
        """
        if self._scale_t is not None:
            self._scale_t.fill_(float(self.spec.call.scale_or(given)))

    # ----- calls -----
    def forward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        **inputs: Unpack[SdpaInputs],
    ) -> tuple[Tensor, Tensor | None]:
        """O ``[B,H,Sq,Dv]`` (input dtype) and Stats ``[B,H,Sq,1]`` fp32 (None when not wanted).

        ``inputs``: the bias, the padding lengths and, where the spec's call leaves it open,
        the scale (:class:`~.call.SdpaInputs`; dropout is refused by :func:`static_reason`)."""
        self._set_scale(inputs.get("scale"))
        bm = self._block_mask(inputs.get("seq_len_q"), inputs.get("seq_len_kv"))
        bias = inputs.get("bias")
        cfg = (
            self._f,
            self._scale,
            self._gqa and not self._expand_kv,
            self.spec.want_stats,
            self._fwd_options,
        )
        q, k, v = distinct(q, k, v)
        args = (q, *self._kv(k, v), self._bias(bias, False))
        with no_recompile(self._building), torch.no_grad():
            out, lse = self._fwd(*args, self._slopes, self._scale_t, bm, cfg)
        if lse is None:
            return out, None
        stats = lse.float().unsqueeze(-1)
        return out, stats.masked_fill(stats == -math.inf, math.inf)

    def backward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        o: Tensor,
        do: Tensor,
        stats: Tensor,
        *,
        dq_out: Tensor | None = None,
        dk_out: Tensor | None = None,
        dv_out: Tensor | None = None,
        dbias_out: Tensor | None = None,
        **inputs: Unpack[SdpaInputs],
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """dQ, dK, dV and dBias (in the call's ``dbias_shape``; None without one); ``inputs``
        as in :meth:`forward`.

        The given-O backward writes each gradient itself, in its declared type
        (``spec.grad_dtypes``): into the caller's ``*_out`` buffer where that is a dense tensor
        of that type and shape (no copy afterwards), else into a new tensor; dBias that needs
        summing over broadcast dims comes back summed in fp32. A recomputed forward returns
        autograd's gradients (input type; dBias in the bias's type, or fp32 where summed).
        """
        s = self.spec
        shape = s.dbias_shape
        want_db = shape is not None
        self._set_scale(inputs.get("scale"))
        bm = self._block_mask(inputs.get("seq_len_q"), inputs.get("seq_len_kv"))
        dt = s.dtype
        q, k, v, o, do = distinct(q, k, v, o.to(dt), do.to(dt))
        bc = self._bias(inputs.get("bias"), want_db)
        if self.backward_mode == "given":
            (lse,) = distinct(stats.reshape(s.b, s.h, s.sq, 1).float())
            cfg = (self._graphs, self._scale, self._options, want_db)
            score_bufs = tuple(x for x in (bc, self._slopes, self._scale_t) if x is not None)
            mask_bufs = tuple(x for x in (self._len_q, self._len_kv) if x is not None)
            dests = self._destinations((dq_out, dk_out, dv_out, dbias_out), q.device)
            with no_recompile(self._building), torch.no_grad():
                db = self._bwd(
                    q, k, v, o, do, lse, score_bufs, mask_bufs, bm.as_tuple()[:-1], dests, cfg
                )
            dq, dk, dv, written = dests
            assert dq is not None and dk is not None and dv is not None
            if written is not None:
                return dq, dk, dv, written
        else:
            qg, kg, vg = (x.detach().requires_grad_(True) for x in (q, k, v))
            cfg_f = (self._f, self._scale, self._gqa and not self._expand_kv, False,
                     self._fwd_options)  # fmt: skip
            with no_recompile(self._building), torch.enable_grad():
                kx, vx = self._kv(kg, vg)  # autograd sums expanded heads back
                out, _ = self._fwd(qg, kx, vx, bc, self._slopes, self._scale_t, bm, cfg_f)
                leaves = [qg, kg, vg] + ([bc] if want_db and bc is not None else [])
                grads = torch.autograd.grad(out, leaves, do)
            dq, dk, dv = grads[:3]
            db = grads[3] if len(grads) > 3 else None
        dbias = None
        if want_db and db is not None and shape is not None:
            dbias = reduce_to(db.reshape(dims4(s.bias_shape) or ()), shape)
        return dq, dk, dv, dbias


def _why(e: Exception) -> str:
    """An exception for a kernel's notes: its type and the first line of its message."""
    text = (str(e).strip().splitlines() or [""])[0][:300]
    return f"{type(e).__name__}: {text}"


def _probe_lengths(spec: FlexSpec) -> list[tuple[list[int], list[int]]]:
    """Lengths the closed-form padding block mask is checked on at build time: full, and uneven
    ones (blocks cut in the middle, an empty batch entry where there are several)."""

    def uneven(full: int) -> list[int]:
        lengths = [max(0, full - full * (i + 1) // (spec.b + 2) - 37 * i) for i in range(spec.b)]
        return [*lengths[:-1], 0] if spec.b > 1 else lengths

    return [([spec.sq] * spec.b, [spec.skv] * spec.b), (uneven(spec.sq), uneven(spec.skv))]


def _same_blocks(a: Any, b: Any) -> bool:
    return all(torch.equal(getattr(a, n), getattr(b, n)) for n in blocks.FIELDS)


def _alibi_slopes(heads: int, device: torch.device) -> Tensor:
    h = torch.arange(heads, dtype=torch.float64)
    return torch.pow(2.0, -8.0 * (h + 1.0) / heads).to(device=device, dtype=torch.float32)


#: backward tiles small enough for an fp32 dBias buffer in shared memory (the default tiles
#: needed 262144 bytes against the H200's 232448 in this session's runs)
_SMALL_TILES: dict[str, Any] = {"BLOCK_M1": 32, "BLOCK_N1": 64, "BLOCK_M2": 64, "BLOCK_N2": 32,
                                "num_stages": 1}  # fmt: skip
#: backward tiles tried in turn for a bias with dBias: flex's defaults, then fewer pipeline stages
#: (an fp32 bias on the H200: 179/175 TFLOP/s at S = 1k/4k with 2 stages, 187/163 with 1, 87/68
#: with the small tiles), then the small tiles
_BACKWARD_TILES: tuple[dict[str, Any], ...] = ({}, {"num_stages": 2}, {"num_stages": 1},
                                               _SMALL_TILES)  # fmt: skip
#: the in-place probe: runs of the copying body (its run-to-run variation), one fewer of the
#: storing body; each run's destinations start filled with its own value (unwritten ones show)
_PROBE_RUNS = 3
_PROBE_FILLS = (7.0, 5.0, 11.0, -3.0, -9.0)
#: forward tiles that fit the H200's 227 KiB of shared memory where flex's defaults do not
_SMALL_FWD_TILES: tuple[tuple[str, Any], ...] = (
    ("BLOCK_M", 64),
    ("BLOCK_N", 32),
    ("num_stages", 1),
)

_TAGS = itertools.count()
