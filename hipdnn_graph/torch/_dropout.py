"""Philox dropout of the torch op: where its seed and offset come from, which engine runs it, and
what its forward hands to its backward.

The op draws no mask. Its forward graph is a philox-dropout SdpaFwd graph (``dropout_p`` with a
pass-by-value Seed and Offset) and its backward graph the matching SdpaBwd graph, pinned to the
engine the forward ran on, so that both draw the same mask:

* **CUDA/ROCm tensors**: ``(seed, offset)`` is read from the device's default CUDA generator
  (its current seed and offset, host-side fields: no sync), exactly the pair that
  ``F.scaled_dot_product_attention``'s fused op would take; after the forward the generator's
  offset is advanced by that engine's increment (:func:`increment`: ``B·H·Sq·Skv`` for the
  memory-efficient and cuDNN kernels and the math engine, ``B·H·32`` for flash, rounded up to a
  multiple of 4), as torch's op advances it. So ``torch.manual_seed`` reproduces a run, and where
  the same fused kernel runs, this op and ``F.scaled_dot_product_attention`` draw the same mask.
  The engine is the fused op ``F.scaled_dot_product_attention`` would choose for these arguments
  (``torch._fused_sdp_choice``), preferred by name; when it cannot run the graph (or the call
  uses a hipDNN-only feature), the default ranking picks an engine of the documented stream.
* **CPU tensors**: the math engine, on the documented stream (:mod:`hipdnn_graph.philox`); the
  seed is a 62-bit integer drawn from torch's CPU generator (``torch.randint``, one draw per
  call) and the offset is 0 (the CPU generator has no Philox offset).

What the forward hands to the backward is a CPU int64 tensor ``[seed, offset, engine]``
(:func:`pack_state`): the backward reads it on the host, without a sync.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from ._choice import FLASH

__all__ = [
    "FLASH",
    "advance",
    "advance_by",
    "draw",
    "increment",
    "pack_state",
    "take",
    "unpack_state",
]

Tensor = torch.Tensor

_U64 = 1 << 64

#: engine names by the index the state tensor carries (process-local; grows, never reorders)
_NAMES: list[str] = []
_NAMES_LOCK = threading.Lock()


def increment(engine: str, b: int, h: int, sq: int, skv: int) -> int:
    """How far a forward on ``engine`` advances the CUDA generator's offset (what torch's fused
    op of that engine advances it by, rounded up to a multiple of 4).

    Example:
        >>> increment("TORCH_SDPA_CUDNN_ENGINE", 8, 12, 1024, 1024), increment(FLASH, 8, 12, 1, 1)
        (100663296, 3072)
    """
    n = b * h * 32 if engine == FLASH else b * h * sq * skv
    return (n + 3) // 4 * 4


def _cuda_generator(device: torch.device) -> Any:
    if not torch.cuda.default_generators:
        torch.cuda.init()  # the generators exist once CUDA is initialized
    index = device.index if device.index is not None else torch.cuda.current_device()
    return torch.cuda.default_generators[index]


def draw(device: torch.device) -> tuple[int, int]:
    """This call's ``(seed, offset)`` from torch's generator of ``device`` (see the module).

    On a CUDA device the generator is only read here; :func:`advance` moves it on once the
    engine is known. On the CPU the seed is drawn (the generator moves on) and the offset is 0.
    """
    if device.type == "cuda":
        gen = _cuda_generator(device)
        return _signed(int(gen.initial_seed())), _signed(int(gen.get_offset()))
    return int(torch.randint(0, 1 << 62, (), dtype=torch.int64)), 0


def take(device: torch.device, step: int) -> tuple[int, int]:
    """This call's ``(seed, offset)`` (:func:`draw`) with the generator already moved on by
    ``step`` (:func:`increment`'s step of the engine that will run), in one call: what torch's
    fused ops do before they launch (a CUDA generator's offset is advanced when the kernel takes
    its Philox state). The engines run at the returned pair whatever the generator holds.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> first = take(torch.device("cpu"), 12)
        >>> _ = torch.manual_seed(0)
        >>> first == draw(torch.device("cpu"))
        True
    """
    if device.type == "cuda":
        gen = _cuda_generator(device)
        seed, offset = int(gen.initial_seed()), int(gen.get_offset())
        gen.set_offset((offset + step) % _U64)
        return _signed(seed), _signed(offset)
    return int(torch.randint(0, 1 << 62, (), dtype=torch.int64)), 0


def _signed(x: int) -> int:
    """A 64-bit pattern as the int64 holding it (the graph's Seed and Offset are INT64)."""
    x %= _U64
    return x - _U64 if x >= 1 << 63 else x


def advance(device: torch.device, offset: int, engine: str, shape: tuple[int, ...]) -> None:
    """Move the CUDA generator of ``device`` past this call's draw (nothing on the CPU)."""
    if device.type == "cuda":
        b, h, sq, skv = shape
        advance_by(device, offset, increment(engine, b, h, sq, skv))


def advance_by(device: torch.device, offset: int, step: int) -> None:
    """Set the CUDA generator of ``device`` to ``offset + step`` (:func:`increment`'s step of the
    engine that ran; nothing on the CPU)."""
    if device.type == "cuda":
        _cuda_generator(device).set_offset((offset + step) % _U64)


def pack_state(seed: int, offset: int, engine: str) -> Tensor:
    """The CPU int64 ``[seed, offset, engine index]`` the forward hands to the backward."""
    with _NAMES_LOCK:
        if engine not in _NAMES:
            _NAMES.append(engine)
        index = _NAMES.index(engine)
    return torch.tensor([_signed(seed), _signed(offset), index], dtype=torch.int64)


def unpack_state(state: Tensor) -> tuple[int, int, str]:
    """``(seed, offset, engine)`` from :func:`pack_state`'s tensor (read on the host: no sync).

    Example:
        >>> unpack_state(pack_state(2**64 - 1, 8, FLASH))
        (-1, 8, 'TORCH_SDPA_FLASH_ENGINE')
    """
    seed, offset, index = (int(x) for x in state.tolist())
    return seed, offset, _NAMES[index]
