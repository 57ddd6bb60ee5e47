"""SDPA forward and backward on torch's FlexAttention (``TORCH_SDPA_FLEX_ENGINE``).

FlexAttention (``torch.nn.attention.flex_attention``) turns a score modifier and a block mask
into fused Triton kernels through ``torch.compile``, on CUDA and ROCm builds alike. This module
expresses a node in those terms (:mod:`._flex_mods`) and compiles one :class:`FlexKernel` per
:class:`FlexSpec`: in its constructor, which the engine calls from ``build_plans()``; kernels
are cached per process (:func:`kernel`), and a call never compiles (each runs under
``torch.compiler.set_stance("fail_on_recompile")``, so a call that would recompile raises).
The spec and what can run live in :mod:`._flex_spec`, the kernel in :mod:`._flex_kernel`; this
module re-exports them and adds :class:`HeadGroups` and the cache.

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

from dataclasses import dataclass
from typing import Unpack

import torch

from ._flex_env import CPU_ENV, cpu_allowed
from ._flex_kernel import FlexKernel
from ._flex_spec import (
    FlexSpec,
    flex_available,
    group_spec,
    head_groups,
    static_reason,
)
from .call import SdpaInputs

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

    def _inputs(self, i: int, inputs: SdpaInputs) -> SdpaInputs:
        """``inputs`` with the bias sliced to group ``i``'s heads."""
        bias = inputs.get("bias")
        if bias is None or bias.dim() < 3 or bias.shape[-3] == 1:
            return inputs
        return {**inputs, "bias": bias.tensor_split(self.groups, dim=bias.dim() - 3)[i]}

    def forward(
        self, q: Tensor, k: Tensor, v: Tensor, **inputs: Unpack[SdpaInputs]
    ) -> tuple[Tensor, Tensor | None]:
        """As :meth:`FlexKernel.forward`."""
        parts = [
            self.inner.forward(*self._part(i, q, k, v), **self._inputs(i, inputs))
            for i in range(self.groups)
        ]
        stats = [st for _, st in parts if st is not None]
        return torch.cat([o for o, _ in parts], 1), torch.cat(stats, 1) if stats else None

    def backward(
        self, q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor, stats: Tensor, *,
        dq_out: Tensor | None = None, dk_out: Tensor | None = None,
        dv_out: Tensor | None = None, dbias_out: Tensor | None = None,
        **inputs: Unpack[SdpaInputs],
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:  # fmt: skip
        """As :meth:`FlexKernel.backward`, into new tensors (the ``*_out`` buffers are not
        used); dBias slices are joined (or summed, where dBias has one head)."""
        del dq_out, dk_out, dv_out, dbias_out
        parts = [
            self.inner.backward(*self._part(i, q, k, v, o, do, stats), **self._inputs(i, inputs))
            for i in range(self.groups)
        ]
        dq, dk, dv = (torch.cat([p[0] for p in parts], 1), torch.cat([p[1] for p in parts], 1),
                      torch.cat([p[2] for p in parts], 1))  # fmt: skip
        full = self.spec.dbias_shape
        slices = [db for *_, db in parts if db is not None]
        if not slices or full is None:
            return dq, dk, dv, None
        if len(full) >= 3 and full[-3] != 1:
            return dq, dk, dv, torch.cat(slices, len(full) - 3)
        return dq, dk, dv, torch.stack(slices).sum(0)


_KERNELS: dict[FlexSpec, FlexKernel | HeadGroups] = {}
#: the engine that builds these kernels (named in the compile's progress line)
FLEX_ENGINE = "TORCH_SDPA_FLEX_ENGINE"


def kernel(spec: FlexSpec, node: str = "") -> FlexKernel | HeadGroups:
    """The compiled kernel of ``spec``, built on first request and cached for the process (a
    bias of 2³¹ elements or more: one kernel over groups of heads, :class:`HeadGroups`). A
    build announces its compile (:func:`hipdnn_graph.backend.compiling`, naming ``node``).

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
            # the kernels import without hipdnn_graph (tests/test_torch_kernel_imports.py); a
            # build runs inside a graph's plan, where the frontend is loaded already
            from hipdnn_graph.backend.progress import compiling

            what = f"flex attention on {spec.device}"
            with compiling(FLEX_ENGINE, node, what, kind="node"):
                hit = FlexKernel(spec)
        else:
            inner = kernel(group_spec(spec, groups), node)
            assert isinstance(inner, FlexKernel)  # a group's bias is below 2**31 elements
            hit = HeadGroups(spec, inner, groups)
        _KERNELS[spec] = hit
    return hit


def clear_cache() -> None:
    """Forget every compiled kernel of this process."""
    _KERNELS.clear()
