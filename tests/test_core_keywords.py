"""cudnn-frontend keyword spellings for Graph.sdpa / Graph.sdpa_backward build the same attributes
as the setter style; unknown or malformed keywords raise HipdnnError(INVALID_VALUE)."""

from __future__ import annotations

from typing import Any

import pytest

from hipdnn_graph import (
    DataType,
    DiagonalAlignment,
    ErrorCode,
    Graph,
    HipdnnError,
    SdpaAttributes,
    SdpaBackwardAttributes,
    TensorAttributes,
    generate_strides,
)

B, H, S, D = 1, 2, 8, 4


def graph() -> Graph:
    return Graph(
        io_data_type=DataType.HALF,
        intermediate_data_type=DataType.FLOAT,
        compute_data_type=DataType.FLOAT,
    )


def make(name: str, dims: list[int], dtype: DataType = DataType.HALF) -> TensorAttributes:
    return TensorAttributes(name=name, dim=dims, data_type=dtype).set_stride(generate_strides(dims))


T: dict[str, TensorAttributes] = {
    "q": make("Q", [B, H, S, D]),
    "k": make("K", [B, H, S, D]),
    "v": make("V", [B, H, S, D]),
    "o": make("O", [B, H, S, D]),
    "do": make("dO", [B, H, S, D]),
    "stats": make("Stats", [B, H, S, 1], DataType.FLOAT),
    "scale": TensorAttributes(name="scale").set_value(0.5),
    "bias": make("bias", [1, 1, S, S]),
    "dbias": make("dBias", [1, 1, S, S]),
    "sq": make("seq_q", [B, 1, 1, 1], DataType.INT32),
    "skv": make("seq_kv", [B, 1, 1, 1], DataType.INT32),
    "seed": TensorAttributes(name="seed").set_value(1),
    "offset": TensorAttributes(name="offset").set_value(2),
    "mask": make("mask", [B, H, S, S]),
    "dscale": TensorAttributes(name="dscale").set_value(1.25),
    "dscale_inv": TensorAttributes(name="dscale_inv").set_value(0.8),
}


def summary(a: Any) -> dict[str, Any]:
    """Everything that defines a node's attributes; tensors by identity, outputs by name."""
    fields = {k: v for k, v in a.model_dump().items() if k not in ("inputs", "outputs")}
    return {
        "fields": fields,
        "inputs": {int(k): id(v) for k, v in a.inputs.items()},
        "outputs": {int(k): v.get_name() for k, v in a.outputs.items()},
        "reason": a.get_unsupported_reason(),
    }


def bwd_node_attributes(attributes: SdpaBackwardAttributes | None, **kw: Any) -> Any:
    g = graph()
    g.sdpa_backward(T["q"], T["k"], T["v"], T["o"], T["do"], T["stats"], attributes, **kw)
    return g.nodes[0].attributes


def fwd_node_attributes(attributes: SdpaAttributes | None, **kw: Any) -> Any:
    g = graph()
    g.sdpa(T["q"], T["k"], T["v"], attributes, **kw)
    return g.nodes[0].attributes


COMMON_CASES: list[tuple[str, dict[str, Any], Any]] = [
    ("name", {"name": "n"}, lambda a: a.set_name("n")),
    ("attn_scale_float", {"attn_scale": 0.125}, lambda a: a.set_attn_scale(0.125)),
    ("attn_scale_tensor", {"attn_scale": T["scale"]}, lambda a: a.set_attn_scale(T["scale"])),
    ("bias", {"bias": T["bias"]}, lambda a: a.set_bias(T["bias"])),
    (
        "padding",
        {"use_padding_mask": True, "seq_len_q": T["sq"], "seq_len_kv": T["skv"]},
        lambda a: a.set_padding_mask(True).set_seq_len_q(T["sq"]).set_seq_len_kv(T["skv"]),
    ),
    ("causal", {"use_causal_mask": True}, lambda a: a.set_causal_mask(True)),
    (
        "causal_bottom_right",
        {"use_causal_mask_bottom_right": True},
        lambda a: a.set_causal_mask_bottom_right(True),
    ),
    (
        "diagonal_alignment",
        {"diagonal_alignment": DiagonalAlignment.BOTTOM_RIGHT},
        lambda a: a.set_diagonal_alignment(DiagonalAlignment.BOTTOM_RIGHT),
    ),
    (
        "band",
        {"diagonal_band_left_bound": 3, "diagonal_band_right_bound": 1},
        lambda a: a.set_diagonal_band_left_bound(3).set_diagonal_band_right_bound(1),
    ),
    (
        "dropout_philox",
        {"dropout": (0.25, T["seed"], T["offset"])},
        lambda a: a.set_dropout(0.25, T["seed"], T["offset"]),
    ),
    (
        "everything",
        {
            "name": "all",
            "attn_scale": 0.3,
            "bias": T["bias"],
            "use_causal_mask": True,
            "diagonal_band_left_bound": 2,
            "dropout": (0.1, T["seed"], T["offset"]),
        },
        lambda a: (
            a.set_name("all")
            .set_attn_scale(0.3)
            .set_bias(T["bias"])
            .set_causal_mask(True)
            .set_diagonal_band_left_bound(2)
            .set_dropout(0.1, T["seed"], T["offset"])
        ),
    ),
]

