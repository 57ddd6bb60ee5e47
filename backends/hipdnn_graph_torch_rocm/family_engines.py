"""The torch engines of the node families other than attention.

| engine | runs | devices |
|---|---|---|
| ``TORCH_FUSION_ENGINE`` | a connected graph of two or more nodes as one ``torch.compile`` d function, compiled and warmed up in ``build_plan`` | GPU; CPU with a C++ compiler (or a cheap compile backend) |
| ``TORCH_EAGER_ENGINE`` | node by node, eager torch ops | wherever the buffers are |

Both run the lowerings of :mod:`.families` through one :class:`~.family_program.FamilyProgram`,
write only the outputs (after every node has run, so a failure leaves them untouched) and never
an input. Lowerings whose data can be invalid (MoE routes, a non-finite X to quantize) raise
the reference's error node by node; compiled, they return a verdict
(:data:`~.families._common.CHECK`) and the fusion plan, after one host synchronisation, writes
the outputs or runs the graph node by node, which raises.

Ranking: the fusion engine ranks first. On the CPU with Inductor it compiles only when asked
(preferred by name, or ``autotune``): there the compile costs tens of seconds and fused calls
gain little, so it defers to the eager engine (:func:`.fusion_compile.cpu_compile_deferral`).
A single node it takes only where the race below runs
(a GPU, or ``autotune``) and the node's torch kernel is no library call: compiled, the kernel
stores its result in the caller's buffer, where node by node a copy follows it
(:func:`_single_node_refusal`). For a graph it accepts, its
``build_plan`` compiles the function for the graph's exact shapes, types and device, then (on
a GPU, unless turned off) times the compiled function against the eager one with CUDA events
and keeps the faster; the verdict is cached per graph signature, so compiling loses nothing
where fusing is slower (issue 25 measured compiled matmul + bias + GELU at 0.57x of eager).
``plan.choice`` says which runs and ``plan.timings`` what was measured. A compile is announced
(an INFO record and a progress line, :func:`hipdnn_graph.backend.compiling`), and Inductor's
on-disk caches keep it for later processes (``plan.inductor_cache``: ``"hit"`` or ``"miss"``).

Example:
    >>> import hipdnn_graph_torch_rocm.family_engines as fe
    >>> [(e.name, e.priority) for e in fe.create_family_engines()]
    [('TORCH_FUSION_ENGINE', 600), ('TORCH_EAGER_ENGINE', 700)]
"""  # noqa: E501

from __future__ import annotations

from .family_eager import EAGER_ENGINE, FUSION_ENGINE, FamilyEagerPlan, TorchEagerEngine
from .family_fusion import FamilyFusionPlan, TorchFusionEngine

__all__ = [
    "EAGER_ENGINE",
    "FUSION_ENGINE",
    "FamilyEagerPlan",
    "FamilyFusionPlan",
    "TorchEagerEngine",
    "TorchFusionEngine",
    "create_family_engines",
]


def create_family_engines() -> list[TorchFusionEngine | TorchEagerEngine]:
    """The fusion engine and the eager engine, in priority order."""
    return [TorchFusionEngine(), TorchEagerEngine()]
