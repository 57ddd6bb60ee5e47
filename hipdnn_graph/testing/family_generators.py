"""Random valid graphs of every family for conformance testing (attention has its own generator,
:func:`~hipdnn_graph.testing.random_sdpa_case`).

:data:`FAMILIES` names what :func:`random_family_case` draws: one family per graph
(``"pointwise"``, ``"matmul"``, ``"reduction"``, and ``"convolution"``, ``"batchnorm"``,
``"layernorm"``, ``"rmsnorm"``, ``"moe"`` from :mod:`~hipdnn_graph.testing.norm_conv_generators`,
``"resample"`` from :mod:`~hipdnn_graph.testing.resample_generators`), small graphs of several
families (``"mixed"``: matmul → bias → activation → optional reduction, convolution → batch-norm
inference → ReLU, or RMSNorm → matmul → SiLU), ``"block_scale"`` (MX quantize, dequantize or
the round trip, in FP8 or INT8 with E8M0 or FLOAT scales), and ``"sdpa"`` (attention, as
:func:`~hipdnn_graph.testing.random_sdpa_case` draws it). Graphs are small (dims up to 24) so a
reference run takes milliseconds; every generated graph validates.

Example:
    >>> from hipdnn_graph.testing import generate_family_cases
    >>> cases = generate_family_cases(4, seed=0, families=("pointwise", "matmul"))
    >>> [c.family for c in cases]
    ['pointwise', 'matmul', 'pointwise', 'matmul']
    >>> all(c.graph.is_validated for c in cases)
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..graph import Graph
from ..nodes.pointwise import BINARY_MODES, TERNARY_MODES, UNARY_MODES
from ..tensor import TensorAttributes
from ..types import DataType, PointwiseMode, ReductionMode
from .draw_common import Draw, draw_dims, mark_output, new_graph, pick
from .generators import DEFAULT_IO_TYPES, KINDS, GraphCase, Kind, random_sdpa_case
from .norm_conv_generators import (
    draw_batchnorm,
    draw_conv_bn_relu,
    draw_convolution,
    draw_layernorm,
    draw_moe,
    draw_rmsnorm,
    draw_rmsnorm_matmul_silu,
)
from .resample_generators import draw_resample

__all__ = ["FAMILIES", "generate_family_cases", "random_family_case"]

_M = PointwiseMode
#: modes whose input must be positive: the generator puts an ABS node (and a shift) before them
_POSITIVE = frozenset({_M.LOG, _M.SQRT, _M.RSQRT})
#: the activation parameters a generated pointwise node may carry, per mode
_PARAMETERS: dict[PointwiseMode, tuple[tuple[str, float, float], ...]] = {
    _M.RELU_FWD: (("relu_lower_clip", -0.5, 0.5), ("relu_upper_clip", 1.0, 3.0),
                  ("relu_lower_clip_slope", 0.0, 0.3)),
    _M.RELU_BWD: (("relu_lower_clip_slope", 0.0, 0.3),),
    _M.ELU_FWD: (("elu_alpha", 0.2, 2.0),),
    _M.ELU_BWD: (("elu_alpha", 0.2, 2.0),),
    _M.SOFTPLUS_FWD: (("softplus_beta", 0.5, 3.0),),
    _M.SOFTPLUS_BWD: (("softplus_beta", 0.5, 3.0),),
    _M.SWISH_FWD: (("swish_beta", 0.5, 2.0),),
    _M.SWISH_BWD: (("swish_beta", 0.5, 2.0),),
}  # fmt: skip
_ACTIVATIONS = (_M.RELU_FWD, _M.GELU_FWD, _M.SWISH_FWD, _M.TANH_FWD, _M.SIGMOID_FWD)


def _broadcast_from(rng: np.random.Generator, dims: list[int]) -> list[int]:
    """Dims that broadcast to ``dims`` from the right: some set to 1, maybe leading ones cut."""
    out = [1 if rng.random() < 0.3 else d for d in dims]
    return out[int(rng.integers(0, len(out))) :] or [dims[-1]]


def _pointwise(rng: np.random.Generator, io: DataType, seed: int) -> tuple[Graph, set[str]]:
    modes = sorted(UNARY_MODES | BINARY_MODES | TERNARY_MODES)
    mode = PointwiseMode(modes[int(rng.integers(len(modes)))])
    g = new_graph(f"pointwise_{seed}", io)
    dims = draw_dims(rng, int(rng.integers(1, 5)))
    arity = 1 if mode in UNARY_MODES else 2 if mode in BINARY_MODES else 3
    inputs = [g.tensor(name="IN_0", dim=dims)]
    inputs += [g.tensor(name=f"IN_{i}", dim=_broadcast_from(rng, dims)) for i in range(1, arity)]
    first = inputs[0]
    features = {mode.name}
    if mode in _POSITIVE:  # |x| + 0.1: the math is defined everywhere the graph reads
        shift = g.tensor(TensorAttributes(name="shift").set_value(0.1))
        first = g.pointwise(g.pointwise(first, mode=_M.ABS, name="abs"), shift, mode=_M.ADD,
                            name="shift")  # fmt: skip
        features.add("abs_first")
    keywords: dict[str, Any] = {}
    for name, low, high in _PARAMETERS.get(mode, ()):
        if rng.random() < 0.5:
            keywords[name] = float(rng.uniform(low, high))
            features.add(name)
    if mode == _M.GEN_INDEX:
        keywords["axis"] = int(rng.integers(len(dims)))
    y = g.pointwise(first, *inputs[1:], mode=mode, name="op", **keywords)
    mark_output(y, dims)
    if mode == _M.GEN_INDEX:
        y.set_data_type(DataType.INT32)
    if any(t.dim != dims for t in inputs[1:]):
        features.add("broadcast")
    return g, features


def _batch_pair(rng: np.random.Generator, rank: int) -> tuple[list[int], list[int]]:
    """Batch dims of A and B that hipDNN's rule accepts: equal, 1, or one dividing the other."""
    a, b = [], []
    for _ in range(rank):
        d = int(rng.choice([1, 2, 3, 4]))
        kind = rng.random()
        if kind < 0.4:
            pair = (d, d)
        elif kind < 0.7:
            pair = (1, d)
        else:
            pair = (d, d * int(rng.integers(1, 3)))
        if rng.random() < 0.5:
            pair = (pair[1], pair[0])
        a.append(pair[0])
        b.append(pair[1])
    return a, b


