"""``torch.compile(model, backend="hipdnn")``: models run as hipDNN graphs where families fit.

The backend partitions AOTAutograd's aten graphs (inference, forward, backward) into maximal
subgraphs that hipDNN's families express (matmul, convolution, pointwise, reduction, RMSNorm,
layernorm, batch norm, SDPA and their backwards), builds each as a
:class:`~hipdnn_graph.Graph` run on the best engine, and leaves the rest to aten. :func:`census`
says which ops went where and why (see docs/torch-compile.md).
:func:`export` writes a model's subgraphs as hipDNN graph files with a manifest; :func:`run_export`
and :func:`replay_export` run such a directory again (``hipdnn-graph show-export`` and
``run-export`` on the command line).

Example:
    >>> import torch
    >>> import hipdnn_graph.torch.compile as hgc
    >>> torch._dynamo.reset()  # forget earlier compiles (and their recompile count)
    >>> hgc.reset_census()
    >>> mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU())
    >>> with torch.no_grad():
    ...     y = torch.compile(mlp, backend=hgc.compile_backend)(torch.randn(2, 4))
    >>> hgc.census().hipdnn_ops()
    ['aten.addmm.default', 'aten.gelu.default']
"""

from __future__ import annotations

from ._backend import compile_backend
from ._census import Census, CensusRow, census, reset_census
from ._export import export
from ._manifest import FORMAT, check_manifest, read_manifest
from ._replay import ExportRun, load_graph, replay_export, run_export

__all__ = [
    "FORMAT",
    "Census",
    "CensusRow",
    "ExportRun",
    "census",
    "check_manifest",
    "compile_backend",
    "export",
    "load_graph",
    "read_manifest",
    "replay_export",
    "reset_census",
    "run_export",
]
