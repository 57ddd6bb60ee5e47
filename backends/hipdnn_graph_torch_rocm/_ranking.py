"""Engine ranking of the torch backend, from measurements (pure rules; no torch, no device).

Engines are tried in priority order (lower first) and each refuses what it cannot run exactly,
so ranking is mostly the order: cuDNN, flash, memory-efficient, FlexAttention, then math. The
order alone is wrong where a later engine was measured faster for a feature; there the earlier
engine *defers*: its ``check`` refuses with a reason naming the faster engine and the figures,
so ``check_support`` says why. Measured on an H200 (CUDA torch 2.11, bf16, D = 128, backward,
issue 14 and docs/performance.md):

* a bias (with or without dBias): memory-efficient 92–102 TFLOP/s, FlexAttention 218–232 (issue
  14), so the efficient engine defers to flex whenever flex accepts the node;
* padding (75 % valid, S = 4k): flash's varlen backward 170 TFLOP/s, the flex engine 357
  (``benchmarks/torch_flex.py``), so flash and efficient defer to flex;
* a band (±256 at S = 16k): flash's window backward 146 TFLOP/s, the flex engine 195, so flash
  and efficient defer to flex for bands and sliding windows (plain causal masks stay on cuDNN
  and flash);
* a bottom-right causal mask with Sq ≠ Skv (Sq = 2k, Skv = 4k; cuDNN cannot align it): flash's
  backward 263 TFLOP/s, memory-efficient 111, the flex engine 341–346 (2026-12-01), so flash and
  efficient defer to flex there.

The math engine takes only what no fused kernel or flex runs exactly: dropout masks (flex cannot
apply a mask after the softmax), ``Hk ≠ Hv``, head dims below 16, float64, and CPU.

Philox dropout (``dropout_probability`` with Seed and Offset) is different: every fused kernel
runs it, but each draws its mask from its own Philox stream, and a forward graph and a backward
graph that a user builds separately must draw the same mask. So by default a philox node goes
only to engines whose stream is the documented one (:mod:`hipdnn_graph.philox`: the math
engine, and the CUDA memory-efficient kernel, which draws exactly that stream); cuDNN and flash
(and, on ROCm builds, the AOTriton efficient kernel) run it only when the graph prefers them by
name (``Graph.set_preferred_engine_id_ext``), and otherwise refuse with the reason
:func:`philox_deferral` gives.

Example:
    >>> features = Features(bias=True, dropout_mask=False)
    >>> deferral("efficient", features, flex_accepts=True)[:55]
    'efficient defers to TORCH_SDPA_FLEX_ENGINE: with a bias'
    >>> deferral("efficient", features, flex_accepts=False) is None
    True
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DOCUMENTED_STREAM", "ENGINES", "Features", "deferral", "philox_deferral", "rank"]

#: (engine name, kernel family or None for math, priority: lower ranks first).
ENGINES: tuple[tuple[str, str | None, int], ...] = (
    ("TORCH_SDPA_CUDNN_ENGINE", "cudnn", 10),
    ("TORCH_SDPA_FLASH_ENGINE", "flash", 20),
    ("TORCH_SDPA_EFFICIENT_ENGINE", "efficient", 30),
    ("TORCH_SDPA_FLEX_ENGINE", "flex", 40),
    ("TORCH_SDPA_MATH_ENGINE", None, 500),
)

FLEX = "TORCH_SDPA_FLEX_ENGINE"

#: the name of the documented Philox stream (defined in :mod:`hipdnn_graph.philox`)
DOCUMENTED_STREAM = "hipdnn_graph.philox"


@dataclass(frozen=True)
class Features:
    """What a node uses, as far as ranking cares."""

    bias: bool = False
    dropout_mask: bool = False
    padding: bool = False
    band: bool = False  # a left bound, or a right bound above 0 (not plain causal)
    offset_diagonal: bool = False  # bottom-right alignment with Sq != Skv


#: (family, predicate, figures): the family defers to flex when the predicate holds
_PAD = "with padding (75% valid, S=4k) flash's varlen backward measured 170 TFLOP/s against "
_BAND = "with a band (+-256, S=16k) flash's window backward measured 146 TFLOP/s against "
_H200 = " on the H200 (bf16, D=128)"
_DEFERRALS: tuple[tuple[str, str, str], ...] = (
    ("efficient", "bias",
     "with a bias the memory-efficient backward measured 92-102 TFLOP/s against flex's "
     "218-232 on the H200 (bf16, D=128, S=1k-4k)"),
    ("flash", "padding", _PAD + "the flex engine's 357" + _H200),
    ("efficient", "padding", _PAD + "the flex engine's 357" + _H200),
    ("flash", "band", _BAND + "the flex engine's 195" + _H200),
    ("efficient", "band", _BAND + "the flex engine's 195" + _H200),
    ("flash", "offset_diagonal",
     "with a bottom-right causal mask and Sq != Skv (2k, 4k) flash's backward measured 263 "
     "TFLOP/s against the flex engine's 341" + _H200),
    ("efficient", "offset_diagonal",
     "with a bottom-right causal mask and Sq != Skv (2k, 4k) the memory-efficient backward "
     "measured 111 TFLOP/s against the flex engine's 346" + _H200),
)  # fmt: skip


def deferral(family: str | None, features: Features, *, flex_accepts: bool) -> str | None:
    """Why the engine of ``family`` leaves this node to flex (measured slower), or None."""
    if not flex_accepts or family is None:
        return None
    for fam, feature, figures in _DEFERRALS:
        if fam == family and getattr(features, feature):
            return f"{family} defers to {FLEX}: {figures}"
    return None


def philox_deferral(engine: str, stream: str, *, preferred: bool) -> str | None:
    """Why ``engine``, whose philox dropout draws ``stream``, leaves a philox node to the
    engines of the documented stream; None when its stream is the documented one or the graph
    prefers it.

    Example:
        >>> philox_deferral("FLASH", "flash", preferred=False)  # doctest: +ELLIPSIS
        'philox dropout: FLASH draws its mask from flash, not the documented stream ...'
        >>> philox_deferral("FLASH", DOCUMENTED_STREAM, preferred=False) is None
        True
        >>> philox_deferral("FLASH", "flash", preferred=True) is None
        True
    """
    if preferred or stream == DOCUMENTED_STREAM:
        return None
    return (
        f"philox dropout: {engine} draws its mask from {stream}, not the documented stream "
        f"({DOCUMENTED_STREAM}), so by default the node goes to an engine of that stream (a "
        "forward and a backward graph built apart must draw one mask); prefer this engine by "
        "name (set_preferred_engine_id_ext) to run it with its own stream"
    )


def rank(accepting: dict[str, bool], features: Features) -> list[str]:
    """The engines that run a node, best first, given which accept it (by engine name).

    Example:
        >>> ok = {name: True for name, _, _ in ENGINES}
        >>> rank(ok, Features(bias=True))[:2]
        ['TORCH_SDPA_CUDNN_ENGINE', 'TORCH_SDPA_FLASH_ENGINE']
    """
    flex_ok = accepting.get(FLEX, False)
    out = []
    for name, family, _ in sorted(ENGINES, key=lambda e: e[2]):
        if accepting.get(name) and deferral(family, features, flex_accepts=flex_ok) is None:
            out.append(name)
    return out
