"""Autotuning: time candidate engines and knob settings on the caller's buffers, keep the
fastest, remember it on disk.

The candidates are the graph's plan specs (``add_engine*``, :meth:`GraphAutotune.add_engine_sweep`,
:meth:`GraphAutotune.add_knob_sweeps`) or, on the compiled-plan path, the plans
``build_plans(BuildPlanPolicy.ALL)`` built. Each candidate the graph's ``deselect_*`` filters
bar, that ``AutotuneConfig.engine_id_filter`` leaves out, or whose workspace is over the
limit is reported without being timed; the others are built and timed with the caller's
buffers (inputs are only read; outputs are written), the fastest becomes the active plan, and
the choice is stored under the graph's content key (:mod:`hipdnn_graph.graph.content_key`)
with the device and the candidate set (:mod:`hipdnn_graph.backend.tuning_store`). A later call,
in this process or another, with the same graph, device and candidates builds the stored
choice without timing anything (its results say ``from_store``); ``AutotuneConfig.retune``
times again. :func:`autotune_table` formats what was tried; ``graph.autotune_write_outcome``
says what became of the store write (hipDNN's ``AutotuneCacheWriteOutcome``: ``WRITTEN``,
``UNCHANGED`` for a stored choice reused, ``DECLINED_DISABLED`` with the store off,
``DECLINED_UNKEYABLE`` when the file could not be written, with a ``RuntimeWarning``).

Example:
    >>> import tempfile, pathlib, numpy as np, hipdnn_graph as hg
    >>> from hipdnn_graph.graph.autotune_types import AutotuneStorageConfig
    >>> store = AutotuneStorageConfig(pathlib.Path(tempfile.mkdtemp()) / "tuned.json")
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> x = g.tensor(name="x", dim=[64])
    >>> y = g.pointwise(x, mode=hg.PointwiseMode.EXP).set_output(True)
    >>> _ = g.build_operation_graph().add_engine("NUMPY_REFERENCE_ENGINE")
    >>> pack = {x: np.ones(64, np.float32), y: np.zeros(64, np.float32)}
    >>> results = g.autotune(pack, storage=store)
    >>> [(r.engine_name, r.rank, r.from_store) for r in results]
    [('NUMPY_REFERENCE_ENGINE', 0, False)]
    >>> g.get_plan_name(), round(float(pack[y][0]), 4)
    ('NUMPY_REFERENCE_ENGINE', 2.7183)
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, cast

from ..backend.contract import Engine, engine_id
from ..backend.knobs import KnobSetting, KnobValue, engine_knobs
from ..backend.progress import progress_enabled
from ..backend.tuning_store import default_store_path, load_entry, record_key, save_entry
from ..errors import HipdnnError
from ..types import ErrorCode
from .autotune_timing import autotune_table, device_name, measure, on_device, timer
from .autotune_types import (
    AutotuneCacheWriteOutcome,
    AutotuneConfig,
    AutotuneResult,
    AutotuneStorageConfig,
    AutotuneStrategy,
    EngineSweepSpec,
    PrimingFailurePolicy,
    TuneMode,
    check_config,
)
from .content_key import graph_content_key
from .engine_configs import BENCHMARKING_KNOB, PlanSpec, engine_for_graph
from .engine_plans import build_one_plan
from .execution import BuiltPlan, execute

if TYPE_CHECKING:
    from . import Graph

__all__ = ["GraphAutotune", "autotune_table"]

#: sweeps of at least this many candidates write a progress line per candidate
PROGRESS_MIN_CANDIDATES = 4


@dataclass
class _Candidate:
    engine: Engine
    settings: tuple[KnobSetting, ...]
    knobs: dict[str, KnobValue]
    estimated_workspace: int

    def label(self) -> str:
        return f"{self.engine.name} {json.dumps(self.knobs, sort_keys=True)}"


def _settings(values: Mapping[str, KnobValue]) -> list[KnobSetting]:
    return [KnobSetting(k, v) for k, v in sorted(values.items())]


class GraphAutotune:
    """The ``Graph`` methods of this module (a mixin of :class:`~hipdnn_graph.Graph`)."""

    _state: Any
    autotune_write_outcome: AutotuneCacheWriteOutcome = (
        AutotuneCacheWriteOutcome.NOT_ATTEMPTED_NO_SUCCESSFUL_ENGINE
    )
    """What became of the last ``autotune``'s store write (see the module docstring)."""

    def _graph(self) -> Graph:
        return cast("Graph", self)

    # ----- more plan specs -----
    def add_engine_sweep(self, specs: Sequence[EngineSweepSpec]) -> Self:
        """One plan spec per combination of each spec's axes (``fixed_settings`` pinned for
        all; no axes: the spec's engine with its fixed settings alone).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an empty list, an axis without values, or
                whatever :meth:`add_engine` raises for a combination.
        """
        graph = self._graph()
        graph._add_preconditions("add_engine_sweep()")
        if not specs:
            raise HipdnnError(ErrorCode.INVALID_VALUE, "Input list is empty")
        for spec in specs:
            combos: list[dict[str, KnobValue]] = [dict(spec.fixed_settings)]
            for axis in spec.axes:
                if not axis.values:
                    raise HipdnnError(
                        ErrorCode.INVALID_VALUE,
                        f"Sweep axis for knob '{axis.knob_id}' of engine {spec.engine_id} has "
                        f"no values",
                    )
                combos = [{**c, axis.knob_id: v} for c in combos for v in axis.values]
            for combo in combos:
                graph.add_engine(spec.engine_id, combo)
        return self

    def add_knob_sweeps(self, per_engine: int | None = None) -> Self:
        """Every engine that applies, with every combination of its knobs' candidate values
        (:func:`~hipdnn_graph.backend.knobs.knob_space`, defaults first), as plan specs; at
        most ``per_engine`` combinations each when given (a knob space can be large: each
        plan may compile).

        Raises:
            HipdnnError: ``INVALID_VALUE`` as :meth:`add_engine`, or for ``per_engine`` < 1.
        """
        from itertools import islice

        from ..backend.knobs import knob_space

        graph = self._graph()
        graph._add_preconditions("add_knob_sweeps()")
        if per_engine is not None and (isinstance(per_engine, bool) or per_engine < 1):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, f"per_engine must be at least 1; got {per_engine!r}"
            )
        for config in graph.get_engine_configs():
            engine = engine_for_graph(graph, config.engine_id)
            tunable = [k for k in engine_knobs(engine) if k.knob_id != BENCHMARKING_KNOB]
            for combo in islice(knob_space(tunable), per_engine):
                graph.add_engine(config.engine_id, combo)
        return self

    def get_autotune_workspace_size(self) -> int:
        """The workspace that covers every candidate: the largest plan spec estimate, else the
        largest built plan's workspace, else 0."""
        state = self._state
        if state.plan_specs:
            return int(max(s.workspace_size for s in state.plan_specs))
        return int(max((p.workspace_size for p in state.plans), default=0))

    # ----- tuning -----
    def _candidates(self) -> list[_Candidate]:
        state = self._state
        if state.plan_specs:
            return [
                _Candidate(engine_for_graph(self._graph(), s.engine_name), s.knob_settings,
                           dict(s.knob_values), s.workspace_size)
                for s in cast(list[PlanSpec], state.plan_specs)
            ]  # fmt: skip
        if state.plans:
            return [
                _Candidate(p.engine, tuple(_settings(p.knobs)), dict(p.knobs), p.workspace_size)
                for p in cast(list[BuiltPlan], state.plans)
            ]
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            "No plan specs or compiled plans to autotune. Call add_engine_*() or "
            "add_engine_sweep(), or create_execution_plans() and build_plans(), first.",
        )

    def _check_pack(self, pack: Mapping[Any, Any]) -> None:
        from ..tensor import TensorAttributes

        present = {k.uid if isinstance(k, TensorAttributes) else k for k in pack}
        graph = self._graph()
        required = [
            t.uid for t in graph.graph_tensors()
            if not t.is_virtual and not (t.value is not None and not t.is_pass_by_value)
        ]  # fmt: skip
        missing = sorted(int(u) for u in required if u is not None and u not in present)
        if missing:
            raise HipdnnError(
                ErrorCode.INVALID_VARIANT_PACK,
                f"Variant pack is missing required non-virtual tensor UIDs: {missing}",
            )

    def autotune(
        self,
        variant_pack: Mapping[Any, Any],
        workspace: Any = None,
        *,
        workspace_size: int | None = None,
        config: AutotuneConfig | None = None,
        storage: AutotuneStorageConfig | None = None,
    ) -> list[AutotuneResult]:
        """Time the candidates, make the fastest the active plan, store the choice (see the
        module docstring); the results are ranked successes first, then the others.

        Args:
            variant_pack: ``{tensor or uid: buffer}``, as :meth:`execute` takes.
            workspace: a buffer of at least :meth:`get_autotune_workspace_size` bytes.
            workspace_size: candidates needing more workspace are not timed (``None``: no
                limit).
            config: how to time (default :class:`AutotuneConfig`).
            storage: where choices are stored (default: the user cache folder's store).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a bad config (naming its field), before plan
                specs exist, or when no candidate could be timed (``"No execution plans were
                benchmarkable"`` with the count of each reason); ``INVALID_VARIANT_PACK`` for a
                pack without every non-virtual tensor; ``GRAPH_EXECUTION_FAILED`` when no
                candidate ran (each one's error listed).
        """
        config = AutotuneConfig() if config is None else config
        storage = AutotuneStorageConfig() if storage is None else storage
        check_config(config)
        graph = self._graph()
        candidates = self._candidates()
        self._check_pack(variant_pack)
        filters = graph.engine_filters()
        wanted = {i & ((1 << 64) - 1) for i in config.engine_id_filter}
        results: list[AutotuneResult] = []
        timed: list[_Candidate] = []
        counts = {"deselected": 0, "excluded by engineIdFilter": 0, "over the workspace limit": 0}
        for c in candidates:
            base = self._result(c, config)
            if filters.reason(c.engine, c.estimated_workspace) is not None:
                counts["deselected"] += 1
                message = "Plan barred (engine ID or workspace deselect filter)."
                results.append(replace(base, error_message=message))
            elif wanted and engine_id(c.engine.name) not in wanted:
                counts["excluded by engineIdFilter"] += 1
                results.append(replace(base, error_message="Plan excluded by engineIdFilter."))
            elif workspace_size is not None and c.estimated_workspace > workspace_size:
                counts["over the workspace limit"] += 1
                message = f"Workspace size {c.estimated_workspace} exceeds limit {workspace_size}"
                results.append(replace(base, error_message=message))
            else:
                timed.append(c)
        if not timed:
            why = ", ".join(f"{n} {reason}" for reason, n in counts.items() if n)
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"No execution plans were benchmarkable ({len(candidates)} candidates: {why}).",
            )
        device = device_name(variant_pack)
        key = record_key(graph_content_key(graph), device, [c.label() for c in timed])
        path = Path(storage.file_path) if str(storage.file_path) else default_store_path()
        if storage.enabled and not config.retune:
            stored = self._from_store(path, key, timed, config)
            if stored is not None:
                return stored
        results = self._time_all(timed, variant_pack, workspace, config) + results
        ranked = self._rank(results)
        if not ranked[0].succeeded:
            lines = "\n".join(
                f"  {r.engine_name} {[(s.knob_id, s.value) for s in r.knob_settings]}: "
                f"{r.error_message}"
                for r in ranked
            )
            raise HipdnnError(
                ErrorCode.GRAPH_EXECUTION_FAILED,
                f"autotune(): no execution plan ran successfully:\n{lines}",
            )
        self.autotune_write_outcome = AutotuneCacheWriteOutcome.DECLINED_DISABLED
        if storage.enabled:
            self._store(path, key, device, ranked, storage)
        return ranked

    def _result(self, c: _Candidate, config: AutotuneConfig) -> AutotuneResult:
        supports = any(k.knob_id == BENCHMARKING_KNOB for k in engine_knobs(c.engine))
        return AutotuneResult(
            engine_id=engine_id(c.engine.name),
            engine_name=c.engine.name,
            knob_settings=list(c.settings),
            estimated_workspace_size=c.estimated_workspace,
            workspace_size=-1,
            mode_used=config.mode,
            strategy_used=config.strategy,
            supports_exhaustive=supports,
        )

    def _prime(self, c: _Candidate, base: AutotuneResult, run: Callable[[BuiltPlan], None],
               config: AutotuneConfig) -> AutotuneResult:  # fmt: skip
        if config.mode != TuneMode.EXHAUSTIVE:
            return base
        if not base.supports_exhaustive:
            return replace(
                base,
                exhaustive_not_run_reason=f"the engine has no '{BENCHMARKING_KNOB}' knob",
            )
        try:
            run(build_one_plan(self._graph(), c.engine, {**c.knobs, BENCHMARKING_KNOB: 1}))
        except Exception as exc:
            why = f"priming failed: {type(exc).__name__}: {exc}"
            if config.priming_failure_policy == PrimingFailurePolicy.ABORT_ON_PRIMING_FAILURE:
                raise HipdnnError(
                    ErrorCode.GRAPH_EXECUTION_FAILED,
                    f"autotune(): exhaustive priming of engine {c.engine.name} failed "
                    f"(ABORT_ON_PRIMING_FAILURE): {type(exc).__name__}: {exc}",
                ) from None
            return replace(base, exhaustive_not_run_reason=why)
        return replace(base, ran_exhaustive=True)

    def _time_all(
        self, timed: list[_Candidate], pack: Mapping[Any, Any], workspace: Any,
        config: AutotuneConfig,
    ) -> list[AutotuneResult]:  # fmt: skip
        """Build and warm up every candidate, then time them: FIXED_AVERAGE in rounds (one run
        of each candidate per round, so a passing load or clock change hits them alike),
        RUN_UNTIL_STABLE one after the other (each until it converges)."""
        clock = timer(on_device(pack))
        out: dict[int, AutotuneResult] = {}
        built: dict[int, BuiltPlan] = {}
        times: dict[int, list[float]] = {}

        def run(plan: BuiltPlan) -> None:
            execute(plan, pack, workspace)

        def failed(index: int, exc: Exception) -> None:
            out[index] = replace(out[index], error_message=f"{type(exc).__name__}: {exc}")
            built.pop(index, None)

        for index, c in enumerate(timed):
            out[index] = self._prime(c, self._result(c, config), run, config)
            try:
                plan = build_one_plan(self._graph(), c.engine, c.knobs)
                out[index] = replace(out[index], workspace_size=plan.workspace_size,
                                     benchmarked=True)  # fmt: skip
                for _ in range(config.warmup_iterations):
                    run(plan)
            except Exception as exc:
                failed(index, exc)
                continue
            built[index], times[index] = plan, []
        converged = dict.fromkeys(built, True)
        if config.strategy == AutotuneStrategy.FIXED_AVERAGE:
            for _ in range(config.timed_iterations):
                for index, plan in list(built.items()):
                    try:
                        times[index].append(clock(partial(run, plan)))
                    except Exception as exc:
                        failed(index, exc)
        else:
            no_warmup = replace(config, warmup_iterations=0)
            for index, plan in list(built.items()):
                try:
                    times[index], converged[index] = measure(partial(run, plan), no_warmup, clock)
                except Exception as exc:
                    failed(index, exc)
        for index in built:
            ms = times[index]
            mean = sum(ms) / len(ms)
            spread = math.sqrt(sum((t - mean) ** 2 for t in ms) / len(ms))
            out[index] = replace(out[index], succeeded=True, min_time_ms=min(ms),
                                 avg_time_ms=mean, stddev_ms=spread, iterations_run=len(ms),
                                 converged=converged[index], compiled_plan_index=index)  # fmt: skip
        self._tuned_plans = built
        self._progress(timed, out)
        return [out[i] for i in range(len(timed))]

    def _progress(self, timed: list[_Candidate], out: dict[int, AutotuneResult]) -> None:
        """One stderr line per candidate for sweeps of :data:`PROGRESS_MIN_CANDIDATES` or more
        (off with ``HIPDNN_GRAPH_PROGRESS=0``)."""
        if not progress_enabled() or len(timed) < PROGRESS_MIN_CANDIDATES:
            return
        name = self._graph().get_name() or "<unnamed>"
        for index, c in enumerate(timed):
            r = out[index]
            what = f"{r.min_time_ms:.4f} ms" if r.succeeded else f"failed: {r.error_message}"
            sys.stderr.write(f"hipdnn-graph: autotune graph '{name}' [{index + 1}/"
                             f"{len(timed)}] {c.label()}: {what}\n")  # fmt: skip
        sys.stderr.flush()

    def _rank(self, results: list[AutotuneResult]) -> list[AutotuneResult]:
        wins = sorted((r for r in results if r.succeeded), key=lambda r: r.min_time_ms)
        ranked = [replace(r, rank=i) for i, r in enumerate(wins)]
        ranked += [r for r in results if not r.succeeded]
        if wins:
            self._activate(self._tuned_plans[wins[0].compiled_plan_index])
        self._tuned_plans = {}
        return ranked

    def _activate(self, built: BuiltPlan) -> None:
        state = self._state
        state.candidates = [built.engine]
        state.refusals = []
        state.knob_values = {built.engine.name: dict(built.knobs)}
        state.plans = [built]
        state.active = built

    def _from_store(
        self, path: Path, key: str, timed: list[_Candidate], config: AutotuneConfig
    ) -> list[AutotuneResult] | None:
        entry = load_entry(path, key)
        if entry is None:
            return None
        chosen = (entry["engine_name"], entry.get("knobs"))
        match = [c for c in timed if (c.engine.name, c.knobs) == chosen]
        if not match:
            return None
        try:
            built = build_one_plan(self._graph(), match[0].engine, match[0].knobs)
        except Exception:
            return None
        self._activate(built)
        meta = entry.get("autotune_metadata", {})
        results = []
        for rank, tried in enumerate(meta.get("tried", [])):
            results.append(AutotuneResult(
                engine_id=engine_id(tried["engine_name"]), engine_name=tried["engine_name"],
                knob_settings=_settings(tried.get("knobs", {})),
                min_time_ms=float(tried.get("min_time_ms", 0.0)),
                avg_time_ms=float(tried.get("avg_time_ms", 0.0)), rank=rank, succeeded=True,
                workspace_size=int(tried.get("workspace_size", 0)), mode_used=config.mode,
                strategy_used=config.strategy, from_store=True,
            ))  # fmt: skip
        self.autotune_write_outcome = AutotuneCacheWriteOutcome.UNCHANGED
        return results

    def _store(self, path: Path, key: str, device: str, ranked: list[AutotuneResult],
               storage: AutotuneStorageConfig) -> None:  # fmt: skip
        winner = ranked[0]
        tried = [
            {"engine_name": r.engine_name, "knobs": {s.knob_id: s.value for s in r.knob_settings},
             "min_time_ms": r.min_time_ms, "avg_time_ms": r.avg_time_ms,
             "workspace_size": r.workspace_size}
            for r in ranked if r.succeeded
        ]  # fmt: skip
        entry = {
            "key": key,
            "device": device,
            "graph": self._graph().get_name(),
            "engine_name": winner.engine_name,
            "knobs": dict(self._state.active.knobs),
            "autotune_metadata": {"rank": winner.rank, "min_time_ms": winner.min_time_ms,
                                  "avg_time_ms": winner.avg_time_ms, "tried": tried},
        }  # fmt: skip
        try:
            save_entry(path, entry, replace_all=storage.delete_all_existing_file_content)
        except OSError as err:
            import warnings

            warnings.warn(f"hipdnn_graph: the autotune store {path} cannot be written "
                          f"({err}); the choice is not remembered", RuntimeWarning,
                          stacklevel=3)  # fmt: skip
            self.autotune_write_outcome = AutotuneCacheWriteOutcome.DECLINED_UNKEYABLE
            return
        self.autotune_write_outcome = AutotuneCacheWriteOutcome.WRITTEN