def _matmul(rng: np.random.Generator, io: DataType, seed: int) -> tuple[Graph, set[str]]:
    g = new_graph(f"matmul_{seed}", io)
    m, n, k = (int(x) for x in rng.integers(1, 25, size=3))
    batch_a, batch_b = _batch_pair(rng, int(rng.integers(0, 3)))
    a = g.tensor(name="A", dim=[*batch_a, m, k])
    b = g.tensor(name="B", dim=[*batch_b, k, n])
    c = g.matmul(a, b, name="mm")
    c.set_output(True)
    features = {f"batch_rank={len(batch_a)}"}
    if batch_a != batch_b:
        features.add("batch_broadcast")
    return g, features


def _reduction(rng: np.random.Generator, io: DataType, seed: int) -> tuple[Graph, set[str]]:
    modes = [m for m in ReductionMode if m != ReductionMode.NOT_SET]
    mode = modes[int(rng.integers(len(modes)))]
    g = new_graph(f"reduction_{seed}", io)
    dims = draw_dims(rng, int(rng.integers(1, 5)), high=7)
    reduced = [i for i in range(len(dims)) if rng.random() < 0.5 and dims[i] > 1]
    if not reduced:
        dims[0] = max(dims[0], 2)
        reduced = [0]
    y_dims = [1 if i in reduced else d for i, d in enumerate(dims)]
    x = g.tensor(name="X", dim=dims)
    mark_output(g.reduction(x, mode=mode, name="reduce"), y_dims)
    return g, {mode.name, f"axes={reduced}"}


def _matmul_chain(rng: np.random.Generator, io: DataType, seed: int) -> tuple[Graph, set[str]]:
    g = new_graph(f"mixed_{seed}", io)
    m, n, k = (int(x) for x in rng.integers(2, 17, size=3))
    x = g.tensor(name="X", dim=[m, k])
    w = g.tensor(name="W", dim=[k, n])
    bias = g.tensor(name="bias", dim=[1, n])
    act = _ACTIVATIONS[int(rng.integers(len(_ACTIVATIONS)))]
    h = g.pointwise(g.matmul(x, w, name="mm"), bias, mode=_M.ADD, name="bias_add")
    y = g.pointwise(h, mode=act, name="act")
    features = {act.name}
    if rng.random() < 0.5:
        mode = ReductionMode.ADD if rng.random() < 0.5 else ReductionMode.AMAX
        mark_output(g.reduction(y, mode=mode, name="reduce"), [m, 1])
        features.add(mode.name)
    else:
        y.set_output(True)
    return g, features


#: the graphs of several families ``"mixed"`` draws from
#: the quantized and scale types a generated block-scale graph draws
_QUANTIZED = (DataType.FP8_E4M3, DataType.FP8_E5M2, DataType.INT8)
_SCALES = (DataType.FP8_E8M0, DataType.FLOAT)


