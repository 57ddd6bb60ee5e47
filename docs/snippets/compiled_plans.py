"""Examples of the Compiled plans page."""

import subprocess
import sys
import tempfile
from pathlib import Path

import hipdnn_graph as hg

f32 = hg.DataType.FLOAT
g = hg.Graph(name="attn", io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)
q = g.tensor(name="Q", dim=[1, 2, 64, 16])
o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="fwd", attn_scale=0.25)
o.set_output(True)

# --8<-- [start:save]
g.build_operation_graph()
g.create_execution_plan_ext("NUMPY_REFERENCE_ENGINE", {"numpy_reference.sdpa_block_q": 16})
g.build_plans()
plan = g.to_compiled_plan_binary()  # hipDNN's SerializedExecutionPlan envelope
print(len(plan) > 0, plan[:4] != b"HDGP")
path = Path(tempfile.mkdtemp()) / "attn.plan"
path.write_bytes(plan)
# --8<-- [end:save]

# --8<-- [start:load]
loader = """
import sys, numpy as np, hipdnn_graph as hg
g = hg.Graph.from_compiled_plan_binary(open(sys.argv[1], "rb").read())
print(g.get_plan_name(), g.get_execution_plan_knobs())
t = {x.name: x for x in g.tensors}
rng = np.random.default_rng(0)
pack = {t[n].uid: rng.standard_normal([1, 2, 64, 16]).astype(np.float32) for n in "QKV"}
out = np.zeros([1, 2, 64, 16], np.float32)
pack[t["fwd::O"].uid] = out
g.execute(pack, None)
print(out.shape, bool(np.isfinite(out).all()))
"""
run = subprocess.run([sys.executable, "-c", loader, str(path)], capture_output=True, text=True)
print(run.stdout.strip())
# --8<-- [end:load]

# --8<-- [start:container]
both = g.serialize_with_plan()  # the graph and its plan in hipDNN's HDGP container
print(both[4:8])
read = hg.Graph.deserialize(both)  # the plan blob is kept, not dropped
print(read.embedded_plan == plan, read.get_execution_plan_count())
ready = hg.Graph.deserialize(both, restore_plan=True)  # ... or made the active plan
print(ready.get_plan_name())
# --8<-- [end:container]

# --8<-- [start:errors]
PREFIX = "Failed to deserialize compiled plan: "
for name, data in [("empty", b""), ("truncated", plan[:40]), ("not a plan", b"x" * 64)]:
    try:
        hg.Graph.from_compiled_plan_binary(data)
    except hg.HipdnnError as err:
        print(f"{name}: {err.code.name}: {err.message.removeprefix(PREFIX)}")
# --8<-- [end:errors]
