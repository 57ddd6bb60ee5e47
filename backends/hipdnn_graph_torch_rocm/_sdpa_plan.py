"""A built plan of the torch SDPA engines: one step per node, each with everything decided when
the plan was built, so that ``execute`` only gathers buffers, resolves runtime scalars and calls
the kernel (or replays the captured CUDA graph, :mod:`.replay`; or hands its single kernel to
the torch op's hot path, :mod:`._launch`).

Example:
    >>> plan = TorchSdpaPlan("TORCH_SDPA_MATH_ENGINE", [], frozenset())
    >>> plan.engine_name, plan.workspace_size, plan.launcher()
    ('TORCH_SDPA_MATH_ENGINE', 0, None)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from hipdnn_graph.backend import Launcher, in_layout

from ._launch import launcher
from .replay import CudaGraphReplay, ReplayedPlan

__all__ = ["Step", "TorchSdpaPlan"]


def _on_host(buffers: Mapping[int, Any], steps: list[Step]) -> bool:
    """Whether the first step's first tensor (its Q) is a CPU torch tensor."""
    if not steps or not steps[0].inputs:
        return False
    first = buffers.get(steps[0].inputs[0])
    return getattr(getattr(first, "device", None), "type", None) == "cpu"


@dataclass
class Step:
    """One node, with everything decided at plan time."""

    run: Callable[..., Any]
    #: uids of the positional tensors (Q, K, V[, O, dO, Stats])
    inputs: tuple[int, ...]
    #: (index in the kernel's result tuple, uid, is virtual, torch dtype, declared strides) of
    #: every output the node has
    outputs: tuple[tuple[int, int, bool, Any, tuple[int, ...]], ...]
    #: keyword arguments known when the plan is built: the node's ``call``
    #: (:class:`~.kernels.call.SdpaCall`: scale, mask, dBias, dropout) and the kernel's options
    static: dict[str, Any] = field(default_factory=dict)
    #: (keyword, uid, conversion or None) of what is read from the variant pack: tensors, and
    #: scales given as runtime pass-by-value tensors
    runtime: tuple[tuple[str, int, Callable[[Any], Any] | None], ...] = ()
    #: (keyword, uid) of outputs the kernel may write in place: the caller's buffer (or None)
    #: is passed under that keyword, and a result that is that buffer is not copied again
    destinations: tuple[tuple[str, int], ...] = ()


class TorchSdpaPlan(ReplayedPlan):
    """A built torch plan: one step per node.

    Outputs missing from the variant pack (``Graph.run``) are the kernels' own result tensors,
    handed over without a copy when they already have the declared type and layout.
    """

    workspace_size = 0
    allocates_outputs = True

    def __init__(
        self,
        engine_name: str,
        steps: list[Step],
        output_uids: frozenset[int],
        *,
        device_only: bool = False,
    ) -> None:
        self.engine_name = engine_name
        self.steps = steps
        self.replay = CudaGraphReplay(output_uids)
        #: the kernels run on a CUDA/ROCm device only (torch's fused ops): host tensors are
        #: staged through the current device (:meth:`execute`)
        self.device_only = device_only

    def execute(self, variant_pack: Mapping[int, Any], workspace: Any) -> None:
        """As :meth:`ReplayedPlan.execute`; a device-only plan given host (CPU) tensors while a
        device is visible copies them to the current device, runs there and copies the outputs
        back into the caller's host buffers (hipDNN hands its engines addresses, which a GPU
        reaches in host memory too; hipDNN's own Python samples pass NumPy arrays)."""
        if self.device_only and _on_host(variant_pack, self.steps):
            self._staged(cast("dict[int, Any]", variant_pack))
        else:
            super().execute(variant_pack, workspace)

    def execute_at(self, variant_pack: Mapping[int, Any], workspace: Any, addresses: Any) -> None:
        if self.device_only and _on_host(variant_pack, self.steps):
            self._staged(cast("dict[int, Any]", variant_pack))
        else:
            super().execute_at(variant_pack, workspace, addresses)

    def _staged(self, buffers: dict[int, Any]) -> None:
        import torch

        if not torch.cuda.device_count():  # no device: the kernel says why it cannot run
            self.run_now(buffers)
            return
        device = torch.device("cuda", torch.cuda.current_device())
        scalars = {uid for s in self.steps for _, uid, convert in s.runtime if convert is not None}
        staged = {
            uid: value.to(device)
            if isinstance(value, torch.Tensor) and uid not in scalars
            else value
            for uid, value in buffers.items()
        }
        self.run_now(staged)
        for uid in self.replay.output_uids:
            value = staged.get(uid)
            if value is None:
                continue
            host = buffers.get(uid)
            if host is None:  # Graph.run: the output is handed back on the host
                buffers[uid] = value.cpu()
            elif host is not value:
                host.copy_(value)

    def run_now(self, buffers: dict[int, Any]) -> None:
        """Every step now (no replay)."""
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
                    if value is not out:  # a view only where the kernel's shape differs
                        out.copy_(value if value.shape == out.shape else value.view(out.shape))
                elif virtual:
                    buffers[uid] = value.to(dtype)
                else:
                    buffers[uid] = in_layout(value, strides, dtype)

    def launcher(self) -> Launcher | None:
        """The plan's kernel with its build-time keywords bound, called without the variant
        pack (:mod:`._launch`); None for a plan of several nodes, or whose kernel writes into
        given output buffers (the flex backward). Never replayed as a CUDA graph: a launcher
        allocates its outputs, so there are no fixed buffers to replay on."""
        if len(self.steps) != 1 or self.steps[0].destinations:
            return None
        step = self.steps[0]
        return launcher(step.run, step.inputs, step.outputs, step.static, step.runtime)