BWD_CASES = [
    *COMMON_CASES,
    (
        "dBias",
        {"bias": T["bias"], "dBias": T["dbias"]},
        lambda a: a.set_bias(T["bias"]).set_dbias(T["dbias"]),
    ),
    (
        "dropout_mask",
        {"dropout": (T["mask"], T["dscale"], T["dscale_inv"])},
        lambda a: a.set_dropout(T["mask"], T["dscale"], T["dscale_inv"]),
    ),
]

FWD_CASES = [
    *COMMON_CASES,
    ("generate_stats", {"generate_stats": True}, lambda a: a.set_generate_stats(True)),
    ("generate_stats_false", {"generate_stats": False}, lambda a: a.set_generate_stats(False)),
    (
        "dropout_mask",
        {"dropout": (T["mask"], T["dscale"])},
        lambda a: a.set_dropout(T["mask"], T["dscale"]),
    ),
]


@pytest.mark.parametrize(("case", "kw", "setters"), BWD_CASES, ids=[c[0] for c in BWD_CASES])
def test_backward_keywords_equal_setters(case: str, kw: dict[str, Any], setters: Any) -> None:
    by_keywords = bwd_node_attributes(None, **kw)
    by_setters = bwd_node_attributes(setters(SdpaBackwardAttributes()))
    assert summary(by_keywords) == summary(by_setters)


@pytest.mark.parametrize(("case", "kw", "setters"), FWD_CASES, ids=[c[0] for c in FWD_CASES])
def test_forward_keywords_equal_setters(case: str, kw: dict[str, Any], setters: Any) -> None:
    by_keywords = fwd_node_attributes(None, **kw)
    by_setters = fwd_node_attributes(setters(SdpaAttributes()))
    assert summary(by_keywords) == summary(by_setters)


def test_keyword_values_land_in_attributes() -> None:
    a = bwd_node_attributes(
        None,
        name="bwd",
        attn_scale=0.125,
        use_causal_mask=True,
        bias=T["bias"],
        dBias=T["dbias"],
        dropout=(0.2, T["seed"], T["offset"]),
    )
    assert a.get_name() == "bwd"
    assert a.get_attn_scale_value() == 0.125
    assert a.get_causal_mask() is True
    assert a.get_bias() is T["bias"] and a.get_dbias() is T["dbias"]
    assert a.get_dropout_probability() == pytest.approx(0.2)
    assert a.get_seed() is T["seed"] and a.get_offset() is T["offset"]


def test_keywords_combine_with_attributes_object() -> None:
    given_attrs = SdpaBackwardAttributes().set_causal_mask(True).set_attn_scale(0.5)
    a = bwd_node_attributes(given_attrs, name="bwd", bias=T["bias"])
    assert (a.get_name(), a.get_causal_mask(), a.get_attn_scale_value()) == ("bwd", True, 0.5)
    assert a.get_bias() is T["bias"]
    assert given_attrs.get_bias() is None and given_attrs.get_name() == ""


def test_generate_stats_keyword_controls_stats_output() -> None:
    g = graph()
    _, stats = g.sdpa(T["q"], T["k"], T["v"], generate_stats=False)
    assert stats is None
    _, stats = g.sdpa(T["q"], T["k"], T["v"], generate_stats=True)
    assert stats is not None and stats.get_name() == "SdpaFwd_1::Stats"


