"""SDPA graphs shared by the graph-level round-trip, packing, lowering and fuzz tests.

Every builder returns a fresh, unvalidated :class:`hipdnn_graph.Graph`; building the same case
twice gives equal graphs. ``CASES`` maps a case id to its builder.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

import ml_dtypes
import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.testing import every_slot_backward_graph

B, H, S, D = 2, 4, 16, 8
SHAPE = [B, H, S, D]

#: An engine name whose FNV-1a id is above 2**63 (checked by the tests).
BIG_ENGINE_NAME = "NUMPY_REFERENCE_ENGINE"


def tensor_fields(t: hg.TensorAttributes) -> tuple[Any, ...]:
    """Every attribute of a tensor (and its value's type), for exact round-trip comparisons."""
    value = t.get_value()
    return (
        t.get_uid(), t.get_name(), t.get_data_type(), t.get_dim(), t.get_stride(),
        t.get_is_virtual(), t.get_is_runtime_pass_by_value(), value, type(value),
        t.get_alignment(),
    )  # fmt: skip


def ten(
    name: str, dims: list[int] | None = None, dtype: hg.DataType = hg.DataType.HALF
) -> hg.TensorAttributes:
    """A named tensor of ``dtype``, with packed strides when ``dims`` are given."""
    t = hg.TensorAttributes().set_name(name).set_data_type(dtype)
    if dims is not None:
        t.set_dim(dims).set_stride(hg.generate_strides(dims))
    return t


def redim(t: hg.TensorAttributes | None, dims: list[int]) -> None:
    """Give ``t`` new dims and packed strides."""
    assert t is not None
    t.set_dim(dims).set_stride(hg.generate_strides(dims))


def json_paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every value in a JSON document (keys and list indices), the root first."""
    found = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            found += json_paths(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += json_paths(child, (*prefix, index))
    return found


def new_graph(name: str = "g", io: hg.DataType = hg.DataType.BFLOAT16) -> hg.Graph:
    return hg.Graph(
        name=name,
        io_data_type=io,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )


def _outputs(*tensors: hg.TensorAttributes | None) -> None:
    for t in tensors:
        if t is not None:
            t.set_output(True)


def forward(generate_stats: bool = True, named: bool = True) -> hg.Graph:
    """The smallest forward graph."""
    g = new_graph("fwd" if named else "")
    q, k, v = (g.tensor(name=n if named else "", dim=SHAPE) for n in "QKV")
    o, stats = g.sdpa(q, k, v, name="attn" if named else "", generate_stats=generate_stats)
    _outputs(o, stats)
    return g


def backward(named: bool = True) -> hg.Graph:
    """The smallest backward graph."""
    g = new_graph("bwd" if named else "")
    q, k, v, o, do = (
        g.tensor(name=n if named else "", dim=SHAPE) for n in ("Q", "K", "V", "O", "dO")
    )
    stats = g.tensor(name="Stats" if named else "", dim=[B, H, S, 1], data_type=hg.DataType.FLOAT)
    _outputs(*g.sdpa_backward(q, k, v, o, do, stats, name="grad" if named else ""))
    return g


def forward_backward(causal: bool = True) -> hg.Graph:
    """Forward feeding backward (O and Stats are virtual edges), as in training."""
    g = new_graph("train")
    q, k, v = (g.tensor(name=n, dim=SHAPE) for n in "QKV")
    o, stats = g.sdpa(q, k, v, name="fwd", use_causal_mask=causal, generate_stats=True)
    assert stats is not None
    do = g.tensor(name="dO", dim=SHAPE)
    _outputs(*g.sdpa_backward(q, k, v, o, do, stats, name="bwd", use_causal_mask=causal))
    return g


def full_forward() -> hg.Graph:
    """A forward graph with every optional slot, flag and scalar set."""
    g = new_graph("fwd_all_slots")
    q, k, v = (g.tensor(name=n, dim=SHAPE) for n in "QKV")
    bias = g.tensor(name="Bias", dim=[1, H, S, S])
    lens = [g.tensor(name=n, dim=[B, 1, 1, 1], data_type=hg.DataType.INT32) for n in ("Lq", "Lkv")]
    seed, offset = (g.tensor(name=n, dim=[1], data_type=hg.DataType.INT64) for n in ("Seed", "Off"))
    mask = g.tensor(name="DropMask", dim=[B, H, S, S])
    scale = g.tensor(name="Scale").set_value(0.125)
    drop_scale = g.tensor(name="DropScale").set_value(1.25)
    attrs = (
        hg.SdpaAttributes()
        .set_name("fwd")
        .set_attn_scale(scale)
        .set_bias(bias)
        .set_padding_mask(True)
        .set_seq_len_q(lens[0])
        .set_seq_len_kv(lens[1])
        .set_dropout(0.1, seed, offset)
        .set_dropout(mask, drop_scale)
        .set_alibi_mask(True)
        .set_causal_mask(True)
        .set_causal_mask_bottom_right(True)
        .set_diagonal_band_left_bound(4)
        .set_diagonal_band_right_bound(1)
        .set_diagonal_alignment(hg.DiagonalAlignment.BOTTOM_RIGHT)
        .set_generate_stats(True)
    )
    _outputs(*g.sdpa(q, k, v, attrs))
    return g


def full_backward() -> hg.Graph:
    """A backward graph with every optional slot, flag and scalar set (the benchmark's graph)."""
    return every_slot_backward_graph(B, H, S, D)


def unnamed() -> hg.Graph:
    """Nothing named: default node names, renamed backward inputs, unnamed graph."""
    g = hg.Graph(
        io_data_type=hg.DataType.HALF,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q, k, v = (g.tensor(dim=SHAPE) for _ in range(3))
    o, stats = g.sdpa(q, k, v)
    assert stats is not None
    _outputs(*g.sdpa_backward(q, k, v, o, g.tensor(dim=SHAPE), stats))
    return g


def user_uids() -> hg.Graph:
    """Some tensors carry user uids (1, 3 and a large one); the others get assigned ones."""
    g = new_graph("uids")
    q = g.tensor(name="Q", dim=SHAPE, uid=3)
    k = g.tensor(name="K", dim=SHAPE)
    v = g.tensor(name="V", dim=SHAPE, uid=1)
    o, stats = g.sdpa(q, k, v, name="fwd")
    assert stats is not None
    o.set_uid(2**40)
    do = g.tensor(name="dO", dim=SHAPE)
    _outputs(*g.sdpa_backward(q, k, v, o, do, stats, name="bwd"))
    return g


def preferred_engine(engine: int | str = BIG_ENGINE_NAME) -> hg.Graph:
    g = backward()
    g.set_preferred_engine_id_ext(engine)
    return g


#: Pass-by-value scalars of every supported type: (id, value given to set_value).
SCALARS: list[tuple[str, Any]] = [
    ("float", 0.3),
    ("double", np.float64(0.1)),
    ("half", np.float16(0.3)),
    ("bfloat16", ml_dtypes.bfloat16(0.3)),
    ("int32", 7),
    ("int64", 2**40 + 3),
    ("np_int64", np.int64(-5)),
    ("uint8", np.uint8(200)),
    ("boolean", True),
]


#: Scalars whose data type is set after ``set_value`` (types ``set_value`` does not infer).
TYPED_SCALARS: list[tuple[str, Any, hg.DataType]] = [
    ("int8", -3, hg.DataType.INT8),
    ("fp8_e4m3", 0.375, hg.DataType.FP8_E4M3),
    ("fp8_e5m2_fnuz", -1.5, hg.DataType.FP8_E5M2_FNUZ),
]


def scalars(value: Any, dtype: hg.DataType | None = None) -> hg.Graph:
    """A forward graph whose scale tensor holds ``value`` (of ``dtype`` when given); seed and
    offset hold INT64 values."""
    g = new_graph("scalars")
    q, k, v = (g.tensor(name=n, dim=SHAPE) for n in "QKV")
    scale = g.tensor(name="Scale").set_value(value)
    if dtype is not None:
        scale.set_data_type(dtype)
    seed = g.tensor(name="Seed").set_value(2**40 + 1)
    offset = g.tensor(name="Offset").set_value(np.int64(17))
    _outputs(*g.sdpa(q, k, v, attn_scale=scale, dropout=(0.25, seed, offset), name="fwd"))
    return g


def runtime_pass_by_value() -> hg.Graph:
    """The scale is a runtime pass-by-value tensor (flag set, no value)."""
    g = new_graph("runtime_scale")
    q, k, v = (g.tensor(name=n, dim=SHAPE) for n in "QKV")
    scale = g.tensor(name="Scale", dim=[1], data_type=hg.DataType.FLOAT)
    scale.set_as_runtime_parameter()
    _outputs(*g.sdpa(q, k, v, attn_scale=scale, name="fwd"))
    return g


def explicit_layouts() -> hg.Graph:
    """GQA heads, non-packed strides, explicit gradient shapes, alignments, a value dtype."""
    g = new_graph("layouts", io=hg.DataType.HALF)
    q = g.tensor(name="Q", dim=[B, H, S, D], stride=[H * S * D, D, H * D, 1], alignment=64)
    k = g.tensor(name="K", dim=[B, 2, S, D], data_type=hg.DataType.FLOAT)
    v = g.tensor(name="V", dim=[B, 1, S, 2 * D])
    o, stats = g.sdpa(q, k, v, name="fwd", attn_scale=0.5, diagonal_band_left_bound=3)
    assert stats is not None
    do = g.tensor(name="dO", dim=[B, H, S, 2 * D])
    dq, dk, dv = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", attn_scale=0.5)
    dq.set_dim([B, H, S, D]).set_stride([H * S * D, D, H * D, 1])
    _outputs(dq, dk, dv)
    return g


CASES: dict[str, Callable[[], hg.Graph]] = {
    "fwd": forward,
    "fwd_unnamed": lambda: forward(named=False),
    "fwd_no_stats": lambda: forward(generate_stats=False),
    "fwd_full": full_forward,
    "bwd": backward,
    "bwd_unnamed": lambda: backward(named=False),
    "bwd_full": full_backward,
    "fwd_bwd": forward_backward,
    "unnamed": unnamed,
    "user_uids": user_uids,
    "engine_by_name": preferred_engine,
    "engine_by_id": lambda: preferred_engine(2**64 - 1),
    "runtime_pass_by_value": runtime_pass_by_value,
    "explicit_layouts": explicit_layouts,
    **{f"scalar_{name}": partial(scalars, value) for name, value in SCALARS},
    **{f"scalar_{name}": partial(scalars, value, dtype) for name, value, dtype in TYPED_SCALARS},
}

#: The cases that serialize: all of them (BOOLEAN has hipDNN's number 16, HIPDNN_WIRE.md A5).
WIRE_CASES = dict(CASES)


def by_uid(text: str) -> dict[str, Any]:
    """A graph's JSON document with its tensors listed by uid (an order-free view)."""
    doc: dict[str, Any] = json.loads(text)
    doc["tensors"].sort(key=lambda t: t["uid"])
    return doc
