"""Declare → lower to backend descriptors → serialize → deserialize → lift → compare.

A forward→backward SDPA graph (as in training) goes through every form the frontend has:

1. declared and validated in Python;
2. lowered by ``build_operation_graph()`` to hipDNN-style backend descriptors (one OPERATIONGRAPH
   descriptor holding one operation descriptor per node; tensor descriptors shared by uid);
3. serialized to hipDNN's own FlatBuffers bytes and to hipDNN's JSON;
4. read back with ``Graph.deserialize`` / ``Graph.from_json``, and lifted from the descriptor with
   ``Graph.from_operation_graph_descriptor``.

Every copy must have the original's JSON, bytes and key. The script prints a short report and
exits with status 1 on any mismatch. It needs only ``hipdnn_graph`` (no torch, no GPU).

Run: ``python examples/pack_unpack_roundtrip.py``.
"""

from __future__ import annotations

import sys

import hipdnn_graph as hg
from hipdnn_graph.descriptors import AttributeName, AttributeType, BackendDescriptor


def declare() -> hg.Graph:
    """SDPA forward (causal, with Stats) feeding SDPA backward; dQ, dK, dV are outputs."""
    g = hg.Graph(
        name="attention_training_step",
        io_data_type=hg.DataType.BFLOAT16,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = g.tensor(name="Q", dim=[2, 8, 128, 64])
    k = g.tensor(name="K", dim=[2, 2, 128, 64])  # grouped-query attention: 2 KV heads
    v = g.tensor(name="V", dim=[2, 2, 128, 64])
    scale = g.tensor(name="attn_scale").set_value(0.125)  # a pass-by-value scalar
    o, stats = g.sdpa(q, k, v, name="fwd", attn_scale=scale, use_causal_mask=True)
    assert stats is not None
    do = g.tensor(name="dO", dim=[2, 8, 128, 64])
    grads = g.sdpa_backward(
        q, k, v, o, do, stats, name="bwd", attn_scale=scale, use_causal_mask=True
    )
    for t in grads:
        t.set_output(True)
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE")
    return g


def describe(desc: BackendDescriptor) -> list[str]:
    """A few lines about the descriptor tree: operation types and some attribute ids."""
    A, T = AttributeName, AttributeType
    ops = desc.get_attribute(A.OPERATIONGRAPH_OPS, T.BACKEND_DESCRIPTOR)
    lines = [f"{desc.descriptor_type.name} ({int(desc.descriptor_type)}), {len(ops)} operations"]
    for op in ops:
        name = op.get_attribute(A.OPERATION_NAME_EXT, T.CHAR)[0]
        present = [a for a in A if op.has_attribute(a)]
        ids = ", ".join(str(int(a)) for a in present[:6])
        lines.append(
            f"  {op.descriptor_type.name} ({int(op.descriptor_type)}) '{name}': "
            f"{len(present)} attributes ({ids}, ...)"
        )
    first = ops[0].get_attribute(A.OPERATION_SDPA_FWD_QDESC, T.BACKEND_DESCRIPTOR)[0]
    uid = first.get_attribute(A.TENSOR_UNIQUE_ID, T.INT64)[0]
    dims = first.get_attribute(A.TENSOR_DIMENSIONS, T.INT64)
    shared = ops[1].get_attribute(A.OPERATION_SDPA_BWD_Q_EXT, T.BACKEND_DESCRIPTOR)[0] is first
    lines.append(
        f"  TENSOR ({int(first.descriptor_type)}) Q: UNIQUE_ID {int(A.TENSOR_UNIQUE_ID)} = {uid}, "
        f"DIMENSIONS {int(A.TENSOR_DIMENSIONS)} = {dims}; shared by both operations: {shared}"
    )
    return lines


def main() -> int:
    g = declare()
    g.validate()
    desc = g.build_operation_graph().get_operation_graph_descriptor()
    print("lowered:")
    for line in describe(desc):
        print(" ", line)

    blob, text, key = g.serialize(), g.to_json(), g.key()
    print(f"serialized: {len(blob)} bytes (hipDNN FlatBuffers), {len(text)} characters (JSON)")
    print(f"key: {key:#018x}")

    copies = {
        "deserialize(serialize())": hg.Graph.deserialize(blob),
        "from_json(to_json())": hg.Graph.from_json(text),
        "from_operation_graph_descriptor()": hg.Graph.from_operation_graph_descriptor(desc),
    }
    failures = 0
    for how, copy in copies.items():
        copy.validate()
        same = {
            "json": copy.to_json() == text,
            "bytes": copy.serialize() == blob,
            "key": copy.key() == key,
        }
        verdict = "equal" if all(same.values()) else "DIFFERENT"
        details = ", ".join(f"{k} {'ok' if ok else 'differs'}" for k, ok in same.items())
        print(f"{how:36s} {verdict} ({details})")
        failures += not all(same.values())
    if failures:
        print(f"{failures} round trip(s) lost information")
        return 1
    print("every round trip is lossless")
    return 0


if __name__ == "__main__":
    sys.exit(main())
