"""Check an engine against ``NUMPY_REFERENCE_ENGINE`` over random graphs of every family.

Cases are attention graphs (:func:`~hipdnn_graph.testing.generate_cases`) by default, or graphs
of the families asked for (``families=``, see :data:`~hipdnn_graph.testing.FAMILIES` and
:func:`~hipdnn_graph.testing.generate_family_cases`), so that an engine for one family is
checked on that family alone. For each case :func:`check_engine`:

1. ranks the engines with the engine under test preferred; when the engine refuses the graph
   (its ``check()`` says no) the case is **skipped** with the engine's reason, before any plan
   is built (no other engine builds, or compiles, for it); otherwise its plan is built;
2. executes it on random inputs (:func:`~hipdnn_graph.testing.make_inputs`) with poisoned
   outputs, then executes the same inputs on ``NUMPY_REFERENCE_ENGINE``;
3. **fails** the case when the engine raised, left an output element unwritten (NaN poison
   left), wrote NaN/inf where the reference has finite values, changed an input, or differs
   from the reference by more than the tolerance of the graph's io type:
   ``max|out - ref| <= atol + rtol * max|ref|`` per output tensor (:data:`TOLERANCES`).

The reference engine is found in the current registry like any other engine, so both must be
registered (the built-in ``numpy`` backend is, through its entry point).

Example:
    >>> from hipdnn_graph.testing import check_engine
    >>> report = check_engine("NUMPY_REFERENCE_ENGINE", cases=3, seed=0)
    >>> report.ok, len(report.passed), len(report.failed)
    (True, 3, 0)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..backend.registry import current_registry
from ..errors import HipdnnError
from ..graph import Graph
from ..tensor import TensorAttributes
from ..types import DataType, ErrorCode
from .family_generators import generate_family_cases
from .generators import DEFAULT_IO_TYPES, KINDS, GraphCase, Kind, generate_cases
from .inputs import (
    default_device,
    empty_for,
    graph_outputs,
    make_inputs,
    poison,
    to_device,
    to_numpy,
    workspace_for,
)

__all__ = [
    "REFERENCE_ENGINE",
    "TOLERANCES",
    "CaseResult",
    "ConformanceReport",
    "Tolerance",
    "assert_engine_conforms",
    "check_engine",
]

#: The engine every other engine is compared with.
REFERENCE_ENGINE = "NUMPY_REFERENCE_ENGINE"


@dataclass(frozen=True)
class Tolerance:
    """``max|out - ref| <= atol + rtol * max|ref|`` over one output tensor."""

    rtol: float
    atol: float

    def limit(self, ref_scale: float) -> float:
        return self.atol + self.rtol * ref_scale


#: Tolerances per io data type. The reference computes in FLOAT (DOUBLE for DOUBLE io) and rounds
#: once to the output type. Kernels that round intermediates to the io type (P and dS in fused
#: GPU kernels, tensor-core matmuls) carry an absolute error of many io-type epsilons: dP = dO·Vᵀ
#: has magnitude ~sqrt(Dv) with unit-scale inputs, and a gradient can be a small difference of
#: such terms. Measured on the H200 over hundreds of generated graphs: up to ~0.011 for HALF
#: and ~0.014 for BFLOAT16 in cancelling gradients whose own magnitude was ~0.004; hence the
#: ``atol`` terms (about 40 and 20 epsilons). Wrong masks, scales, head mappings or dropout
#: handling give errors of order 0.1 to 1 and still fail.
TOLERANCES: dict[DataType, Tolerance] = {
    DataType.DOUBLE: Tolerance(rtol=1e-9, atol=1e-9),
    DataType.FLOAT: Tolerance(rtol=1e-4, atol=1e-4),
    DataType.HALF: Tolerance(rtol=1e-2, atol=2e-2),
    DataType.BFLOAT16: Tolerance(rtol=3e-2, atol=8e-2),
}

Status = Literal["passed", "skipped", "failed"]


@dataclass
class CaseResult:
    """The outcome of one case.

    Attributes:
        case: the generated case (graph, features, seed).
        status: ``"passed"``, ``"skipped"`` or ``"failed"``.
        reason: the engine's refusal (skipped) or what went wrong (failed).
        errors: per output tensor name, ``max|out - ref| / (atol + rtol * max|ref|)`` (≤ 1 passes).
    """

    case: GraphCase
    status: Status
    reason: str = ""
    errors: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        text = f"{self.status.upper():7} {self.case.label}"
        return f"{text}: {self.reason}" if self.reason else text


@dataclass
class ConformanceReport:
    """What :func:`check_engine` found.

    Attributes:
        engine: the engine checked.
        results: one :class:`CaseResult` per case, in order.
    """

    engine: str
    results: list[CaseResult] = field(default_factory=list)

    def _with(self, status: Status) -> list[CaseResult]:
        return [r for r in self.results if r.status == status]

    @property
    def passed(self) -> list[CaseResult]:
        return self._with("passed")

    @property
    def skipped(self) -> list[CaseResult]:
        return self._with("skipped")

    @property
    def failed(self) -> list[CaseResult]:
        return self._with("failed")

    @property
    def ok(self) -> bool:
        """No case failed (skipped cases do not count against the engine)."""
        return not self.failed

    def summary(self) -> str:
        """``ENGINE: 17 passed, 3 skipped, 0 failed``."""
        return (
            f"{self.engine}: {len(self.passed)} passed, {len(self.skipped)} skipped, "
            f"{len(self.failed)} failed"
        )

    def by_family(self) -> dict[str, tuple[int, int, int]]:
        """``family -> (passed, skipped, failed)``, in the order families first appear."""
        counts: dict[str, list[int]] = {}
        slot = {"passed": 0, "skipped": 1, "failed": 2}
        for r in self.results:
            counts.setdefault(r.case.family, [0, 0, 0])[slot[r.status]] += 1
        return {family: (c[0], c[1], c[2]) for family, c in counts.items()}

    def details(self) -> str:
        """The summary, one line per family when there are several, then one line per
        skipped or failed case."""
        lines = [self.summary()]
        families = self.by_family()
        if len(families) > 1:
            lines += [f"  {family}: {p} passed, {s} skipped, {f} failed"
                      for family, (p, s, f) in families.items()]  # fmt: skip
        lines += [f"  {r}" for r in self.results if r.status != "passed"]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.details()


def _registered(name: str) -> None:
    names = [e.name for e in current_registry().engines()]
    if name not in names:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"No engine named {name!r} is registered; registered engines: "
            + (", ".join(names) or "none"),
        )


def _build_on(graph: Graph, engine: str) -> tuple[Status, str] | None:
    """Build the graph with ``engine`` first: None when its plan is active, else the outcome.

    The engines are ranked before any plan is built, so a case the engine refuses is skipped
    without building another engine's plan (which can mean a compile)."""
    graph.set_preferred_engine_id_ext(engine)
    try:
        graph.create_execution_plans()  # validates and lowers first when needed
    except HipdnnError as exc:
        return "failed", f"build raised {exc.code.name}: {exc}"
    refusals = graph.get_engine_refusals()
    if engine in refusals:
        return "skipped", refusals[engine]
    try:
        graph.build_plans()
    except HipdnnError as exc:
        return "failed", f"build raised {exc.code.name}: {exc}"
    if graph.get_plan_name() != engine:
        return "failed", f"{engine} accepted the graph but its plan could not be built"
    return None


