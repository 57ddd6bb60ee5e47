"""The torch plans' launchers: a one-node plan's kernel with its build-time keywords bound.

``execute`` gathers a step's tensors and keywords from the variant pack on every call
(:meth:`._sdpa_plan.TorchSdpaPlan.run_now`). A caller that keeps built graphs in a cache keyed
by every fact the variant-pack check reads (the torch op) can call the kernel directly instead:
:func:`launcher` binds the step's static keywords once (``functools.partial``, bound in C) and
returns a :class:`~hipdnn_graph.backend.Launcher` whose call takes the step's tensors and runtime
scalars positionally and returns the node's outputs in their declared dtype and layout.

When a plan offers one (see :meth:`._sdpa_plan.TorchSdpaPlan.launcher`): exactly one node (every
graph of the torch op), no output the kernel writes in place into a caller's buffer (the flex
backward), and no virtual output another node reads. The fused ops' kernels are bound further:
their per-signature check runs once per plan and device, then the op's call runs on its own
(:mod:`.kernels.fused`, ``memo``); the math engine's CPU shortcut calls torch's fused CPU kernel
(:mod:`.kernels.cpu_fused`).

Example:
    >>> import torch, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 1, 4, 8])
    >>> o, stats = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=True)
    >>> _ = o.set_output(True); _ = stats.set_output(True)
    >>> _ = g.set_preferred_engine_id_ext("TORCH_SDPA_MATH_ENGINE").build()
    >>> launch = g._state.active.plan.launcher()
    >>> x = torch.ones(1, 1, 4, 8)
    >>> [tuple(t.shape) for t in launch.call(x, x, x)], launch.outputs == (o.uid, stats.uid)
    ([(1, 1, 4, 8), (1, 1, 4, 1)], True)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from hipdnn_graph.backend import AutogradForm, Launcher, in_layout

__all__ = ["launcher"]


def launcher(
    run: Callable[..., Any],
    inputs: tuple[int, ...],
    outputs: tuple[tuple[int, int, bool, Any, tuple[int, ...]], ...],
    static: dict[str, Any],
    runtime: tuple[tuple[str, int, Callable[[Any], Any] | None], ...],
) -> Launcher:
    """The :class:`~hipdnn_graph.backend.Launcher` of one step (the fields of
    :class:`._sdpa_plan.Step`): positional tensors ``inputs``, then the ``runtime`` values; the
    non-virtual ``outputs`` come back in their order, as declared."""
    declared = tuple((index, dtype, strides) for index, _, virtual, dtype, strides in outputs
                     if not virtual)  # fmt: skip
    out_uids = tuple(uid for _, uid, virtual, _, _ in outputs if not virtual)
    n = len(inputs)
    convert = tuple((key, n + j, conv) for j, (key, _, conv) in enumerate(runtime))
    call: Callable[..., list[Any]]
    bind = getattr(run, "bind", None)  # a kernel that binds the plan's keywords itself
    if bind is None or (convert and not getattr(run, "binds_runtime", False)):
        kernel = functools.partial(run, **static)
    else:
        kernel = bind(static)
    if not convert:

        def call(*args: Any) -> list[Any]:
            results = kernel(*args)
            return [in_layout(results[i], strides, dtype) for i, dtype, strides in declared]

    else:

        def call(*args: Any) -> list[Any]:
            kw = {}
            for key, j, conv in convert:
                kw[key] = args[j] if conv is None else conv(args[j])
            results = kernel(*args[:n], **kw)
            return [in_layout(results[i], strides, dtype) for i, dtype, strides in declared]

    fields = getattr(kernel, "autograd", None)  # a kernel that knows its autograd form
    autograd = None
    if fields is not None:

        def autograd() -> AutogradForm | None:
            known = fields()
            return None if known is None else AutogradForm(*known)

    return Launcher(inputs + tuple(uid for _, uid, _ in runtime), out_uids, call, autograd)
