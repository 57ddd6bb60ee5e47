"""The conformance kit for backend plugin authors.

Generate random valid graphs: attention (:func:`generate_cases`, :func:`random_sdpa_case`) and
every other family that has a reference (pointwise, matmul, reduction, convolution, batch norm,
layer norm, RMSNorm, MoE grouped matmul, resample), alone or several in one graph
(:func:`generate_family_cases`, :func:`random_family_case`, :data:`FAMILIES`); random inputs
for any graph, valid for each family's constraints (:func:`make_inputs`); and compare an
engine with ``NUMPY_REFERENCE_ENGINE`` over them (:func:`check_engine`,
:func:`assert_engine_conforms`). Use it from a plugin's own pytest:

    from hipdnn_graph.testing import assert_engine_conforms

    def test_my_engine_conforms():
        assert_engine_conforms("MY_ENGINE", cases=30, seed=0)

    def test_my_pointwise_engine_conforms():
        assert_engine_conforms("MY_POINTWISE_ENGINE", cases=30, families=("pointwise",))

Example:
    >>> from hipdnn_graph.testing import check_engine
    >>> print(check_engine("NUMPY_REFERENCE_ENGINE", cases=2).summary())
    NUMPY_REFERENCE_ENGINE: 2 passed, 0 skipped, 0 failed
"""

from .conformance import (
    REFERENCE_ENGINE,
    TOLERANCES,
    CaseResult,
    ConformanceReport,
    Tolerance,
    assert_engine_conforms,
    check_engine,
)
from .family_generators import FAMILIES, generate_family_cases, random_family_case
from .generators import (
    DEFAULT_IO_TYPES,
    FEATURES,
    KINDS,
    GraphCase,
    Kind,
    every_slot_backward_graph,
    generate_cases,
    random_sdpa_case,
)
from .inputs import (
    default_device,
    empty_for,
    empty_packed,
    graph_outputs,
    make_inputs,
    poison,
    runtime_inputs,
    tensor_roles,
    to_device,
    to_numpy,
    workspace_for,
)

__all__ = [
    "DEFAULT_IO_TYPES",
    "FAMILIES",
    "FEATURES",
    "KINDS",
    "REFERENCE_ENGINE",
    "TOLERANCES",
    "CaseResult",
    "ConformanceReport",
    "GraphCase",
    "Kind",
    "Tolerance",
    "assert_engine_conforms",
    "check_engine",
    "default_device",
    "empty_for",
    "empty_packed",
    "every_slot_backward_graph",
    "generate_cases",
    "generate_family_cases",
    "graph_outputs",
    "make_inputs",
    "poison",
    "random_family_case",
    "random_sdpa_case",
    "runtime_inputs",
    "tensor_roles",
    "to_device",
    "to_numpy",
    "workspace_for",
]
