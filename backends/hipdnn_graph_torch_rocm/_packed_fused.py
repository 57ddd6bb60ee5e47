"""The flash and memory-efficient engines on packed (ragged) SDPA graphs: what they accept
(:func:`packed_fused_choice`, the engines' ``check``) and the plan step that runs a node through
torch's variable-length kernels (:class:`PackedFusedStep`): one kernel launch for the whole
packed batch, cumulative sequence lengths from the call's offsets, no loop over sequences.

What a step does per call: it reads the offsets on the host (as every packed plan does,
:class:`~hipdnn_graph.backend.packed_sdpa.PackedCall`), takes each packed token tensor as a
``[T, H, D]`` view of the caller's buffer (never written), runs the kernel, converts the
log-sum-exp between the graph's Stats and the kernel's layout (:mod:`.kernels.varlen_lse`) and
writes every result into the caller's buffers (a virtual Stats a later node reads is kept in
the plan's private variant pack).

What they accept, checked when the plan is built (each refusal names the feature, and
``TORCH_SDPA_MATH_ENGINE`` runs every packed graph):

* every token tensor of the node packed (Q, K, V, O, dO, dQ, dK, dV); Stats packed, or dense
  ``[B, H, S_max, 1]``;
* no padding mask within the packed sequences (the kernels run each sequence whole);
* what the op's rules accept for a variable-length call (:func:`.kernels.fused.check` with
  ``padding``: data types, head dims, GQA, Dv, masks and the causal alignment the probe
  measured on the device). A causal mask whose alignment the kernel has not (or whose
  variable-length forward the probe found wrong) is accepted when the other alignment passes:
  both masks are one where every sequence has ``Sq == Skv``, so a call whose sequences all
  have it runs the kernel, and any other call runs that node through the math step
  (:class:`~._packed_plan.PackedTorchStep`) — decided per call from the host lengths.

Example:
    >>> PackedFusedChoice("no").accepted, PackedFusedChoice(None, exact_alignment=False).accepted
    (False, True)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

import hipdnn_graph as hg
from hipdnn_graph.backend import SdpaProblem
from hipdnn_graph.backend.dtypes import torch_dtype
from hipdnn_graph.backend.packed_sdpa import KEY_SLOTS, QUERY_SLOTS, PackedCall, packed_results
from hipdnn_graph.backend.ragged import is_ragged

from .kernels import fused
from .kernels._fused_common import rng_state
from .kernels.call import SdpaCall, problem_dims
from .kernels.varlen import (
    cu_seqlens,
    efficient_varlen_backward,
    efficient_varlen_forward,
    flash_varlen_backward,
    flash_varlen_forward,
)
from .kernels.varlen_lse import (
    TokenIndex,
    dense_stats_read,
    dense_stats_write,
    from_kernel_lse,
    to_kernel_lse,
)

__all__ = ["PackedFusedChoice", "PackedFusedStep", "packed_fused_choice"]

Tensor = torch.Tensor
#: the slots that hold tokens (every one of them must be packed on the fused path)
TOKEN_SLOTS = tuple(s for s in QUERY_SLOTS + KEY_SLOTS if s != "Stats")


@dataclass(frozen=True)
class PackedFusedChoice:
    """An engine's verdict on a packed node: why it refuses (``reason``), or that it runs it,
    with the node's causal alignment (``exact_alignment``) or only on calls whose sequences all
    have ``Sq == Skv`` (the others run through the math step)."""

    reason: str | None
    exact_alignment: bool = True

    @property
    def accepted(self) -> bool:
        return self.reason is None


def _device() -> str:
    return f"cuda:{torch.cuda.current_device()}"


def _case(p: SdpaProblem, call: SdpaCall) -> fused.FusedSdpaCase:
    """The node as the fused ops' rules judge a variable-length call (``padding``)."""
    return fused.FusedSdpaCase(
        *problem_dims(p), torch_dtype(p.tensors["Q"].data_type), _device(), call,
        padding=True, forward=not p.backward,
    )  # fmt: skip


