"""A graph of family nodes as one Python function of tensors (what both family engines run).

:class:`FamilyProgram` reads the graph once: per node its prepared lowering (the ``prepare`` of
its record, :func:`~hipdnn_graph_torch_rocm.families.family_of`) and where each input slot
comes from (a buffer of the variant pack, a constant pass-by-value value, or an earlier node's
result); per output its storage type. :meth:`FamilyProgram.results` then maps the graph's input
buffers to its outputs with eager torch ops only, rounding every result, virtual or not, to its
tensor's declared type, so the same function runs node by node or traced whole by
``torch.compile``. Given the caller's output buffers, a node whose outputs are all graph outputs
and whose family writes into given tensors (its record's ``writer``) writes them there, and the
result is that buffer.

Example:
    >>> import torch, hipdnn_graph as hg
    >>> f = hg.DataType.FLOAT
    >>> g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
    >>> x = g.tensor(name="x", dim=[2])
    >>> y = g.pointwise(g.pointwise(x, mode=hg.PointwiseMode.EXP), mode=hg.PointwiseMode.LOG)
    >>> _ = y.set_output(True)
    >>> _ = g.build_operation_graph()
    >>> p = FamilyProgram(g)
    >>> p.results({x.get_uid(): torch.tensor([1.0, 2.0])})
    [tensor([1., 2.])]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import hipdnn_graph as hg
from hipdnn_graph.backend import is_runtime_scalar
from hipdnn_graph.backend.dtypes import torch_dtype

from .families import Prepared, Writer, family_of
from .families._common import CHECK

__all__ = ["FamilyProgram"]

#: where an input slot's value comes from
_FEED, _CONST, _LOCAL = 0, 1, 2


@dataclass(frozen=True)
class _Step:
    name: str
    run: Prepared
    #: (slot, source kind, uid for feeds and locals / value for constants)
    inputs: tuple[tuple[str, int, Any], ...]
    #: (slot, uid, torch storage dtype)
    outputs: tuple[tuple[str, int, Any], ...]
    #: the node's writer, where its family has one and every output is a graph output
    write: Writer | None


class FamilyProgram:
    """The graph's nodes in topological order, ready to run on tensors.

    Attributes:
        feeds: uids of what :meth:`results` reads, in a fixed order: every non-virtual tensor no
            node writes and that has no constant value (runtime pass-by-value scalars included).
        scalars: the uids among ``feeds`` that are pass-by-value scalars.
        outputs: uids of the non-virtual tensors nodes write, in a fixed order.
        specs: uid -> (dims, strides, torch dtype) of every feed and output.
        host_checked: whether a node's lowering checks its data on the host
            (its record's ``host_checked``): its plans are not captured as CUDA graphs.
    """

    def __init__(self, graph: hg.Graph) -> None:
        produced = {id(t) for node in graph.nodes for t in node.outputs()}
        steps: list[_Step] = []
        feeds: list[int] = []
        scalars: set[int] = set()
        outputs: list[int] = []
        specs: dict[int, tuple[tuple[int, ...], tuple[int, ...], Any]] = {}
        host_checked = False
        for node in graph.nodes:
            ins: list[tuple[str, int, Any]] = []
            outs: list[tuple[str, int, Any]] = []
            for slot, t in node.attributes.tensors_by_slot().items():
                uid = t.get_uid()
                is_output = any(t is o for o in node.outputs())
                if is_output:
                    dtype = torch_dtype(t.data_type)
                    outs.append((slot, uid, dtype))
                    if not t.is_virtual and uid not in outputs:
                        outputs.append(uid)
                        specs[uid] = (tuple(t.dim), tuple(t.stride), dtype)
                elif t.value is not None:
                    ins.append((slot, _CONST, t.value))
                elif id(t) in produced:
                    ins.append((slot, _LOCAL, uid))
                else:
                    ins.append((slot, _FEED, uid))
                    if uid not in feeds:
                        feeds.append(uid)
                        if is_runtime_scalar(t):
                            scalars.add(uid)
                        else:
                            specs[uid] = (tuple(t.dim), tuple(t.stride), torch_dtype(t.data_type))
            family = family_of(node)
            write = None
            if family.writer is not None and all(not t.is_virtual for t in node.outputs()):
                write = family.writer(node)
            steps.append(_Step(node.name, family.prepare(node), tuple(ins), tuple(outs), write))
            host_checked = host_checked or family.host_checked
        self.steps = tuple(steps)
        self.host_checked = host_checked
        self.feeds = tuple(feeds)
        self.scalars = frozenset(scalars)
        self.outputs = tuple(outputs)
        self.specs = specs

    def results(self, feeds: Mapping[int, Any], into: Mapping[int, Any] | None = None) -> list[Any]:
        """The graph's outputs (in :attr:`outputs` order, each in its storage type) from its
        feeds by uid (tensors; scalars as numbers or one-element tensors).

        ``into`` maps output uids to the caller's buffers: a node with a writer whose outputs
        are all there writes into them, and its results are those buffers."""
        return self.checked_results(feeds, into)[0]

    def checked_results(
        self, feeds: Mapping[int, Any], into: Mapping[int, Any] | None = None
    ) -> tuple[list[Any], Any]:
        """:meth:`results`, and whether the data passed the lowerings' checks: the AND of their
        :data:`~.families._common.CHECK` results (a 0-d bool tensor), or None when no lowering
        gave one (run eagerly, a lowering raises instead)."""
        local: dict[int, Any] = {}
        ok = self.run_steps(0, len(self.steps), feeds, local, into)
        return [local[uid] for uid in self.outputs], ok

    def run_steps(
        self,
        start: int,
        stop: int,
        feeds: Mapping[int, Any],
        local: dict[int, Any],
        into: Mapping[int, Any] | None = None,
    ) -> Any:
        """Run ``steps[start:stop]``, reading earlier results from ``local`` and adding theirs
        (by uid); ``into`` as in :meth:`results`. Returns the AND of their checks (see
        :meth:`checked_results`)."""
        ok: Any = None
        for step in self.steps[start:stop]:
            args = {}
            for slot, source, key in step.inputs:
                if source == _FEED:
                    args[slot] = feeds[key]
                elif source == _LOCAL:
                    args[slot] = local[key]
                else:
                    args[slot] = key
            if step.write is not None and into and all(u in into for _, u, _ in step.outputs):
                outs = {slot: into[uid] for slot, uid, _ in step.outputs}
                step.write(args, outs)
                local.update((uid, outs[slot]) for slot, uid, _ in step.outputs)
                continue
            got = step.run(args)
            for slot, uid, dtype in step.outputs:
                local[uid] = got[slot].to(dtype)
            check = got.get(CHECK)
            if check is not None:
                ok = check if ok is None else ok & check
        return ok

    def writer_tail(self) -> int | None:
        """Where the trailing run of steps with writers begins (each writes the caller's
        buffers with ``out=``), when some step comes before it and no lowering checks its data;
        None otherwise.

        The fusion engine compiles the steps before it and runs this tail eagerly: a compiled
        function returns fresh tensors and then copies them into the caller's buffers, and
        inductor folds that copy into a pointwise kernel but not into a matmul's result, which
        a writer produces in place (:class:`~.family_fusion.FamilyFusionPlan`).
        """
        cut = len(self.steps)
        while cut > 0 and self.steps[cut - 1].write is not None:
            cut -= 1
        if cut == 0 or cut == len(self.steps) or self.host_checked:
            return None
        return cut

    def made_before(self, cut: int) -> set[int]:
        """The uids of the results of ``steps[:cut]``."""
        return {uid for step in self.steps[:cut] for _, uid, _ in step.outputs}

    def carried(self, cut: int) -> tuple[int, ...]:
        """The uids of the results of ``steps[:cut]`` that ``steps[cut:]`` read, in a fixed
        order (what a compiled head hands to an eager tail)."""
        made = self.made_before(cut)
        read: list[int] = []
        for step in self.steps[cut:]:
            for _, source, key in step.inputs:
                if source == _LOCAL and key in made and key not in read:
                    read.append(key)
        return tuple(read)