def _fresh_outputs(
    pack: Mapping[TensorAttributes, Any], outputs: Sequence[TensorAttributes]
) -> dict[TensorAttributes, Any]:
    fresh = dict(pack)
    for t in outputs:
        fresh[t] = poison(empty_for(t))
    return fresh


def _as_f64(array: Any) -> np.ndarray[Any, Any]:
    return np.asarray(array).astype(np.float64)


def _compare(
    out: np.ndarray[Any, Any], ref: np.ndarray[Any, Any], tol: Tolerance
) -> tuple[float, str | None]:
    ref_finite = np.isfinite(ref)
    if np.isnan(out).all() and out.size:
        return float("inf"), "was not written (all elements still hold the NaN poison)"
    bad = ~np.isfinite(out) & ref_finite
    if bad.any():
        count = int(bad.sum())
        return float("inf"), f"has {count} non-finite element(s) where the reference is finite"
    mismatch = ~ref_finite & ~((out == ref) | (np.isnan(out) & np.isnan(ref)))
    if mismatch.any():
        return float("inf"), "differs from the reference's non-finite elements"
    if not ref_finite.any():
        return 0.0, None
    diff = float(np.max(np.abs(out[ref_finite] - ref[ref_finite])))
    scale = float(np.max(np.abs(ref[ref_finite])))
    ratio = diff / tol.limit(scale)
    if ratio > 1.0:
        return ratio, (
            f"max |out - ref| = {diff:.3g} exceeds {tol.atol:g} + {tol.rtol:g} * {scale:.3g}"
        )
    return ratio, None