@pytest.mark.parametrize(
    ("op", "kw"),
    [
        ("bwd", {"causal": True}),
        ("bwd", {"is_causal": True}),
        ("bwd", {"generate_stats": True}),
        ("bwd", {"Bias": T["bias"]}),
        ("fwd", {"dBias": T["dbias"]}),
        ("fwd", {"use_causal": True}),
        ("fwd", {"scale": 0.5}),
    ],
    ids=str,
)
def test_unknown_keyword(op: str, kw: dict[str, Any]) -> None:
    build = bwd_node_attributes if op == "bwd" else fwd_node_attributes
    with pytest.raises(HipdnnError) as info:
        build(None, **kw)
    assert info.value.code is ErrorCode.INVALID_VALUE
    assert next(iter(kw)) in info.value.message


@pytest.mark.parametrize(
    ("op", "kw"),
    [
        ("bwd", {"dropout": 0.1}),
        ("bwd", {"dropout": (0.1,)}),
        ("bwd", {"dropout": (0.1, T["seed"], T["offset"], T["seed"])}),
        ("bwd", {"dropout": ("p", T["seed"], T["offset"])}),
        ("bwd", {"dropout": (0.1, "seed", "offset")}),
        ("bwd", {"attn_scale": "0.5"}),
        ("bwd", {"bias": [1, 2]}),
        ("bwd", {"dBias": 3}),
        ("bwd", {"seq_len_q": 4}),
        ("bwd", {"diagonal_band_left_bound": "2"}),
        ("bwd", {"diagonal_alignment": 7}),
        ("bwd", {"name": 5}),
        ("bwd", {"dropout": (T["mask"], T["dscale"])}),
        ("fwd", {"dropout": (T["mask"],)}),
        ("fwd", {"dropout": (T["mask"], T["dscale"], T["dscale_inv"])}),
        ("fwd", {"dropout": (0.1, T["seed"])}),
        ("fwd", {"attn_scale": [0.5]}),
        ("fwd", {"diagonal_band_right_bound": 0.5}),
    ],
    ids=str,
)
def test_malformed_keyword_values(op: str, kw: dict[str, Any]) -> None:
    build = bwd_node_attributes if op == "bwd" else fwd_node_attributes
    with pytest.raises(HipdnnError) as info:
        build(None, **kw)
    assert info.value.code is ErrorCode.INVALID_VALUE


@pytest.mark.parametrize("op", ["bwd", "fwd"])
def test_wrong_attributes_object_type(op: str) -> None:
    with pytest.raises(HipdnnError) as info:
        if op == "bwd":
            bwd_node_attributes(SdpaAttributes())  # type: ignore[arg-type]
        else:
            fwd_node_attributes(SdpaBackwardAttributes())  # type: ignore[arg-type]
    assert info.value.code is ErrorCode.INVALID_VALUE


def test_keyword_graph_validates_like_setter_graph() -> None:
    def build(style: str) -> list[Any]:
        g = graph()
        q, k, v = (g.tensor(name=n, dim=[B, H, S, D]) for n in "QKV")
        o, do = g.tensor(name="O", dim=[B, H, S, D]), g.tensor(name="dO", dim=[B, H, S, D])
        stats = g.tensor(name="Stats", dim=[B, H, S, 1], data_type=DataType.FLOAT)
        bias = g.tensor(name="bias", dim=[1, 1, S, S])
        db = g.tensor(name="dBias")
        if style == "kw":
            grads = g.sdpa_backward(
                q,
                k,
                v,
                o,
                do,
                stats,
                name="bwd",
                attn_scale=0.25,
                bias=bias,
                dBias=db,
                use_causal_mask_bottom_right=True,
            )
        else:
            a = SdpaBackwardAttributes().set_name("bwd").set_attn_scale(0.25).set_bias(bias)
            grads = g.sdpa_backward(
                q, k, v, o, do, stats, a.set_dbias(db).set_causal_mask_bottom_right(True)
            )
        for t in grads:
            t.set_output(True)
        g.validate()
        return [(t.get_name(), t.get_dim(), t.get_stride()) for t in (*grads, db)]

    assert build("kw") == build("setters")
