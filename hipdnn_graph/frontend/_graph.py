"""``Graph``: hipDNN's bound graph class, over a core :class:`hipdnn_graph.Graph`.

Every rule lives in the core; this class only changes the calling convention to the one of
hipDNN's Python bindings: the lifecycle and the loaders *return* an
:class:`~hipdnn_graph.frontend.Error`, ``tensor``/``tensor_like`` are static, node methods return
tuples, ``execute`` takes a handle and raw addresses, and ``from_json``/``from_binary`` fill this
graph. ``core_graph`` is the core graph underneath, for hipdnn-graph's own features.

Example:
    >>> import numpy as np
    >>> import hipdnn_graph.frontend as hipdnn
    >>> g = hipdnn.Graph().set_io_data_type(hipdnn.DataType.FLOAT)
    >>> _ = g.set_intermediate_data_type(hipdnn.DataType.FLOAT)
    >>> _ = g.set_compute_data_type(hipdnn.DataType.FLOAT)
    >>> q, k, v = (hipdnn.Tensor.create([1, 2, 8, 16], hipdnn.DataType.FLOAT) for _ in range(3))
    >>> o, stats = g.sdpa(q, k, v, hipdnn.SdpaAttributes().set_generate_stats(False))
    >>> _ = o.set_output(True)
    >>> handle = hipdnn.create_handle()
    >>> [e.is_good() for e in (g.validate(), g.build_operation_graph(handle),
    ...  g.create_execution_plans(), g.check_support(), g.build_plans())]
    [True, True, True, True, True]
    >>> x = np.ones((1, 2, 8, 16), np.float32)
    >>> out = np.zeros_like(x)
    >>> g.execute(handle, {q: x, k: x, v: x, o: out}).is_good(), float(out[0, 0, 0, 0])
    (True, 1.0)
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..attributes.sdpa import SdpaAttributes as CoreSdpaAttributes
from ..attributes.sdpa_backward import SdpaBackwardAttributes
from ..backend.contract import engine_id
from ..backend.dlpack import CPU
from ..backend.registry import current_registry
from ..backend.variant_pack import is_torch_tensor
from ..errors import HipdnnError
from ..graph import Graph as CoreGraph
from ..graph.execution import out_of_bounds
from ..tensor import DataTypeLike, TensorAttributes
from ..types import BuildPlanPolicy, DataType, ErrorCode, HeuristicMode
from ._attributes import SdpaAttributes
from ._autotune import AutotuneMethods
from ._compiled_methods import CompiledPlanMethods
from ._dlpack import read_dlpack
from ._engine_methods import EngineMethods
from ._errors import (
    Error,
    FrontendRuntimeError,
    FrontendTypeError,
    FrontendValueError,
    returning_error,
)
from ._execute import ExecutionTiming, run_core, stream_context
from ._family_methods import FamilyMethods
from ._memory import remember
from ._tensor import Tensor, adopt, adopt_all
from ._unsupported import GRAPH_METHODS, unsupported_graph_method

__all__ = ["Graph"]


def _raising(call: Callable[[], Any]) -> Any:
    """Run a getter; a HipdnnError becomes a ``RuntimeError`` (keeping its code), as hipDNN's
    bindings raise from their ``(value, Error)`` getters."""
    try:
        return call()
    except HipdnnError as err:
        if isinstance(err, RuntimeError | TypeError | ValueError | IndexError):
            raise
        raise FrontendRuntimeError(err.message, err.code) from None


class Graph(CompiledPlanMethods, EngineMethods, AutotuneMethods, FamilyMethods):
    """hipDNN's ``Graph`` binding (see the module docstring)."""

    def __init__(self) -> None:
        self.core_graph = CoreGraph()

    def __getattr__(self, name: str) -> Any:
        if name in GRAPH_METHODS:
            raise unsupported_graph_method(name)
        raise AttributeError(f"'Graph' object has no attribute '{name}'")

    def __repr__(self) -> str:
        return f"<hipdnn_frontend.Graph over {self.core_graph!r}>"

    # ----- configuration -----
    def set_name(self, name: str) -> Graph:
        self.core_graph.set_name(name)
        return self

    def set_io_data_type(self, data_type: DataTypeLike) -> Graph:
        self.core_graph.set_io_data_type(data_type)
        return self

    def set_intermediate_data_type(self, data_type: DataTypeLike) -> Graph:
        self.core_graph.set_intermediate_data_type(data_type)
        return self

    def set_compute_data_type(self, data_type: DataTypeLike) -> Graph:
        self.core_graph.set_compute_data_type(data_type)
        return self

    def get_name(self) -> str:
        return self.core_graph.get_name()

    def get_io_data_type(self) -> DataType:
        return self.core_graph.get_io_data_type()

    def get_intermediate_data_type(self) -> DataType:
        return self.core_graph.get_intermediate_data_type()

    def get_compute_data_type(self) -> DataType:
        return self.core_graph.get_compute_data_type()

    def set_preferred_engine_id_ext(self, engine: int | str | None = None) -> Graph:
        """Rank this engine (an id, or a name) first whenever it applies; ``None`` or ``""``
        clears it. As in hipDNN's binding, any name is taken and hashed to its id (an engine
        that is not loaded is passed over when plans are ranked); the core
        ``hipdnn_graph.Graph`` checks names against the registered engines instead.

        Example:
            >>> import hipdnn_graph.frontend as hipdnn
            >>> from hipdnn_graph.backend import engine_id
            >>> g = hipdnn.Graph().set_preferred_engine_id_ext("MIOPEN_ENGINE")
            >>> g.get_preferred_engine_id_ext() == engine_id("MIOPEN_ENGINE")
            True
            >>> g.set_preferred_engine_id_ext("").get_preferred_engine_id_ext() is None
            True
        """
        if isinstance(engine, str):
            engine = engine_id(engine) if engine else None
        self.core_graph.set_preferred_engine_id_ext(engine)
        return self

    def get_preferred_engine_id_ext(self) -> int | None:
        return self.core_graph.get_preferred_engine_id_ext()

    # ----- tensors -----
    @staticmethod
    def tensor(tensor: TensorAttributes) -> TensorAttributes:
        """Return ``tensor`` (hipDNN's graph inputs are standalone tensors)."""
        if not isinstance(tensor, TensorAttributes):
            raise FrontendTypeError(f"Graph.tensor() expects a Tensor, got {type(tensor).__name__}")
        return tensor

    @staticmethod
    def tensor_like(source: Any, name: str = "") -> Tensor:
        """A new tensor shaped like a ``Tensor`` (uid cleared) or like a DLPack producer.

        From a DLPack producer: its dims, element strides and data type; as in hipDNN's
        binding, a producer in ``cpu`` memory makes a runtime pass-by-value tensor (whatever
        its size) and a device one an ordinary tensor. One element is a runtime scalar (the
        runtime ``attn_scale`` pattern); more make a host buffer that the CPU engines read as
        an array (:func:`hipdnn_graph.backend.is_runtime_scalar`). SDPA's Q, K, V (every slot
        but its scalar ones) take no pass-by-value tensor: declare those with
        ``Tensor.create``, or ``set_is_pass_by_value(False)``.

        Raises:
            FrontendTypeError: neither a ``Tensor`` nor a ``__dlpack__`` producer.
            FrontendValueError: a malformed capsule, an unsupported device, a vector
                (``lanes != 1``) or unsupported data type.
        """
        if isinstance(source, TensorAttributes):
            copy = Tensor(
                name=name,
                data_type=source.data_type,
                dim=list(source.dim),
                stride=list(source.stride),
                is_virtual=False,
                is_pass_by_value=source.is_pass_by_value,
                alignment=source.alignment,
            )
            return copy
        if not hasattr(source, "__dlpack__"):
            raise FrontendTypeError(
                "tensor_like() expects a hipdnn Tensor or an object implementing __dlpack__"
            )
        info = read_dlpack(source, "tensor_like()")
        if info.lanes != 1:
            raise FrontendValueError(
                "tensor_like(): vector DLPack dtypes (lanes != 1) are unsupported"
            )
        data_type = info.data_type
        if data_type is None:
            raise FrontendValueError(f"tensor_like(): unsupported DLPack dtype {info.dtype_text()}")
        if isinstance(source, np.ndarray) or is_torch_tensor(source):
            remember(source)  # so that its address resolves in execute()
        return Tensor(
            name=name,
            data_type=data_type,
            dim=info.dims,
            stride=info.strides,
            is_pass_by_value=info.device_type == CPU,
        )

    # ----- nodes -----
    def sdpa(
        self,
        q: TensorAttributes,
        k: TensorAttributes,
        v: TensorAttributes,
        attributes: CoreSdpaAttributes,
    ) -> tuple[TensorAttributes, TensorAttributes | None]:
        """Add SDPA forward; returns ``(o, stats)``, stats ``None`` unless ``generate_stats``.

        Members hipdnn-graph's engines cannot honour (see
        :meth:`SdpaAttributes.unsupported_reason`) make ``validate()`` fail with their reason.
        """
        if not isinstance(attributes, CoreSdpaAttributes):
            raise FrontendTypeError(
                f"sdpa() expects SdpaAttributes, got {type(attributes).__name__}"
            )
        node_attributes = attributes.copy_for_node()
        if node_attributes.generate_stats is None:
            node_attributes.set_generate_stats(False)
        if isinstance(node_attributes, SdpaAttributes):
            reason = node_attributes.unsupported_reason()
            if reason:
                node_attributes.record_unsupported(reason)
            if node_attributes.unfuse_fma_hint:
                warnings.warn(
                    "SdpaAttributes.unfuse_fma_hint is advisory and ignored: hipdnn-graph's "
                    "engines choose their own fusion",
                    RuntimeWarning,
                    stacklevel=2,
                )
        o, stats = self._node(lambda: self.core_graph.sdpa(q, k, v, node_attributes))
        return adopt(o), adopt(stats)  # type: ignore[return-value]

    def sdpa_backward(
        self,
        q: TensorAttributes,
        k: TensorAttributes,
        v: TensorAttributes,
        o: TensorAttributes,
        dO: TensorAttributes,
        stats: TensorAttributes,
        attributes: SdpaBackwardAttributes,
    ) -> tuple[TensorAttributes, TensorAttributes, TensorAttributes]:
        """Add SDPA backward; returns ``(dq, dk, dv)``."""
        if not isinstance(attributes, SdpaBackwardAttributes):
            raise FrontendTypeError(
                f"sdpa_backward() expects SdpaBackwardAttributes, got {type(attributes).__name__}"
            )
        outputs = self._node(
            lambda: self.core_graph.sdpa_backward(q, k, v, o, dO, stats, attributes)
        )
        adopt_all(outputs)
        return outputs  # type: ignore[no-any-return]

    def _node(self, add: Callable[[], Any]) -> Any:
        try:
            return add()
        except HipdnnError as err:  # a wrong argument type: nanobind raises TypeError
            raise FrontendTypeError(err.message, err.code) from None

    # ----- lifecycle: each returns an Error -----
    def validate(self) -> Error:
        return returning_error(self.core_graph.validate)

    def build_operation_graph(self, handle: Any) -> Error:
        """Validate if needed, assign uids and lower (``handle`` is checked, otherwise unused)."""
        stream_context(handle)
        return returning_error(self.core_graph.build_operation_graph)

    def create_execution_plans(self, modes: list[HeuristicMode] | list[int] | None = None) -> Error:
        """Rank the engines that apply (every mode ranks alike on hipdnn-graph).

        Raises:
            FrontendTypeError: a mode that is not a ``HeuristicMode`` (nanobind raises
                ``TypeError`` for it).
        """
        checked = None if modes is None else [_enum(HeuristicMode, m, "mode") for m in modes]
        return returning_error(lambda: self.core_graph.create_execution_plans(checked))

    def check_support(self) -> Error:
        return returning_error(self.core_graph.check_support)

    def build_plans(
        self, policy: BuildPlanPolicy | int = BuildPlanPolicy.HEURISTICS_CHOICE
    ) -> Error:
        """Build the best plan (``HEURISTICS_CHOICE``) or every ranked plan (``ALL``).

        Raises:
            FrontendTypeError: a policy that is not a ``BuildPlanPolicy``.
        """
        checked = _enum(BuildPlanPolicy, policy, "policy")
        return returning_error(lambda: self.core_graph.build_plans(checked))

    def build_plan_at_index(self, plan_index: int) -> Error:
        """Make plan ``plan_index`` executable. hipdnn-graph builds every ranked plan here (its
        engines build in microseconds), so ``execute_plan_at_index`` works for each of them."""

        def build() -> None:
            count = self.core_graph.get_execution_plan_count()
            if not 0 <= plan_index < count:
                raise HipdnnError(ErrorCode.INVALID_VALUE, out_of_bounds(plan_index, count))
            self.core_graph.build_plans(BuildPlanPolicy.ALL)

        return returning_error(build)

    # ----- plan queries (raise RuntimeError on failure, as hipDNN's bindings do) -----
    def get_workspace_size(self) -> int:
        return int(_raising(self.core_graph.get_workspace_size))

    def get_execution_plan_count(self) -> int:
        return self.core_graph.get_execution_plan_count()

    def get_plan_name(self, handle: Any = None) -> str:
        """The active plan's engine name (``handle`` accepted, as in hipDNN, and unused).

        Raises:
            FrontendRuntimeError: before a plan is built (plan index 0 is out of bounds).
        """
        if not self.core_graph.get_execution_plan_count():
            raise FrontendRuntimeError(out_of_bounds(0, 0))
        return str(_raising(self.core_graph.get_plan_name))

    def get_ranked_engine_ids(
        self, modes: list[HeuristicMode] | list[int] | None = None
    ) -> list[int]:
        """The ids of the applicable engines, best first (runs ``create_execution_plans`` when
        it has not run; every mode ranks alike on hipdnn-graph)."""
        if not self.core_graph.get_engine_names():
            _raising(lambda: self.core_graph.create_execution_plans(modes))
        return [engine_id(name) for name in self.core_graph.get_engine_names()]

    def get_plan_name_at_index(self, plan_index: int, handle: Any = None) -> str:
        return self._ranked(plan_index)

    def get_workspace_size_plan_at_index(self, plan_index: int) -> int:
        engine = current_registry().find_engine(self._ranked(plan_index))
        assert engine is not None
        return int(_raising(lambda: engine.workspace_size(self.core_graph)))

    def _ranked(self, plan_index: int) -> str:
        names = self.core_graph.get_engine_names()
        if not 0 <= plan_index < len(names):
            raise FrontendRuntimeError(out_of_bounds(plan_index, len(names)))
        return names[plan_index]

    def set_override_shape_enabled(self, is_enabled: bool) -> Graph:
        """Let ``execute`` take override shapes (set before the plans are built; see
        :meth:`hipdnn_graph.Graph.set_override_shape_enabled`)."""
        self.core_graph.set_override_shape_enabled(is_enabled)
        return self

    def is_override_shape_enabled(self) -> bool:
        """Whether ``execute`` may take override shapes."""
        return self.core_graph.is_override_shape_enabled()

    # ----- execution -----
    def execute(
        self,
        handle: Any,
        variant_pack: Mapping[Any, Any],
        workspace: Any = 0,
        override_uids: Any = None,
        override_shapes: Any = None,
        override_strides: Any = None,
        *,
        overrides: Any = None,
    ) -> Error:
        """Run the built plan; ``variant_pack`` as described in :mod:`~hipdnn_graph.frontend._pack`.

        With ``override_uids``, ``override_shapes`` and ``override_strides`` (hipDNN's
        override-execute overload; or its map form ``overrides={uid: OverrideEntry(shape,
        stride)}``), the plan runs at those shapes and each address is read at its override
        layout (:mod:`hipdnn_graph.graph.overrides`; errors come back as an ``Error``).

        Raises:
            FrontendTypeError / FrontendValueError: keys and values hipDNN rejects the same way.
            FrontendRuntimeError: a destroyed handle.
        """
        signature = None
        if not (override_uids is override_shapes is override_strides is overrides is None):
            from ..graph.overrides import normalize_overrides

            try:
                signature = normalize_overrides(
                    override_uids, override_shapes, override_strides, overrides
                )
            except HipdnnError as err:
                return Error.of(err)
        error, _ = run_core(self.core_graph, handle, variant_pack, workspace, overrides=signature)
        return error

    def execute_plan_at_index(
        self, handle: Any, variant_pack: Mapping[Any, Any], workspace: Any, plan_index: int
    ) -> Error:
        """Run the plan built at ``plan_index`` (see :meth:`build_plan_at_index`); an index
        without a built plan is out of bounds (hipDNN's word), before the pack is looked at."""
        count = self.core_graph.get_built_plan_count()
        is_index = isinstance(plan_index, int) and not isinstance(plan_index, bool)
        if is_index and not 0 <= plan_index < count:
            return Error(ErrorCode.INVALID_VALUE, out_of_bounds(plan_index, count))
        error, _ = run_core(self.core_graph, handle, variant_pack, workspace, plan_index)
        return error

    def execute_timed_ext(
        self, handle: Any, variant_pack: Mapping[Any, Any], workspace: Any = 0
    ) -> tuple[Error, ExecutionTiming]:
        """Run once and time it: with device buffers, torch events on the handle's stream
        (``DEVICE_ONLY``); with host buffers, the host clock around the engine, since the host
        is then the device (``DEVICE_ONLY`` too). A failed run has no timing (``INVALID``)."""
        return run_core(self.core_graph, handle, variant_pack, workspace, timed=True)

    # ----- serialization: hipDNN's JSON and binary, through the core -----
    def to_json(self) -> str:
        """The graph as hipDNN's JSON (validates and assigns uids first when needed)."""
        return str(_raising(self.core_graph.to_json))

    def to_binary(self) -> bytes:
        """The graph as hipDNN's serialized binary graph; with its built plan in an ``HDGP``
        container when the plan's engine reports ``SUPPORTS_EXECUTION_PLAN_SERIALIZATION``
        (hipDNN's rule)."""
        if self.plan_serializable():
            return bytes(_raising(self.core_graph.serialize_with_plan))
        return bytes(_raising(self.core_graph.serialize))

    def from_json(self, *args: Any) -> Error:
        """``from_json(json)`` fills this graph; ``from_json(handle, json)`` also builds the
        operation graph, ready for ``create_execution_plans``. On failure the graph is kept."""
        handle, text = _loader_args("from_json", args)
        return self._load(handle, lambda: CoreGraph.from_json(text))

    def from_binary(self, *args: Any) -> Error:
        """``from_binary(data)`` / ``from_binary(handle, data)``, as :meth:`from_json`."""
        handle, data = _loader_args("from_binary", args)
        # the (handle, data) form brings a plan in an HDGP container back built, as hipDNN's
        restore = len(args) == 2
        return self._load(handle, lambda: CoreGraph.deserialize(data, restore_plan=restore))

    def _load(self, handle: Any, load: Callable[[], CoreGraph]) -> Error:
        if handle is not None:
            stream_context(handle)
        loaded: list[CoreGraph] = []

        def fill() -> None:
            graph = load()
            if handle is not None:
                graph.build_operation_graph()
            loaded.append(graph)

        error = returning_error(fill)
        if error.is_good():
            self.core_graph = loaded[0]
            adopt_all(self.core_graph.tensors)
        return error


def _enum(cls: Any, value: Any, what: str) -> Any:
    try:
        return cls(value)
    except (ValueError, TypeError):
        raise FrontendTypeError(f"{what} must be a {cls.__name__}, got {value!r}") from None


def _loader_args(name: str, args: tuple[Any, ...]) -> tuple[Any, Any]:
    if len(args) == 1:
        return None, args[0]
    if len(args) == 2:
        return args[0], args[1]
    raise FrontendTypeError(f"{name}() takes (data) or (handle, data), got {len(args)} arguments")
