"""How the fusion engine compiles and measures: configuration, the counting compiler backend,
example buffers and the build-time race between the compiled and the eager function.

Configuration (engine arguments win over the environment, read when a plan is built):

| environment variable | engine argument | default | meaning |
|---|---|---|---|
| ``HIPDNN_GRAPH_TORCH_COMPILE_BACKEND`` | ``backend`` | ``inductor`` | ``torch.compile`` backend (``aot_eager``, ``eager``: cheap, for CPU tests) |
| ``HIPDNN_GRAPH_TORCH_COMPILE_MODE`` | ``mode`` | none | Inductor mode (``max-autotune-no-cudagraphs``, ...) |
| (none) | ``options`` | none | Inductor config patches (a dict) |
| ``HIPDNN_GRAPH_TORCH_FUSION_AUTOTUNE`` | ``autotune`` | on for GPUs, off on the CPU | measure both plans in ``build_plan`` |

Example:
    >>> cfg = FusionConfig.resolve(backend="eager", mode=None, options=None, autotune=False)
    >>> cfg.backend, cfg.autotune
    ('eager', False)
"""  # noqa: E501

from __future__ import annotations

import importlib.util
import os
import shutil
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AUTOTUNE_ENV",
    "BACKEND_ENV",
    "COMPILE_MODE_KNOB",
    "MODE_ENV",
    "CountingBackend",
    "FusionConfig",
    "compiler_refusal",
    "cpu_compile_deferral",
    "eager_numerics_patches",
    "example_buffers",
    "inductor_cache_counts",
    "inductor_cache_outcome",
    "measure",
]

from hipdnn_graph.backend import Knob, StringConstraint

BACKEND_ENV = "HIPDNN_GRAPH_TORCH_COMPILE_BACKEND"
MODE_ENV = "HIPDNN_GRAPH_TORCH_COMPILE_MODE"
AUTOTUNE_ENV = "HIPDNN_GRAPH_TORCH_FUSION_AUTOTUNE"

#: the fusion engine's knob: the Inductor mode of its compile ("" keeps the engine's ``mode``,
#: else ``HIPDNN_GRAPH_TORCH_COMPILE_MODE``, else none); a plan built with another mode is
#: compiled again (the mode is part of the configuration's key)
COMPILE_MODE_KNOB = Knob(
    "fusion.compile_mode",
    "",
    "Inductor mode of the compile ('': the engine's setting or HIPDNN_GRAPH_TORCH_COMPILE_MODE)",
    StringConstraint(32, ("", "default", "max-autotune-no-cudagraphs")),
)


@dataclass(frozen=True)
class FusionConfig:
    """How a fusion plan is compiled (see the module docstring)."""

    backend: str | Callable[..., Any] = "inductor"
    mode: str | None = None
    options: Mapping[str, Any] | None = None
    #: None: on for CUDA/ROCm devices, off on the CPU
    autotune: bool | None = None

    @classmethod
    def resolve(
        cls,
        *,
        backend: str | Callable[..., Any] | None,
        mode: str | None,
        options: Mapping[str, Any] | None,
        autotune: bool | None,
    ) -> FusionConfig:
        """Engine arguments, else the environment, else the defaults."""
        if autotune is None and os.environ.get(AUTOTUNE_ENV):
            autotune = os.environ[AUTOTUNE_ENV].strip().lower() not in ("0", "false", "no", "off")
        return cls(
            backend=backend or os.environ.get(BACKEND_ENV) or "inductor",
            mode=mode or os.environ.get(MODE_ENV) or None,
            options=options,
            autotune=autotune,
        )

    def races(self, device: str) -> bool:
        """Whether ``build_plan`` on ``device`` times the compiled function against the eager
        one: ``autotune`` when set, else on for GPUs and off on the CPU."""
        return self.autotune if self.autotune is not None else device != "cpu"

    def describe(self, device: str) -> str:
        """The compiler and device, for the progress line: ``"inductor on cpu"``."""
        backend = self.backend if isinstance(self.backend, str) else "a custom backend"
        mode = f", mode {self.mode}" if self.mode else ""
        return f"{backend}{mode} on {device}"

    def key(self) -> tuple[Any, ...]:
        """What distinguishes two configurations in the measurement cache."""
        backend = self.backend if isinstance(self.backend, str) else id(self.backend)
        return (backend, self.mode, tuple(sorted((self.options or {}).items())))


