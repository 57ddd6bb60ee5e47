"""hipdnn_graph.frontend: every SdpaAttributes / SdpaBackwardAttributes member round-trips through
its getter or property (hipDNN's binding test), and the members hipdnn-graph's engines cannot
honour are refused at validate() with their reason."""

from __future__ import annotations

import pytest
from frontend_cases import sdpa_graph

import hipdnn_graph as hg
import hipdnn_graph.frontend as hipdnn

# (setter suffix, getter suffix) of every SdpaAttributes tensor member, as hipDNN binds them
FORWARD_TENSORS = [
    ("q", "q"),
    ("k", "k"),
    ("v", "v"),
    ("bias", "bias"),
    ("attn_scale", "attn_scale"),
    ("seq_len_q", "seq_len_q"),
    ("seq_len_kv", "seq_len_kv"),
    ("seed", "seed"),
    ("offset", "offset"),
    ("dropout_mask", "dropout_mask"),
    ("dropout_scale", "dropout_scale"),
    ("paged_attention_k_table", "page_table_k"),
    ("paged_attention_v_table", "page_table_v"),
    ("block_mask", "block_mask"),
    ("sink_token", "sink_token"),
    ("descale_q", "descale_q"),
    ("descale_k", "descale_k"),
    ("descale_v", "descale_v"),
    ("descale_s", "descale_s"),
    ("scale_s", "scale_s"),
    ("scale_o", "scale_o"),
    ("o", "o"),
    ("stats", "stats"),
    ("logit_max", "max"),
    ("score_sum_exp", "sum_exp"),
    ("rng_dump", "rng_dump"),
    ("amax_s", "amax_s"),
    ("amax_o", "amax_o"),
]
BACKWARD_TENSORS = [
    "q",
    "k",
    "v",
    "o",
    "do",
    "stats",
    "attn_scale",
    "bias",
    "seq_len_q",
    "seq_len_kv",
    "seed",
    "offset",
    "dropout_mask",
    "dropout_scale",
    "dropout_scale_inv",
    "dq",
    "dk",
    "dv",
    "dbias",
]


class TestSdpaAttributeRoundTrips:
    def test_every_forward_tensor_member_reads_back_its_own_tensor(self) -> None:
        attributes = hipdnn.SdpaAttributes()
        tensors = {s: hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT) for s, _ in FORWARD_TENSORS}
        for setter, _ in FORWARD_TENSORS:
            assert getattr(attributes, f"set_{setter}")(tensors[setter]) is attributes
        for setter, getter in FORWARD_TENSORS:  # each getter returns exactly its setter's tensor
            assert getattr(attributes, f"get_{getter}")() is tensors[setter], getter
        assert attributes.set_block_mask(None).get_block_mask() is None

    def test_forward_scalars_read_back_through_properties(self) -> None:
        a = hipdnn.SdpaAttributes()
        mask, scale = (hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT) for _ in range(2))
        calls = [
            ("set_name", "sdpa"),
            ("set_compute_data_type", hipdnn.DataType.FLOAT),
            ("set_generate_stats", True),
            ("set_alibi_mask", True),
            ("set_padding_mask", True),
            ("set_causal_mask", True),
            ("set_causal_mask_bottom_right", True),
            ("set_dropout_probability", 0.25),
            ("set_attn_scale", 0.5),
            ("set_diagonal_band_left_bound", 1),
            ("set_diagonal_band_right_bound", 2),
            ("set_paged_attention_max_seq_len_kv", 3),
            ("set_diagonal_alignment", hipdnn.DiagonalAlignment.BOTTOM_RIGHT),
            ("set_mma_core_mode", hipdnn.DataType.FLOAT),
            ("set_implementation", hipdnn.AttentionImplementation.UNIFIED),
            ("set_unfuse_fma", True),
        ]
        for setter, arg in calls:
            assert getattr(a, setter)(arg) is a
        assert a.set_dropout(0.125, mask, scale) is a
        assert a.get_name() == "sdpa" and a.get_compute_data_type() == hipdnn.DataType.FLOAT
        expected = {
            "generate_stats": True,
            "alibi_mask": True,
            "padding_mask": True,
            "causal_mask": True,
            "causal_mask_bottom_right": True,
            "dropout_probability": 0.125,
            "attn_scale_value": 0.5,
            "left_bound": 1,
            "right_bound": 2,
            "max_seq_len_kv": 3,
            "diagonal_alignment": hipdnn.DiagonalAlignment.BOTTOM_RIGHT,
            "mma_core_mode": hipdnn.DataType.FLOAT,
            "implementation": hipdnn.AttentionImplementation.UNIFIED,
            "unfuse_fma_hint": True,
        }
        assert {name: getattr(a, name) for name in expected} == expected

    def test_forward_properties_are_writable(self) -> None:
        a = hipdnn.SdpaAttributes()
        a.causal_mask = True
        a.max_seq_len_kv = 9
        a.implementation = hipdnn.AttentionImplementation.COMPOSITE
        assert a.get_causal_mask() and a.max_seq_len_kv == 9
        assert a.implementation == hipdnn.AttentionImplementation.COMPOSITE

    def test_dropout_probability_alone_keeps_seed_and_offset(self) -> None:
        seed, offset = (hipdnn.Tensor.create([1], hipdnn.DataType.INT64) for _ in range(2))
        a = hipdnn.SdpaAttributes().set_dropout(0.5, seed, offset).set_dropout_probability(0.25)
        assert a.dropout_probability == 0.25 and a.get_seed() is seed and a.get_offset() is offset

    def test_every_backward_member_round_trips(self) -> None:
        a = hipdnn.SdpaBackwardAttributes()
        tensors = {s: hipdnn.Tensor.create([1], hipdnn.DataType.FLOAT) for s in BACKWARD_TENSORS}
        for suffix in BACKWARD_TENSORS:
            assert getattr(a, f"set_{suffix}")(tensors[suffix]) is a
        for suffix in BACKWARD_TENSORS:
            assert getattr(a, f"get_{suffix}")() is tensors[suffix], suffix
        for setter, arg in [
            ("set_alibi_mask", True),
            ("set_padding_mask", True),
            ("set_causal_mask", True),
            ("set_causal_mask_bottom_right", True),
            ("set_attn_scale", 0.5),
            ("set_diagonal_band_left_bound", 1),
            ("set_diagonal_band_right_bound", 1),
            ("set_diagonal_alignment", hipdnn.DiagonalAlignment.TOP_LEFT),
        ]:
            assert getattr(a, setter)(arg) is a
        assert a.set_dropout(0.25, tensors["seed"], tensors["offset"]) is a
        assert (a.alibi_mask, a.padding_mask, a.causal_mask, a.causal_mask_bottom_right) == (
            True,
            True,
            True,
            True,
        )
        assert (a.dropout_probability, a.attn_scale_value, a.left_bound, a.right_bound) == (
            0.25,
            0.5,
            1,
            1,
        )
        assert a.diagonal_alignment == hipdnn.DiagonalAlignment.TOP_LEFT


