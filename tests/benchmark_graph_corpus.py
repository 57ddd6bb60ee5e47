"""hipDNN's own benchmark graph files (``tests/data/hipdnn_benchmark_graphs/``, see its README)
and what each must do here: load, validate and run, or be refused with the message below.

Read by ``tests/wire/test_wire_benchmark_graphs.py`` (reading, validation, the round trip, the
wire oracles, the CLI) and ``tests/test_benchmark_graphs_numerics.py`` (the small ones on the
NumPy reference against torch in float64). The helpers read the files with :mod:`json` alone,
never with the project's reader, so the tests compare the project's reading with the file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent / "data" / "hipdnn_benchmark_graphs"

#: every graph file of the folder, relative to it
FILES = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.json"))


def _unmodelled(field: str, value: int) -> str:
    node = 'hipDNN node "sdpa_node"'
    return f"{node}: SdpaAttributes.{field} = {value} is not supported by this version"


_VARLEN = "aotriton_test/varlen_padded_"
_COMMON = "ckdsl_sdpa_extracted/common_llm_workloads/"

#: refused on reading (UNSUPPORTED_GRAPH_FORMAT), naming the field this version does not model:
#: paged KV's ``max_seq_len_kv`` (the padded varlen files: they use no ragged offsets, so ragged
#: support does not load them; hipDNN's own SDPA plugins decline ``max_seq_len_kv`` as paged
#: KV), paged KV (``page_table_k_tensor_uid``), attention sinks
REFUSED_ON_READ = {
    _VARLEN + "bf16_h3_n12_d184_causal_on.json": _unmodelled("max_seq_len_kv", 143),
    _VARLEN + "bf16_h3_n22_dqk120_dv8_causal_on.json": _unmodelled("max_seq_len_kv", 143),
    _VARLEN + "fp16_h3_n17_dqk24_dv152_causal_off.json": _unmodelled("max_seq_len_kv", 143),
    _VARLEN + "fp16_h3_n5_d8_causal_off.json": _unmodelled("max_seq_len_kv", 63),
    _VARLEN + "fp16_h3_n7_d64_causal_off.json": _unmodelled("max_seq_len_kv", 143),
    _COMMON + "paged_kv_serving_fp16_b2_s4096_d128_gqa4_block32.json": _unmodelled(
        "page_table_k_tensor_uid", 11
    ),
    _COMMON + "paged_kv_vllm_prefill_bf16_b4_s4096_d128_gqa4_block16.json": _unmodelled(
        "page_table_k_tensor_uid", 11
    ),
    _COMMON + "paged_varlen_serving_fp16_b4_s2048_d128_gqa4_block64.json": _unmodelled(
        "page_table_k_tensor_uid", 11
    ),
    _COMMON + "sink_streaming_sliding_bf16_b1_s8192_w4096_d128_gqa4.json": _unmodelled(
        "sink_token_tensor_uid", 20
    ),
}

#: refused by ``validate()`` (INVALID_VALUE) with hipDNN's own message: hipDNN's node refuses
#: the file too (``RMSNormNode``/``RMSNormBackwardNode`` with ``validateScaleNormalizedShape``
#: and ``validateMinimumTensorDimensions``, see docs/interop.md)
REFUSED_ON_VALIDATE = {
    "sample_rmsnorm.json": (
        "scale has no trailing dims matching input — RMSNorm requires at least one normalized dim"
    ),
    "sample_rmsnorm_backward.json": "scale must have at least 2 dimensions, but has 1",
}

#: a valid file runs on the NumPy reference in the tests when its tensors hold at most this many
#: elements in all (every small sample and correctness graph; no performance-sized one)
RUN_BOUND = 1 << 20


def text(rel: str) -> str:
    """The file's text."""
    return (ROOT / rel).read_text(encoding="utf-8")


def doc(rel: str) -> dict[str, Any]:
    """The file parsed with :mod:`json` (not with the project's reader)."""
    parsed: dict[str, Any] = json.loads(text(rel))
    return parsed


def elements(graph_doc: dict[str, Any]) -> int:
    """The number of elements of all the document's tensors."""
    return sum(math.prod(t["dims"]) for t in graph_doc["tensors"])


def node_uids(node: dict[str, Any]) -> dict[str, int]:
    """Every ``<x>_tensor_uid`` key of a JSON node that names a tensor, wherever the layout puts
    it (on the node, or in ``inputs``/``outputs``), with its uid."""
    found: dict[str, int] = {}
    for holder in (node, node.get("inputs", {}), node.get("outputs", {})):
        for key, value in holder.items():
            if key.endswith("_tensor_uid") and value is not None:
                found[key] = value
    return found


def runnable(rel: str) -> bool:
    """Whether the tests run the file: it is valid and within :data:`RUN_BOUND`."""
    valid = rel not in REFUSED_ON_READ and rel not in REFUSED_ON_VALIDATE
    return valid and elements(doc(rel)) <= RUN_BOUND