def packed_fused_choice(op: str, p: SdpaProblem) -> PackedFusedChoice:
    """Whether kernel family ``op`` (``"flash"``, ``"efficient"``) runs the packed node ``p``
    (the engine checked its compute and data types, :mod:`._sdpa_support`)."""
    node = f"node '{p.name}'"
    for slot in TOKEN_SLOTS:
        if p.has(slot) and not is_ragged(p.tensors[slot]):
            return PackedFusedChoice(
                f"{node}: {op}'s variable-length kernels take packed tokens, but {slot} "
                f"'{p.tensors[slot].name}' is dense (TORCH_SDPA_MATH_ENGINE runs it)"
            )
    if p.padding:
        return PackedFusedChoice(
            f"{node}: {op}'s variable-length kernels run each packed sequence whole; a padding "
            "mask (SEQ_LEN_Q/SEQ_LEN_KV) within packed sequences runs on TORCH_SDPA_MATH_ENGINE"
        )
    stats = p.tensors.get("Stats")
    if stats is not None and not is_ragged(stats) and len(stats.dim) != 4:
        return PackedFusedChoice(
            f"{node}: {op}'s packed path reads a dense Stats as [B, H, S_max, 1], got dims "
            f"{list(stats.dim)}"
        )
    call = SdpaCall.of(p)
    reason = fused.check(fused.FusedOp(op), _case(p, call))
    if reason is None:
        return PackedFusedChoice(None)
    if call.causal:
        other = dataclasses.replace(call, bottom_right=not call.bottom_right)
        if fused.check(fused.FusedOp(op), _case(p, other)) is None:
            return PackedFusedChoice(None, exact_alignment=False)
    return PackedFusedChoice(f"{node}: {reason}")


def _last_dim_dense(x: Tensor) -> Tensor:
    """``x`` with a unit stride on its last dim (the kernels' one layout demand)."""
    return x if x.stride(-1) == 1 else x.contiguous()


@dataclass(frozen=True)
class PackedFusedStep:
    """One packed node through a variable-length kernel, resolved when the plan is built."""

    op: fused.FusedOp
    backward: bool
    packed: Any  # PackedSdpa
    results: tuple[Any, ...]  # PackedResult
    io: torch.dtype
    #: H, Hk, Hv
    heads: tuple[int, int, int]
    causal: bool
    bottom_right: bool
    exact_alignment: bool
    #: efficient's custom_mask_type (0 without a mask)
    mask_type: int
    #: the kernel's LSE layout ("tokens", "batch") and the batch layout's padding
    lse_layout: str
    lse_pad: int
    #: K and V reach the kernel with their own heads (else expanded to H, dK/dV summed back)
    gqa_native: bool
    stats_dense: bool
    #: the math step, for calls the kernel's causal alignment does not serve
    fallback: Any

    @classmethod
    def of(cls, p: SdpaProblem, op: str, fallback: Any) -> PackedFusedStep:
        choice = packed_fused_choice(op, p)
        if choice.reason is not None:  # check() refused it already; a plan built anyway
            raise hg.HipdnnError(hg.ErrorCode.GRAPH_NOT_SUPPORTED, choice.reason)
        kind = fused.FusedOp(op)
        io = torch_dtype(p.tensors["Q"].data_type)
        caps = fused.capabilities(_device(), io)[kind]
        call = SdpaCall.of(p)
        align = call.bottom_right if choice.exact_alignment else not call.bottom_right
        mask_type = 0
        if call.causal and kind is fused.FusedOp.EFFICIENT:
            mask_type = caps.mask_type("bottom_right" if align else "top_left") or 0
        stats = p.tensors.get("Stats")
        return cls(
            op=kind, backward=p.backward, packed=fallback.packed,
            results=packed_results(p, torch_dtype), io=io,
            heads=(p.heads, p.heads_k, p.heads_v), causal=call.causal,
            bottom_right=call.bottom_right, exact_alignment=choice.exact_alignment,
            mask_type=mask_type,
            lse_layout=caps.varlen_lse if kind is fused.FusedOp.FLASH else "batch",
            lse_pad=1 if kind is fused.FusedOp.FLASH else max(1, caps.lse_pad),
            gqa_native=caps.gqa_native and p.heads_k == p.heads_v,
            stats_dense=stats is not None and not is_ragged(stats), fallback=fallback,
        )  # fmt: skip

    def reads(self) -> set[int]:
        return set(self.fallback.reads())

    # ------------------------------------------------------------------------------ per call

    def execute(self, buffers: dict[int, Any], internal: frozenset[int]) -> None:
        call = self.packed.call(buffers)
        lq, lkv = call.lengths("q"), call.lengths("kv")
        if not self.exact_alignment and lq != lkv:
            self.fallback.execute(buffers, internal)
            return
        uids = self.packed.uids
        tokens = {
            s: _last_dim_dense(call.gather(s, buffers[uids[s]]))
            for s in (("Q", "K", "V", "O", "dO") if self.backward else ("Q", "K", "V"))
        }
        device = tokens["Q"].device
        idx = TokenIndex.of(lq, device)
        run = _Run(self, idx, lq, lkv, self.packed.scale(buffers), device)
        values: dict[str, Tensor]
        if self.backward:
            stats_buffer = buffers[uids["Stats"]]
            stats = (
                dense_stats_read(stats_buffer, idx)
                if self.stats_dense
                else call.gather("Stats", stats_buffer)[..., 0]
            )
            values = dict(zip(("dQ", "dK", "dV"), run.backward(tokens, stats), strict=True))
        else:
            o, lse = run.forward(tokens)
            values = {"O": o, "Stats": lse[..., None]}
        self._store(call, values, buffers, internal, idx, device)

    def _store(
        self,
        call: PackedCall,
        values: Mapping[str, Tensor],
        buffers: dict[int, Any],
        internal: frozenset[int],
        idx: TokenIndex,
        device: torch.device,
    ) -> None:
        for slot, uid, fill, dtype, dims in self.results:
            out = buffers.get(uid)
            if out is None:  # a virtual tensor: kept if a later node reads it
                if uid not in internal:
                    continue
                out = buffers[uid] = torch.empty(dims, dtype=dtype, device=device)
            if slot == "Stats" and self.stats_dense:
                dense_stats_write(out, values[slot][..., 0], idx)
            else:
                call.scatter(slot, out, values[slot], fill)


