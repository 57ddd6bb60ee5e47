"""One SDPA node as a cudnn-frontend graph: declared, checked by cuDNN, built, executed.

Each tensor of the node is declared to cuDNN with the graph's own uid, dims, strides and data
type, so the caller's buffers are the variant pack as they are: cuDNN reads the inputs and writes
the outputs where they lie (no copy in or out). What is not a device buffer in the graph is made
one here: a constant scale or dropout scale is a pass-by-value host tensor made once; a runtime
pass-by-value scalar (a Python number in the variant pack) becomes a host tensor per call.
Sequence lengths are INT32 ``[B, 1, 1, 1]`` in hipDNN's graph, as cuDNN reads them.

After cuDNN ran, the rows hipDNN defines and cuDNN writes otherwise are rewritten
(``docs/sdpa-math.md``, "Rows with no visible key"; what cuDNN writes was measured, see
:func:`_fixup`): Stats = +inf on padded query rows, and O = 0, Stats = +inf, dQ = 0 on rows a
band leaves without keys.

Imports torch and cudnn only inside the functions that need them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import hipdnn_graph as hg
from hipdnn_graph.backend import IntConstraint, Knob, ScalarSource, SdpaProblem
from hipdnn_graph.backend.dropout import read_int

from .rules import mask_arguments

__all__ = ["PLAN_INDEX_KNOB", "CudnnNodeGraph", "build_node_graph"]

#: the engine's knob: which of cuDNN's execution plans (ranked by its heuristics, modes A then
#: FALLBACK) each node runs; 0 builds the first plan that builds, n > 0 exactly plan n
PLAN_INDEX_KNOB = Knob(
    "cudnn_fe.plan_index",
    0,
    "cuDNN execution plan index per node, in cuDNN's heuristic order (0: the first that builds)",
    IntConstraint(0, 255),
)

_FWD_INPUTS = ("Q", "K", "V")
_BWD_INPUTS = ("Q", "K", "V", "O", "dO", "Stats")
_OPTIONAL_INPUTS = (("bias", "Bias"), ("seq_len_q", "SEQ_LEN_Q"), ("seq_len_kv", "SEQ_LEN_KV"))


def _cudnn_type(cudnn: Any, dtype: hg.DataType) -> Any:
    names = {
        hg.DataType.HALF: "HALF",
        hg.DataType.BFLOAT16: "BFLOAT16",
        hg.DataType.FLOAT: "FLOAT",
        hg.DataType.DOUBLE: "DOUBLE",
        hg.DataType.INT32: "INT32",
        hg.DataType.INT64: "INT64",
        hg.DataType.INT8: "INT8",
        hg.DataType.UINT8: "UINT8",
        hg.DataType.BOOLEAN: "BOOLEAN",
    }
    return getattr(cudnn.data_type, names[dtype])


@dataclass
class CudnnNodeGraph:
    """A built cuDNN graph for one node, and how to feed it per call.

    Attributes:
        graph: the cudnn-frontend graph (plans built); ``None`` once released.
        uids: the uid of every tensor cuDNN reads or writes, in the order ``execute`` passes
            their buffers.
        sources: per uid in ``uids``: ``None`` (the variant pack's buffer as it is) or a
            function of the variant pack returning the buffer (host tensors for pass-by-value
            scalars).
        workspace_size: bytes of scratch memory the plan needs.
        fixup: writes the rows cuDNN leaves unspecified (or ``None`` when there can be none).
    """

    graph: Any
    uids: tuple[int, ...]
    sources: tuple[Callable[[Mapping[int, Any]], Any] | None, ...]
    workspace_size: int
    fixup: Callable[[Mapping[int, Any]], None] | None = None
    #: the execution plan cuDNN runs (:data:`PLAN_INDEX_KNOB`; 0: its first that builds)
    plan_index: int = 0
    #: that plan's name in cuDNN (its engine and knobs), "" when cuDNN does not say
    plan_name: str = ""
    #: host tensors made once (constant pass-by-value scalars), kept alive with the graph
    constants: dict[int, Any] = field(default_factory=dict)

    def release(self) -> None:
        """Drop the cuDNN graph (its plan's release, at interpreter exit: :mod:`.lifetime`)."""
        self.graph = None

    def buffers(self, pack: Mapping[int, Any]) -> tuple[Any, ...]:
        return tuple(
            pack[uid] if source is None else source(pack)
            for uid, source in zip(self.uids, self.sources, strict=True)
        )


class _Declarer:
    """Declares the node's tensors to one cuDNN graph (uid → cuDNN tensor, per-call sources)."""

    def __init__(self, graph: Any, cudnn: Any, torch: Any) -> None:
        self.graph, self.cudnn, self.torch = graph, cudnn, torch
        self.uids: list[int] = []
        self.sources: list[Callable[[Mapping[int, Any]], Any] | None] = []
        self.constants: dict[int, Any] = {}
        self._next_private = -1

    def tensor(self, t: hg.TensorAttributes, *, data_type: hg.DataType | None = None) -> Any:
        uid = t.get_uid()
        ct = self.graph.tensor(
            name=t.name or f"t{uid}",
            dim=list(t.get_dim()),
            stride=list(t.get_stride()),
            data_type=_cudnn_type(self.cudnn, data_type or t.data_type),
            uid=uid,
        )
        self.uids.append(uid)
        self.sources.append(None)
        return ct

    def scalar(self, source: ScalarSource | None, value: float | None, kind: str) -> Any:
        """A pass-by-value host scalar: a constant (``value``), or read per call (``source``)."""
        torch = self.torch
        dtype, cudnn_type = (
            (torch.float32, self.cudnn.data_type.FLOAT)
            if kind == "float"
            else (torch.int64, self.cudnn.data_type.INT64)
        )
        uid = self._next_private if source is None or source.uid is None else source.uid
        if source is None or source.uid is None:
            self._next_private -= 1
        # private uids are negative in our graph; cuDNN wants them distinct and non-negative
        cudnn_uid = uid if uid >= 0 else (1 << 40) - uid
        ct = self.graph.tensor(
            name=f"scalar{cudnn_uid}",
            dim=[1, 1, 1, 1],
            stride=[1, 1, 1, 1],
            data_type=cudnn_type,
            is_pass_by_value=True,
            uid=cudnn_uid,
        )
        self.uids.append(cudnn_uid)
        if source is None or source.uid is None:
            host = torch.full((1, 1, 1, 1), value, dtype=dtype)
            self.constants[cudnn_uid] = host
            self.sources.append(lambda pack: host)
        else:
            read = ScalarSource.read if kind == "float" else _read_int
            runtime_uid = source.uid
            self.sources.append(
                lambda pack: torch.full((1, 1, 1, 1), read(pack[runtime_uid]), dtype=dtype)
            )
        return ct

    def int_tensor(self, t: hg.TensorAttributes, source: Any) -> Any:
        """A philox Seed or Offset: a device tensor as it is, else a pass-by-value host int."""
        if source.uid is None:
            return self.scalar(None, source.value, "int")
        if t.is_pass_by_value:
            return self.scalar(ScalarSource(uid=source.uid), None, "int")
        return self.tensor(t)


def _read_int(value: Any) -> int:
    return read_int(value, "philox Seed/Offset")


def build_node_graph(p: SdpaProblem, handle: Any, plan_index: int = 0) -> CudnnNodeGraph:
    """Declare ``p`` to cuDNN, let cuDNN check it, and build its plan (``plan_index`` > 0:
    exactly that plan of cuDNN's ranked list).

    Raises:
        Exception: whatever cudnn-frontend raises when cuDNN cannot run the node (the engine
            turns it into a refusal naming cuDNN's message); ValueError for a plan index
            beyond cuDNN's list.
    """
    import cudnn
    import torch

    io = p.tensors["Q"].data_type
    g = cudnn.pygraph(
        io_data_type=_cudnn_type(cudnn, io),
        intermediate_data_type=cudnn.data_type.FLOAT,
        compute_data_type=cudnn.data_type.FLOAT,
        handle=handle,
    )
    d = _Declarer(g, cudnn, torch)
    positional = [d.tensor(p.tensors[s]) for s in (_BWD_INPUTS if p.backward else _FWD_INPUTS)]
    kwargs: dict[str, Any] = {"name": p.name or "sdpa"}
    mask = mask_arguments(p)
    if "diagonal_alignment" in mask:
        mask["diagonal_alignment"] = getattr(cudnn.diagonal_alignment, mask["diagonal_alignment"])
    kwargs.update(mask)
    if p.scale.uid is not None:
        kwargs["attn_scale"] = d.scalar(p.scale, None, "float")
    else:
        kwargs["attn_scale"] = float(p.scale.value if p.scale.value is not None else 1.0)
    for key, slot in _OPTIONAL_INPUTS:
        if p.has(slot):
            t = p.tensors[slot]
            kwargs[key] = d.tensor(t)
    if p.padding:
        kwargs["use_padding_mask"] = True
    if p.alibi:
        kwargs["use_alibi_mask"] = True
    kwargs.update(_dropout(p, d))
    if p.backward:
        if p.has("dBias"):
            kwargs["dBias"] = d.tensor(p.tensors["dBias"])
        grads = g.sdpa_backward(*positional, **kwargs)
        outputs = dict(zip(("dQ", "dK", "dV"), grads[:3], strict=True))
    else:
        kwargs["generate_stats"] = p.has("Stats")
        o, stats = g.sdpa(*positional, **kwargs)
        outputs = {"O": o, "Stats": stats}
    for slot, ct in outputs.items():
        if ct is None or not p.has(slot):
            continue
        t = p.tensors[slot]
        ct.set_output(True).set_dim(list(t.get_dim())).set_stride(list(t.get_stride()))
        ct.set_data_type(_cudnn_type(cudnn, t.data_type)).set_uid(t.get_uid())
        d.uids.append(t.get_uid())
        d.sources.append(None)
    if p.backward and p.has("dBias"):
        kwargs["dBias"].set_output(True)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    if plan_index:
        count = int(g.get_execution_plan_count())
        if plan_index >= count:
            raise ValueError(
                f"Plan index {plan_index} is out of bounds: cuDNN offers {count} execution "
                f"plans for node '{p.name}'"
            )
        g.build_plan_at_index(plan_index)  # cudnn-frontend runs the plan built last
    else:
        g.build_plans()
    return CudnnNodeGraph(
        graph=g,
        uids=tuple(d.uids),
        sources=tuple(d.sources),
        workspace_size=int(g.get_workspace_size()),
        fixup=_fixup(p),
        plan_index=plan_index,
        plan_name=_plan_name(g, plan_index),
        constants=d.constants,
    )


def _plan_name(g: Any, index: int) -> str:
    """cuDNN's name of plan ``index`` ("" where this cudnn-frontend has no such query)."""
    try:
        return str(g.get_plan_name_at_index(index))
    except Exception:
        return ""


def _dropout(p: SdpaProblem, d: _Declarer) -> dict[str, Any]:
    """cuDNN's ``dropout`` argument: ``(probability, seed, offset)`` for philox dropout,
    ``(mask, scale)`` for an explicit mask (forward only: :data:`.rules.MASK_BACKWARD`)."""
    if p.philox is not None:
        ph = p.philox
        seed = d.int_tensor(p.tensors["Seed"], ph.seed)
        offset = d.int_tensor(p.tensors["Offset"], ph.offset)
        return {"dropout": (ph.probability, seed, offset)}
    if not p.has("Dropout_mask"):
        return {}
    mask = d.tensor(p.tensors["Dropout_mask"])
    scale_source = p.dropout_scale
    value = scale_source.value if scale_source.value else 1.0
    scale = d.scalar(scale_source if scale_source.uid is not None else None, value, "float")
    return {"dropout": (mask, scale)}


def _fixup(p: SdpaProblem) -> Callable[[Mapping[int, Any]], None] | None:
    """The in-place writes of the rows hipDNN defines and cuDNN leaves otherwise.

    Measured on the H200 (cuDNN 9.19): with a padding mask cuDNN itself writes O = 0 on padded
    query rows and zero dQ/dK/dV on padded rows and keys, but Stats = FLT_MAX instead of +inf; so
    padding needs only Stats rewritten (a ``[B, H, Sq, 1]`` tensor). Rows a band or a diagonal
    leaves without keys get the whole convention (O, Stats, dQ).
    """
    import torch

    from ..kernels._fused_common import empty_rows
    from ..kernels._fused_rules import FusedSdpaCase
    from ..kernels.call import SdpaCall, problem_dims

    problem = functools.partial(
        FusedSdpaCase, *problem_dims(p), torch.float32, "cuda", SdpaCall.of(p)
    )
    band_empties = empty_rows(problem(), torch.device("cpu")) is not None
    slots: list[tuple[str, float]] = []
    if p.backward:
        slots += [("dQ", 0.0)] if band_empties else []
    else:
        slots += [("O", 0.0)] if band_empties else []
        slots += [("Stats", math.inf)] if (band_empties or p.padding) and p.has("Stats") else []
    if not slots:
        return None
    rows_problem = problem(padding=p.padding)
    writes = [(p.uid(slot), value) for slot, value in slots]
    q_uid = p.uid("Q")
    lens = (p.uid("SEQ_LEN_Q"), p.uid("SEQ_LEN_KV")) if p.padding else None

    def fixup(pack: Mapping[int, Any]) -> None:
        slq, slkv = (pack[lens[0]], pack[lens[1]]) if lens else (None, None)
        rows = empty_rows(rows_problem, pack[q_uid].device, slq, slkv)
        if rows is not None:
            for uid, value in writes:
                pack[uid].masked_fill_(rows, value)

    return fixup
