"""What the torch SDPA engines accept: :class:`SdpaSupport`, the ``check()`` of each engine
(a mixin of :class:`~._engines.TorchSdpaEngine`), with the reason each refusal or deferral
gives, and what a node is to the flex kernels (:func:`flex_spec`).

What an op cannot do exactly is refused with a reason naming the feature, so ranking falls
through, in the end to the math engine; where an earlier engine was measured slower than flex
it defers with a reason (:mod:`._ranking`).

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 1, 4, 8])
    >>> _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="f")
    >>> g.validate()
    >>> common_refusal(SdpaProblem.from_node(g.nodes[0])), sorted(t.name for t in LOWP)
    (None, ['BFLOAT16', 'HALF'])
"""

from __future__ import annotations

import importlib.util
from typing import Any

import hipdnn_graph as hg
from hipdnn_graph.backend import SdpaProblem, Support, engine_id
from hipdnn_graph.backend.dtypes import torch_dtype
from hipdnn_graph.backend.packed_sdpa import packed_refusal
from hipdnn_graph.backend.ragged import is_ragged

from ._ranking import DOCUMENTED_STREAM, FLEX, Features, deferral, philox_deferral

__all__ = [
    "FUSED_PACKED_OPS",
    "GRADS",
    "LOWP",
    "SdpaSupport",
    "common_refusal",
    "flex_accepts",
    "flex_device",
    "flex_spec",
    "torch_available",
]

#: the backward's gradient slots, in the order the kernels return them
GRADS = ("dQ", "dK", "dV", "dBias")
#: the data types the fused kernels take
LOWP = frozenset({hg.DataType.HALF, hg.DataType.BFLOAT16})
#: the kernel families whose variable-length kernels run packed (ragged) graphs
#: (:mod:`._packed_fused`; the math engine runs every packed graph)
FUSED_PACKED_OPS = frozenset({"flash", "efficient"})


def torch_available() -> bool:
    """Whether torch can be imported (without importing it)."""
    return importlib.util.find_spec("torch") is not None


def common_refusal(p: SdpaProblem) -> str | None:
    """Why no torch SDPA engine runs this node (philox or data type rules), or None."""
    return p.philox_problem() or p.data_type_problem()


def _philox_refusal(p: SdpaProblem, op: str | None) -> str | None:
    """Why an engine of kernel family ``op`` (None: math) cannot draw this node's philox
    dropout at all (which fused engine draws it by default is :func:`_ranking.philox_deferral`'s
    rule)."""
    if p.philox is None or op is None:
        return None
    node = f"node '{p.name}'"
    if op == "flex":
        return (
            f"{node}: flex cannot draw philox dropout (a score modifier acts before the softmax); "
            "the fused and math engines run it"
        )
    offset = p.philox.offset.value
    if offset is not None and offset % 4:
        return (
            f"{node}: {op} needs a philox Offset that is a multiple of 4 (torch's generator keeps "
            f"offsets in steps of 4), got {offset}"
        )
    return None


