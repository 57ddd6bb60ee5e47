"""SDPA forward and backward on torch's FlexAttention (``TORCH_SDPA_FLEX_ENGINE``).

FlexAttention (``torch.nn.attention.flex_attention``) turns a score modifier and a block mask
into fused Triton kernels through ``torch.compile``, on CUDA and ROCm builds alike. This module
expresses a node in those terms (:mod:`._flex_mods`) and compiles one :class:`FlexKernel` per
:class:`FlexSpec`: in its constructor, which the engine calls from ``build_plans()``; kernels
are cached per process, and a call never compiles (each runs under
``torch.compiler.set_stance("fail_on_recompile")``, so a call that would recompile raises).

* Forward: ``flex_attention`` with the log-sum-exp; Stats are natural-log ``[B,H,Sq,1]`` fp32,
  ``+inf`` on rows that see no key (flex returns ``−inf`` there).
* Backward, fed the graph's own O and Stats: ``torch.ops.higher_order.flex_attention_backward``
  called directly with the given ``out`` and ``logsumexp``. Its LSE is base 2 (the forward
  operator's internal convention; the public function converts), so Stats are divided by
  ``ln 2``. The score modifier, its joint (gradient) graph and the mask modifier are traced with
  ``make_fx`` at build time and handed over through a dict (the only form torch 2.11's dynamo
  passes to that operator). Where this does not compile, the kernel recomputes the forward
  through autograd (``backward_mode == "recompute"``, reasons in ``notes``). dBias: the bias is a
  captured buffer of its own type (as in a direct flex call) that needs a gradient; torch
  accumulates it inside the fused backward kernel in fp32 and rounds once to that type (fewer
  pipeline stages, then smaller tiles, where flex's defaults do not fit shared memory, as for an
  fp32 bias on the H200).
* Bias: a score modifier over the bias reshaped to the dims it varies along; dBias comes back in
  that shape and is summed (in fp32) to the requested shape; one that needs no sum keeps its
  type (the engine converts it once, into the declared output). ALiBi: ``slope_h·(j − i)``.
  Padding: a block mask computed on every call from the ``seq_len`` tensors in closed form
  (:mod:`._flex_blocks`, compiled at build time and checked against ``create_block_mask``).
  Bands and causal masks in both alignments: a block mask built once. GQA/MQA: ``enable_gqa``
  (K/V never expanded); FlexAttention needs ``Hk == Hv``.

Refused (:func:`static_reason`): dropout masks (a score modifier acts before the softmax; a
dropout mask multiplies after it), ``Hk ≠ Hv``, head dims below 16 on GPU, a bias of 2³¹
elements or more that no split by heads brings below (:func:`head_groups`; splittable ones
run in groups of whole K/V heads, :class:`HeadGroups`), and CPU unless
``HIPDNN_GRAPH_TORCH_FLEX_CPU=1`` (torch's compiled CPU FlexAttention has no
backward and no log-sum-exp; on CPU the kernel runs FlexAttention's reference implementation,
for tests).

Example:
    >>> import torch
    >>> spec = FlexSpec(b=1, h=2, hk=1, hv=1, sq=8, skv=8, d=16, dv=16, dtype=torch.float32,
    ...                 device="cpu", forward=True, dropout_mask=True)
    >>> static_reason(spec, allow_cpu=True)  # doctest: +ELLIPSIS
    'FlexAttention cannot apply a dropout mask: ...'
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

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
from ._flex_env import CPU_ENV, cpu_allowed
from ._flex_inplace import disagreement, stores_into_destinations
from ._fused_common import reduce_to

__all__ = [
    "CPU_ENV",
    "FlexKernel",
    "FlexSpec",
    "HeadGroups",
    "clear_cache",
    "cpu_allowed",
    "flex_available",
    "group_spec",
    "head_groups",
    "kernel",
    "static_reason",
]

Tensor = torch.Tensor


def flex_available() -> bool:
    """Whether this torch has FlexAttention and its backward operator."""
    import importlib

    try:
        importlib.import_module("torch.nn.attention.flex_attention")
        hop = importlib.import_module("torch._higher_order_ops.flex_attention")
    except ImportError:
        return False
    return hasattr(hop, "flex_attention_backward")


@dataclass(frozen=True)
class FlexSpec:
    """Everything about one SDPA node that its compiled kernel depends on."""

    b: int
    h: int
    hk: int
    hv: int
    sq: int
    skv: int
    d: int
    dv: int
    dtype: torch.dtype
    device: str
    forward: bool
    bias_shape: tuple[int, ...] | None = None
    bias_dtype: torch.dtype | None = None  # None: the input type
    dbias_shape: tuple[int, ...] | None = None
    #: backward: declared types of dQ, dK, dV (and dBias); () means the input type (dBias fp32)
    grad_dtypes: tuple[torch.dtype, ...] = ()
    alibi: bool = False
    bottom_right: bool = False
    left_bound: int | None = None
    right_bound: int | None = None
    padding: bool = False
    dropout_mask: bool = False
    scale: float | None = None  # None: given at run time
    want_stats: bool = True  # forward: produce Stats

    @property
    def features(self) -> mods.Features:
        return mods.Features(
            sq=self.sq,
            skv=self.skv,
            bias_dims=None if self.bias_shape is None else mods.bias_dims(self.bias_shape),
            alibi=self.alibi,
            runtime_scale=self.scale is None,
            bottom_right=self.bottom_right,
            left_bound=self.left_bound,
            right_bound=self.right_bound,
            padding=self.padding,
        )


def static_reason(spec: FlexSpec, *, allow_cpu: bool | None = None) -> str | None:
    """Why FlexAttention cannot run ``spec`` exactly; None if it can (compiled at build time).

    ``allow_cpu`` defaults to :func:`cpu_allowed`.
    """
    if not flex_available():
        return f"torch {torch.__version__} has no FlexAttention backward operator"
    if spec.dropout_mask:
        return (
            "FlexAttention cannot apply a dropout mask: its score modifier acts before the "
            "softmax and a dropout mask multiplies after it"
        )
    if spec.hk != spec.hv:
        return f"FlexAttention needs K and V with one head count (Hk={spec.hk}, Hv={spec.hv})"
    if spec.h % spec.hk:
        return f"query heads {spec.h} are not a multiple of K/V heads {spec.hk}"
    if spec.bias_shape is not None and len(spec.bias_shape) > 4:
        return f"bias rank {len(spec.bias_shape)} > 4"
    if head_groups(spec) is None:
        elements = math.prod(spec.bias_shape or ())
        return (
            f"a bias of {elements} elements: FlexAttention indexes captured tensors (and "
            "scatters dBias) with 32-bit offsets (a [1,16,16384,16384] bias crashed the H200 "
            "with an illegal memory access), and no split into groups of whole K/V heads brings "
            f"its slices below 2^31 elements{_ALIBI_NOTE if spec.alibi else ''}"
        )
    dev = torch.device(spec.device)
    if dev.type == "cpu":
        if not (cpu_allowed() if allow_cpu is None else allow_cpu):
            return (
                "FlexAttention on CPU has no compiled backward or log-sum-exp in torch; the "
                f"math engine is faster there (set {CPU_ENV}=1 to run flex's reference path)"
            )
    elif dev.type == "cuda":
        if spec.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            return f"FlexAttention runs float16/bfloat16/float32, not {spec.dtype}"
        if min(spec.d, spec.dv) < 16:
            return f"FlexAttention's Triton kernels need head dims >= 16 (D={spec.d}, Dv={spec.dv})"
    else:
        return f"FlexAttention does not run on {dev.type}"
    return None


def head_groups(spec: FlexSpec) -> int | None:
    """In how many groups of whole K/V heads ``spec`` runs: 1 when its bias is below 2³¹
    elements (FlexAttention's 32-bit offsets), else the fewest groups whose bias slices are;
    None when no split does (the bias does not vary by head, or ALiBi is on).

    Example:
        >>> big = FlexSpec(b=1, h=16, hk=16, hv=16, sq=2**14, skv=2**14, d=128, dv=128,
        ...                dtype=torch.bfloat16, device="cuda", forward=False,
        ...                bias_shape=(1, 16, 2**14, 2**14))
        >>> head_groups(big)  # 2**32 elements: four slices of 2**30
        4
    """
    if spec.bias_shape is None:
        return 1
    elements = math.prod(spec.bias_shape)
    if elements < _MAX_BUFFER:
        return 1
    if spec.alibi or not mods.bias_dims(spec.bias_shape)[1]:
        return None
    for groups in range(2, spec.hk + 1):
        if spec.hk % groups == 0 and elements // groups < _MAX_BUFFER:
            return groups
    return None


def _dims4(shape: Sequence[int] | None) -> tuple[int, ...] | None:
    """``shape`` right-aligned to four dims (leading ones added)."""
    return None if shape is None else (1,) * (4 - len(shape)) + tuple(shape)


def _per_group(shape: tuple[int, ...] | None, groups: int) -> tuple[int, ...] | None:
    """``shape`` (right-aligned to ``[B,H,Sq,Skv]``) with its head dim divided by ``groups``."""
    if shape is None or len(shape) < 3 or shape[-3] == 1:
        return shape
    i = len(shape) - 3
    return (*shape[:i], shape[i] // groups, *shape[i + 1 :])


# ------------------------------------------------------------------------------------ the kernel


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
        self._scale = 1.0 if s.scale is None else float(s.scale)
        self._scale_t = (
            torch.ones((), dtype=torch.float32, device=self._dev) if s.scale is None else None
        )
        self._slopes = _alibi_slopes(s.h, self._dev) if s.alibi else None
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
        attempts = [(expand, tiles) for expand in layouts for tiles in ((), _SMALL_FWD_TILES)]
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
        base = dict(self._options)
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
        same = s.dbias_shape is not None and _dims4(s.dbias_shape) == _dims4(s.bias_shape)
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

    def _set_scale(self, scale: float) -> None:
        if self._scale_t is not None:
            self._scale_t.fill_(float(scale))

    # ----- calls -----
    def forward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        scale: float,
        bias: Tensor | None = None,
        seq_len_q: Tensor | None = None,
        seq_len_kv: Tensor | None = None,
        **unused: Any,
    ) -> tuple[Tensor, Tensor | None]:
        """O ``[B,H,Sq,Dv]`` (input dtype) and Stats ``[B,H,Sq,1]`` fp32 (None when not wanted)."""
        self._set_scale(scale)
        bm = self._block_mask(seq_len_q, seq_len_kv)
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
        scale: float,
        bias: Tensor | None = None,
        dbias_shape: Sequence[int] | None = None,
        dq_out: Tensor | None = None,
        dk_out: Tensor | None = None,
        dv_out: Tensor | None = None,
        dbias_out: Tensor | None = None,
        seq_len_q: Tensor | None = None,
        seq_len_kv: Tensor | None = None,
        **unused: Any,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """dQ, dK, dV and dBias (in ``dbias_shape``; None without one).

        The given-O backward writes each gradient itself, in its declared type
        (``spec.grad_dtypes``): into the caller's ``*_out`` buffer where that is a dense tensor
        of that type and shape (no copy afterwards), else into a new tensor; dBias that needs
        summing over broadcast dims comes back summed in fp32. A recomputed forward returns
        autograd's gradients (input type; dBias in the bias's type, or fp32 where summed).
        """
        s = self.spec
        want_db = s.dbias_shape is not None
        shape = tuple(dbias_shape) if dbias_shape is not None else s.dbias_shape
        self._set_scale(scale)
        bm = self._block_mask(seq_len_q, seq_len_kv)
        dt = s.dtype
        q, k, v, o, do = distinct(q, k, v, o.to(dt), do.to(dt))
        bc = self._bias(bias, want_db)
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
            dbias = reduce_to(db.reshape(_dims4(s.bias_shape) or ()), shape)
        return dq, dk, dv, dbias


@dataclass
class HeadGroups:
    """A node whose bias is too large for FlexAttention's 32-bit offsets, run as ``groups``
    calls of one kernel over whole K/V heads (see :func:`head_groups`); each call reads its
    slice of the bias, and the results are joined along the head dim.

    Example (a [1,16,16k,16k] bias of 2³² elements runs as four calls over 4 heads each):
        >>> big = FlexSpec(b=1, h=16, hk=16, hv=16, sq=2**14, skv=2**14, d=128, dv=128,
        ...                dtype=torch.bfloat16, device="cuda", forward=False,
        ...                bias_shape=(1, 16, 2**14, 2**14))
        >>> group_spec(big, 4).bias_shape
        (1, 4, 16384, 16384)
    """

    spec: FlexSpec
    inner: FlexKernel
    groups: int

    @property
    def backward_mode(self) -> str:
        return self.inner.backward_mode

    @property
    def build_seconds(self) -> float:
        return self.inner.build_seconds

    @property
    def stored_in_place(self) -> tuple[str, ...]:
        return self.inner.stored_in_place

    @property
    def notes(self) -> list[str]:
        return [*self.inner.notes, f"heads in {self.groups} groups: the bias has 2^31 elements "
                "or more"]  # fmt: skip

    def _part(self, i: int, *tensors: Tensor) -> list[Tensor]:
        return [t.tensor_split(self.groups, dim=1)[i] for t in tensors]

    def _bias_part(self, i: int, bias: Tensor | None) -> Tensor | None:
        if bias is None or bias.dim() < 3 or bias.shape[-3] == 1:
            return bias
        return bias.tensor_split(self.groups, dim=bias.dim() - 3)[i]

    def forward(
        self, q: Tensor, k: Tensor, v: Tensor, *, bias: Tensor | None = None, **kw: Any
    ) -> tuple[Tensor, Tensor | None]:
        """As :meth:`FlexKernel.forward`."""
        parts = [
            self.inner.forward(*self._part(i, q, k, v), bias=self._bias_part(i, bias), **kw)
            for i in range(self.groups)
        ]
        stats = [st for _, st in parts if st is not None]
        return torch.cat([o for o, _ in parts], 1), torch.cat(stats, 1) if stats else None

    def backward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        o: Tensor,
        do: Tensor,
        stats: Tensor,
        *,
        bias: Tensor | None = None,
        dbias_shape: Sequence[int] | None = None,
        **kw: Any,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """As :meth:`FlexKernel.backward`; dBias slices are joined (or summed, where dBias has
        one head) into a new tensor."""
        for key in ("dq_out", "dk_out", "dv_out", "dbias_out"):
            kw.pop(key, None)
        full = tuple(dbias_shape) if dbias_shape is not None else self.spec.dbias_shape
        parts = [
            self.inner.backward(*self._part(i, q, k, v, o, do, stats),
                                bias=self._bias_part(i, bias),
                                dbias_shape=_per_group(full, self.groups), **kw)
            for i in range(self.groups)
        ]  # fmt: skip
        dq, dk, dv = (torch.cat([p[0] for p in parts], 1), torch.cat([p[1] for p in parts], 1),
                      torch.cat([p[2] for p in parts], 1))  # fmt: skip
        slices = [db for *_, db in parts if db is not None]
        if not slices or full is None:
            return dq, dk, dv, None
        if len(full) >= 3 and full[-3] != 1:
            return dq, dk, dv, torch.cat(slices, len(full) - 3)
        return dq, dk, dv, torch.stack(slices).sum(0)


def _why(e: Exception) -> str:
    """An exception for a kernel's notes: its type and the first line of its message."""
    text = (str(e).strip().splitlines() or [""])[0][:300]
    return f"{type(e).__name__}: {text}"


