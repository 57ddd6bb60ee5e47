"""Export a model's hipDNN subgraphs to a directory.

:func:`export` traces the model for inference (AOTAutograd's inference graph, as the
``torch.compile`` backend sees it), partitions it with the backend's partitioner
(:func:`~hipdnn_graph.torch.compile._partition.partition`) and writes one file per hipDNN
subgraph (``<n>.json`` or ``<n>.bin``), the model's parameters and buffers (``weights.pt``) and
``manifest.json``: the steps in execution order (hipDNN subgraphs and the aten ops left
between them), what feeds each subgraph input and which values are the model's outputs; and
``reference.npz``, the example inputs with the model's outputs on them, so that a replay
(:func:`~hipdnn_graph.torch.compile.run_export`, ``hipdnn-graph run-export --check``) can be
checked. The format is described in docs/torch-compile.md ("Export").

Example:
    >>> import tempfile, torch
    >>> from hipdnn_graph.torch.compile import export, run_export
    >>> mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
    >>> x = torch.randn(2, 4)
    >>> with tempfile.TemporaryDirectory() as out:
    ...     manifest = export(mlp, (x,), out)
    ...     (y,) = run_export(out, (x,))
    >>> [s["kind"] for s in manifest["steps"]], torch.allclose(y, mlp(x), atol=1e-5)
    (['aten', 'hipdnn'], True)
"""

from __future__ import annotations

import json
import operator
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.fx
from torch._functorch.aot_autograd import aot_export_module

from ...errors import HipdnnError, NotSupportedError
from ...types import ErrorCode
from ._manifest import FORMAT, GRAPH_SUFFIXES, MANIFEST, REFERENCE, WEIGHTS
from ._partition import HipdnnSubgraph, partition
from ._replay import dtype_name, numpy_values

__all__ = ["export"]


class _Flat(torch.nn.Module):
    """The model with its outputs flattened to a tuple (what AOTAutograd's export asks)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *args: Any) -> tuple[Any, ...]:
        return tuple(torch.utils._pytree.tree_leaves(self.model(*args)))


def _op_name(target: Any) -> str:
    if target is operator.getitem:
        return "getitem"
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._opname}.{target._overloadname}"
    raise NotSupportedError(f"export: cannot name the op {target!r} left in aten")


class _Writer:
    """Walks the partitioned graph, writing subgraph files and collecting the manifest."""

    def __init__(self, out: Path, suffix: str, weights: dict[str, str], name: str) -> None:
        self.out = out
        self.name = name  # the graphs' names: <name>_<n>
        self.suffix = suffix
        self.weights = weights
        self.steps: list[dict[str, Any]] = []
        self.alias: dict[str, Any] = {}  # fx name (with prefix) -> a ref name or a list of them
        self.origin: dict[str, dict[str, Any]] = {}  # ref name -> where the value comes from
        self.subgraphs = 0

    def encode(self, value: Any, prefix: str) -> Any:
        """An FX argument as JSON: ``{"ref": name}`` for a value, dtypes and the like named."""
        if isinstance(value, torch.fx.Node):
            ref = self.alias[prefix + value.name]
            if isinstance(ref, list):
                return [{"ref": r} for r in ref]
            return {"ref": ref}
        if isinstance(value, tuple | list):
            return [self.encode(v, prefix) for v in value]
        if isinstance(value, torch.dtype):
            return {"dtype": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {"device": str(value)}
        if isinstance(value, torch.memory_format | torch.layout):
            return {"torch": str(value).removeprefix("torch.")}
        if value is None or isinstance(value, bool | int | float | str):
            return value
        raise NotSupportedError(f"export: an aten argument {value!r} has no JSON form")

    def source(self, value: Any, prefix: str) -> dict[str, Any]:
        ref = self.alias[prefix + value.name]
        return {"ref": ref, **self.origin[ref]}

    def walk(self, gm: torch.fx.GraphModule, prefix: str, args: list[Any]) -> Any:
        """Emit ``gm``'s steps; ``args`` are the refs its placeholders read; returns its
        output's refs."""
        placeholders = iter(args)
        for node in gm.graph.nodes:
            key = prefix + node.name
            if node.op == "placeholder":
                self.alias[key] = next(placeholders)
            elif node.op == "call_function":
                self._call(node, prefix)
            elif node.op == "call_module":
                module = getattr(gm, str(node.target))
                inner = [self.alias[prefix + a.name] for a in node.args]
                if isinstance(module, HipdnnSubgraph):
                    self._subgraph(node, module, prefix)
                else:  # a partition whose graph failed to build: its aten ops, inlined
                    self.alias[key] = self.walk(module, key + ".", inner)
            elif node.op == "output":
                out = node.args[0]
                if isinstance(out, tuple | list):
                    return [self.alias[prefix + o.name] for o in out]
                return self.alias[prefix + out.name]
        raise NotSupportedError("export: a graph without an output")

    def _call(self, node: torch.fx.Node, prefix: str) -> None:
        key = prefix + node.name
        source = node.args[0] if node.target is operator.getitem else None
        if isinstance(source, torch.fx.Node):
            made = self.alias[prefix + source.name]
            if isinstance(made, list):  # an item of a subgraph's (or inlined graph's) results
                self.alias[key] = made[int(str(node.args[1]))]
                return
        self.alias[key] = key
        self.origin[key] = {"kind": "aten", "step": len(self.steps)}
        self.steps.append(
            {
                "kind": "aten",
                "name": key,
                "op": _op_name(node.target),
                "args": self.encode(list(node.args), prefix),
                "kwargs": {k: self.encode(v, prefix) for k, v in node.kwargs.items()},
            }
        )

    def _subgraph(self, node: torch.fx.Node, module: HipdnnSubgraph, prefix: str) -> None:
        number = self.subgraphs
        self.subgraphs += 1
        lowered = module.lowered
        graph = lowered.graph.set_name(f"{self.name}_{number}")
        file = f"{number}{self.suffix}"
        data = graph.serialize() if self.suffix == ".bin" else graph.to_json().encode()
        (self.out / file).write_bytes(data)
        inputs = [
            {
                "tensor": b.tensor.get_name(),
                "uid": b.tensor.get_uid(),
                "dims": list(b.dims),
                "from": self.source(node.args[b.index], prefix),
            }
            for b in lowered.inputs
        ]
        refs = [f"{prefix}{node.name}.{k}" for k in range(len(lowered.outputs))]
        outputs = []
        for k, ((tensor, example), ref) in enumerate(zip(lowered.outputs, refs, strict=True)):
            self.origin[ref] = {"kind": "subgraph", "subgraph": number, "output": k}
            outputs.append(
                {
                    "ref": ref,
                    "tensor": tensor.get_name(),
                    "uid": tensor.get_uid(),
                    "shape": list(example.shape),
                    "stride": list(example.stride()),
                    "dtype": dtype_name(example.dtype),
                }
            )
        self.alias[prefix + node.name] = refs[0] if module.single else refs
        self.steps.append(
            {
                "kind": "hipdnn",
                "name": prefix + node.name,
                "subgraph": number,
                "file": file,
                "inputs": inputs,
                "outputs": outputs,
            }
        )


