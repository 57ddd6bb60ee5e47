"""Examples of the Interoperating-with-hipDNN page (run from the repository root)."""

import hashlib
from pathlib import Path

import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.testing import make_inputs

# --8<-- [start:capture]
# What hipdnnBackendGetSerializedJsonGraph_ext returned for a graph in a hipDNN run
# (this file is the minimal SDPA backward example of hipDNN's JSON)
root = Path(__file__).resolve().parents[2]
captured = (root / "examples" / "data" / "hipdnn_sdpa_bwd.json").read_text()
g = hg.Graph.from_json(captured)
print(g.get_name(), [n.name for n in g.nodes], [t.name for t in g.tensors][:4])
blob = g.serialize()  # the bytes hipDNN's backend holds for the same graph
print(len(blob), hashlib.sha256(blob).hexdigest()[:16])
assert hg.Graph.deserialize(blob).to_json() == captured.strip()
# --8<-- [end:capture]

# --8<-- [start:replay]
g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE")  # the executable definition
g.build()  # validate, lower, build a plan
pack = make_inputs(g, np.random.default_rng(0))  # or the buffers you captured
outputs = g.run({t: a for t, a in pack.items() if not t.get_is_virtual()})
print(g.get_plan_name(), {t.name: a.shape for t, a in outputs.items()})
# --8<-- [end:replay]

# --8<-- [start:send]
py = hg.Graph(
    name="from_python",
    io_data_type=hg.DataType.HALF,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
q = py.tensor(name="Q", dim=[1, 8, 128, 64])
k, v = py.tensor_like(q, "K"), py.tensor_like(q, "V")
o, stats = py.sdpa(q, k, v, name="attn", use_causal_mask=True, generate_stats=True)
o.set_output(True)
Path("attn.hipdnn").write_bytes(py.serialize())  # hand this file to hipDNN
print(Path("attn.hipdnn").stat().st_size, "bytes")
Path("attn.hipdnn").unlink()
# --8<-- [end:send]
