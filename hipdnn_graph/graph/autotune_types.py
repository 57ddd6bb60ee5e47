"""The records of autotuning, with hipDNN's names, fields and defaults
(``hipdnn_frontend/autotune/AutotuneTypes.hpp``, in its Python bindings' snake case).

Example:
    >>> config = AutotuneConfig(strategy=AutotuneStrategy.FIXED_AVERAGE, timed_iterations=0)
    >>> try:
    ...     check_config(config)
    ... except HipdnnError as err:
    ...     print(err.message)
    Invalid AutotuneConfig: timedIterations must be >= 1 (got 0)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from os import PathLike
from typing import Any

from ..backend.knobs import KnobSetting, KnobValue
from ..errors import HipdnnError
from ..types import ErrorCode, HipdnnEnum

__all__ = [
    "AutotuneCacheWriteOutcome",
    "AutotuneConfig",
    "AutotuneResult",
    "AutotuneStorageConfig",
    "AutotuneStrategy",
    "EngineSweepSpec",
    "KnobSweepAxis",
    "PrimingFailurePolicy",
    "TuneMode",
    "check_config",
]


class TuneMode(HipdnnEnum):
    """STANDARD times engines as they are; EXHAUSTIVE first primes each engine that declares
    the ``global.benchmarking`` knob with a plan built with it."""

    STANDARD = 0
    EXHAUSTIVE = 1


class AutotuneStrategy(HipdnnEnum):
    """FIXED_AVERAGE times ``timed_iterations`` runs; RUN_UNTIL_STABLE runs until the last
    ``window_size`` times vary by less than ``stability_threshold`` (or ``max_iterations``)."""

    FIXED_AVERAGE = 0
    RUN_UNTIL_STABLE = 1


class PrimingFailurePolicy(HipdnnEnum):
    """What a failed EXHAUSTIVE priming does: abort ``autotune`` or time the engine unprimed."""

    ABORT_ON_PRIMING_FAILURE = 0
    BENCHMARK_UNPRIMED = 1


class AutotuneCacheWriteOutcome(HipdnnEnum):
    """What became of a tuned ranking's write to the store (hipDNN's enumerators)."""

    NOT_ATTEMPTED_NO_SUCCESSFUL_ENGINE = 0
    WRITTEN = 1
    DECLINED_DISABLED = 2
    DECLINED_UNKEYABLE = 3
    UNCHANGED = 4


@dataclass
class KnobSweepAxis:
    """One knob of an engine sweep and the values to try."""

    knob_id: str = ""
    values: list[KnobValue] = field(default_factory=list)


@dataclass
class EngineSweepSpec:
    """An engine, the knob axes whose every combination is tried, and knobs pinned for all."""

    engine_id: int = -1
    axes: list[KnobSweepAxis] = field(default_factory=list)
    fixed_settings: dict[str, KnobValue] = field(default_factory=dict)


@dataclass
class AutotuneConfig:
    """How ``autotune`` times (hipDNN's fields and defaults; ``retune`` is hipdnn-graph's:
    time again even when the store holds a choice for this graph)."""

    mode: TuneMode = TuneMode.STANDARD
    strategy: AutotuneStrategy = AutotuneStrategy.RUN_UNTIL_STABLE
    warmup_iterations: int = 1
    timed_iterations: int = 10
    max_iterations: int = 100
    window_size: int = 3
    stability_threshold: float = 0.05
    engine_id_filter: list[int] = field(default_factory=list)
    priming_failure_policy: PrimingFailurePolicy = PrimingFailurePolicy.ABORT_ON_PRIMING_FAILURE
    retune: bool = False


@dataclass
class AutotuneStorageConfig:
    """Where tuned choices are stored: ``file_path`` (empty: the default store under the user
    cache folder, see :mod:`hipdnn_graph.backend.tuning_store`);
    ``delete_all_existing_file_content`` drops every other graph's entry when writing (hipDNN's
    flag); ``enabled`` (hipdnn-graph's) turns reading and writing the store off."""

    file_path: str | PathLike[str] = ""
    delete_all_existing_file_content: bool = False
    enabled: bool = True


@dataclass(frozen=True)
class AutotuneResult:
    """One candidate's outcome (read-only; hipDNN's fields and defaults). ``from_store`` is
    hipdnn-graph's: the figures were read from the store, not measured by this call."""

    engine_id: int = -1
    engine_name: str = ""
    knob_settings: list[KnobSetting] = field(default_factory=list)
    min_time_ms: float = 0.0
    avg_time_ms: float = 0.0
    stddev_ms: float = 0.0
    iterations_run: int = 0
    converged: bool = False
    rank: int = -1
    succeeded: bool = False
    benchmarked: bool = False
    error_message: str = ""
    workspace_size: int = 0
    estimated_workspace_size: int = 0
    compiled_plan_index: int = -1
    mode_used: TuneMode = TuneMode.STANDARD
    supports_exhaustive: bool = False
    ran_exhaustive: bool = False
    exhaustive_not_run_reason: str = ""
    strategy_used: AutotuneStrategy = AutotuneStrategy.RUN_UNTIL_STABLE
    from_store: bool = False


def _int(config: AutotuneConfig, name: str, camel: str, minimum: int) -> None:
    value: Any = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Invalid AutotuneConfig: {camel} must be >= {minimum} (got {value!r})",
        )


def check_config(config: AutotuneConfig) -> None:
    """Raise for a config ``autotune`` cannot run, naming the field as hipDNN does (its C++
    name).

    Raises:
        HipdnnError: ``INVALID_VALUE``.
    """
    if not isinstance(config, AutotuneConfig):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"config must be an AutotuneConfig; got {type(config).__name__}",
        )
    _int(config, "warmup_iterations", "warmupIterations", 0)
    if config.strategy == AutotuneStrategy.FIXED_AVERAGE:
        _int(config, "timed_iterations", "timedIterations", 1)
        return
    _int(config, "max_iterations", "maxIterations", 1)
    _int(config, "window_size", "windowSize", 2)
    if config.max_iterations < config.window_size:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Invalid AutotuneConfig: maxIterations ({config.max_iterations}) must be >= "
            f"windowSize ({config.window_size})",
        )
    threshold: Any = config.stability_threshold
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or threshold <= 0:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Invalid AutotuneConfig: stabilityThreshold must be > 0 (got {threshold!r})",
        )