def _save_reference(
    path: Path, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor]
) -> None:
    """``input_<i>`` and ``output_<i>`` arrays in the ``.npz`` file ``path``
    (:func:`~hipdnn_graph.torch.compile._replay.numpy_values`: bfloat16 as float32)."""
    arrays = {f"input_{i}": numpy_values(t) for i, t in enumerate(inputs)}
    arrays.update((f"output_{i}", numpy_values(t)) for i, t in enumerate(outputs))
    with open(path, "wb") as file:
        np.savez(file, **arrays)


def export(
    model: torch.nn.Module,
    example_inputs: Sequence[torch.Tensor],
    directory: str | Path,
    *,
    graph_format: str = "json",
) -> dict[str, Any]:
    """Write ``model``'s hipDNN subgraphs (inference) and their manifest into ``directory``.

    Args:
        model: the module; traced once with ``example_inputs`` (positional tensors) under
            ``torch.no_grad()``; its outputs may be any nesting of tensors (flattened).
        example_inputs: the inputs to trace with (their shapes and types are fixed).
        directory: created if missing; ``manifest.json``, ``weights.pt``, one file per
            subgraph and ``reference.npz`` (``input_<i>``: ``example_inputs``; ``output_<i>``:
            the model's outputs on them, run once under ``torch.no_grad()``) are written there.
        graph_format: ``"json"`` (``Graph.to_json``, ``<n>.json``) or ``"bin"``
            (``Graph.serialize``, hipDNN's FlatBuffers bytes, ``<n>.bin``); graph ``n`` is named
            ``<the model's class name>_<n>``.

    Returns:
        The manifest (as written to ``manifest.json``).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for another ``graph_format`` or an input that is not a
            tensor; ``GRAPH_NOT_SUPPORTED`` for a model tracing refuses (the reason named) or an
            op left in aten whose arguments have no JSON form.
    """
    if graph_format not in GRAPH_SUFFIXES:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"export: graph_format must be one of {list(GRAPH_SUFFIXES)}, not {graph_format!r}",
        )
    if not all(isinstance(t, torch.Tensor) for t in example_inputs):
        kinds = [type(t).__name__ for t in example_inputs]
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"export: inputs must be tensors, got {kinds}")
    try:
        with torch.no_grad():
            gm, signature = aot_export_module(
                _Flat(model), tuple(example_inputs), trace_joint=False
            )
    except Exception as err:  # whatever tracing refused, named
        raise NotSupportedError(f"export: tracing the model failed: {err}") from err
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    assert isinstance(gm, torch.fx.GraphModule)  # as AOTAutograd's export makes it
    fused, _ = partition(gm, "inference")
    named = {**signature.inputs_to_parameters, **signature.inputs_to_buffers}
    weights = {str(ref): fqn.removeprefix("model.") for ref, fqn in named.items()}
    writer = _Writer(out, GRAPH_SUFFIXES[graph_format], weights, type(model).__name__)
    refs = [n.name for n in fused.graph.find_nodes(op="placeholder")]
    for ref in refs:
        if ref in weights:
            writer.origin[ref] = {"kind": "weight", "weight": weights[ref]}
        else:
            writer.origin[ref] = {"kind": "input", "input": signature.user_inputs.index(ref)}
    results = writer.walk(fused, "", refs)
    results = results if isinstance(results, list) else [results]
    state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    torch.save({fqn: state[fqn].detach().cpu() for fqn in weights.values()}, out / WEIGHTS)
    with torch.no_grad():
        expected = _Flat(model)(*example_inputs)
    _save_reference(out / REFERENCE, example_inputs, expected)
    manifest = {
        "format": FORMAT,
        "version": 1,
        "graph_format": graph_format,
        "inputs": [
            {"ref": ref, "shape": list(t.shape), "dtype": dtype_name(t.dtype)}
            for ref, t in zip(signature.user_inputs, example_inputs, strict=True)
        ],
        "weights": {"file": WEIGHTS, "refs": weights},
        "steps": writer.steps,
        "outputs": [
            {"ref": r, **writer.origin[r], "shape": list(t.shape), "dtype": dtype_name(t.dtype)}
            for r, t in zip(results[-len(expected) :], expected, strict=True)
        ],
        "reference": {"file": REFERENCE},
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest
