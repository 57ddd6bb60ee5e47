"""One FX subgraph (aten ops) as one hipDNN :class:`~hipdnn_graph.Graph`.

:class:`Lowering` walks a fused partition's nodes in order and asks the rule of each aten op
(:mod:`._rules`) to add its nodes through the public builder. Boundary inputs become non-virtual
tensors with the dims and strides of the example values (optionally viewed to another rank, a
view the runtime repeats on the real tensor); the partition's results become outputs typed as
the FX graph types them.

Example:
    >>> import torch, torch.fx
    >>> from hipdnn_graph.torch.compile._lowering import lower
    >>> gm = torch.fx.symbolic_trace(lambda a, b: torch.ops.aten.mm.default(a, b))
    >>> a, b = gm.graph.find_nodes(op="placeholder")
    >>> a.meta["val"], b.meta["val"] = torch.ones(2, 3), torch.ones(3, 4)
    >>> for n in gm.graph.nodes:
    ...     if n.op == "call_function": n.meta["val"] = torch.ones(2, 4)
    >>> lowered = lower(gm)
    >>> lowered.run((torch.ones(2, 3), torch.ones(3, 4)))[0].sum().item()
    24.0
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from ...errors import NotSupportedError
from ...graph import Graph
from ...tensor import TensorAttributes
from ...tensor_input import as_data_type
from ...types import DataType

__all__ = ["BoundInput", "Lowered", "Lowering", "lower", "meta_value"]


def meta_value(node: Any) -> torch.Tensor:
    """The example value FX recorded for ``node``; ``GRAPH_NOT_SUPPORTED`` when there is none."""
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if not isinstance(value, torch.Tensor):
        raise NotSupportedError(f"{node} has no example tensor")
    return value


def _ints(values: Sequence[Any], what: str) -> list[int]:
    if not all(isinstance(v, int) for v in values):
        raise NotSupportedError(f"{what} has symbolic sizes: {list(values)}")
    return [int(v) for v in values]


@dataclass(frozen=True)
class BoundInput:
    """A graph input: the subgraph argument it reads and the dims it is viewed to."""

    index: int
    dims: tuple[int, ...]
    tensor: TensorAttributes


@dataclass
class Lowering:
    """The state of one subgraph's lowering: the graph, what each FX node became, its inputs."""

    graph: Graph
    placeholders: dict[torch.fx.Node, int]
    env: dict[torch.fx.Node, Any] = field(default_factory=dict)
    inputs: dict[tuple[int, tuple[int, ...]], BoundInput] = field(default_factory=dict)

    def tensor(self, arg: Any, dims: Sequence[int] | None = None) -> TensorAttributes:
        """The graph tensor of an FX argument, viewed to ``dims`` (its own dims when ``None``).

        A boundary input may be viewed to any dims its example value views to; a tensor made
        inside the subgraph only to its own dims.

        Raises:
            HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a virtual tensor asked for other dims, or
                a view torch refuses.
        """
        if arg in self.placeholders:
            value = meta_value(arg)
            want = tuple(_ints(value.shape if dims is None else dims, str(arg)))
            key = (self.placeholders[arg], want)
            if key not in self.inputs:
                try:
                    viewed = value.view(want)
                except RuntimeError as err:
                    raise NotSupportedError(f"{arg}: {err}") from err
                declared = self.graph.tensor(
                    name=f"{arg.name}_{len(self.inputs)}",
                    dim=list(want),
                    stride=_ints(viewed.stride(), str(arg)),
                    data_type=as_data_type(viewed.dtype),
                )
                self.inputs[key] = BoundInput(key[0], want, declared)
            return self.inputs[key].tensor
        made = self.env.get(arg)
        if not isinstance(made, TensorAttributes):
            raise NotSupportedError(f"{arg} is not a tensor of this subgraph")
        own = tuple(_ints(meta_value(arg).shape, str(arg)))
        if dims is not None and tuple(dims) != own:
            raise NotSupportedError(f"{arg} is made in the subgraph: no view {own} -> {dims}")
        return made

    def scalar(self, node: torch.fx.Node, what: str, value: Any) -> TensorAttributes:
        """A ``[1]`` pass-by-value tensor ``<node>_<what>`` holding ``value`` (a norm's epsilon,
        a momentum)."""
        return self.graph.tensor(name=f"{node.name}_{what}", dim=[1]).set_value(float(value))

    def operand(self, arg: Any, rank: int) -> TensorAttributes:
        """A pointwise operand: a tensor with leading 1s up to ``rank``, or a number by value."""
        if isinstance(arg, bool) or not isinstance(arg, int | float | torch.fx.Node):
            raise NotSupportedError(f"operand {arg!r} is not a tensor or number")
        if not isinstance(arg, torch.fx.Node):
            value = self.graph.tensor(name=f"scalar_{len(self.env)}", dim=[1] * rank)
            return value.set_value(float(arg)).set_data_type(DataType.FLOAT)
        shape = _ints(meta_value(arg).shape, str(arg))
        return self.tensor(arg, [1] * (rank - len(shape)) + shape)


