"""What torch's fused SDPA ops can run: the case they judge (:class:`FusedSdpaCase`), the
capability record, and the rules that refuse what an op cannot do exactly (each reason names
the feature).

Imports only the call description (:mod:`.call`): the rules take the measured capabilities as
an argument (the probe in :mod:`.probe` measures them; :mod:`.fused` joins the two and
re-exports every public name here), so nothing here runs on a device.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Unpack

import torch

from .call import PLAIN, SdpaCall, SdpaDims, SdpaInputs, tensor_dims

__all__ = [
    "DTYPES",
    "FusedOp",
    "FusedSdpaCase",
    "FusedUnsupportedError",
    "OpCaps",
    "check",
    "dtype_reason",
    "measured_reason",
    "static_reason",
]

Tensor = torch.Tensor
_LOWP = (torch.float16, torch.bfloat16)


class FusedOp(enum.StrEnum):
    """The fused op families torch exposes."""

    CUDNN = "cudnn"
    FLASH = "flash"
    EFFICIENT = "efficient"


class FusedUnsupportedError(RuntimeError):
    """A fused op cannot run this problem exactly; ``str(err)`` names the op and the feature."""

    def __init__(self, op: FusedOp, reason: str) -> None:
        super().__init__(f"{op.value}: {reason}")
        self.op = op
        self.reason = reason


#: the input dtypes each op takes (torch's own lists: cuDNN and flash attention run half
#: precision only, the memory-efficient kernel float32 too, on CUDA and on ROCm's AOTriton)
DTYPES: dict[FusedOp, tuple[torch.dtype, ...]] = {
    FusedOp.CUDNN: _LOWP,
    FusedOp.FLASH: _LOWP,
    FusedOp.EFFICIENT: (*_LOWP, torch.float32),
}


def dtype_reason(op: FusedOp, dtype: torch.dtype) -> str | None:
    """Why ``op`` cannot take inputs of ``dtype`` (None: it takes them).

    Example:
        >>> dtype_reason(FusedOp.FLASH, torch.float32)
        'flash runs float16/bfloat16 only, not float32'
        >>> dtype_reason(FusedOp.EFFICIENT, torch.float32) is None
        True
    """
    if dtype in DTYPES[op]:
        return None
    names = "/".join(str(t).replace("torch.", "") for t in DTYPES[op])
    return f"{op.value} runs {names} only, not {str(dtype).replace('torch.', '')}"


@dataclass(frozen=True)
class FusedSdpaCase(SdpaDims):
    """One SDPA call as the fused ops' rules judge it: its sizes (:class:`~.call.SdpaDims`),
    dtype and device, its :class:`~.call.SdpaCall`, which optional tensors it passes, and its
    direction."""

    dtype: torch.dtype
    device: str
    call: SdpaCall = PLAIN
    bias_shape: tuple[int, ...] | None = None
    padding: bool = False
    dropout_mask: bool = False
    forward: bool = False  # a forward call (O, Stats) rather than a backward one

    @classmethod
    def from_tensors(
        cls,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        call: SdpaCall = PLAIN,
        *,
        forward: bool = False,
        **inputs: Unpack[SdpaInputs],
    ) -> FusedSdpaCase:
        """The case of a call on these tensors (``inputs``: those the call passes)."""
        bias = inputs.get("bias")
        return cls(
            *tensor_dims(q, k, v), q.dtype, str(q.device), call,
            bias_shape=None if bias is None else tuple(int(x) for x in bias.shape),
            padding=inputs.get("seq_len_q") is not None or inputs.get("seq_len_kv") is not None,
            dropout_mask=inputs.get("dropout_mask") is not None,
            forward=forward,
        )  # fmt: skip

    @property
    def dbias(self) -> bool:
        """A backward that computes dBias (a forward ignores the call's dBias shape)."""
        return not self.forward and self.call.dbias_shape is not None

    @property
    def needed_alignment(self) -> str | None:
        """'top_left'/'bottom_right' when the alignment changes the mask, else None."""
        if not self.call.masked:
            return None
        if self.sq == self.skv and not self.padding:
            return None
        return "bottom_right" if self.call.bottom_right else "top_left"


@dataclass(frozen=True)
class OpCaps:
    """What one fused op does on one (device, dtype), measured by tiny runs (see :mod:`.probe`)."""

    op: FusedOp
    available: bool
    reason: str = ""
    lse_rank: int = 3  # rank of the LSE its own forward returns (cuDNN: 3 or 4 by version)
    lse_pad: int = 1  # LSE last dim padded to a multiple of this (efficient on CUDA: 32)
    gqa_native: bool = False
    causal_alignment: str | None = None  # what is_causal means when Sq != Skv
    mask_types: tuple[tuple[str, int], ...] = ()  # efficient: alignment -> custom_mask_type
    window: bool = False  # flash: window_size_left/right; efficient: window_size (causal)
    window_offset: int = 0  # efficient: window_size = left_bound + window_offset
    bias: bool = False
    bias_broadcast: bool = False
    dbias: bool = False
    varlen: bool = False
    varlen_lse: str = ""  # flash: "tokens" ([H, total]) or "batch" ([B, H, max_q])
    varlen_causal: bool = False  # causal per sequence with padding (alignment as measured)
    dv_ne_d: bool = False
    errors: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def mask_type(self, alignment: str) -> int | None:
        for name, value in self.mask_types:
            if name == alignment:
                return value
        return None


# ------------------------------------------------------------------------------------------
# static rules (API facts; no device run)


def static_reason(op: FusedOp, p: FusedSdpaCase) -> str | None:
    """Why ``op`` can never run ``p`` exactly, judged from torch's op signatures; None if it may.

    Device facts (alignment, native GQA, …) are added by :func:`measured_reason`.
    """
    dev = torch.device(p.device)
    if dev.type != "cuda":
        return f"{op.value} needs a CUDA or ROCm device; the tensors are on {dev.type}"
    reason = dtype_reason(op, p.dtype)
    if reason is not None:
        return reason
    if p.dropout_mask:
        return f"{op.value} cannot take an explicit dropout mask (torch's fused ops draw their own)"
    if p.call.alibi:
        return f"{op.value} has no ALiBi in its backward"
    if p.d % 8 or p.dv % 8:
        return f"{op.value} needs head dims that are multiples of 8 (D={p.d}, Dv={p.dv})"
    for name, val in (("left_bound", p.call.left_bound), ("right_bound", p.call.right_bound)):
        if val is not None and val < 0:
            return f"{op.value} cannot take a negative {name} ({val})"
    band = p.call.band
    if band and p.padding:
        return f"{op.value}: sliding-window/band masks with padding are not verified"
    if op is FusedOp.CUDNN:
        if torch.version.hip:
            return "cudnn attention does not exist in ROCm builds of torch"
        if p.sq == 1 and p.skv == 1:  # measured on the H200: cuDNN rejects it at execute time
            return "cudnn does not support seq_q = seq_kv = 1"
        if p.dbias:
            return "cudnn's backward does not compute dBias"
        if p.padding:
            return "cudnn (torch API) takes no padding sequence lengths"
        if band:
            return "cudnn (torch API) has no sliding-window/band masks, only causal"
    elif op is FusedOp.FLASH:
        if p.bias_shape is not None or p.dbias:
            return "flash takes no attention bias"
        if p.dv != p.d:
            return f"flash needs Dv == D (D={p.d}, Dv={p.dv})"
        if p.d > 256:
            return f"flash supports head dim <= 256, got {p.d}"
        if band:
            if not p.call.bottom_right and p.sq != p.skv:
                return "flash windows are bottom-right aligned, node is top-left with Sq != Skv"
            off = p.skv - p.sq
            if (
                p.call.right_bound is not None
                and p.call.right_bound >= p.skv
                and off + p.call.right_bound < p.skv - 1
            ):
                return "flash ignores a right_bound >= Skv, which would change this mask"
            if (
                p.call.left_bound is not None
                and p.call.left_bound >= p.skv
                and p.sq - 1 + off - p.call.left_bound > 0
            ):
                return "flash ignores a left_bound >= Skv, which would change this mask"
    elif op is FusedOp.EFFICIENT:
        if p.padding and (p.bias_shape is not None or p.dbias):
            return "efficient cannot combine padding (cu_seqlens) with a bias"
        if p.call.right_bound is None and p.call.left_bound is not None:
            return "efficient windows need right_bound == 0 (causal + window)"
        if p.call.right_bound not in (None, 0):
            return f"efficient has no band mask with right_bound={p.call.right_bound}"
    if p.bias_shape is not None and len(p.bias_shape) > 4:
        return f"bias rank {len(p.bias_shape)} > 4"
    return None


def check(op: FusedOp, p: FusedSdpaCase, c: OpCaps) -> str | None:
    """Why ``op`` cannot run ``p`` exactly: the static rules, then the measured capabilities ``c``.

    Example:
        >>> import torch
        >>> p = FusedSdpaCase(b=1, h=1, hk=1, hv=1, sq=8, skv=8, d=64, dv=64,
        ...                   dtype=torch.bfloat16, device="cuda:0",
        ...                   call=SdpaCall(dbias_shape=(1, 1, 8, 8)))
        >>> check(FusedOp.CUDNN, p, OpCaps(op=FusedOp.CUDNN, available=True))
        "cudnn's backward does not compute dBias"
    """
    return static_reason(op, p) or measured_reason(op, p, c)


def measured_reason(op: FusedOp, p: FusedSdpaCase, c: OpCaps) -> str | None:
    """Why ``op`` cannot run ``p`` given what the probe measured (``c``); the static rules of
    :func:`static_reason` are assumed to have passed."""
    if not c.available:
        return c.reason or f"{op.value} is not available on {p.device}"
    if p.dv != p.d and not c.dv_ne_d:
        return f"{op.value} did not run Dv != D on this device"
    if p.bias_shape is not None and not c.bias:
        return f"{op.value} did not accept an attention bias on this device"
    if p.dbias and not c.dbias:
        return f"{op.value} did not produce dBias on this device"
    if p.padding and not c.varlen:
        return f"{op.value} has no working varlen (padding) path on this device"
    if p.padding and p.call.right_bound is not None and not c.varlen_causal:
        return f"{op.value} did not run causal masks with padding on this device"
    band = p.call.band
    if band and not c.window:
        return f"{op.value} has no working sliding-window path on this device"
    need = p.needed_alignment
    if op is FusedOp.EFFICIENT:
        reason = _efficient_measured(p, band)
        if reason is not None:
            return reason
    if need is not None:
        if op is FusedOp.EFFICIENT:
            if c.mask_type(need) is None:
                return f"efficient has no {need.replace('_', '-')} causal mask on this device"
        elif op is FusedOp.FLASH and band:
            pass  # windows: bottom-right (static rule above), verified by the probe
        elif c.causal_alignment != need:
            got = (c.causal_alignment or "unknown").replace("_", "-")
            return (
                f"{op.value} causal is {got} aligned when Sq != Skv; the node needs "
                f"{need.replace('_', '-')}"
            )
    return None


def _efficient_measured(p: FusedSdpaCase, band: bool) -> str | None:
    """Cases where the memory-efficient kernels gave wrong numbers on the H200 probe (CUDA
    torch 2.11, docs/notes/torch_gpu_probe.md), refused until a probe shows them right:

    * forward with a bottom-right causal mask when a (sequence's) Sq > Skv: wrong O and
      Stats (the backward of the same case, fed correct O/Stats, was right);
    * sliding windows bottom-right aligned: wrong dQ/dK/dV (top-left windows were right);
      windows with Sq > Skv were not measured.
    """
    br = p.call.bottom_right and p.call.right_bound is not None and (p.sq != p.skv or p.padding)
    if p.forward and br and (p.padding or p.sq > p.skv):
        return (
            "efficient forward with a bottom-right causal mask and Sq > Skv (or padding) "
            "gave wrong O on the GPU probe"
        )
    if band and (br or p.sq > p.skv):
        return "efficient sliding windows are verified only top-left with Sq <= Skv"
    return None
