"""Engines and knobs (docs/engines-and-knobs.md): which engines apply, their knobs, a plan built
with a chosen knob, a refused value, and the plan as hipDNN's EngineConfig bytes."""

import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.descriptors.engine_wire import read_engine_config, write_engine_config

# --8<-- [start:configs]
g = hg.Graph(
    name="attn",
    io_data_type=hg.DataType.FLOAT,
    intermediate_data_type=hg.DataType.FLOAT,
    compute_data_type=hg.DataType.FLOAT,
)
q = g.tensor(name="Q", dim=[1, 2, 64, 16])
o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
o.set_output(True)
g.build_operation_graph()
configs = {c.engine_name: c for c in g.get_engine_configs()}
for knob in configs["NUMPY_REFERENCE_ENGINE"].knobs:
    print(knob.knob_id, knob.value_type.name, knob.default_value, knob.constraint)
# --8<-- [end:configs]

# --8<-- [start:plan]
g.create_execution_plan_ext("NUMPY_REFERENCE_ENGINE", {"numpy_reference.sdpa_block_q": 16})
g.build_plans()
print(g.get_plan_name(), dict(g.get_execution_plan_knobs()))
x = np.random.default_rng(0).standard_normal((1, 2, 64, 16)).astype(np.float32)
out = g.run(dict.fromkeys(g.graph_inputs(), x))[o]
print(out.shape)
try:
    g.create_execution_plan_ext("NUMPY_REFERENCE_ENGINE", {"numpy_reference.sdpa_block_q": -1})
except hg.HipdnnError as err:
    print(err.code.name, err)
# --8<-- [end:plan]

# --8<-- [start:wire]
config = g.get_execution_plan_engine_config()
blob = write_engine_config(config)
assert read_engine_config(blob) == config
print(len(blob), config.knobs)
# --8<-- [end:wire]
