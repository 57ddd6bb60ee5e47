"""The math engine's CPU shortcut: torch's fused CPU attention kernel for plain nodes.

``torch.nn.functional.scaled_dot_product_attention`` runs CPU tensors on one fused kernel
(``aten._scaled_dot_product_flash_attention_for_cpu`` and its backward); the chunked matmuls of
:mod:`.math` cost several times its host time on small problems. A node that kernel computes
exactly (no bias, ALiBi, band, padding or dropout; a causal mask only top-left or on a square
problem; as many K/V heads as Q heads; equal head dims; the compute type that the kernel
accumulates in) runs on it when its tensors are on the CPU; anything else, and every other
device, keeps the chunked kernels. The results have the chunked kernels' contract: ``(O, Stats)``
with Stats ``[B, H, Sq, 1]``, and ``(dQ, dK, dV, None)`` from the given O and Stats.

Example:
    >>> import torch
    >>> from hipdnn_graph_torch_rocm.kernels import cpu_fused, math
    >>> from hipdnn_graph_torch_rocm.kernels.call import SdpaCall
    >>> q = k = v = torch.randn(1, 2, 4, 8)
    >>> o, stats = cpu_fused.forward(q, k, v, scale=0.5, causal=True)
    >>> ref, _ = math.sdpa_forward(q, k, v, SdpaCall(scale=0.5, right_bound=0))
    >>> torch.allclose(o, ref, atol=1e-6), stats.shape
    (True, torch.Size([1, 2, 4, 1]))
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["OnCpu", "applies", "backward", "forward", "on_cpu"]

Tensor = torch.Tensor

_FORWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default

#: what the fused CPU kernel accumulates in, by input dtype
_ACCUMULATE = {
    torch.float16: torch.float32,
    torch.bfloat16: torch.float32,
    torch.float32: torch.float32,
    torch.float64: torch.float64,
}


def applies(
    *,
    io: torch.dtype,
    compute: torch.dtype,
    heads: tuple[int, int, int],
    dims: tuple[int, int],
    seq: tuple[int, int],
    causal: bool | None,
    bottom_right: bool,
) -> bool:
    """Whether the fused CPU kernel computes a node exactly as the chunked kernels do.

    ``causal`` is True for a causal mask, False for no mask and None for any other window.
    """
    h, hk, hv = heads
    sq, skv = seq
    return (
        causal is not None
        and _ACCUMULATE.get(io) == compute
        and h == hk == hv
        and dims[0] == dims[1]
        and min(h, sq, skv, dims[0]) > 0
        and not (causal and bottom_right and sq != skv)
    )


def forward(
    q: Tensor, k: Tensor, v: Tensor, *, scale: float, causal: bool
) -> tuple[Tensor, Tensor]:
    """``(O, Stats)``: O in q's dtype, Stats ``[B, H, Sq, 1]`` natural-log LSE."""
    o, lse = _FORWARD(q, k, v, 0.0, causal, scale=scale)
    return o, lse.unsqueeze(-1)


def backward(
    q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor, stats: Tensor, *, scale: float,
    causal: bool,
) -> tuple[Tensor, Tensor, Tensor, None]:  # fmt: skip
    """``(dQ, dK, dV, None)`` from the given O and Stats (an LSE of ``−inf`` never occurs here:
    every row of a plain or top-left causal problem sees a key)."""
    dtype = q.dtype
    lse = stats.squeeze(3)  # [B, H, Sq, 1] -> [B, H, Sq]: a view op, the cheapest
    if lse.dtype is not _ACCUMULATE[dtype]:
        lse = lse.to(_ACCUMULATE[dtype])
    if do.dtype is not dtype:
        do = do.to(dtype)
    if o.dtype is not dtype:
        o = o.to(dtype)
    dq, dk, dv = _BACKWARD(do, q, k, v, o, lse, 0.0, causal, scale=scale)
    return dq, dk, dv, None


def on_cpu(
    chunked: Callable[..., Any], fused: Callable[..., Any], causal: bool
) -> Callable[..., Any]:
    """A kernel that runs ``fused`` on CPU tensors and ``chunked`` elsewhere (``chunked``'s
    arguments: the tensors, the ``call`` keyword and the per-call inputs)."""
    return OnCpu(chunked, fused, causal)


class OnCpu:
    """:func:`on_cpu`'s kernel: ``fused`` on CPU tensors, ``chunked`` elsewhere; :meth:`bind`
    gives the same with a plan's keywords bound once."""

    __slots__ = ("causal", "chunked", "fused")

    def __init__(self, chunked: Callable[..., Any], fused: Callable[..., Any], causal: bool):
        self.chunked, self.fused, self.causal = chunked, fused, causal

    def __call__(self, *args: Any, **kw: Any) -> Any:
        if args[0].is_cpu:
            scale = kw["call"].scale_or(kw.get("scale"))
            return self.fused(*args, scale=scale, causal=self.causal)
        return self.chunked(*args, **kw)

    def bind(self, static: dict[str, Any]) -> Callable[..., Any]:
        """The kernel on positional tensors alone, with ``static`` (every keyword) bound: on CPU
        tensors torch's fused CPU op itself, with its constant arguments bound.

        The result's ``autograd()`` answers the fields ``(pair, call)`` of its
        :class:`~hipdnn_graph.backend.AutogradForm` while its last call ran the fused op (on
        CPU tensors), else None: the backward's call is exactly the one torch's autograd
        formula of ``aten._scaled_dot_product_flash_attention_for_cpu`` makes (its backward
        op on the forward's inputs, output and log-sum-exp, with the same flags), so the
        forward's and the backward's pairs are equal."""
        chunked = functools.partial(self.chunked, **static)
        scale, causal = static["call"].scale_or(None), self.causal
        pair = ("_scaled_dot_product_flash_attention_for_cpu", causal, scale)
        fused_ran = [False]  # whether the last call ran the fused op
        if self.fused is forward:

            def run_forward(q: Tensor, k: Tensor, v: Tensor) -> Any:
                fused_ran[0] = q.is_cpu
                if q.is_cpu:
                    o, lse = _FORWARD(q, k, v, 0.0, causal, scale=scale)
                    return o, lse.unsqueeze(-1)
                return chunked(q, k, v)

            def differentiable(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
                return _FORWARD(q, k, v, 0.0, causal, scale=scale)[0]  # type: ignore[no-any-return]

            run_forward.autograd = lambda: (pair, differentiable) if fused_ran[0] else None  # type: ignore[attr-defined]
            return run_forward
        fused = functools.partial(self.fused, scale=scale, causal=causal)

        def run(*args: Any) -> Any:
            fused_ran[0] = args[0].is_cpu
            return fused(*args) if fused_ran[0] else chunked(*args)

        run.autograd = lambda: (pair, None) if fused_ran[0] else None  # type: ignore[attr-defined]
        return run
