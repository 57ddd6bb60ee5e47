"""One SDPA forward or backward node of a NumPy reference plan, resolved when the plan is built.

Everything that does not depend on the buffers (which slots are set, flags, bounds, constant
scales, result dtypes) is resolved once here, so that executing a step is a few dictionary
lookups and one call into :mod:`hipdnn_graph_numpy_reference.sdpa_math`.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.backend import PhiloxDropout, ScalarSource, SdpaProblem
from hipdnn_graph.backend.dtypes import numpy_dtype

from .philox_mask import PhiloxKeepMask
from .sdpa_math import presized_backward, sdpa_backward, sdpa_forward

__all__ = ["SDPA_NODE_TYPES", "SdpaStep", "sdpa_refusal"]

#: the node families whose steps live here (their math is :mod:`.sdpa_math`)
SDPA_NODE_TYPES = frozenset({hg.NodeType.SDPA_FWD, hg.NodeType.SDPA_BWD})

_COMPUTE = {hg.DataType.FLOAT: np.float32, hg.DataType.DOUBLE: np.float64}


def sdpa_refusal(problem: SdpaProblem) -> str | None:
    """Why the reference cannot run this node exactly, or ``None``."""
    node = f"node '{problem.name}'"
    reason = problem.philox_problem()
    if reason is not None:
        return reason
    if problem.compute_data_type not in _COMPUTE:
        return f"{node}: compute type {problem.compute_data_type.name} (FLOAT or DOUBLE only)"
    return problem.data_type_problem()


#: (keyword of the math function, slot) for the array arguments, in call order
_ARRAY_ARGS_FWD = (("q", "Q"), ("k", "K"), ("v", "V"))
_ARRAY_ARGS_BWD = (*_ARRAY_ARGS_FWD, ("o", "O"), ("do", "dO"), ("stats", "Stats"))
_OPTIONAL_ARGS = (("bias", "Bias"), ("dropout_mask", "Dropout_mask"))
_PADDING_ARGS = (("seq_len_q", "SEQ_LEN_Q"), ("seq_len_kv", "SEQ_LEN_KV"))
_RESULT_SLOTS_FWD = ("O", "Stats")
_RESULT_SLOTS_BWD = ("dQ", "dK", "dV", "dBias")


@dataclass(frozen=True)
class SdpaStep:
    """One node, resolved when the plan is built so that ``execute`` only looks up buffers."""

    name: str
    function: Any
    #: uids of the leading positional arrays: q, k, v (and o, do, stats for the backward)
    positional: tuple[int, ...]
    #: keyword → uid of the optional array arguments (bias, dropout mask, sequence lengths)
    optional: tuple[tuple[str, int], ...]
    #: keyword arguments known when the plan is built (flags, bounds, constant scales, dtype)
    static: Mapping[str, Any]
    #: keyword → uid of runtime pass-by-value scalars (read from the variant pack)
    runtime: tuple[tuple[str, int], ...]
    #: (index in the math function's result tuple, uid, storage dtype) of every produced tensor
    results: tuple[tuple[int, int, np.dtype[Any]], ...]
    #: the math with its checks done at build time (see :func:`_presized`), or None
    presized: Any = None
    #: philox dropout: its keep mask is drawn per call from the Seed and Offset (or None)
    philox: _PhiloxMask | None = None
    #: ``buffers → (q, k, v[, o, do, stats])`` (set from ``positional``)
    fetch: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # the positional arrays from the buffers in one call (every SDPA node has q, k and v)
        object.__setattr__(self, "fetch", operator.itemgetter(*self.positional))

    @classmethod
    def of(cls, p: SdpaProblem, block_q: int = 0) -> SdpaStep:
        """The step of one node; ``block_q`` > 0 fixes the query rows per tile (the tiled math
        whenever it is below Sq), 0 lets the math size its tiles."""
        positional = tuple(
            p.uid(slot) for _, slot in (_ARRAY_ARGS_BWD if p.backward else _ARRAY_ARGS_FWD)
        )
        optional = _OPTIONAL_ARGS + (_PADDING_ARGS if p.padding else ())
        flags = {
            "alibi": p.alibi,
            "bottom_right": p.window.bottom_right,
            "left_bound": p.window.left_bound,
            "right_bound": p.window.right_bound,
        }
        # only what differs from the math functions' defaults: fewer keywords to pass per call
        static: dict[str, Any] = {
            kw: x for kw, x in flags.items() if x is not None and x is not False
        }
        static["compute_dtype"] = _COMPUTE[p.compute_data_type]
        if block_q:
            static["block_q"] = block_q
        runtime: list[tuple[str, int]] = []
        scalars = [("scale", p.scale)]
        if p.has("Dropout_mask"):
            scalars.append(("dropout_scale", p.dropout_scale))
        for kw, source in scalars:
            if source.uid is not None:
                runtime.append((kw, source.uid))
            else:
                static[kw] = source.value
        if p.backward:
            # without a dBias slot the math skips dBias's reduction even when there is a bias
            static["compute_dbias"] = p.has("dBias")
            if p.has("dBias"):
                static["dbias_shape"] = tuple(p.tensors["dBias"].dim)
        slots = _RESULT_SLOTS_BWD if p.backward else _RESULT_SLOTS_FWD
        results = tuple(
            (i, p.uid(slot), numpy_dtype(p.tensors[slot].data_type))
            for i, slot in enumerate(slots)
            if p.has(slot)
        )
        return cls(
            name=p.name,
            function=sdpa_backward if p.backward else sdpa_forward,
            positional=positional,
            optional=tuple((kw, p.uid(slot)) for kw, slot in optional if p.has(slot)),
            static=static,
            runtime=tuple(runtime),
            results=results,
            presized=_presized(p, static) if not runtime and not block_q else None,
            philox=None if p.philox is None else _PhiloxMask.of(p, p.philox),
        )

    def inputs(self) -> set[int]:
        """The uids this node reads."""
        seeds = () if self.philox is None else self.philox.uids()
        return {*self.positional, *(uid for _, uid in self.optional + self.runtime), *seeds}

    def outputs(self) -> set[int]:
        """The uids this node writes."""
        return {uid for _, uid, _ in self.results}

    def execute(self, buffers: dict[int, Any], internal: frozenset[int]) -> None:
        """Run the node on ``buffers`` (uid → array); results that are virtual tensors some
        later node reads (``internal``) are stored there in their declared data type."""
        args = self.fetch(buffers)
        if self.presized is not None:
            values = self.presized(*args)
        elif self.optional or self.runtime or self.philox is not None:
            kwargs = dict(self.static)
            for kw, uid in self.optional:
                kwargs[kw] = buffers[uid]
            for kw, uid in self.runtime:
                kwargs[kw] = ScalarSource.read(buffers[uid])
            if self.philox is not None:
                kwargs.update(self.philox.arguments(buffers))
            values = self.function(*args, **kwargs)
        else:
            values = self.function(*args, **self.static)
        for index, uid, dtype in self.results:
            value = values[index]
            out = buffers.get(uid)
            if out is None:  # a virtual tensor: keep it if a later node reads it
                if uid in internal:
                    buffers[uid] = value.astype(dtype, copy=False)
            elif out.shape == value.shape:
                out[...] = value  # casts like copyto(casting="unsafe"), with less overhead
            else:
                np.copyto(out, value.reshape(out.shape), casting="unsafe")


@dataclass(frozen=True)
class _PhiloxMask:
    """Draws a node's philox keep mask (:mod:`hipdnn_graph.philox`) for one call."""

    dropout: PhiloxDropout
    shape: tuple[int, int, int, int]

    @classmethod
    def of(cls, p: SdpaProblem, dropout: PhiloxDropout) -> _PhiloxMask:
        return cls(dropout, (p.batch, p.heads, p.seq_q, p.seq_kv))

    def uids(self) -> tuple[int, ...]:
        return tuple(s.uid for s in (self.dropout.seed, self.dropout.offset) if s.uid is not None)

    def arguments(self, buffers: Mapping[int, Any]) -> dict[str, Any]:
        """``dropout_mask`` and ``dropout_scale`` of the math functions, for this call."""
        d = self.dropout
        seed, offset = d.seed.resolve(buffers), d.offset.resolve(buffers)
        mask = PhiloxKeepMask(seed, offset, d.probability, self.shape)
        return {"dropout_mask": mask, "dropout_scale": d.scale}


def _presized(p: SdpaProblem, static: Mapping[str, Any]) -> Any:
    """The backward with its checks done now, when nothing about its arrays can differ per call.

    That is a backward without bias, dBias, dropout or padding whose six arrays are stored in
    the compute type with packed strides: the variant pack's checks then guarantee C-contiguous
    arrays of the shapes and type that :func:`presized_backward` checked once (small problems
    only; it returns None for the others).
    """
    if not p.backward or any(p.has(slot) for slot in ("Bias", "dBias", "Dropout_mask")):
        return None
    if p.philox is not None:
        return None
    if p.padding:
        return None
    ct = np.dtype(static["compute_dtype"])
    for _, slot in _ARRAY_ARGS_BWD:
        tensor = p.tensors[slot]
        packed = list(tensor.get_stride() or ()) == hg.generate_strides(tensor.get_dim())
        if numpy_dtype(tensor.data_type) != ct or not packed:
            return None
    shapes = [tuple(p.tensors[slot].get_dim()) for slot in ("Q", "K", "V")]
    flags = {kw: static[kw] for kw in ("alibi", "bottom_right", "left_bound", "right_bound")
             if kw in static}  # fmt: skip
    return presized_backward(*shapes, scale=static["scale"], compute_dtype=ct, **flags)