def compiler_refusal(config: FusionConfig, device: str) -> str | None:
    """Why ``torch.compile`` with this configuration cannot compile for ``device``, or None."""
    if config.backend != "inductor":
        return None
    if device != "cpu":
        if importlib.util.find_spec("triton") is None:
            return "Inductor needs Triton for GPU kernels; it is not installed"
        return None
    cxx = os.environ.get("CXX")
    if not any(shutil.which(c) for c in (cxx, "g++", "c++", "clang++") if c):
        return (
            "Inductor on the CPU needs a C++ compiler and none was found (set CXX, or "
            f"{BACKEND_ENV}=aot_eager)"
        )
    return None


#: the measurement quoted by :func:`cpu_compile_deferral` (examples/conv_block.py's graph,
#: N=2 C=8 K=16 12x12 float32, torch 2.13.0 CPU, one thread, a loaded 2-core container)
CPU_COMPILE_FIGURES = (
    "Inductor's CPU build of a conv -> bias -> ReLU graph took 47 s, 7-12 s from Inductor's "
    "cache in a later process, and its calls then ran in 0.144 ms against node by node's "
    "0.098 ms"
)


def cpu_compile_deferral(config: FusionConfig, device: str, *, preferred: bool) -> str | None:
    """Why the fusion engine leaves a graph on ``device`` to the eager engine because
    compiling would not pay, or None.

    The rule: on the CPU, Inductor's compile (C++ code generated and built, tens of seconds)
    costs more than fusing a graph's nodes saves unless the graph runs very many times, so
    the engine compiles there only when asked: the graph prefers it by name
    (``set_preferred_engine_id_ext``), or ``autotune`` is on (the engine argument, or
    ``HIPDNN_GRAPH_TORCH_FUSION_AUTOTUNE=1``: compile, then keep the faster of the compiled
    and the eager function). GPUs (where the race keeps fusing only where it measured faster)
    and the cheap compile backends (``aot_eager``, ``eager``) are unaffected.

    Example:
        >>> inductor = FusionConfig(backend="inductor")
        >>> cpu_compile_deferral(inductor, "cpu", preferred=False)[:44]
        'on the CPU compiling does not pay by default'
        >>> cpu_compile_deferral(inductor, "cpu", preferred=True) is None
        True
        >>> cpu_compile_deferral(FusionConfig(autotune=True), "cpu", preferred=False) is None
        True
        >>> cpu_compile_deferral(inductor, "cuda:0", preferred=False) is None
        True
    """
    if device != "cpu" or config.backend != "inductor" or preferred or config.autotune:
        return None
    return (
        f"on the CPU compiling does not pay by default ({CPU_COMPILE_FIGURES}); the eager "
        "engine runs the graph. Prefer this engine by name (set_preferred_engine_id_ext), or "
        f"set autotune (engine argument, or {AUTOTUNE_ENV}=1) to compile and race the two"
    )


def inductor_cache_counts() -> tuple[int, int]:
    """Inductor's FX-graph cache ``(hits, misses)`` in this process so far (its own counters;
    (0, 0) before Inductor is imported). A build whose compile adds a hit loaded the compiled
    code from Inductor's on-disk cache (``TORCHINDUCTOR_CACHE_DIR``), written by an earlier
    process that compiled the same graph for the same shapes, types, device and settings."""
    import sys

    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return 0, 0
    inductor = utils.counters["inductor"]
    return int(inductor["fxgraph_cache_hit"]), int(inductor["fxgraph_cache_miss"])


def inductor_cache_outcome(before: tuple[int, int]) -> str | None:
    """What Inductor's FX-graph cache did since :func:`inductor_cache_counts` gave ``before``:
    ``"hit"`` (the compiled code loaded from the on-disk cache), ``"miss"`` (compiled, and
    stored there for later processes), or None (no Inductor compile: another backend).

    Example:
        >>> inductor_cache_outcome(inductor_cache_counts()) is None
        True
    """
    hits, misses = inductor_cache_counts()
    if misses > before[1]:
        return "miss"
    return "hit" if hits > before[0] else None


