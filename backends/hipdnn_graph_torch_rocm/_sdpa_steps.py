"""How the torch SDPA engines build a plan: :class:`SdpaPlanning` (a mixin of
:class:`~._engines.TorchSdpaEngine`) turns each node into a :class:`~._sdpa_plan.Step`: the
kernel of the engine's family, its build-time keywords (the node's
:class:`~.kernels.call.SdpaCall`, built once here, and the kernel's own options), and what is
read from the variant pack per call (tensors, runtime scales, philox Seed and Offset).

Example:
    >>> _scale_or_one(0.0), _scale_or_one(2.0)
    (1.0, 2.0)
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import hipdnn_graph as hg
from hipdnn_graph.backend import ScalarSource, SdpaProblem
from hipdnn_graph.backend.dropout import read_int
from hipdnn_graph.backend.dtypes import torch_dtype
from hipdnn_graph.backend.ragged import is_ragged

from ._sdpa_plan import Step, TorchSdpaPlan
from ._sdpa_support import GRADS, LOWP, flex_spec, is_mask
from .engine_knobs import apply_replay_knob, flex_tiles

__all__ = ["SdpaPlanning"]

#: why plans with philox dropout always run eagerly (see :mod:`.replay`)
_NO_PHILOX_REPLAY = (
    "philox dropout: a captured forward would draw its mask from the CUDA generator's state at "
    "replay time (torch's fused forward ops take no seed), not from the graph's Seed and "
    "Offset, and the memory-efficient backward reads its seed on the host, which a capture "
    "cannot record"
)


class SdpaPlanning:
    """The ``build_plan()`` of one torch SDPA engine (``name`` and kernel family ``op`` as in
    :class:`~._sdpa_support.SdpaSupport`)."""

    name: str
    op: str | None

    def build_plan(self, graph: hg.Graph, knobs: Mapping[str, Any] | None = None) -> TorchSdpaPlan:
        """The plan; ``knobs``: the engine's knob values (replay, and flex's tiles)."""
        import torch

        if any(is_ragged(t) for t in graph.graph_tensors()):  # math, flash and efficient accept
            from ._packed_plan import PackedTorchPlan

            return PackedTorchPlan(self.name, graph, self.op)  # type: ignore[return-value]
        problems = [SdpaProblem.from_node(node) for node in graph.nodes]
        steps = [self._step(p, torch, knobs) for p in problems]
        produced = {id(t) for node in graph.nodes for t in node.outputs()}
        outputs = frozenset(
            t.get_uid() for t in graph.graph_tensors() if id(t) in produced and not t.is_virtual
        )
        plan = TorchSdpaPlan(self.name, steps, outputs, device_only=self._device_only())
        if self.op is not None and any(p.philox is not None for p in problems):
            plan.replay.refuse(_NO_PHILOX_REPLAY)
        apply_replay_knob(plan.replay, knobs)
        return plan

    def _device_only(self) -> bool:
        """Whether the kernels run on a device only (the math engine and flex's CPU reference
        path, when allowed, run on host tensors too)."""
        if self.op is None:
            return False
        if self.op == "flex":
            from .kernels._flex_env import cpu_allowed

            return not cpu_allowed()
        return True

    def _step(self, p: SdpaProblem, torch: Any, knobs: Mapping[str, Any] | None = None) -> Step:
        from .kernels.call import SdpaCall

        run, static = self._kernel(p, SdpaCall.of(p), torch, knobs)
        runtime = _runtime_scalars(p)
        slots = [("bias", "Bias"), ("dropout_mask", "Dropout_mask")]
        if p.padding:
            slots += [("seq_len_q", "SEQ_LEN_Q"), ("seq_len_kv", "SEQ_LEN_KV")]
        runtime += [(key, p.uid(slot), None) for key, slot in slots if p.has(slot)]
        names: tuple[str, ...]
        out_slots: tuple[str, ...]
        if p.backward:
            names = ("Q", "K", "V", "O", "dO", "Stats")
            out_slots = GRADS
        else:
            names = ("Q", "K", "V")
            out_slots = ("O", "Stats")
        if p.has("Bias") and is_mask(p.tensors["Bias"]):
            # math adds the bias in its compute type, the fused and flex kernels in Q's type
            added = static["compute_dtype"] if self.op is None else p.tensors["Q"].data_type
            run = _mask_as_bias(run, added if self.op is None else torch_dtype(added))
        if self.op is not None:  # fused kernels read O and dO in Q's type (e.g. a FLOAT virtual O)
            io = p.tensors["Q"].data_type
            casts = {
                i: torch_dtype(io)
                for i, s in enumerate(names)
                if s in ("O", "dO") and p.tensors[s].data_type != io
            }
            if casts:
                run = _casting(run, casts)
        if p.backward and len(p.tensors["Stats"].dim) == 3:  # [B, H, Sq]: hipDNN's sample files
            run = _stats_as_rank4(run, tuple(p.tensors["Stats"].dim))
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
                (f"{slot.lower()}_out", p.uid(slot)) for slot in GRADS if p.has(slot)
            )
        return Step(
            run, tuple(p.uid(s) for s in names), outputs, static, tuple(runtime), destinations
        )

    def _kernel(
        self,
        p: SdpaProblem,
        call: Any,
        torch: Any,
        knobs: Mapping[str, Any] | None = None,
    ) -> tuple[Callable[..., Any], dict[str, Any]]:
        """The kernel of this engine's family for the node, and its build-time keywords: the
        node's ``call`` (a flex kernel is compiled for it: its spec holds it; flex's tile knobs
        give a kernel of its own) and the kernel's own options."""
        io = p.tensors["Q"].data_type
        if self.op is None:
            from .kernels import math as kmath

            compute = torch_dtype(p.compute_data_type)
            static: dict[str, Any] = {"call": call, "compute_dtype": compute}
            lowp = io in LOWP and compute == torch.float32
            if lowp:
                static["matmul_dtype"] = torch_dtype(io)
            kernel: Callable[..., Any] = kmath.sdpa_backward if p.backward else kmath.sdpa_forward
            kernel = _math_on_device(kernel) if lowp else kernel
            return _cpu_shortcut(p, kernel, compute) or kernel, static
        if self.op == "flex":
            from .kernels import flex

            spec = flex_spec(p, io, call)
            tiles = flex_tiles(knobs, forward=not p.backward)
            if tiles:  # a kernel of its own: the spec is the compiled kernels' cache key
                spec = dataclasses.replace(spec, tiles=tiles)
            k = flex.kernel(spec, p.name)
            return k.backward if p.backward else k.forward, {}
        from .kernels import fused

        return fused.Kernel(fused.FusedOp(self.op), not p.backward), {"call": call, "check": False}


