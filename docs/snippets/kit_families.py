"""The conformance kit over the families beyond attention (docs/plugins.md): the reference on
every family, then the torch eager engine against it on the CPU, family by family."""

import importlib.util

import hipdnn_graph as hg
from hipdnn_graph.testing import FAMILIES, check_engine, generate_family_cases

# --8<-- [start:families]
print(FAMILIES)
for case in generate_family_cases(3, seed=2, families=("convolution", "moe", "mixed")):
    print(case.label)
report = check_engine("NUMPY_REFERENCE_ENGINE", cases=21, seed=0, families=FAMILIES[4:],
                      io_types=(hg.DataType.FLOAT, hg.DataType.HALF))  # fmt: skip
print(report.details())
# --8<-- [end:families]

# --8<-- [start:torch]
if importlib.util.find_spec("torch") is not None:  # the torch backend's eager engine, on the CPU
    io = (hg.DataType.FLOAT, hg.DataType.DOUBLE)
    for family in ("convolution", "resample", "batchnorm", "layernorm", "moe", "block_scale"):
        torch_report = check_engine("TORCH_EAGER_ENGINE", cases=6, seed=1, families=[family],
                                    io_types=io, device="cpu")  # fmt: skip
        print(family, torch_report.summary())
# --8<-- [end:torch]
