"""The backend layer: the plugin contract, the registry and variant-pack checking.

See :mod:`hipdnn_graph.backend.contract` for what a plugin implements.
"""

from .api_version import ENGINE_API_VERSION, EngineApiVersion
from .contract import (
    AutogradForm,
    Backend,
    BackendInfo,
    Engine,
    ExecutionPlan,
    Launcher,
    Support,
    engine_id,
    engine_node_types,
    node_type_refusal,
)
from .dropout import IntSource, PhiloxDropout
from .family_table import FamilyRecord, FamilyTable
from .knobs import (
    BehaviorNote,
    FloatConstraint,
    IntConstraint,
    Knob,
    KnobSetting,
    KnobValueType,
    StringConstraint,
    knob_space,
)
from .layout import in_layout, same_layout
from .progress import compiling
from .registry import (
    ENTRY_POINT_GROUP,
    Registry,
    current_registry,
    isolated_registry,
    list_backends,
    register_backend,
)
from .sdpa_problem import ScalarSource, SdpaProblem, visible_pairs
from .variant_pack import (
    TensorSpec,
    VariantPackBinder,
    as_numpy,
    as_torch,
    is_runtime_scalar,
    is_torch_tensor,
)

__all__ = [
    "ENGINE_API_VERSION",
    "ENTRY_POINT_GROUP",
    "AutogradForm",
    "Backend",
    "BackendInfo",
    "BehaviorNote",
    "Engine",
    "EngineApiVersion",
    "ExecutionPlan",
    "FamilyRecord",
    "FamilyTable",
    "FloatConstraint",
    "IntConstraint",
    "IntSource",
    "Knob",
    "KnobSetting",
    "KnobValueType",
    "Launcher",
    "PhiloxDropout",
    "Registry",
    "ScalarSource",
    "SdpaProblem",
    "StringConstraint",
    "Support",
    "TensorSpec",
    "VariantPackBinder",
    "as_numpy",
    "as_torch",
    "compiling",
    "current_registry",
    "engine_id",
    "engine_node_types",
    "in_layout",
    "is_runtime_scalar",
    "is_torch_tensor",
    "isolated_registry",
    "knob_space",
    "list_backends",
    "node_type_refusal",
    "register_backend",
    "same_layout",
    "visible_pairs",
]