@dataclass
class _Run:
    """One call of a :class:`PackedFusedStep`: its sequences and the kernel calls."""

    step: PackedFusedStep
    idx: TokenIndex
    lq: list[int]
    lkv: list[int]
    scale: float
    device: torch.device

    @property
    def max_q(self) -> int:
        return max(self.lq, default=0)

    def _kv(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor, bool]:
        h, hk, hv = self.step.heads
        # FlashAttention runs a GQA batch whose longest query sequence is one token as one query
        # per sequence (seqlenq_ngroups_swapped in flash_api.cpp), which a packed batch with an
        # empty query sequence is not: such a call takes K and V expanded to H heads
        swapped = self.step.op is fused.FusedOp.FLASH and self.max_q == 1 and 0 in self.lq
        if (hk == h and hv == h) or (self.step.gqa_native and not swapped):
            return k, v, False
        return k.repeat_interleave(h // hk, dim=1), v.repeat_interleave(h // hv, dim=1), True

    def _empty_rows(self) -> Tensor | None:
        """Bool ``[Tq]``: query tokens that see no key (None when the lengths allow none)."""
        shifted = self.step.causal and self.step.bottom_right
        pairs = zip(self.lq, self.lkv, strict=True)
        if not any(kv == 0 or (shifted and kv < q) for q, kv in pairs):
            return None
        lq = torch.tensor(self.lq, device=self.device)[self.idx.batch]
        lkv = torch.tensor(self.lkv, device=self.device)[self.idx.batch]
        rows = lkv == 0
        if shifted:
            rows |= self.idx.position + lkv - lq < 0
        return rows

    def forward(self, t: Mapping[str, Tensor]) -> tuple[Tensor, Tensor]:
        """``(o [Tq, H, Dv] in the inputs' type, stats [Tq, H] float32)``."""
        q, k, v = t["Q"], t["K"], t["V"]
        tq, h = q.shape[0], q.shape[1]
        if max(self.lq, default=0) == 0 or max(self.lkv, default=0) == 0:
            o = q.new_zeros((tq, h, v.shape[2]))
            return o, torch.full((tq, h), math.inf, device=self.device)
        kx, vx, _ = self._kv(k, v)
        cu_q, cu_kv = cu_seqlens(self.lq, self.device), cu_seqlens(self.lkv, self.device)
        max_kv = max(self.lkv)
        if self.step.op is fused.FusedOp.FLASH:
            o, lse, _ = flash_varlen_forward(
                q, kx, vx, cu_q, cu_kv, self.max_q, max_kv, scale=self.scale,
                causal=self.step.causal,
            )  # fmt: skip
        else:
            o, lse = efficient_varlen_forward(
                q, kx, vx, cu_q, cu_kv, self.max_q, max_kv, scale=self.scale,
                mask_type=self.step.mask_type,
            )  # fmt: skip
        stats = from_kernel_lse(lse, self.step.lse_layout, self.idx)
        rows = self._empty_rows()
        if rows is not None:
            o = o.masked_fill(rows[:, None, None], 0.0)
            stats = stats.masked_fill(rows[:, None], math.inf)
        return o, stats

    def backward(self, t: Mapping[str, Tensor], stats: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(dq, dk, dv)`` over the packed tokens from the given O and Stats ``[Tq, H]``."""
        q, k, v = t["Q"], t["K"], t["V"]
        o, do = (x if x.dtype == q.dtype else x.to(q.dtype) for x in (t["O"], t["dO"]))
        if max(self.lq, default=0) == 0 or max(self.lkv, default=0) == 0:
            return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        kx, vx, expanded = self._kv(k, v)
        cu_q, cu_kv = cu_seqlens(self.lq, self.device), cu_seqlens(self.lkv, self.device)
        max_q, max_kv = self.max_q, max(self.lkv)
        width = -(-max_q // self.step.lse_pad) * self.step.lse_pad
        lse = to_kernel_lse(stats, self.step.lse_layout, self.idx, width=width)
        if self.step.op is fused.FusedOp.FLASH:
            dq, dk, dv = flash_varlen_backward(
                do, q, kx, vx, o, lse, rng_state(fused.FusedOp.FLASH, self.device), cu_q, cu_kv,
                max_q, max_kv, scale=self.scale, causal=self.step.causal,
            )  # fmt: skip
        else:
            dq, dk, dv = efficient_varlen_backward(
                do, q, kx, vx, o, lse, cu_q, cu_kv, max_q, max_kv, scale=self.scale,
                mask_type=self.step.mask_type,
            )  # fmt: skip
        if expanded:
            _, hk, hv = self.step.heads
            dk = dk.view(dk.shape[0], hk, -1, dk.shape[2]).sum(2)
            dv = dv.view(dv.shape[0], hv, -1, dv.shape[2]).sum(2)
        rows = self._empty_rows()  # queries that see no key: never left to a kernel's buffer
        if rows is not None:
            dq = dq.masked_fill(rows[:, None, None], 0.0)
        if any(q == 0 < kv for q, kv in zip(self.lq, self.lkv, strict=True)):  # keys no query reads
            idle = torch.tensor([q == 0 for q in self.lq], device=self.device)
            keys = torch.repeat_interleave(idle, torch.tensor(self.lkv, device=self.device))
            dk = dk.masked_fill(keys[:, None, None], 0.0)
            dv = dv.masked_fill(keys[:, None, None], 0.0)
        return dq, dk, dv