class SdpaSupport:
    """The ``check()`` of one torch SDPA engine; ``op`` is the kernel family (``"cudnn"``,
    ``"flash"``, ``"efficient"``, ``"flex"``) or ``None`` for the math engine."""

    def __init__(self, name: str, op: str | None) -> None:
        self.name = name
        self.op = op

    def check(self, graph: hg.Graph) -> Support:
        if not torch_available():
            return Support.no("torch is not installed")
        import torch

        if self.op == "flex":
            from .kernels._flex_env import CPU_ENV, cpu_allowed  # not .flex: a second to import

            if not (torch.cuda.is_available() or cpu_allowed()):
                return Support.no(
                    "flex needs a CUDA or ROCm device (or "
                    f"{CPU_ENV}=1 for FlexAttention's CPU reference path); none is available"
                )
        elif self.op is not None:
            if not torch.cuda.is_available():
                return Support.no(f"{self.op} needs a CUDA or ROCm device; none is available")
            if self.op == "cudnn" and torch.version.hip:
                return Support.no("cuDNN attention does not exist in ROCm builds of torch")
        preferred = graph.get_preferred_engine_id_ext() == engine_id(self.name)
        # flex refuses override-shape graphs, so nothing defers to it there
        flex_usable = not graph.is_override_shape_enabled()
        packed = any(is_ragged(t) for t in graph.graph_tensors())
        for node in graph.nodes:
            if not isinstance(node, hg.SdpaBwdNode | hg.SdpaFwdNode):
                return Support.no(f"{type(node).__name__} is not implemented")
            p = SdpaProblem.from_node(node)
            philox = p.philox is not None
            reason = (
                common_refusal(p)
                # a packed graph runs every node of it packed (._packed_plan)
                or (packed_refusal(p) if packed else None)
                or (_philox_refusal(p, self.op) if philox else None)
                or self._refusal(p, flex_usable, packed)
                or (self._philox_deferral(p, preferred) if philox else None)
            )
            if reason is not None:
                return Support.no(reason)
        return Support.yes()

    def dropout_stream(self) -> str | None:
        """The Philox stream this engine's philox dropout draws its mask from on this torch
        build (None: the engine runs no philox dropout). See :mod:`.kernels._fused_philox`."""
        if self.op is None:
            return DOCUMENTED_STREAM  # the math kernel draws hipdnn_graph.philox's stream
        if self.op == "flex":
            return None
        from .kernels import _fused_philox, fused

        return _fused_philox.stream(fused.FusedOp(self.op))

    def _philox_deferral(self, p: SdpaProblem, preferred: bool) -> str | None:
        stream = self.dropout_stream()
        if stream is None or self.op is None:
            return None
        reason = philox_deferral(self.name, stream, preferred=preferred)
        return None if reason is None else f"node '{p.name}': {reason}"

    def _refusal(
        self, p: SdpaProblem, flex_usable: bool = True, packed: bool = False
    ) -> str | None:
        node = f"node '{p.name}'"
        if self.op is None:
            if p.compute_data_type not in (hg.DataType.FLOAT, hg.DataType.DOUBLE):
                return f"{node}: compute type {p.compute_data_type.name} (FLOAT or DOUBLE only)"
            return None
        if p.compute_data_type != hg.DataType.FLOAT:
            return f"{node}: fused kernels compute in FLOAT, not {p.compute_data_type.name}"
        io = p.tensors["Q"].data_type
        if self.op == "flex":
            return self._flex_reason(p, io)
        if any(p.tensors[s].data_type != io for s in ("K", "V")):
            return f"{node}: fused kernels need Q, K and V of one data type"
        from .kernels import fused

        reason = fused.dtype_reason(fused.FusedOp(self.op), torch_dtype(io))
        if reason is not None:
            return f"{node}: {reason}"
        if packed:  # the variable-length kernels (engines without them refused by name)
            from ._packed_fused import packed_fused_choice

            return packed_fused_choice(self.op, p).reason
        return self._fused_reason(p, io, flex_usable)

    def _fused_reason(self, p: SdpaProblem, io: hg.DataType, flex_usable: bool) -> str | None:
        import torch

        from .kernels import fused
        from .kernels.call import SdpaCall, problem_dims

        fp = fused.FusedSdpaCase(
            *problem_dims(p), torch_dtype(io), f"cuda:{torch.cuda.current_device()}",
            SdpaCall.of(p),
            bias_shape=tuple(p.tensors["Bias"].dim) if p.has("Bias") else None,
            padding=p.padding, dropout_mask=p.has("Dropout_mask"), forward=not p.backward,
        )  # fmt: skip
        assert self.op is not None
        reason = fused.check(fused.FusedOp(self.op), fp)
        if reason is None:
            w = p.window
            band = w.left_bound is not None or (w.right_bound or 0) > 0
            offset = w.bottom_right and p.seq_q != p.seq_kv
            features = Features(
                bias=p.has("Bias"), padding=p.padding, band=band, offset_diagonal=offset
            )
            if features != Features():
                usable = flex_usable and flex_accepts(p, io)
                reason = deferral(self.op, features, flex_accepts=usable)
        return None if reason is None else f"node '{p.name}': {reason}"

    def _flex_reason(self, p: SdpaProblem, io: hg.DataType) -> str | None:
        node = f"node '{p.name}'"
        if any(p.tensors[s].data_type != io for s in ("K", "V")):
            return f"{node}: flex needs Q, K and V of one data type"
        if io not in LOWP and not (io == hg.DataType.FLOAT and flex_device() == "cpu"):
            return f"{node}: flex runs HALF or BFLOAT16 Q/K/V on the GPU, got {io.name}"
        from .kernels import flex

        reason = flex.static_reason(flex_spec(p, io))
        return None if reason is None else f"{node}: {reason}"


def _bias_dtype(p: SdpaProblem, io: hg.DataType) -> Any:
    """The torch type flex adds the Bias in: its own, or Q's for a boolean mask; None without
    a Bias."""
    if not p.has("Bias"):
        return None
    bias = p.tensors["Bias"]
    return torch_dtype(io if is_mask(bias) else bias.data_type)


def is_mask(bias: hg.TensorAttributes) -> bool:
    """Whether a Bias is a boolean mask (True attends, False hides the key, as torch's bool
    ``attn_mask``); the engines add it as a bias of 0 and −inf (:mod:`._sdpa_steps`)."""
    return bias.data_type is hg.DataType.BOOLEAN


def flex_device() -> str:
    import torch

    return f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu"


def flex_spec(p: SdpaProblem, io: hg.DataType, call: Any = None) -> Any:
    """The :class:`~.kernels.flex.FlexSpec` of a node (on the current device); ``call``: the
    node's :class:`~.kernels.call.SdpaCall` where the caller has built it already."""
    from .kernels import flex
    from .kernels.call import SdpaCall, problem_dims

    return flex.FlexSpec(
        *problem_dims(p), torch_dtype(io), flex_device(), not p.backward,
        call if call is not None else SdpaCall.of(p),
        bias_shape=tuple(p.tensors["Bias"].dim) if p.has("Bias") else None,
        bias_dtype=_bias_dtype(p, io),
        grad_dtypes=tuple(torch_dtype(p.tensors[g].data_type) for g in GRADS if p.has(g))
        if p.backward
        else (),
        padding=p.padding, dropout_mask=p.has("Dropout_mask"),
        want_stats=p.backward or p.has("Stats"),
    )  # fmt: skip


def flex_accepts(p: SdpaProblem, io: hg.DataType) -> bool:
    """Whether the flex engine would take this node (static rules; nothing is compiled)."""
    del io
    import torch

    from .kernels._flex_env import cpu_allowed

    if not (torch.cuda.is_available() or cpu_allowed()) or common_refusal(p):
        return False
    if p.philox is not None:
        return False
    return _FLEX_RULES._refusal(p) is None


#: the flex engine's rules, for engines that defer to it
_FLEX_RULES = SdpaSupport(FLEX, "flex")
