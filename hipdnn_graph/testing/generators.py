"""Random valid SDPA graphs for conformance testing.

:func:`random_sdpa_case` draws one graph (forward, backward, or forward→backward in one graph)
with a random subset of the allowed :data:`FEATURES`; :func:`generate_cases` draws many,
reproducibly from one seed. Every generated graph validates; sizes stay small (sequence lengths
up to 48, head dims up to 32) so that a reference run takes milliseconds.

Example:
    >>> from hipdnn_graph.testing import generate_cases
    >>> cases = generate_cases(3, seed=0)
    >>> [c.kind for c in cases]
    ['fwd', 'bwd', 'fwd_bwd']
    >>> all(c.graph.is_validated for c in cases)
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..graph import Graph
from ..tensor import TensorAttributes
from ..types import DataType, DiagonalAlignment

__all__ = [
    "DEFAULT_IO_TYPES",
    "FEATURES",
    "KINDS",
    "GraphCase",
    "Kind",
    "generate_cases",
    "random_sdpa_case",
]

Kind = Literal["fwd", "bwd", "fwd_bwd"]

#: The graph kinds: a forward node alone, a backward node alone (O and Stats are inputs), and
#: a forward node feeding its O and Stats to a backward node in the same graph.
KINDS: tuple[Kind, ...] = ("fwd", "bwd", "fwd_bwd")

#: Features a generated graph may use, with what each means. Each is drawn with probability
#: 1/2 from the allowed set; mutually exclusive ones (the mask kinds, the scale forms) are
#: resolved by keeping one of them.
FEATURES: dict[str, str] = {
    "gqa": "fewer K/V heads than query heads (GQA/MQA), K and V head counts drawn independently",
    "d_ne_dv": "V's head dim differs from Q/K's (D != Dv)",
    "sq_ne_skv": "query and key sequence lengths differ (Sq != Skv)",
    "causal": "causal mask, top-left aligned (use_causal_mask)",
    "causal_bottom_right": "causal mask, bottom-right aligned (use_causal_mask_bottom_right)",
    "band": "diagonal band: random left/right bounds and alignment",
    "alibi": "ALiBi bias (use_alibi_mask)",
    "bias": "additive Bias tensor of a random broadcast shape",
    "dbias": "dBias output of the backward (needs bias; backward graphs only)",
    "padding": "padding mask with SEQ_LEN_Q/SEQ_LEN_KV tensors (INT32, [B,1,1,1])",
    "dropout_mask": "dropout with an explicit 0/1 mask and pass-by-value scale(s)",
    "scale_value": "attention scale given as a float (attn_scale_value)",
    "scale_tensor": "attention scale given as a pass-by-value tensor (constant or runtime)",
}

_MASKS = ("causal", "causal_bottom_right", "band")
_SCALES = ("scale_value", "scale_tensor")

#: io data types drawn by default (DOUBLE too when asked for).
DEFAULT_IO_TYPES: tuple[DataType, ...] = (DataType.FLOAT, DataType.HALF, DataType.BFLOAT16)


@dataclass
class GraphCase:
    """One generated graph and how it was made.

    Attributes:
        index: position in the generated list.
        seed: the seed that regenerates exactly this case with :func:`random_sdpa_case` (or
            :func:`~hipdnn_graph.testing.random_family_case` with its ``family``).
        kind: ``"fwd"``, ``"bwd"`` or ``"fwd_bwd"`` for attention; the family's name otherwise.
        features: what this graph uses (attention: a subset of :data:`FEATURES`; other
            families: the modes and options drawn).
        io_data_type: the graph's io type.
        graph: the validated graph; its outputs are non-virtual.
        shape: ``B, H, Hk, Hv, Sq, Skv, D, Dv`` (attention).
        family: the family it was drawn from (``"sdpa"`` for attention; see
            :data:`~hipdnn_graph.testing.FAMILIES`).
    """

    index: int
    seed: int
    kind: Kind | str
    features: frozenset[str]
    io_data_type: DataType
    graph: Graph
    shape: dict[str, int] = field(default_factory=dict)
    family: str = "sdpa"

    @property
    def label(self) -> str:
        """A short description: ``#3 fwd_bwd BFLOAT16 [causal,gqa] seed=7``."""
        feats = ",".join(sorted(self.features)) or "plain"
        dims = " ".join(f"{k}={v}" for k, v in self.shape.items())
        parts = [f"#{self.index}", str(self.kind), self.io_data_type.name, f"[{feats}]", dims]
        return " ".join(p for p in parts if p) + f" seed={self.seed}"