def _block_scale(rng: np.random.Generator, io: DataType, seed: int) -> tuple[Graph, set[str]]:
    """MX block scaling: a quantize node (Y and SCALE the outputs, blocks along a random axis),
    a dequantize node (blocks along the last axis), or the round trip through a virtual
    quantized tensor."""
    g = new_graph(f"block_scale_{seed}", io)
    kind = pick(rng, ("quantize", "dequantize", "round_trip"))
    block = pick(rng, (2, 4, 8, 32))
    dims = draw_dims(rng, int(rng.integers(1, 4)), high=5)
    axis = int(rng.integers(len(dims))) if kind == "quantize" else len(dims) - 1
    dims[axis] = block * int(rng.integers(1, 4))
    q_type, s_type = pick(rng, _QUANTIZED), pick(rng, _SCALES)
    features = {kind, f"block={block}", q_type.name, s_type.name}
    if kind == "dequantize":
        x = g.tensor(name="X", dim=dims, data_type=q_type)
        s_dims = [*dims[:-1], dims[-1] // block]
        scale = g.tensor(name="SCALE", dim=s_dims, data_type=s_type)
        negative = bool(rng.random() < 0.3)
        y = g.block_scale_dequantize(x, scale, block_size=[block], is_negative_scale=negative,
                                     name="dq")  # fmt: skip
        y.set_data_type(io).set_output(True)
        return g, features | ({"negative_scale"} if negative else set())
    x = g.tensor(name="X", dim=dims)
    q, scale = g.block_scale_quantize(x, block_size=block, axis=axis, name="q")
    q.set_data_type(q_type)
    scale.set_data_type(s_type)
    if kind == "quantize":
        q.set_output(True)
        scale.set_output(True)
        return g, features | {f"axis={axis}"}
    y = g.block_scale_dequantize(q, scale, block_size=[block], name="dq")
    y.set_data_type(io).set_output(True)
    return g, features


_CHAINS: tuple[Draw, ...] = (_matmul_chain, draw_conv_bn_relu, draw_rmsnorm_matmul_silu)


def _mixed(rng: np.random.Generator, io: DataType, seed: int) -> tuple[Graph, set[str]]:
    return pick(rng, _CHAINS)(rng, io, seed)


#: family name -> its draw: the one list of the families beyond attention
_DRAW: dict[str, Draw] = {
    "pointwise": _pointwise,
    "matmul": _matmul,
    "reduction": _reduction,
    "convolution": draw_convolution,
    "resample": draw_resample,
    "batchnorm": draw_batchnorm,
    "layernorm": draw_layernorm,
    "rmsnorm": draw_rmsnorm,
    "moe": draw_moe,
    "mixed": _mixed,
    "block_scale": _block_scale,
}

#: the families a case can be drawn from (``"sdpa"``: attention graphs of :data:`KINDS`)
FAMILIES: tuple[str, ...] = ("sdpa", *_DRAW)


def random_family_case(
    seed: int,
    family: str,
    *,
    io_types: Sequence[DataType] = DEFAULT_IO_TYPES,
    index: int = 0,
    kind: Kind = "fwd_bwd",
    features: Iterable[str] | None = None,
) -> GraphCase:
    """Draw one random valid graph of ``family`` (one of :data:`FAMILIES`).

    Args:
        seed: seeds everything drawn; the same arguments give the same graph.
        family: the family (``"sdpa"`` draws :func:`random_sdpa_case` with ``kind`` and
            ``features``).
        io_types: io data types to draw from; compute is DOUBLE for DOUBLE io, FLOAT otherwise.
        index: stored in the case (its position in a list).
        kind: the attention graph kind (``"sdpa"`` only).
        features: the attention features allowed (``"sdpa"`` only).

    Returns:
        The case, with a validated graph.

    Raises:
        ValueError: for an unknown family.
    """
    if family == "sdpa":
        return random_sdpa_case(seed, kind=kind, features=features, io_types=io_types,
                                index=index)  # fmt: skip
    if family not in _DRAW:
        raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")
    rng = np.random.default_rng(seed)
    io = DataType(io_types[int(rng.integers(len(io_types)))])
    graph, drawn = _DRAW[family](rng, io, seed)
    graph.validate()
    return GraphCase(index, seed, family, frozenset(drawn), io, graph, family=family)


def generate_family_cases(
    count: int,
    seed: int = 0,
    *,
    families: Sequence[str] = FAMILIES,
    io_types: Sequence[DataType] = DEFAULT_IO_TYPES,
    kinds: Sequence[Kind] = KINDS,
    features: Iterable[str] | None = None,
) -> list[GraphCase]:
    """Draw ``count`` cases cycling through ``families`` (attention ones cycling through
    ``kinds``); case ``i`` uses seed ``seed * 1000 + i``.

    Raises:
        ValueError: for an unknown family or an empty list of families.
    """
    if not families:
        raise ValueError(f"no family to draw from; expected some of {FAMILIES}")
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown families {unknown}; expected some of {FAMILIES}")
    allowed = None if features is None else frozenset(features)
    cases = []
    for i in range(count):
        family = families[i % len(families)]
        kind = kinds[(i // len(families)) % len(kinds)]
        cases.append(random_family_case(seed * 1000 + i, family, io_types=io_types, index=i,
                                        kind=kind, features=allowed))  # fmt: skip
    return cases