class CountingBackend:
    """A ``torch.compile`` backend that counts its compilations and refuses any outside a
    plan's build (execute never compiles: a guard that fails at execute raises here, and the
    plan runs node by node instead)."""

    def __init__(self, config: FusionConfig) -> None:
        self.config = config
        self.compiles = 0
        self.building = False
        #: set when a compilation outside the build was refused (the caller then runs eagerly)
        self.refused = False

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        if not self.building:
            self.refused = True
            raise RuntimeError("a fusion plan recompiled at execute (its guards failed)")
        self.compiles += 1
        return self._inner()(gm, example_inputs)

    def _inner(self) -> Callable[..., Any]:
        backend, cfg = self.config.backend, self.config
        if callable(backend):
            return backend
        if backend == "inductor":
            import torch._inductor
            from torch._inductor.compile_fx import compile_fx

            patches = eager_numerics_patches(torch._inductor.config)
            if cfg.mode:
                patches.update(torch._inductor.list_mode_options(cfg.mode, False))
            patches.update(cfg.options or {})

            def inductor(gm: Any, example_inputs: Any) -> Any:
                return compile_fx(gm, example_inputs, config_patches=patches)

            return inductor
        from torch._dynamo.backends.registry import lookup_backend

        found: Callable[..., Any] = lookup_backend(backend)
        return found


def eager_numerics_patches(inductor_config: Any) -> dict[str, Any]:
    """Inductor settings that keep the eager engine's numerics in compiled kernels: every
    declared cast really rounds (Inductor otherwise drops a down-cast followed by an up-cast,
    so a value stored as half or bfloat16 keeps float32 bits), and float32 division rounds
    correctly (Triton's ``/`` is approximate). Bit-exact lowerings such as block-scale
    quantize rely on both. The division switch's name changed after torch 2.11; whichever this
    torch has is set.

    Example:
        >>> import types
        >>> old = types.SimpleNamespace(emulate_precision_casts=False,
        ...                             emulate_divison_rounding=False)
        >>> eager_numerics_patches(old)
        {'emulate_precision_casts': True, 'emulate_divison_rounding': True}
    """
    patches: dict[str, Any] = {}
    if hasattr(inductor_config, "emulate_precision_casts"):
        patches["emulate_precision_casts"] = True
    if hasattr(inductor_config, "emulate_divison_rounding"):  # (sic) torch <= 2.11
        patches["emulate_divison_rounding"] = True
    elif hasattr(getattr(inductor_config, "eager_numerics", None), "division_rounding"):
        patches["eager_numerics.division_rounding"] = True
    return patches


def example_buffers(
    specs: Mapping[int, tuple[tuple[int, ...], tuple[int, ...], Any]],
    uids: tuple[int, ...],
    device: str,
    seed: int = 0,
) -> list[Any]:
    """Buffers of the declared dims, strides and types on ``device`` (random normal values for
    floating types, zeros otherwise), to compile and time with."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    out = []
    for uid in uids:
        dims, strides, dtype = specs[uid]
        buf = torch.empty_strided(dims, strides, dtype=dtype, device=device)
        if dtype.is_floating_point:
            buf.copy_(torch.randn(dims, generator=gen, dtype=torch.float32))
        else:
            buf.zero_()
        out.append(buf)
    return out


def measure(
    contenders: Mapping[str, Callable[[], Any]],
    device: str,
    *,
    repeats: int = 3,
    calls: int = 5,
    replay: bool = False,
) -> dict[str, float]:
    """Median seconds per call of each contender: CUDA events on a GPU, ``perf_counter`` on
    the CPU, after one warm-up call each.

    ``replay`` (a GPU): time each contender as ``execute`` will run it, replayed from a CUDA
    graph (its kernels' time, no host time), where its kernels can be captured.
    """
    import torch

    gpu = device != "cpu"
    result: dict[str, float] = {}
    for name, call in contenders.items():
        call()
        fn = _replayed(call, device) if gpu and replay else call
        samples = []
        for _ in range(repeats):
            if gpu:
                start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                start.record()
                for _ in range(calls):
                    fn()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end) / 1e3 / calls)
            else:
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                samples.append((time.perf_counter() - t0) / calls)
        result[name] = statistics.median(samples)
    return result


def _replayed(call: Callable[[], Any], device: str) -> Callable[[], Any]:
    """A CUDA graph's ``replay`` of ``call``'s kernels, or ``call`` where they cannot be
    captured (a host synchronisation)."""
    import torch

    from .replay import record_graph

    try:
        graph = record_graph(call, device, torch.cuda.Stream(device))  # type: ignore[no-untyped-call]
    except Exception:
        return call
    replay: Callable[[], Any] = graph.replay
    return replay