def _draw_features(rng: np.random.Generator, allowed: frozenset[str], kind: Kind) -> set[str]:
    chosen = {f for f in sorted(allowed) if rng.random() < 0.5}
    masks = [m for m in _MASKS if m in chosen]
    if len(masks) > 1:
        keep = masks[int(rng.integers(len(masks)))]
        chosen -= set(masks) - {keep}
    scales = [s for s in _SCALES if s in chosen]
    if len(scales) > 1:
        keep = scales[int(rng.integers(len(scales)))]
        chosen -= set(scales) - {keep}
    if kind == "fwd" or "bias" not in chosen:
        chosen.discard("dbias")
    return chosen


def _divisor_below(rng: np.random.Generator, h: int) -> int:
    options = [d for d in range(1, h) if h % d == 0] or [h]
    return int(options[int(rng.integers(len(options)))])


def random_sdpa_case(
    seed: int,
    *,
    kind: Kind = "fwd_bwd",
    features: Iterable[str] | None = None,
    io_types: Sequence[DataType] = DEFAULT_IO_TYPES,
    index: int = 0,
) -> GraphCase:
    """Draw one random valid SDPA graph.

    Args:
        seed: seeds everything drawn; the same arguments give the same graph.
        kind: ``"fwd"``, ``"bwd"`` or ``"fwd_bwd"``.
        features: the features that may be drawn (default: all of :data:`FEATURES`).
        io_types: io data types to draw from; compute is DOUBLE for DOUBLE io, FLOAT otherwise.
        index: stored in the case (its position in a list).

    Returns:
        The case, with a validated graph.

    Raises:
        ValueError: for an unknown kind or feature name.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown graph kind {kind!r}; expected one of {KINDS}")
    allowed = frozenset(FEATURES if features is None else features)
    unknown = allowed - set(FEATURES)
    if unknown:
        raise ValueError(f"unknown features {sorted(unknown)}; known: {sorted(FEATURES)}")
    rng = np.random.default_rng(seed)
    feats = _draw_features(rng, allowed, kind)
    io = DataType(io_types[int(rng.integers(len(io_types)))])
    compute = DataType.DOUBLE if io == DataType.DOUBLE else DataType.FLOAT

    b = int(rng.integers(1, 3))
    h = int(rng.choice([2, 4])) if "gqa" in feats else int(rng.integers(1, 4))
    hk = _divisor_below(rng, h) if "gqa" in feats else h
    hv = _divisor_below(rng, h) if "gqa" in feats else h
    sq = int(rng.integers(1, 41))
    skv = sq
    if "sq_ne_skv" in feats:
        while skv == sq:
            skv = int(rng.integers(1, 49))
    d = int(rng.choice([8, 16, 32]))
    dv = d
    if "d_ne_dv" in feats:
        dv = int(rng.choice([x for x in (8, 16, 24, 32) if x != d]))
    shape = {"B": b, "H": h, "Hk": hk, "Hv": hv, "Sq": sq, "Skv": skv, "D": d, "Dv": dv}

    g = Graph(
        name=f"conformance_{kind}_{seed}",
        io_data_type=io,
        intermediate_data_type=DataType.FLOAT,
        compute_data_type=compute,
    )
    q = g.tensor(name="Q", dim=[b, h, sq, d])
    k = g.tensor(name="K", dim=[b, hk, skv, d])
    v = g.tensor(name="V", dim=[b, hv, skv, dv])
    common: dict[str, Any] = {}
    if "causal" in feats:
        common["use_causal_mask"] = True
    if "causal_bottom_right" in feats:
        common["use_causal_mask_bottom_right"] = True
    if "band" in feats:
        common["diagonal_band_left_bound"] = int(rng.integers(0, skv + 1))
        common["diagonal_band_right_bound"] = int(rng.integers(0, skv + 1))
        common["diagonal_alignment"] = DiagonalAlignment(int(rng.integers(2)))
    if "alibi" in feats:
        common["use_alibi_mask"] = True
    bias = None
    if "bias" in feats:
        options = [[b, h, sq, skv], [1, h, sq, skv], [1, 1, sq, skv], [b, 1, 1, skv], [sq, skv]]
        bias = g.tensor(name="Bias", dim=options[int(rng.integers(len(options)))])
        common["bias"] = bias
    if "padding" in feats:
        common["use_padding_mask"] = True
        common["seq_len_q"] = g.tensor(name="SeqLenQ", dim=[b, 1, 1, 1], data_type=DataType.INT32)
        common["seq_len_kv"] = g.tensor(name="SeqLenKV", dim=[b, 1, 1, 1], data_type=DataType.INT32)
    if "scale_value" in feats:
        common["attn_scale"] = float(rng.uniform(0.05, 0.5))
    if "scale_tensor" in feats:
        scale = TensorAttributes(name="AttnScale")
        if rng.random() < 0.5:
            scale.set_value(float(rng.uniform(0.05, 0.5)))
        else:
            scale.set_as_runtime_parameter().set_data_type(DataType.FLOAT)
            scale.set_dim([1]).set_stride([1])
        common["attn_scale"] = g.tensor(scale)
    mask = keep = None
    if "dropout_mask" in feats:
        keep = float(rng.uniform(0.6, 0.95))
        mask_dims = [b if rng.random() < 0.5 else 1, h if rng.random() < 0.5 else 1, sq, skv]
        mask = g.tensor(name="DropoutMask", dim=mask_dims)

    def dropout(backward: bool) -> tuple[Any, ...]:
        assert mask is not None and keep is not None
        scale_t = g.tensor(TensorAttributes(name="DropoutScale").set_value(1.0 / keep))
        if not backward:
            return (mask, scale_t)
        inv = g.tensor(TensorAttributes(name="DropoutScaleInv").set_value(keep))
        return (mask, scale_t, inv)

    if kind in ("fwd", "fwd_bwd"):
        kw = dict(common)
        if mask is not None:
            kw["dropout"] = dropout(False)
        generate = kind == "fwd_bwd" or rng.random() < 0.75
        o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=generate, **kw)
        if kind == "fwd":
            o.set_output(True)
            if stats is not None:
                stats.set_output(True).set_data_type(DataType.FLOAT)
        else:
            assert stats is not None
            stats.set_data_type(DataType.FLOAT)
            o.set_data_type(io)  # as in training graphs: O in the io type, like dO
            if rng.random() < 0.5:  # O both feeds the backward and is returned
                o.set_output(True)
    else:
        o = g.tensor(name="O", dim=[b, h, sq, dv])
        stats = g.tensor(name="Stats", dim=[b, h, sq, 1], data_type=DataType.FLOAT)
    if kind in ("bwd", "fwd_bwd"):
        assert stats is not None
        do = g.tensor(name="dO", dim=[b, h, sq, dv])
        kw = dict(common)
        if mask is not None:
            kw["dropout"] = dropout(True)
        if "dbias" in feats:
            assert bias is not None
            kw["dBias"] = TensorAttributes(name="dBias").set_output(True)
        for grad in g.sdpa_backward(q, k, v, o, do, stats, name="bwd", **kw):
            grad.set_output(True)
    g.validate()
    return GraphCase(index, seed, kind, frozenset(feats), io, g, shape)


def generate_cases(
    count: int,
    seed: int = 0,
    *,
    kinds: Sequence[Kind] = KINDS,
    features: Iterable[str] | None = None,
    io_types: Sequence[DataType] = DEFAULT_IO_TYPES,
) -> list[GraphCase]:
    """Draw ``count`` cases, cycling through ``kinds``; case ``i`` uses seed ``seed * 1000 + i``.

    Args:
        count: how many graphs.
        seed: the base seed.
        kinds: graph kinds to cycle through.
        features: the features that may be drawn (default: all of :data:`FEATURES`).
        io_types: io data types to draw from.

    Returns:
        The cases, each with a validated graph.
    """
    allowed = None if features is None else frozenset(features)
    return [
        random_sdpa_case(
            seed * 1000 + i,
            kind=kinds[i % len(kinds)],
            features=allowed,
            io_types=io_types,
            index=i,
        )
        for i in range(count)
    ]


def every_slot_backward_graph(
    b: int = 2, h: int = 8, s: int = 1024, d: int = 64, name: str = "bwd_all_slots"
) -> Graph:
    """An SDPA-backward graph with every optional slot, flag and scalar set (not validated).

    Scale tensor, bias and dBias, seq_len_q/kv with padding, philox seed/offset and probability,
    dropout mask/scale/scale_inv, ALiBi, both causal flags, both band bounds and bottom-right
    alignment: 19 tensors. Serialization round-trip tests and ``benchmarks/serialization.py`` use
    it; it is not meant to execute (it sets both dropout forms at once).

    Example:
        >>> g = every_slot_backward_graph(1, 2, 16, 8)
        >>> g.validate(); len(g.tensors)
        19
    """
    from ..attributes.sdpa_backward import SdpaBackwardAttributes

    g = Graph(name=name, io_data_type=DataType.BFLOAT16, intermediate_data_type=DataType.FLOAT,
              compute_data_type=DataType.FLOAT)  # fmt: skip
    shape = [b, h, s, d]
    q, k, v, o, do = (g.tensor(name=n, dim=shape) for n in ("Q", "K", "V", "O", "dO"))
    stats = g.tensor(name="Stats", dim=[b, h, s, 1], data_type=DataType.FLOAT)
    bias = g.tensor(name="Bias", dim=[1, h, s, s])
    dbias = g.tensor(name="dBias", dim=[1, h, s, s])
    len_q, len_kv = (g.tensor(name=n, dim=[b, 1, 1, 1], data_type=DataType.INT32)
                     for n in ("SeqLenQ", "SeqLenKV"))  # fmt: skip
    seed, offset = (g.tensor(name=n, dim=[1], data_type=DataType.INT64) for n in ("Seed", "Offset"))
    mask = g.tensor(name="DropMask", dim=[b, h, s, s])
    scale = g.tensor(name="Scale").set_value(0.125)
    drop_scale = g.tensor(name="DropScale").set_value(1.25)
    drop_scale_inv = g.tensor(name="DropScaleInv").set_value(0.8)
    attrs = (
        SdpaBackwardAttributes()
        .set_name("bwd")
        .set_attn_scale(scale)
        .set_bias(bias)
        .set_dbias(dbias)
        .set_padding_mask(True)
        .set_seq_len_q(len_q)
        .set_seq_len_kv(len_kv)
        .set_dropout(0.1, seed, offset)
        .set_dropout(mask, drop_scale, drop_scale_inv)
        .set_alibi_mask(True)
        .set_causal_mask(True)
        .set_causal_mask_bottom_right(True)
        .set_diagonal_band_left_bound(64)
        .set_diagonal_band_right_bound(0)
        .set_diagonal_alignment(DiagonalAlignment.BOTTOM_RIGHT)
    )
    for t in g.sdpa_backward(q, k, v, o, do, stats, attrs):
        t.set_output(True)
    return g
