"""hipdnn_graph.torch.export (docs/torch-compile.md, "Export"): a small model's hipDNN subgraphs
written to a directory, run again in Python, then shown and checked with the command line."""

import torch

import hipdnn_graph.torch as hgt
from hipdnn_graph.cli import main
from hipdnn_graph.torch.compile import run_export

# --8<-- [start:export]
torch.manual_seed(0)
mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU()).eval()
x = torch.randn(2, 4)
manifest = hgt.export(mlp, (x,), "mlp_export")  # or graph_format="bin"
(y,) = run_export("mlp_export", (torch.randn(2, 4),))  # the traced shapes, other values
# --8<-- [end:export]

# --8<-- [start:cli]
# the same as `hipdnn-graph show-export mlp_export` in a shell
main(["show-export", "mlp_export"])
# the same as `hipdnn-graph run-export mlp_export --check --engine NUMPY_REFERENCE_ENGINE`
status = main(["run-export", "mlp_export", "--check", "--engine", "NUMPY_REFERENCE_ENGINE"])
print("exit status", status)
# --8<-- [end:cli]