def _run_case(
    engine: str,
    case: GraphCase,
    tolerances: Mapping[DataType, Tolerance],
    rng_seed: int,
    device: str | None = None,
) -> CaseResult:
    graph = case.graph
    outcome = _build_on(graph, engine)
    if outcome is not None:
        return CaseResult(case, outcome[0], outcome[1])
    outputs = graph_outputs(graph)
    host = make_inputs(graph, np.random.default_rng(rng_seed))
    pack = to_device(host, device) if device else dict(host)
    inputs_before = {
        t: np.array(v, copy=True)
        for t, v in host.items()
        if t not in outputs and isinstance(v, np.ndarray)
    }
    try:
        graph.execute(pack, workspace_for(graph, device))
        if device:
            _synchronize(device)
    except Exception as exc:  # any failure of the engine is a failed case, not a crash
        code = exc.code.name + ": " if isinstance(exc, HipdnnError) else ""
        return CaseResult(case, "failed", f"execute raised {code}{type(exc).__name__}: {exc}")
    for t, before in inputs_before.items():
        if not _same(to_numpy(pack[t]), before):
            return CaseResult(case, "failed", f"execute modified input {t.name!r}")
    reference_pack = _fresh_outputs(host, outputs)
    outcome = _build_on(graph, REFERENCE_ENGINE)
    if outcome is not None:
        return CaseResult(case, "skipped", f"the reference cannot run this graph: {outcome[1]}")
    graph.execute(reference_pack, workspace_for(graph, None))
    tol = tolerances.get(case.io_data_type, TOLERANCES[DataType.FLOAT])
    errors: dict[str, float] = {}
    problems: list[str] = []
    for t in outputs:
        got = _as_f64(to_numpy(pack[t]))
        ratio, problem = _compare(got, _as_f64(reference_pack[t]), tol)
        errors[t.name] = ratio
        if problem is not None:
            problems.append(f"output {t.name!r} {problem}")
    if problems:
        return CaseResult(case, "failed", "; ".join(problems), errors)
    return CaseResult(case, "passed", "", errors)


def _synchronize(device: str) -> None:
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _same(a: Any, b: np.ndarray[Any, Any]) -> bool:
    return bool(np.array_equal(np.asarray(a), b, equal_nan=True))


def check_engine(
    engine_name: str,
    *,
    cases: int | Iterable[GraphCase] = 24,
    seed: int = 0,
    features: Iterable[str] | None = None,
    kinds: Sequence[Kind] = KINDS,
    io_types: Sequence[DataType] = DEFAULT_IO_TYPES,
    tolerances: Mapping[DataType, Tolerance] | None = None,
    device: str | None = "auto",
    families: Sequence[str] | None = None,
) -> ConformanceReport:
    """Run generated graphs on ``engine_name`` and compare with ``NUMPY_REFERENCE_ENGINE``.

    Args:
        engine_name: the engine to check; it must be registered in the current registry.
        cases: how many graphs to generate, or the cases themselves.
        seed: base seed of the generated graphs and their inputs.
        features: the attention features graphs may use (default: all of
            :data:`~hipdnn_graph.testing.FEATURES`).
        kinds: attention graph kinds to cycle through (``"fwd"``, ``"bwd"``, ``"fwd_bwd"``).
        io_types: io data types to draw from.
        tolerances: overrides of :data:`TOLERANCES`, per io type.
        device: run the engine on torch tensors on this device (``"cuda"``, ``"cuda:1"``,
            ``"cpu"``) instead of NumPy arrays; ``None`` for NumPy arrays; ``"auto"`` (the
            default) is ``"cuda"`` for an engine whose ``array_kind`` is ``"torch"`` when a
            CUDA or ROCm device is present, else ``None``. The reference always runs on NumPy
            arrays.
        families: the families to draw graphs from, cycling through them (names of
            :data:`~hipdnn_graph.testing.FAMILIES`, e.g. ``("pointwise",)`` for a pointwise
            engine, or ``FAMILIES`` for all); ``None`` (the default) draws attention graphs.
            Cases of a family the engine refuses are skipped with the engine's reason.

    Returns:
        The report; it never raises for a failing case.

    Raises:
        HipdnnError: ``INVALID_VALUE`` when the engine or the reference is not registered.
        ValueError: for an unknown family.
    """
    _registered(engine_name)
    _registered(REFERENCE_ENGINE)
    if device == "auto":
        device = default_device(current_registry().find_engine(engine_name))
    if isinstance(cases, int) and families is not None:
        case_list = generate_family_cases(cases, seed, families=families, io_types=io_types,
                                          kinds=kinds, features=features)  # fmt: skip
    elif isinstance(cases, int):
        case_list = generate_cases(cases, seed, kinds=kinds, features=features, io_types=io_types)
    else:
        case_list = list(cases)
    tol = dict(TOLERANCES)
    tol.update(tolerances or {})
    report = ConformanceReport(engine_name)
    for case in case_list:
        report.results.append(_run_case(engine_name, case, tol, case.seed + 1, device))
    return report


def assert_engine_conforms(
    engine_name: str, *, min_passed: int = 1, **kwargs: Any
) -> ConformanceReport:
    """:func:`check_engine`, raising ``AssertionError`` when a case fails.

    Args:
        engine_name: the engine to check.
        min_passed: fewer passing cases than this also fails (an engine that refuses everything
            would otherwise "conform").
        **kwargs: passed to :func:`check_engine`.

    Returns:
        The report, when the engine conforms.

    Raises:
        AssertionError: with the report's details.
    """
    report = check_engine(engine_name, **kwargs)
    if not report.ok or len(report.passed) < min_passed:
        extra = ""
        if len(report.passed) < min_passed:
            extra = f"\nonly {len(report.passed)} case(s) passed; at least {min_passed} required"
        raise AssertionError(f"engine does not conform: {report.details()}{extra}")
    return report
