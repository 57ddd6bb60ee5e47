"""What one SDPA node is to FlexAttention, and whether it can run it: :class:`FlexSpec` (all a
compiled kernel depends on), :func:`static_reason` (why not, decided before anything compiles),
:func:`head_groups` / :func:`group_spec` (a bias past FlexAttention's 32-bit offsets, run over
groups of whole K/V heads). Part of :mod:`.flex`, which re-exports these names.

Example:
    >>> import torch
    >>> spec = FlexSpec(b=1, h=2, hk=1, hv=1, sq=8, skv=8, d=16, dv=16, dtype=torch.float32,
    ...                 device="cpu", forward=True, bias_shape=(1, 2, 8, 8))
    >>> head_groups(spec), group_spec(spec, 1) == spec
    (1, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from . import _flex_mods as mods
from ._flex_env import CPU_ENV, cpu_allowed
from .call import PLAIN, SdpaCall, SdpaDims

__all__ = [
    "FlexSpec",
    "dims4",
    "flex_available",
    "group_spec",
    "head_groups",
    "per_group",
    "static_reason",
]

#: FlexAttention's kernels index a captured tensor (and scatter its gradient) with 32-bit offsets
_MAX_BUFFER = 2**31
_ALIBI_NOTE = " (not with ALiBi: its slopes follow the head)"


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
class FlexSpec(SdpaDims):
    """Everything about one SDPA node that its compiled kernel depends on: sizes
    (:class:`~.call.SdpaDims`), types and device, its :class:`~.call.SdpaCall` (a scale of None
    there: given per call), and which optional tensors it passes."""

    dtype: torch.dtype
    device: str
    forward: bool
    call: SdpaCall = PLAIN
    bias_shape: tuple[int, ...] | None = None
    bias_dtype: torch.dtype | None = None  # None: the input type
    #: backward: declared types of dQ, dK, dV (and dBias); () means the input type (dBias fp32)
    grad_dtypes: tuple[torch.dtype, ...] = ()
    padding: bool = False
    dropout_mask: bool = False
    want_stats: bool = True  # forward: produce Stats
    #: flex kernel options fixed by the engine's knobs (``BLOCK_M``, ``BLOCK_N``,
    #: ``num_warps``); () leaves the tiles to flex, with the smaller-tile fallbacks
    tiles: tuple[tuple[str, int], ...] = ()

    @property
    def dbias_shape(self) -> tuple[int, ...] | None:
        """The backward's dBias shape (None: no dBias), the call's."""
        return self.call.dbias_shape

    @property
    def features(self) -> mods.Features:
        c = self.call
        return mods.Features(
            sq=self.sq,
            skv=self.skv,
            bias_dims=None if self.bias_shape is None else mods.bias_dims(self.bias_shape),
            alibi=c.alibi,
            runtime_scale=c.scale is None,
            bottom_right=c.bottom_right,
            left_bound=c.left_bound,
            right_bound=c.right_bound,
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
            f"its slices below 2^31 elements{_ALIBI_NOTE if spec.call.alibi else ''}"
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
    if spec.call.alibi or not mods.bias_dims(spec.bias_shape)[1]:
        return None
    for groups in range(2, spec.hk + 1):
        if spec.hk % groups == 0 and elements // groups < _MAX_BUFFER:
            return groups
    return None


def group_spec(spec: FlexSpec, groups: int) -> FlexSpec:
    """The spec of one of ``groups`` head groups of ``spec`` (its heads and bias divided)."""
    return replace(
        spec,
        h=spec.h // groups,
        hk=spec.hk // groups,
        hv=spec.hv // groups,
        call=replace(spec.call, dbias_shape=per_group(spec.dbias_shape, groups)),
        bias_shape=per_group(spec.bias_shape, groups),
    )


def dims4(shape: Sequence[int] | None) -> tuple[int, ...] | None:
    """``shape`` right-aligned to four dims (leading ones added)."""
    return None if shape is None else (1,) * (4 - len(shape)) + tuple(shape)


def per_group(shape: tuple[int, ...] | None, groups: int) -> tuple[int, ...] | None:
    """``shape`` (right-aligned to ``[B,H,Sq,Skv]``) with its head dim divided by ``groups``."""
    if shape is None or len(shape) < 3 or shape[-3] == 1:
        return shape
    i = len(shape) - 3
    return (*shape[:i], shape[i] // groups, *shape[i + 1 :])
