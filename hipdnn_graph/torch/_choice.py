"""The kernel torch would pick: ``F.scaled_dot_product_attention``'s own backend selection, asked
for the op's calls on CUDA and ROCm tensors, so that the op runs on the same fused kernel.

Torch's selection (``torch._fused_sdp_choice``, the function ``F.scaled_dot_product_attention``
calls to dispatch, which runs ``can_use_flash_attention``, ``can_use_efficient_attention`` and
``can_use_cudnn_attention`` in the priority order) reads the tensors' shapes, strides, dtypes,
devices and gradient flags, the other arguments, and process-wide switches: the backends enabled
(``torch.backends.cuda.enable_*_sdp`` and the ``torch.nn.attention.sdpa_kernel`` context, which
sets them), their priority order, determinism, cuDNN, grad mode and the ROCm attention library.
:func:`choose_engine` asks it once per combination of all of them (:func:`switches` reads the
switches, each a host-side flag) and names the engine running the backend it picked: the math
engine where torch falls back to its math backend, and None where torch picks none (every
backend disabled) or one this package has no engine for.

Example:
    >>> import torch
    >>> ENGINE_OF_BACKEND[int(torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION)]
    'TORCH_SDPA_EFFICIENT_ENGINE'
    >>> ENGINE_OF_BACKEND[int(torch.nn.attention.SDPBackend.MATH)]
    'TORCH_SDPA_MATH_ENGINE'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..types import DiagonalAlignment
from ._cached import Options, remember

__all__ = [
    "DEVICE_TYPES",
    "ENGINE_OF_BACKEND",
    "FLASH",
    "MATH",
    "choose_engine",
    "clear_choices",
    "fused_choice",
    "on_clear",
    "preferring",
    "switches",
]

Tensor = torch.Tensor

#: the device types whose calls torch's choice decides (CUDA and ROCm builds of torch: "cuda";
#: on the CPU the math engine runs, on torch's fused CPU kernel where torch runs it)
DEVICE_TYPES = frozenset({"cuda"})

FLASH = "TORCH_SDPA_FLASH_ENGINE"
MATH = "TORCH_SDPA_MATH_ENGINE"
#: torch's ``SDPBackend`` values (``torch._fused_sdp_choice``) -> the engine running that backend
ENGINE_OF_BACKEND = {
    0: MATH,
    1: FLASH,
    2: "TORCH_SDPA_EFFICIENT_ENGINE",
    3: "TORCH_SDPA_CUDNN_ENGINE",
}


def fused_choice(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, p: float, options: Options, *,
    padded: bool, training: bool = False,
) -> str | None:  # fmt: skip
    """The engine of the backend ``F.scaled_dot_product_attention`` would run this call on
    (:func:`choose_engine`), to prefer (not force): the same fused kernel, and with
    dropout the same mask; None on the CPU, for a forced engine, or where the call uses a
    feature torch's op lacks (its choice then means nothing). ``training``: decide as for
    inputs that need gradients (the custom ops see detached tensors)."""
    plain = (
        (options.alignment == DiagonalAlignment.TOP_LEFT or not options.causal)
        and options.left_bound is None
        and options.right_bound is None
        and not options.alibi
        and not padded
    )
    if q.device.type not in DEVICE_TYPES or options.engine is not None or not plain:
        return None
    gqa = k.shape[1] != q.shape[1] or v.shape[1] != q.shape[1]
    return choose_engine(q, k, v, mask, p, options.causal, options.scale, gqa, training=training)


def preferring(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, p: float, options: Options, *,
    padded: bool,
) -> Options:  # fmt: skip
    """``options`` preferring the engine of torch's choice for this call (:func:`fused_choice`;
    the options themselves where there is none), made once per combination."""
    prefer = fused_choice(q, k, v, mask, p, options, padded=padded)
    if prefer is None:
        return options
    key = (options, prefer)
    made = _PREFERRING.get(key)
    return made if made is not None else remember(_PREFERRING, key, options._replace(prefer=prefer))


_PREFERRING: dict[tuple[Options, str], Options] = {}


def choose_engine(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None,
    p: float,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
    *,
    training: bool = False,
) -> str | None:
    """The engine of the backend ``F.scaled_dot_product_attention`` picks for these arguments
    (None: torch picks none this package runs). For CUDA/ROCm tensors only.

    ``training``: decide as for inputs that need gradients (the op's custom ops see detached
    tensors; a training call's inputs need them), leaving the caller's tensors untouched;
    otherwise the tensors' own gradient flags are read, as torch reads them.
    """
    key = (
        *(_facts(t) for t in (q, k, v)),
        None if attn_mask is None else _facts(attn_mask),
        p, is_causal, scale, enable_gqa, training, switches(),
    )  # fmt: skip
    choice = _CHOICES.get(key)
    if choice is None:
        if training:  # some rules of torch's choice depend on it
            q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        try:
            choice = int(
                torch._fused_sdp_choice(
                    q, k, v, attn_mask, p, is_causal, scale=scale, enable_gqa=enable_gqa
                )
            )
        except RuntimeError:  # torch has no backend for it (each one disabled, say)
            choice = -1
        if len(_CHOICES) > 4096:
            _CHOICES.clear()
        _CHOICES[key] = choice
    return ENGINE_OF_BACKEND.get(choice)


#: torch's choice by everything it reads (see :func:`choose_engine`)
_CHOICES: dict[tuple[Any, ...], int] = {}


def clear_choices() -> None:
    """Forget the remembered choices of :func:`choose_engine` and what was learnt from them
    (see :func:`on_clear`): they are asked again."""
    _CHOICES.clear()
    for forget in _ON_CLEAR:
        forget()


def on_clear(forget: Callable[[], Any]) -> None:
    """Have :func:`clear_choices` call ``forget()`` too (for what remembers a choice)."""
    _ON_CLEAR.append(forget)


_ON_CLEAR: list[Callable[[], Any]] = []


def _facts(t: Tensor) -> tuple[Any, ...]:
    return (t.shape, t.stride(), t.dtype, t.device, t.requires_grad)


def switches() -> tuple[Any, ...]:
    """The process-wide settings torch's choice reads (each a host-side flag)."""
    return (*(read() for read in _SWITCH_READERS), tuple(torch._C._get_sdp_priority_order()))


#: readers of the switches of :func:`switches` that this torch build has (the sdpa backends
#: enabled, determinism, cuDNN, grad mode, the ROCm attention library)
_SWITCH_READERS = tuple(
    getattr(torch._C, name)
    for name in (
        "_get_flash_sdp_enabled",
        "_get_mem_efficient_sdp_enabled",
        "_get_math_sdp_enabled",
        "_get_cudnn_sdp_enabled",
        "_get_overrideable_sdp_enabled",
        "_get_fa3_sdp_enabled",
        "_get_deterministic_algorithms",
        "_get_deterministic_algorithms_warn_only",
        "_get_cudnn_enabled",
        "is_grad_enabled",
        "_get_rocm_fa_preferred_backend",
    )
    if hasattr(torch._C, name)
)
