"""The torch engines: three fused-kernel engines and a general math engine.

Every engine runs whole SDPA forward/backward graphs, node by node in topological order.

| engine | kernels | devices |
|---|---|---|
| ``TORCH_SDPA_CUDNN_ENGINE`` | cuDNN attention (``aten._scaled_dot_product_cudnn_*``) | CUDA only |
| ``TORCH_SDPA_FLASH_ENGINE`` | FlashAttention-2 (CUDA) / AOTriton (ROCm) | GPU |
| ``TORCH_SDPA_EFFICIENT_ENGINE`` | memory-efficient kernels (AOTriton on ROCm) | GPU |
| ``TORCH_SDPA_FLEX_ENGINE`` | FlexAttention (Triton kernels compiled in ``build_plans``) | GPU |
| ``TORCH_SDPA_MATH_ENGINE`` | chunked matmuls, every feature of the node | any, CPU too |

The fused engines feed the graph's own O and Stats to torch's fused backward ops (the forward is
never recomputed; flex does so where its backward operator compiles, see
:mod:`.kernels.flex`); what an op cannot do exactly is refused in ``check()`` with a reason
naming the feature, so ranking falls through, in the end to the math engine. Where an earlier
engine was measured slower than flex it defers with a reason (:mod:`._ranking`). Everything that
can be decided when the plan is built is decided then; ``execute`` gathers buffers, resolves runtime
scalars and calls the kernel.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import hipdnn_graph as hg
from hipdnn_graph.backend import PhiloxDropout, ScalarSource, SdpaProblem, Support, engine_id
from hipdnn_graph.backend.dropout import read_int
from hipdnn_graph.backend.dtypes import torch_dtype

from ._ranking import DOCUMENTED_STREAM, ENGINES, Features, deferral, philox_deferral
from .replay import CudaGraphReplay

__all__ = ["ENGINES", "TorchSdpaBackend", "TorchSdpaEngine", "create_engines"]

_LOWP = frozenset({hg.DataType.HALF, hg.DataType.BFLOAT16})


def torch_available() -> bool:
    """Whether torch can be imported (without importing it)."""
    return importlib.util.find_spec("torch") is not None


def _common_refusal(p: SdpaProblem) -> str | None:
    return p.philox_problem() or p.data_type_problem()


def _philox_refusal(p: SdpaProblem, op: str | None) -> str | None:
    """Why an engine of kernel family ``op`` (None: math) cannot draw this node's philox
    dropout at all (which fused engine draws it by default is :func:`_ranking.philox_deferral`'s
    rule)."""
    if p.philox is None or op is None:
        return None
    node = f"node '{p.name}'"
    if op == "flex":
        return (
            f"{node}: flex cannot draw philox dropout (a score modifier acts before the softmax); "
            "the fused and math engines run it"
        )
    offset = p.philox.offset.value
    if offset is not None and offset % 4:
        return (
            f"{node}: {op} needs a philox Offset that is a multiple of 4 (torch's generator keeps "
            f"offsets in steps of 4), got {offset}"
        )
    return None


#: why plans with philox dropout always run eagerly (see :mod:`.replay`)
_NO_PHILOX_REPLAY = (
    "philox dropout: a captured forward would draw its mask from the CUDA generator's state at "
    "replay time (torch's fused forward ops take no seed), not from the graph's Seed and "
    "Offset, and the memory-efficient backward reads its seed on the host, which a capture "
    "cannot record"
)

#: the backward's gradient slots, in the order the kernels return them
_GRADS = ("dQ", "dK", "dV", "dBias")


@dataclass
class _Step:
    """One node, with everything decided at plan time."""

    run: Callable[..., Any]
    #: uids of the positional tensors (Q, K, V[, O, dO, Stats])
    inputs: tuple[int, ...]
    #: (index in the kernel's result tuple, uid, is virtual, torch dtype, declared strides) of
    #: every output the node has
    outputs: tuple[tuple[int, int, bool, Any, tuple[int, ...]], ...]
    #: keyword arguments known when the plan is built (flags, bounds, constant scales)
    static: dict[str, Any] = field(default_factory=dict)
    #: (keyword, uid, conversion or None) of what is read from the variant pack: tensors, and
    #: scales given as runtime pass-by-value tensors
    runtime: tuple[tuple[str, int, Callable[[Any], Any] | None], ...] = ()
    #: (keyword, uid) of outputs the kernel may write in place: the caller's buffer (or None)
    #: is passed under that keyword, and a result that is that buffer is not copied again
    destinations: tuple[tuple[str, int], ...] = ()


class TorchSdpaPlan:
    """A built torch plan: one step per node.

    Outputs missing from the variant pack (``Graph.run``) are the kernels' own result tensors,
    handed over without a copy when they already have the declared type and layout.
    """

    workspace_size = 0
    allocates_outputs = True

    def __init__(self, engine_name: str, steps: list[_Step], output_uids: frozenset[int]) -> None:
        self.engine_name = engine_name
        self.steps = steps
        self.replay = CudaGraphReplay(output_uids)

    def execute(self, variant_pack: Mapping[int, Any], workspace: Any) -> None:
        buffers = cast("dict[int, Any]", variant_pack)  # a fresh dict from the frontend
        if not self.replay.run(buffers, self._run_steps):
            self._run_steps(buffers)

    def _run_steps(self, buffers: dict[int, Any]) -> None:
        for step in self.steps:
            kw = step.static
            if step.runtime or step.destinations:
                kw = {
                    **kw,
                    **{
                        key: buffers[uid] if convert is None else convert(buffers[uid])
                        for key, uid, convert in step.runtime
                    },
                    **{key: buffers.get(uid) for key, uid in step.destinations},
                }
            results = step.run(*[buffers[uid] for uid in step.inputs], **kw)
            for index, uid, virtual, dtype, strides in step.outputs:
                value = results[index]
                out = buffers.get(uid)
                if out is not None:
                    if value is not out:
                        out.copy_(value.view(out.shape))
                elif virtual:
                    buffers[uid] = value.to(dtype)
                else:
                    buffers[uid] = _as_declared(value, dtype, strides)


class TorchSdpaEngine:
    """One torch engine; ``op`` is the kernel family (``"cudnn"``, ``"flash"``, ``"efficient"``,
    ``"flex"``) or ``None`` for the math engine."""

    array_kind = "torch"
    #: the node families these engines run (others are refused by name before ``check``)
    node_types = frozenset({hg.NodeType.SDPA_FWD, hg.NodeType.SDPA_BWD})

    def __init__(self, name: str, op: str | None, priority: int) -> None:
        self.name = name
        self.op = op
        self.priority = priority

    def __repr__(self) -> str:
        return f"TorchSdpaEngine({self.name})"

    # ----- support -----
    def check(self, graph: hg.Graph) -> Support:
        if not torch_available():
            return Support.no("torch is not installed")
        import torch

        if self.op == "flex":
            from .kernels._flex_env import CPU_ENV, cpu_allowed  # not .flex: a second to import

            if not (torch.cuda.is_available() or cpu_allowed()):
                return Support.no(
                    "flex needs a CUDA or ROCm device (or "
                    f"{CPU_ENV}=1 for FlexAttention's CPU reference path); none is available"
                )
        elif self.op is not None:
            if not torch.cuda.is_available():
                return Support.no(f"{self.op} needs a CUDA or ROCm device; none is available")
            if self.op == "cudnn" and torch.version.hip:
                return Support.no("cuDNN attention does not exist in ROCm builds of torch")
        preferred = graph.get_preferred_engine_id_ext() == engine_id(self.name)
        for node in graph.nodes:
            if not isinstance(node, hg.SdpaBwdNode | hg.SdpaFwdNode):
                return Support.no(f"{type(node).__name__} is not implemented")
            p = SdpaProblem.from_node(node)
            philox = p.philox is not None
            reason = (
                _common_refusal(p)
                or (_philox_refusal(p, self.op) if philox else None)
                or self._refusal(p)
                or (self._philox_deferral(p, preferred) if philox else None)
            )
            if reason is not None:
                return Support.no(reason)
        return Support.yes()

    def dropout_stream(self) -> str | None:
        """The Philox stream this engine's philox dropout draws its mask from on this torch
        build (None: the engine runs no philox dropout). See :mod:`.kernels._fused_philox`."""
        if self.op is None:
            return DOCUMENTED_STREAM  # the math kernel draws hipdnn_graph.philox's stream
        if self.op == "flex":
            return None
        from .kernels import _fused_philox, fused

        return _fused_philox.stream(fused.FusedOp(self.op))

    def _philox_deferral(self, p: SdpaProblem, preferred: bool) -> str | None:
        stream = self.dropout_stream()
        if stream is None or self.op is None:
            return None
        reason = philox_deferral(self.name, stream, preferred=preferred)
        return None if reason is None else f"node '{p.name}': {reason}"

    def _refusal(self, p: SdpaProblem) -> str | None:
        node = f"node '{p.name}'"
        if self.op is None:
            if p.compute_data_type not in (hg.DataType.FLOAT, hg.DataType.DOUBLE):
                return f"{node}: compute type {p.compute_data_type.name} (FLOAT or DOUBLE only)"
            return None
        if p.compute_data_type != hg.DataType.FLOAT:
            return f"{node}: fused kernels compute in FLOAT, not {p.compute_data_type.name}"
        io = p.tensors["Q"].data_type
        if self.op == "flex":
            return self._flex_reason(p, io)
        if io not in _LOWP:
            return f"{node}: fused kernels need HALF or BFLOAT16 Q/K/V, got {io.name}"
        if any(p.tensors[s].data_type != io for s in ("K", "V")):
            return f"{node}: fused kernels need Q, K and V of one data type"
        return self._fused_reason(p, io)

    def _fused_reason(self, p: SdpaProblem, io: hg.DataType) -> str | None:
        import torch

        from .kernels import fused

        fp = fused.SdpaProblem(
            b=p.batch, h=p.heads, hk=p.heads_k, hv=p.heads_v, sq=p.seq_q, skv=p.seq_kv,
            d=p.head_dim, dv=p.head_dim_v,
            dtype=torch_dtype(io),
            device=f"cuda:{torch.cuda.current_device()}",
            bias_shape=tuple(p.tensors["Bias"].dim) if p.has("Bias") else None,
                    dbias=p.has("dBias"), alibi=p.alibi, bottom_right=p.window.bottom_right,
            left_bound=p.window.left_bound, right_bound=p.window.right_bound,
            padding=p.padding, dropout_mask=p.has("Dropout_mask"), forward=not p.backward,
        )  # fmt: skip
        assert self.op is not None
        reason = fused.check(fused.FusedOp(self.op), fp)
        if reason is None:
            w = p.window
            band = w.left_bound is not None or (w.right_bound or 0) > 0
            offset = w.bottom_right and p.seq_q != p.seq_kv
            features = Features(
                bias=p.has("Bias"), padding=p.padding, band=band, offset_diagonal=offset
            )
            if features != Features():
                reason = deferral(self.op, features, flex_accepts=_flex_accepts(p, io))
        return None if reason is None else f"node '{p.name}': {reason}"

    def _flex_reason(self, p: SdpaProblem, io: hg.DataType) -> str | None:
        node = f"node '{p.name}'"
        if any(p.tensors[s].data_type != io for s in ("K", "V")):
            return f"{node}: flex needs Q, K and V of one data type"
        if io not in _LOWP and not (io == hg.DataType.FLOAT and _flex_device() == "cpu"):
            return f"{node}: flex runs HALF or BFLOAT16 Q/K/V on the GPU, got {io.name}"
        from .kernels import flex

        reason = flex.static_reason(_flex_spec(p, io))
        return None if reason is None else f"{node}: {reason}"

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0

    # ----- plans -----
    def build_plan(self, graph: hg.Graph) -> TorchSdpaPlan:
        import torch

        problems = [SdpaProblem.from_node(node) for node in graph.nodes]
        steps = [self._step(p, torch) for p in problems]
        produced = {id(t) for node in graph.nodes for t in node.outputs()}
        outputs = frozenset(
            t.get_uid() for t in graph.graph_tensors() if id(t) in produced and not t.is_virtual
        )
        plan = TorchSdpaPlan(self.name, steps, outputs)
        if self.op is not None and any(p.philox is not None for p in problems):
            plan.replay.refuse(_NO_PHILOX_REPLAY)
        return plan

    def _step(self, p: SdpaProblem, torch: Any) -> _Step:
        w = p.window
        static: dict[str, Any] = {
            "alibi": p.alibi,
            "bottom_right": w.bottom_right,
            "left_bound": w.left_bound,
            "right_bound": w.right_bound,
        }
        runtime: list[tuple[str, int, Callable[[Any], Any] | None]] = []
        for key, source, convert in (
            ("scale", p.scale, ScalarSource.read),
            ("dropout_scale", p.dropout_scale, _scale_or_one),
        ):
            if source.uid is not None:
                runtime.append((key, source.uid, convert))
            else:
                static[key] = source.value if key == "scale" else source.value or 1.0
        if p.philox is not None:  # math draws the mask, a fused op has it drawn (no mask tensor)
            _philox_arguments(p.philox, static, runtime)
        slots = [("bias", "Bias"), ("dropout_mask", "Dropout_mask")]
        if p.padding:
            slots += [("seq_len_q", "SEQ_LEN_Q"), ("seq_len_kv", "SEQ_LEN_KV")]
        runtime += [(key, p.uid(slot), None) for key, slot in slots if p.has(slot)]
        names: tuple[str, ...]
        out_slots: tuple[str, ...]
        if p.backward:
            names = ("Q", "K", "V", "O", "dO", "Stats")
            out_slots = _GRADS
            if p.has("dBias"):
                static["dbias_shape"] = tuple(p.tensors["dBias"].dim)
        else:
            names = ("Q", "K", "V")
            out_slots = ("O", "Stats")
        run = self._kernel(p, static, torch)
        if self.op is not None:  # fused kernels read O and dO in Q's type (e.g. a FLOAT virtual O)
            io = p.tensors["Q"].data_type
            casts = {
                i: torch_dtype(io)
                for i, s in enumerate(names)
                if s in ("O", "dO") and p.tensors[s].data_type != io
            }
            if casts:
                run = _casting(run, casts)
        outputs = tuple(
            (
                index,
                p.uid(s),
                p.tensors[s].is_virtual,
                torch_dtype(p.tensors[s].data_type),
                tuple(p.tensors[s].stride),
            )
            for index, s in enumerate(out_slots)
            if p.has(s)
        )
        destinations: tuple[tuple[str, int], ...] = ()
        if self.op == "flex" and p.backward:  # the flex backward writes its gradients itself
            destinations = tuple(
                (f"{slot.lower()}_out", p.uid(slot)) for slot in _GRADS if p.has(slot)
            )
        return _Step(
            run, tuple(p.uid(s) for s in names), outputs, static, tuple(runtime), destinations
        )

    def _kernel(self, p: SdpaProblem, static: dict[str, Any], torch: Any) -> Callable[..., Any]:
        if self.op is None:
            from .kernels import math as kmath

            compute = torch_dtype(p.compute_data_type)
            static["compute_dtype"] = compute
            io = p.tensors["Q"].data_type
            lowp = io in _LOWP and compute == torch.float32
            if lowp:
                static["matmul_dtype"] = torch_dtype(io)
            kernel: Callable[..., Any] = kmath.sdpa_backward if p.backward else kmath.sdpa_forward
            kernel = _math_on_device(kernel) if lowp else kernel
            return _cpu_shortcut(p, kernel, compute) or kernel
        if self.op == "flex":
            from .kernels import flex

            io = p.tensors["Q"].data_type
            k = flex.kernel(_flex_spec(p, io))
            return k.backward if p.backward else k.forward
        from .kernels import fused

        op = fused.FusedOp(self.op)
        static["check"] = False
        wrapper: Callable[..., Any] = fused.backward if p.backward else fused.forward
        return functools.partial(wrapper, op)  # bound in C: no Python frame per call


def _flex_device() -> str:
    import torch

    return f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu"


def _flex_spec(p: SdpaProblem, io: hg.DataType) -> Any:
    """The :class:`~.kernels.flex.FlexSpec` of a node (on the current device)."""
    from .kernels import flex

    w = p.window
    return flex.FlexSpec(
        b=p.batch, h=p.heads, hk=p.heads_k, hv=p.heads_v, sq=p.seq_q, skv=p.seq_kv,
        d=p.head_dim, dv=p.head_dim_v, dtype=torch_dtype(io), device=_flex_device(),
        forward=not p.backward,
        bias_shape=tuple(p.tensors["Bias"].dim) if p.has("Bias") else None,
        bias_dtype=torch_dtype(p.tensors["Bias"].data_type) if p.has("Bias") else None,
        dbias_shape=tuple(p.tensors["dBias"].dim) if p.has("dBias") else None,
        grad_dtypes=tuple(torch_dtype(p.tensors[g].data_type) for g in _GRADS if p.has(g))
        if p.backward
        else (),
        alibi=p.alibi, bottom_right=w.bottom_right, left_bound=w.left_bound,
        right_bound=w.right_bound, padding=p.padding, dropout_mask=p.has("Dropout_mask"),
        scale=p.scale.value if p.scale.uid is None else None,
        want_stats=p.backward or p.has("Stats"),
    )  # fmt: skip


def _flex_accepts(p: SdpaProblem, io: hg.DataType) -> bool:
    """Whether the flex engine would take this node (static rules; nothing is compiled)."""
    del io
    import torch

    from .kernels._flex_env import cpu_allowed

    if not (torch.cuda.is_available() or cpu_allowed()) or _common_refusal(p):
        return False
    if p.philox is not None:
        return False
    return _FLEX_RULES._refusal(p) is None


def _philox_arguments(
    d: PhiloxDropout,
    static: dict[str, Any],
    runtime: list[tuple[str, int, Callable[[Any], Any] | None]],
) -> None:
    """The kernel's ``dropout_p``/``dropout_seed``/``dropout_offset``/``dropout_scale`` (math and
    fused kernels alike): a constant Seed or Offset is static, the others are read per call (a
    tensor stays a tensor, so a device seed is read where the kernel reads it)."""
    static["dropout_p"] = d.probability
    static["dropout_scale"] = d.scale
    for key, source in (("dropout_seed", d.seed), ("dropout_offset", d.offset)):
        if source.uid is None:
            static[key] = source.value
        else:
            runtime.append((key, source.uid, functools.partial(_philox_scalar, source.label)))


def _philox_scalar(label: str, value: Any) -> Any:
    """A runtime Seed or Offset: an integer tensor of one element as it is, else a host int."""
    import torch

    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype in _int_dtypes(torch):
        return value
    return read_int(value, label)


@functools.cache
def _int_dtypes(torch: Any) -> frozenset[Any]:
    return frozenset({torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8})


def _scale_or_one(value: Any) -> float:
    """A runtime dropout scale; 0 (or unset) means no scaling, as for a constant one."""
    return ScalarSource.read(value) or 1.0


#: (shape, strides got, strides declared) -> whether they lay the elements out alike (strides
#: of size-1 dims never matter); a kernel returns the same few layouts call after call
_SAME_LAYOUT: dict[tuple[Any, tuple[int, ...], tuple[int, ...]], bool] = {}


def _as_declared(value: Any, dtype: Any, strides: tuple[int, ...]) -> Any:
    """``value`` itself when it has the declared type and layout, else a converted copy."""
    if value.dtype == dtype:
        got = value.stride()
        if got == strides:
            return value
        key = (value.shape, got, strides)
        same = _SAME_LAYOUT.get(key)
        if same is None:
            same = all(d == 1 or a == b for d, a, b in zip(value.shape, got, strides, strict=True))
            if len(_SAME_LAYOUT) > 4096:
                _SAME_LAYOUT.clear()
            _SAME_LAYOUT[key] = same
        if same:
            return value
    import torch

    out = torch.empty_strided(value.shape, strides, dtype=dtype, device=value.device)
    out.copy_(value)
    return out


def _casting(fn: Callable[..., Any], casts: dict[int, Any]) -> Callable[..., Any]:
    """Cast the positional tensors at ``casts``' indices before calling ``fn``."""

    def run(*args: Any, **kw: Any) -> Any:
        converted = [a.to(casts[i]) if i in casts else a for i, a in enumerate(args)]
        return fn(*converted, **kw)

    return run