def _runtime_scalars(p: SdpaProblem) -> list[tuple[str, int, Callable[[Any], Any] | None]]:
    """(keyword, uid, conversion) of the scalars read from the variant pack per call: those the
    node's call leaves open (:meth:`~.kernels.call.SdpaCall.of`): a runtime scale or dropout
    scale, and a philox Seed or Offset that is not constant (a tensor stays a tensor, so a
    device seed is read where the kernel reads it)."""
    runtime: list[tuple[str, int, Callable[[Any], Any] | None]] = []
    if p.scale.uid is not None:
        runtime.append(("scale", p.scale.uid, ScalarSource.read))
    d = p.philox
    if d is None:
        if p.dropout_scale.uid is not None:
            runtime.append(("dropout_scale", p.dropout_scale.uid, _scale_or_one))
        return runtime
    for key, source in (("dropout_seed", d.seed), ("dropout_offset", d.offset)):
        if source.uid is not None:
            runtime.append((key, source.uid, functools.partial(_philox_scalar, source.label)))
    return runtime


def _philox_scalar(label: str, value: Any) -> Any:
    """A runtime Seed or Offset: an integer tensor of one element as it is, else a host int."""
    if value.__class__ is int:  # the torch op's (a Python int: nothing to read)
        return value
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


def _casting(fn: Callable[..., Any], casts: dict[int, Any]) -> Callable[..., Any]:
    """Cast the positional tensors at ``casts``' indices before calling ``fn``."""

    def run(*args: Any, **kw: Any) -> Any:
        converted = [a.to(casts[i]) if i in casts else a for i, a in enumerate(args)]
        return fn(*converted, **kw)

    return run


def _mask_as_bias(fn: Callable[..., Any], dtype: Any) -> Callable[..., Any]:
    """Call ``fn`` with its boolean ``bias`` keyword (a mask) turned into the additive bias it
    means, of ``dtype``: 0 where the mask is True, −inf where it is False. One elementwise pass a
    call, as torch's own ``scaled_dot_product_attention`` does with a bool ``attn_mask``."""

    def run(*args: Any, **kw: Any) -> Any:
        mask = kw["bias"]
        bias = mask.new_zeros(mask.shape, dtype=dtype).masked_fill_(mask.logical_not(), -math.inf)
        return fn(*args, **{**kw, "bias": bias})

    return run


def _stats_as_rank4(fn: Callable[..., Any], dims: tuple[int, ...]) -> Callable[..., Any]:
    """Give ``fn`` a rank-3 Stats (``[B, H, Sq]``, the 6th positional tensor) as the
    ``[B, H, Sq, 1]`` every kernel reads (a view: the same elements)."""

    def run(*args: Any, **kw: Any) -> Any:
        stats = args[5].reshape(*dims, 1)
        return fn(*args[:5], stats, *args[6:], **kw)

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
