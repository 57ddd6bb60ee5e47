"""Examples of the Serialization page."""

import json

import hipdnn_graph as hg
from hipdnn_graph.descriptors import MAX_INPUT_BYTES

g = hg.Graph(
    name="fwd_only",
    io_data_type=hg.DataType.BFLOAT16,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
q = g.tensor(name="Q", dim=[1, 2, 8, 16])
o, _ = g.sdpa(
    q,
    g.tensor_like(q, "K"),
    g.tensor_like(q, "V"),
    name="fwd",
    generate_stats=False,
    attn_scale=0.1,
)
o.set_output(True)

# --8<-- [start:formats]
blob = g.serialize()
print(len(blob), blob[:4].hex(), MAX_INPUT_BYTES)
doc = json.loads(g.to_json())
print(list(doc))
print(doc["tensors"][0])
node = doc["nodes"][0]
print(
    node["type"],
    {k: v for k, v in node["inputs"].items() if v is not None},
    node["outputs"]["o_tensor_uid"],
)
print(node["attributes"]["attn_scale_value"], node["attributes"]["diagonal_alignment"])
# --8<-- [end:formats]

# --8<-- [start:errors]
text = g.to_json()
bad_inputs: dict[str, str | bytes] = {
    "truncated bytes": blob[:20],
    "not a graph": b"\x00" * 64,
    "missing key": text.replace('"tensors":', '"tensor_list":'),
    "dangling uid": text.replace('"q_tensor_uid":1', '"q_tensor_uid":99'),
    "unknown type": text.replace('"bfloat16"', '"bfloat17"', 1),
    "other node kind": text.replace('"SdpaAttributes"', '"MatmulAttributes"'),
}
for what, data in bad_inputs.items():
    try:
        hg.Graph.deserialize(data) if isinstance(data, bytes) else hg.Graph.from_json(data)
    except hg.HipdnnError as err:
        print(f"{what}: {err.code.name}")
# --8<-- [end:errors]
