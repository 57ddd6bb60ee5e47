"""The Dynamo backend: AOTAutograd's aten graphs, each partitioned into hipDNN subgraphs.

``torch.compile(model, backend="hipdnn")`` finds :func:`compile_backend` through the
``torch_dynamo_backends`` entry point. Attention off the CPU is first pointed at the
``hipdnn_graph::sdpa_fwd`` custom op (:mod:`._attention`); then AOTAutograd traces the captured
graph to aten ops: an inference graph, or a forward and a backward graph when gradients are
needed; each goes through :func:`~hipdnn_graph.torch.compile._partition.partition` and its
census is recorded.

Example:
    >>> import torch
    >>> from hipdnn_graph.torch.compile import compile_backend
    >>> f = torch.compile(torch.nn.ReLU(), backend=compile_backend)
    >>> f(torch.tensor([-1.0, 2.0]))
    tensor([0., 2.])
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.fx
from torch._dynamo.backends.common import aot_autograd
from torch._functorch._aot_autograd.utils import make_boxed_func

from ...errors import HipdnnError
from ...graph import Graph
from ...types import ErrorCode
from ._attention import route_attention
from ._census import record
from ._partition import partition

__all__ = ["compile_backend"]


def _compile_graph(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *, kind: str, prefer: str | None
) -> Callable[..., Any]:
    fused, rows = partition(gm, kind, prefer)
    record(rows)
    return make_boxed_func(fused.forward)


@functools.cache
def _aot(prefer: str | None) -> Callable[..., Any]:
    """AOTAutograd with our compiler for each graph kind (one per preferred engine)."""

    def compiler(kind: str) -> Callable[..., Any]:
        return functools.partial(_compile_graph, kind=kind, prefer=prefer)

    backend: Callable[..., Any] = aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
    )
    return backend


#: the options ``torch.compile(..., options=...)`` may pass
OPTIONS = ("prefer",)


def compile_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    options: Mapping[str, Any] | None = None,
    mode: str | None = None,
) -> Callable[..., Any]:
    """Compile a Dynamo-captured graph: hipDNN graphs where a family expresses the ops, aten
    elsewhere (``torch.compile(model, backend="hipdnn")`` or ``backend=compile_backend``).

    Args:
        gm: the FX graph Dynamo captured.
        example_inputs: its example inputs.
        options: ``torch.compile``'s ``options=``: ``{"prefer": engine name}`` ranks that
            engine first for every subgraph where it applies (``"TORCH_EAGER_ENGINE"`` keeps
            the GPU from compiling a fusion plan per subgraph).
        mode: ``torch.compile``'s ``mode=``; accepted, unused.

    Returns:
        The compiled callable (AOTAutograd's, with autograd when inputs need gradients).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for an option other than those of :data:`OPTIONS`, or
            an engine name no registered backend has.
    """
    given = dict(options or {})
    unknown = sorted(set(given) - set(OPTIONS))
    if unknown:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"hipdnn torch.compile backend: unknown options {unknown}; it takes {list(OPTIONS)}",
        )
    prefer = given.get("prefer")
    if prefer is not None:
        Graph().set_preferred_engine_id_ext(prefer)  # an unknown engine name fails here
    route_attention(gm)
    compiled: Callable[..., Any] = _aot(prefer)(gm, example_inputs)
    return compiled
