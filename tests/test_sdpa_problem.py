"""SdpaProblem: the engine-facing view of an SDPA node."""

from __future__ import annotations

import hipdnn_graph as hg


def _problem(
    mask_type: hg.DataType, len_type: hg.DataType, padding: bool = True
) -> hg.backend.SdpaProblem:
    g = hg.Graph(io_data_type=hg.DataType.HALF, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    q = g.tensor(name="Q", dim=[2, 2, 8, 16])
    mask = g.tensor(name="Mask", dim=[2, 2, 8, 8], data_type=mask_type)
    lens = [g.tensor(name=n, dim=[2, 1, 1, 1], data_type=len_type) for n in ("Lq", "Lkv")]
    g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="fwd",
           dropout=(mask, g.tensor(name="S").set_value(1.25)), use_padding_mask=padding,
           seq_len_q=lens[0], seq_len_kv=lens[1])  # fmt: skip
    g.validate()
    return hg.backend.SdpaProblem.from_node(g.nodes[0])


def test_data_type_problem_accepts_engine_types() -> None:
    assert _problem(hg.DataType.UINT8, hg.DataType.INT32).data_type_problem() is None
    assert _problem(hg.DataType.HALF, hg.DataType.INT64, padding=False).data_type_problem() is None


def test_data_type_problem_names_the_slot_and_type() -> None:
    assert (
        _problem(hg.DataType.INT32, hg.DataType.INT32).data_type_problem()
        == "node 'fwd': Dropout_mask has data type INT32"
    )
    assert (
        _problem(hg.DataType.UINT8, hg.DataType.FLOAT, padding=False).data_type_problem()
        == "node 'fwd': SEQ_LEN_Q has data type FLOAT"
    )
