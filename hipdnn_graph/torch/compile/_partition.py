"""Partition an aten FX graph into maximal hipDNN subgraphs; the rest stays aten.

:class:`FamilySupport` answers torch's partitioner from the rule table (:mod:`._rules`) and
remembers why it refused each node; :func:`partition` fuses the supported nodes into maximal
subgraphs (``CapabilityBasedPartitioner``), lowers each to a hipDNN graph and swaps it in as a
:class:`HipdnnSubgraph`. A subgraph whose graph fails to build stays the aten submodule; one
whose run fails falls back to it for that call. Either way the model runs.

Example:
    >>> import torch
    >>> from hipdnn_graph.torch.compile._partition import FamilySupport
    >>> FamilySupport().reasons
    {}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase
from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

from ._attention import OWN_GRAPH_OPS
from ._census import LOGGER, CensusRow
from ._lowering import Lowered, lower
from ._rmsnorm import fuse_rms_norm
from ._rules import FLOAT_TYPES, RULES, flops

__all__ = ["FamilySupport", "HipdnnSubgraph", "partition"]

_PREFIX = "hipdnn_subgraph_"


def _op_name(node: torch.fx.Node) -> str:
    return str(node.target).replace("aten::", "aten.").replace("torch.ops.", "")


def _tensors(value: Any) -> list[Any]:
    if isinstance(value, tuple | list):
        return [t for v in value for t in _tensors(v)]
    return [value] if isinstance(value, torch.Tensor) else []


def _data_refusal(node: torch.fx.Node) -> str | None:
    """Element types and sizes a subgraph can take (floating point, static shapes)."""
    values = [a.meta.get("val") for a in node.all_input_nodes] + [node.meta.get("val")]
    tensors = [t for v in values for t in _tensors(v)]
    if not tensors:
        return "no example values"
    for t in tensors:
        if t.dtype not in FLOAT_TYPES:
            return f"a {t.dtype} tensor (subgraphs take float32, float16, bfloat16)"
        if not all(isinstance(d, int) for d in (*t.shape, *t.stride())):
            return "symbolic shapes"
    return None


class FamilySupport(OperatorSupportBase):
    """Which nodes a hipDNN family expresses; ``reasons`` says why the others stay in aten."""

    def __init__(self) -> None:
        self.reasons: dict[torch.fx.Node, str] = {}

    def is_node_supported(
        self, submodules: Mapping[str, torch.nn.Module], node: torch.fx.Node
    ) -> bool:
        if node.op != "call_function":
            return False
        if getattr(node.target, "__name__", "") == "getitem":
            source = node.args[0]
            return isinstance(source, torch.fx.Node) and self.is_node_supported(submodules, source)
        reason = self.refusal(node)
        if reason is not None:
            self.reasons[node] = reason
        return reason is None

    @staticmethod
    def refusal(node: torch.fx.Node) -> str | None:
        """``None`` when a family expresses ``node``, else why it stays in aten."""
        rule = RULES.get(node.target)
        if rule is None:
            return "no hipDNN family expresses it"
        return _data_refusal(node) or rule.refusal(node)


class HipdnnSubgraph(torch.nn.Module):
    """A partition run as a hipDNN graph, falling back to its aten submodule if a run fails.

    A plan that fails to build (at the first call) sends every later call to aten too; a run
    that fails sends only that call.
    """

    def __init__(self, lowered: Lowered, fallback: torch.fx.GraphModule, single: bool) -> None:
        super().__init__()
        self.lowered = lowered
        self.fallback = fallback
        self.single = single
        self.given_up = False

    def forward(self, *args: torch.Tensor) -> Any:
        if self.given_up:
            return self.fallback(*args)
        try:
            out = self.lowered.run(args)
        except Exception as err:  # the model must run: aten takes this call
            self.given_up = not self.lowered.built
            LOGGER.warning("hipDNN subgraph failed at run time, aten runs it: %s", err)
            return self.fallback(*args)
        return out[0] if self.single else tuple(out)


def split_convolution_backward(gm: torch.fx.GraphModule) -> None:
    """Give each gradient of ``convolution_backward`` a node of its own (aten semantics kept).

    One node asking for dX and dW would be two hipDNN nodes sharing only the input DY, which
    hipDNN rejects as a disconnected graph; split, each (dgrad, wgrad, the bias gradient's
    reduction) can join the subgraph it feeds.
    """
    op = torch.ops.aten.convolution_backward.default
    for node in list(gm.graph.find_nodes(op="call_function", target=op)):
        mask = list(node.args[10])
        if sum(bool(m) for m in mask) < 2:
            continue
        for user in list(node.users):
            index = user.args[1]
            alone = [i == index for i in range(3)]
            with gm.graph.inserting_before(user):
                single = gm.graph.call_function(op, (*node.args[:10], alone), dict(node.kwargs))
                single.meta = dict(node.meta)
                item = gm.graph.call_function(user.target, (single, index))
                item.meta = dict(user.meta)
            user.replace_all_uses_with(item)
            gm.graph.erase_node(user)
        gm.graph.erase_node(node)
    gm.recompile()


def _components(nodes: list[torch.fx.Node]) -> list[dict[torch.fx.Node, int | None]]:
    """A partition split into its connected parts (a hipDNN graph is one connected graph)."""
    parent = {n: n for n in nodes}

    def root(n: torch.fx.Node) -> torch.fx.Node:
        while parent[n] is not n:
            n = parent[n]
        return n

    for n in nodes:
        for m in n.all_input_nodes:
            if m in parent:
                parent[root(m)] = root(n)
    parts: dict[torch.fx.Node, dict[torch.fx.Node, int | None]] = {}
    for n in nodes:
        parts.setdefault(root(n), {})[n] = None
    return list(parts.values())


def _single_output(gm: torch.fx.GraphModule) -> bool:
    (output,) = gm.graph.find_nodes(op="output")
    return not isinstance(output.args[0], tuple | list)


def partition(
    gm: torch.fx.GraphModule, kind: str, prefer: str | None = None
) -> tuple[torch.fx.GraphModule, list[CensusRow]]:
    """Fuse ``gm``'s supported nodes into hipDNN subgraphs (``prefer``: an engine name ranked
    first where it applies); returns the new module and the census rows."""
    split_convolution_backward(gm)
    fuse_rms_norm(gm)
    support = FamilySupport()
    partitioner = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True)
    partitions = [
        part
        for proposed in partitioner.propose_partitions()
        for part in _components(list(proposed.nodes))
    ]
    owner: dict[torch.fx.Node, int] = {}
    for number, members in enumerate(partitions):
        for node in members:
            owner[node] = number
    ops = [n for n in gm.graph.nodes if n.op == "call_function" and n.target.__name__ != "getitem"]
    facts = [(n, _op_name(n), flops(n), RULES.get(n.target)) for n in ops]
    fused = fuse_by_partitions(gm, partitions, prefix=_PREFIX)
    failures: dict[int, str] = {}
    for node in list(fused.graph.nodes):
        if node.op != "call_module" or not str(node.target).startswith(_PREFIX):
            continue
        index = int(str(node.target)[len(_PREFIX) :])
        submodule = getattr(fused, str(node.target))
        try:
            lowered = lower(submodule, prefer)
        except Exception as err:  # unsupported in a way no check saw: aten runs it
            failures[index] = f"its hipDNN graph failed to build: {err}"
            continue
        setattr(
            fused, str(node.target), HipdnnSubgraph(lowered, submodule, _single_output(submodule))
        )
    fused.recompile()
    rows = []
    for node, name, work, rule in facts:
        part = owner.get(node)
        if node.target in OWN_GRAPH_OPS:
            rows.append(CensusRow(kind, name, "hipdnn", OWN_GRAPH_OPS[node.target], None, work))
        elif part is not None and part not in failures and rule is not None:
            rows.append(CensusRow(kind, name, "hipdnn", rule.family, part, work))
        else:
            why = failures.get(part, "") if part is not None else support.reasons.get(node, "")
            rows.append(CensusRow(kind, name, "aten", why or "not partitioned", None, work))
    return fused, rows
