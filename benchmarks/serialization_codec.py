"""Median encode/decode times and sizes of the serialized-graph codec (records only).

Builds the record of an SDPA-backward graph with every optional slot set (19 tensors, one node)
and times record → bytes, bytes → record, record → JSON, JSON → record, the key, and building the
record through pydantic validation. Run: ``python benchmarks/serialization_codec.py``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from timing import samples_us

from hipdnn_graph.descriptors import (
    GraphRecord,
    NodeRecord,
    SdpaBwdRecord,
    TensorRecord,
    construct_record,
    record_from_bytes,
    record_from_json,
    record_key,
    record_to_bytes,
    record_to_json,
)
from hipdnn_graph.types import DataType, DiagonalAlignment

SLOTS = (
    *SdpaBwdRecord.REQUIRED_UIDS,
    *SdpaBwdRecord.OPTIONAL_UIDS,
)


def full_bwd_fields() -> dict[str, Any]:
    """Keyword arguments of a GraphRecord for an SDPA backward with every slot set."""
    tensors = []
    for uid, slot in enumerate(SLOTS, start=1):
        scalar = slot in ("attn_scale", "seed", "offset", "dropout_scale", "dropout_scale_inv")
        dims = [1] if scalar else [2, 8, 128, 64]
        strides = [1] if scalar else [65536, 8192, 64, 1]
        tensors.append(
            {
                "uid": uid,
                "name": f"SdpaBwd_0::{slot}",
                "data_type": DataType.FLOAT if scalar else DataType.BFLOAT16,
                "dims": dims,
                "strides": strides,
                "is_virtual": slot in ("dq", "dk", "dv", "dbias"),
                "is_pass_by_value": scalar,
                "value": 0.125 if slot == "attn_scale" else None,
            }
        )
    attrs: dict[str, Any] = {"type": "SDPA_BWD"}
    attrs |= {slot: uid for uid, slot in enumerate(SLOTS, start=1)}
    attrs.update(
        alibi_mask=True, padding_mask=True, causal_mask=True, causal_mask_bottom_right=True,
        dropout_probability=0.1, attn_scale_value=None, left_bound=64, right_bound=0,
        diagonal_alignment=DiagonalAlignment.BOTTOM_RIGHT,
    )  # fmt: skip
    return {
        "name": "sdpa_bwd_full",
        "compute_data_type": DataType.FLOAT,
        "intermediate_data_type": DataType.FLOAT,
        "io_data_type": DataType.BFLOAT16,
        "preferred_engine_id": 3,
        "tensors": tensors,
        "nodes": [{"name": "SdpaBwd_0", "compute_data_type": DataType.FLOAT, "attributes": attrs}],
    }


def full_bwd_record() -> GraphRecord:
    """The benchmark's record, built through pydantic validation."""
    f = full_bwd_fields()
    return GraphRecord(
        **{k: v for k, v in f.items() if k not in ("tensors", "nodes")},
        tensors=[TensorRecord(**t) for t in f["tensors"]],
        nodes=[
            NodeRecord(
                name=n["name"],
                compute_data_type=n["compute_data_type"],
                attributes=SdpaBwdRecord(
                    **{k: v for k, v in n["attributes"].items() if k != "type"}
                ),
            )
            for n in f["nodes"]
        ],
    )


def times_us(fn: Callable[[], object], repeat: int = 2000) -> tuple[float, float]:
    """Median and best wall time of ``fn`` in microseconds."""
    samples = samples_us(fn, repeat, warmup=50)
    return statistics.median(samples), min(samples)


def main() -> None:
    rec = full_bwd_record()
    blob = record_to_bytes(rec)
    text = record_to_json(rec)
    fields = full_bwd_fields()
    tensors = [TensorRecord(**t).model_dump() for t in fields["tensors"]]
    rows = [
        ("record -> bytes", times_us(lambda: record_to_bytes(rec)), len(blob)),
        ("bytes -> record", times_us(lambda: record_from_bytes(blob)), len(blob)),
        ("record -> JSON", times_us(lambda: record_to_json(rec)), len(text)),
        ("JSON -> record", times_us(lambda: record_from_json(text)), len(text)),
        ("record_key", times_us(lambda: record_key(rec)), 8),
        ("GraphRecord.model_validate", times_us(lambda: GraphRecord.model_validate(fields)), 0),
        (
            "construct_record (tensors)",
            times_us(lambda: [construct_record(TensorRecord, **t) for t in tensors]),
            0,
        ),
    ]
    print(f"{len(rec.tensors)} tensors, {len(rec.nodes)} node(s), every optional slot set")
    print(f"{'operation':<28} {'median us':>10} {'best us':>8} {'bytes':>7}")
    for name, (median, best), size in rows:
        print(f"{name:<28} {median:>10.1f} {best:>8.1f} {size:>7}")


if __name__ == "__main__":
    main()