def group_spec(spec: FlexSpec, groups: int) -> FlexSpec:
    """The spec of one of ``groups`` head groups of ``spec`` (its heads and bias divided)."""
    return replace(
        spec,
        h=spec.h // groups,
        hk=spec.hk // groups,
        hv=spec.hv // groups,
        bias_shape=_per_group(spec.bias_shape, groups),
        dbias_shape=_per_group(spec.dbias_shape, groups),
    )


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
#: FlexAttention's kernels index a captured tensor (and scatter its gradient) with 32-bit offsets
_MAX_BUFFER = 2**31
#: the in-place probe: runs of the copying body (its run-to-run variation), one fewer of the
#: storing body; each run's destinations start filled with its own value (unwritten ones show)
_PROBE_RUNS = 3
_PROBE_FILLS = (7.0, 5.0, 11.0, -3.0, -9.0)
_ALIBI_NOTE = " (not with ALiBi: its slopes follow the head)"
#: forward tiles that fit the H200's 227 KiB of shared memory where flex's defaults do not
_SMALL_FWD_TILES: tuple[tuple[str, Any], ...] = (
    ("BLOCK_M", 64),
    ("BLOCK_N", 32),
    ("num_stages", 1),
)

_KERNELS: dict[FlexSpec, FlexKernel | HeadGroups] = {}
_TAGS = itertools.count()


def kernel(spec: FlexSpec) -> FlexKernel | HeadGroups:
    """The compiled kernel of ``spec``, built on first request and cached for the process (a
    bias of 2³¹ elements or more: one kernel over groups of heads, :class:`HeadGroups`).

    Raises:
        ValueError: :func:`static_reason` refuses ``spec`` (the message is the reason).
    """
    hit = _KERNELS.get(spec)
    if hit is None:
        reason = static_reason(spec)
        if reason is not None:
            raise ValueError(reason)
        groups = head_groups(spec) or 1
        if groups == 1:
            hit = FlexKernel(spec)
        else:
            inner = kernel(group_spec(spec, groups))
            assert isinstance(inner, FlexKernel)  # a group's bias is below 2**31 elements
            hit = HeadGroups(spec, inner, groups)
        _KERNELS[spec] = hit
    return hit


def clear_cache() -> None:
    """Forget every compiled kernel of this process."""
    _KERNELS.clear()