# member -> (setter call, expected reason) for the members hipdnn-graph's engines cannot honour
def _table() -> hipdnn.Tensor:
    return hipdnn.Tensor.create([2, 1, 4, 1], hipdnn.DataType.INT32)


REFUSED = [
    (
        lambda a: a.set_paged_attention_k_table(_table()),
        "SDPA paged attention is unsupported by hipDNN",
    ),
    (
        lambda a: a.set_paged_attention_max_seq_len_kv(32),
        "SDPA paged attention is unsupported by hipDNN",
    ),
    (lambda a: a.set_sink_token(_table()), "SDPA sink token is unsupported by hipDNN"),
    (lambda a: a.set_block_mask(_table()), "SDPA block mask is unsupported by hipdnn-graph"),
    (lambda a: a.set_descale_q(_table()), "SDPA FP8 descale_q is unsupported by hipdnn-graph"),
    (lambda a: a.set_amax_o(_table()), "SDPA FP8 amax_o output is unsupported by hipdnn-graph"),
    (lambda a: a.set_logit_max(_table()), "SDPA logit max output is unsupported by hipdnn-graph"),
    (
        lambda a: a.set_mma_core_mode(hipdnn.DataType.FP8_E4M3),
        "SDPA mma_core_mode FP8_E4M3 is unsupported by hipdnn-graph "
        "(its engines pick their own MMA types)",
    ),
]


class TestUnsupportedMembersAtValidate:
    @pytest.mark.parametrize(("call", "reason"), REFUSED)
    def test_validate_returns_the_reason(self, call: object, reason: str) -> None:
        attributes = hipdnn.SdpaAttributes().set_generate_stats(True)
        call(attributes)  # type: ignore[operator]
        graph, *_ = sdpa_graph(attributes=attributes)
        error = graph.validate()
        assert error.get_code() == hipdnn.ErrorCode.INVALID_VALUE
        assert error.get_message() == reason

    def test_hints_are_accepted(self) -> None:
        attributes = (
            hipdnn.SdpaAttributes()
            .set_implementation(hipdnn.AttentionImplementation.COMPOSITE)
            .set_mma_core_mode(hipdnn.DataType.NOT_SET)
        )
        graph, *_ = sdpa_graph(attributes=attributes)
        assert graph.validate().is_good()

    def test_unfuse_fma_is_warned_and_ignored(self) -> None:
        with pytest.warns(RuntimeWarning, match="unfuse_fma_hint is advisory"):
            graph, *_ = sdpa_graph(attributes=hipdnn.SdpaAttributes().set_unfuse_fma(True))
        assert graph.validate().is_good()

    def test_bad_enum_values(self) -> None:
        with pytest.raises(hg.HipdnnError):
            hipdnn.SdpaAttributes().set_implementation(7)
        with pytest.raises(hg.HipdnnError):
            hipdnn.SdpaAttributes().set_mma_core_mode(99)
        with pytest.raises(hg.HipdnnError):
            hipdnn.SdpaAttributes().set_block_mask("mask")  # type: ignore[arg-type]