def _cpu_shortcut(
    p: SdpaProblem, chunked: Callable[..., Any], compute: Any
) -> Callable[..., Any] | None:
    """The math kernel that runs CPU tensors on torch's fused CPU kernel, for a node that
    kernel computes exactly (:mod:`.kernels.cpu_fused`); None for any other node."""
    from .kernels import cpu_fused

    w = p.window
    causal = None
    if w.left_bound is None and w.right_bound in (None, 0):
        causal = w.right_bound == 0
    io = p.tensors["Q"].data_type
    plain = not (p.has("Bias") or p.alibi or p.padding or p.uses_dropout or p.has("dBias"))
    one_type = all(p.tensors[s].data_type == io for s in ("K", "V", "O", "dO") if p.has(s))
    if not (plain and one_type) or not cpu_fused.applies(
        io=torch_dtype(io),
        compute=compute,
        heads=(p.heads, p.heads_k, p.heads_v),
        dims=(p.head_dim, p.head_dim_v),
        seq=(p.seq_q, p.seq_kv),
        causal=causal,
        bottom_right=w.bottom_right,
    ):
        return None
    assert causal is not None
    fused = cpu_fused.backward if p.backward else cpu_fused.forward
    return cpu_fused.on_cpu(chunked, fused, causal)


def _math_on_device(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Use the tensor-core matmul path only on devices that have one (the CPU has none)."""

    def run(*args: Any, **kw: Any) -> Any:
        from .kernels.math import lowp_matmul_supported

        if not lowp_matmul_supported(args[0].device, kw["matmul_dtype"]):
            kw = {k: v for k, v in kw.items() if k != "matmul_dtype"}
        return fn(*args, **kw)

    return run


#: the flex engine's rules, for engines that defer to it
_FLEX_RULES = TorchSdpaEngine("TORCH_SDPA_FLEX_ENGINE", "flex", 40)


def create_engines() -> list[TorchSdpaEngine]:
    """The five engines, in priority order."""
    return [TorchSdpaEngine(name, op, priority) for name, op, priority in ENGINES]


class TorchSdpaBackend:
    """The five SDPA engines of :func:`create_engines` as a backend (the ``torch`` entry point
    serves :class:`._backend.TorchBackend`, which adds the cuDNN-frontend and family engines)."""

    name = "torch"

    def __init__(self) -> None:
        self._engines = create_engines()

    def engines(self) -> list[TorchSdpaEngine]:
        return self._engines
