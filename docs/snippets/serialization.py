"""Examples of the Serialization page."""

import json

import hipdnn_graph as hg
from hipdnn_graph.descriptors import FILE_IDENTIFIER, FORMAT_VERSION, MAX_INPUT_BYTES

g = hg.Graph(
    name="fwd_only",
    io_data_type=hg.DataType.BFLOAT16,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
q = g.tensor(name="Q", dim=[1, 2, 8, 16])
o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="fwd", generate_stats=False)
o.set_output(True)

# --8<-- [start:formats]
blob = g.serialize()
print(blob[4:8] == FILE_IDENTIFIER, FILE_IDENTIFIER, FORMAT_VERSION, MAX_INPUT_BYTES)
doc = json.loads(g.to_json())
print(list(doc))
print(doc["tensors"][0])
print({k: doc["nodes"][0]["attributes"][k] for k in ("type", "q", "k", "v", "o", "stats")})
# --8<-- [end:formats]

# --8<-- [start:errors]
bad_inputs: dict[str, str | bytes] = {
    "truncated bytes": blob[:20],
    "not a graph": b"\x00" * 64,
    "future version": g.to_json().replace('"format_version":1', '"format_version":2'),
    "dangling uid": g.to_json().replace('"q":1', '"q":99'),
    "unknown type": g.to_json().replace('"BFLOAT16"', '"BFLOAT17"', 1),
}
for what, data in bad_inputs.items():
    try:
        hg.Graph.deserialize(data) if isinstance(data, bytes) else hg.Graph.from_json(data)
    except hg.HipdnnError as err:
        print(f"{what}: {err.code.name}")
# --8<-- [end:errors]
