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
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx
from torch._dynamo.backends.common import aot_autograd
from torch._functorch._aot_autograd.utils import make_boxed_func

from ._attention import route_attention
from ._census import record
from ._partition import partition

__all__ = ["compile_backend"]


def _compile_graph(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *, kind: str
) -> Callable[..., Any]:
    fused, rows = partition(gm, kind)
    record(rows)
    return make_boxed_func(fused.forward)


_AOT = aot_autograd(
    fw_compiler=functools.partial(_compile_graph, kind="forward"),
    bw_compiler=functools.partial(_compile_graph, kind="backward"),
    inference_compiler=functools.partial(_compile_graph, kind="inference"),
)


def compile_backend(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **options: Any
) -> Callable[..., Any]:
    """Compile a Dynamo-captured graph: hipDNN graphs where a family expresses the ops, aten
    elsewhere (``torch.compile(model, backend="hipdnn")`` or ``backend=compile_backend``).

    Args:
        gm: the FX graph Dynamo captured.
        example_inputs: its example inputs.
        **options: ``torch.compile``'s ``options=`` (none are read yet).

    Returns:
        The compiled callable (AOTAutograd's, with autograd when inputs need gradients).
    """
    route_attention(gm)
    compiled: Callable[..., Any] = _AOT(gm, example_inputs)
    return compiled