@dataclass
class Lowered:
    """A supported graph and how to call it with the subgraph's arguments.

    Its plan is built at the first call (``build_plans``: where the fusion engine ranks first,
    its compile), outside the compilation that lowered it.
    """

    graph: Graph
    inputs: list[BoundInput]
    outputs: list[tuple[TensorAttributes, torch.Tensor]]
    built: bool = False

    def run(self, args: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Run the graph; each result has the shape, strides and type FX recorded."""
        if not self.built:
            self.graph.build_plans()
            self.built = True
        pack = {b.tensor: args[b.index].view(b.dims) for b in self.inputs}
        results = self.graph.run(pack)
        out = []
        for tensor, example in self.outputs:
            result = results[tensor]
            if tuple(result.shape) != tuple(example.shape):
                result = result.view(example.shape)
            if result.stride() != example.stride() or result.dtype != example.dtype:
                like = torch.empty_strided(
                    example.shape, example.stride(), dtype=example.dtype, device=result.device
                )
                result = like.copy_(result)
            out.append(result)
        return out


def _no_broadcast_strides(made: TensorAttributes, example: torch.Tensor) -> None:
    """A pointwise output inherits its strides from IN_0 (hipDNN's inference); where IN_0 was
    broadcast (a 0 stride over a dim > 1) no engine can write it: it takes FX's strides."""
    dims, strides = made.get_dim(), made.get_stride()
    broadcast = any(s == 0 and d > 1 for d, s in zip(dims, strides, strict=False))
    if broadcast and list(dims) == list(example.shape):
        made.set_stride(_ints(example.stride(), str(made.get_name())))


def lower(gm: torch.fx.GraphModule, prefer: str | None = None) -> Lowered:
    """Build ``gm`` (one partition: placeholders, supported aten ops, one output) as a Graph,
    validated and checked against the engines (``prefer``: an engine ranked first where it
    applies); its plan is built at the first run.

    Raises:
        HipdnnError: whatever a rule, validation or the support check raises (the caller falls
            back to aten).
    """
    from ._rules import RULES

    placeholders = {n: i for i, n in enumerate(gm.graph.find_nodes(op="placeholder"))}
    graph = Graph(
        name=f"compile_{id(gm):x}",
        intermediate_data_type=DataType.FLOAT,
        compute_data_type=DataType.FLOAT,
    )
    cx = Lowering(graph, placeholders)
    results: list[Any] = []
    for node in gm.graph.nodes:
        if node.op == "call_function":
            if node.target.__name__ == "getitem":
                source, index = node.args
                cx.env[node] = cx.env[source][index]
            else:
                cx.env[node] = RULES[node.target].lower(cx, node)
        elif node.op == "output":
            out = node.args[0]
            results = list(out) if isinstance(out, tuple | list) else [out]
    outputs = []
    for result in results:
        made = cx.env.get(result)
        if not isinstance(made, TensorAttributes):
            raise NotSupportedError(f"result {result} is not a graph tensor")
        example = meta_value(result)
        made.set_output(True).set_data_type(example.dtype)
        outputs.append((made, example))
    if cx.inputs:  # the io type: the first input's (each tensor also carries its own)
        graph.set_io_data_type(next(iter(cx.inputs.values())).tensor.get_data_type())
    if prefer is not None:
        graph.set_preferred_engine_id_ext(prefer)
    graph.build_operation_graph()  # infers the outputs' dims and strides
    for made, example in outputs:
        _no_broadcast_strides(made, example)
    graph.create_execution_plans().check_support()
    return Lowered(graph, list(cx.inputs.values()), outputs)
