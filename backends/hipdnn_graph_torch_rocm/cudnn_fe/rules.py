"""What ``CUDNN_FRONTEND_ENGINE`` can run, decided without torch, cuDNN or a device.

cuDNN itself has the last word (the engine asks cudnn-frontend's ``check_support`` on the built
cuDNN graph, and refuses with cuDNN's message); these rules come first, so a node that cannot
map onto cuDNN's SDPA operation is refused with a reason naming the feature before any cuDNN
call, and they translate the node's mask into cuDNN's arguments.

The band (``docs/sdpa-math.md``): key ``j`` is visible to query ``i`` when
``i + offset − left_bound ≤ j ≤ i + offset + right_bound``. cuDNN's band keeps ``j`` when
``j + L > i + offset`` and ``j ≤ i + offset + R``: the same right bound, and a left bound one
larger (``L = left_bound + 1``). cuDNN takes ``L ≥ 1`` and ``R ≥ 0``, so negative bounds (a band
that excludes the diagonal) are refused.

Example:
    >>> import hipdnn_graph as hg
    >>> from hipdnn_graph.backend import SdpaProblem
    >>> g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, compute_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 2, 64, 64])
    >>> o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), use_causal_mask=True,
    ...               sliding_window_length=16)
    >>> _ = o.set_output(True); g.validate()
    >>> args = mask_arguments(SdpaProblem.from_node(g.nodes[0]))
    >>> args["diagonal_alignment"], args["diagonal_band_left_bound"]
    ('TOP_LEFT', 17)
    >>> args["diagonal_band_right_bound"]
    0
"""

from __future__ import annotations

from typing import Any

import hipdnn_graph as hg
from hipdnn_graph.backend import SdpaProblem

from .._ranking import philox_deferral

__all__ = [
    "BOOLEAN_BIAS",
    "ENGINE_NAME",
    "INSTALL_HINT",
    "PRIORITY",
    "STREAM",
    "environment_refusal",
    "flex_deferral",
    "mask_arguments",
    "node_refusal",
]

ENGINE_NAME = "CUDNN_FRONTEND_ENGINE"
#: ranks before the aten engines: the same cuDNN kernels, written straight into the caller's
#: buffers, and every feature cuDNN's graph expresses (docs/performance.md has the figures)
PRIORITY = 5
#: the Philox stream cuDNN's dropout draws (not the documented one, see ``.._ranking``)
STREAM = "cudnn (cuDNN's own Philox stream)"
INSTALL_HINT = "pip install 'hipdnn-graph[cudnn]'"
#: why an explicit-mask dropout backward stays on the math engine (tests/gpu cross-check)
MASK_BACKWARD = (
    "cuDNN's explicit-mask dropout backward disagrees with hipDNN's math: on the H200 (cuDNN "
    "9.19, cudnn-frontend 1.32) its dQ differed from the math engine's by 2-17 % (relative "
    "norm) while dK and dV agreed; its forward agrees and runs here"
)

_LOWP = frozenset({hg.DataType.HALF, hg.DataType.BFLOAT16})
#: cudnn-frontend's SDPA adds its bias to the scores; it has no boolean mask input
BOOLEAN_BIAS = "cuDNN's SDPA adds a bias of a float type; it takes no BOOLEAN mask"


def environment_refusal(
    *, torch_found: bool, hip: bool, cuda: bool, cudnn_found: bool
) -> str | None:
    """Why the engine cannot run at all in this environment, or ``None``.

    Example:
        >>> environment_refusal(torch_found=True, hip=True, cuda=True, cudnn_found=True)
        'cuDNN does not exist in ROCm builds of torch'
        >>> environment_refusal(torch_found=True, hip=False, cuda=True, cudnn_found=False)
        "nvidia-cudnn-frontend is not installed (pip install 'hipdnn-graph[cudnn]')"
    """
    if not torch_found:
        return "torch is not installed"
    if hip:
        return "cuDNN does not exist in ROCm builds of torch"
    if not cuda:
        return "cuDNN needs a CUDA device; none is available"
    if not cudnn_found:
        return f"nvidia-cudnn-frontend is not installed ({INSTALL_HINT})"
    return None


def node_refusal(p: SdpaProblem, *, preferred: bool) -> str | None:
    """Why the node cannot map onto cuDNN's SDPA operation, or ``None`` (cuDNN's own
    ``check_support`` decides the rest when the graph is built).

    ``preferred``: the graph asks for this engine by name (philox dropout then runs on cuDNN's
    own stream, as for the aten cuDNN engine).
    """
    node = f"node '{p.name}'"
    if p.compute_data_type != hg.DataType.FLOAT:
        return f"{node}: cuDNN attention computes in FLOAT, not {p.compute_data_type.name}"
    io = p.tensors["Q"].data_type
    if io not in _LOWP:
        return f"{node}: cuDNN attention needs HALF or BFLOAT16 Q/K/V, got {io.name}"
    for slot in ("K", "V", "O", "dO", "dQ", "dK", "dV"):
        if p.has(slot) and p.tensors[slot].data_type != io:
            return f"{node}: cuDNN attention needs {slot} in Q's data type ({io.name})"
    if p.has("Bias") and p.tensors["Bias"].data_type == hg.DataType.BOOLEAN:
        return f"{node}: {BOOLEAN_BIAS}"
    if p.has("Stats") and p.tensors["Stats"].data_type != hg.DataType.FLOAT:
        return f"{node}: cuDNN attention keeps Stats in FLOAT"
    if p.has("Stats") and len(p.tensors["Stats"].dim) != 4:
        return f"{node}: cuDNN attention takes Stats as [B, H, Sq, 1], not of rank 3"
    w = p.window
    if w.left_bound is not None and w.left_bound < 0:
        return f"{node}: cuDNN's band needs a left bound of 0 or more, got {w.left_bound}"
    if w.right_bound is not None and w.right_bound < 0:
        return f"{node}: cuDNN's band needs a right bound of 0 or more, got {w.right_bound}"
    if p.padding:
        if not (p.has("SEQ_LEN_Q") and p.has("SEQ_LEN_KV")):
            return f"{node}: cuDNN's padding mask needs both SEQ_LEN_Q and SEQ_LEN_KV"
        if p.has("dBias"):
            return f"{node}: cuDNN computes no dBias together with a padding mask"
    if p.has("Dropout_mask") and p.backward:
        return f"{node}: {MASK_BACKWARD}"
    if p.philox is not None:
        reason = philox_deferral(ENGINE_NAME, STREAM, preferred=preferred)
        if reason is not None:
            return f"{node}: {reason}"
    return None


#: the largest Sq·Skv at which flex's bias + dBias backward was measured faster than cuDNN's
_FLEX_DBIAS_PAIRS = 1024 * 1024


def flex_deferral(p: SdpaProblem, *, flex_accepts: bool, preferred: bool) -> str | None:
    """Why the engine leaves a node to ``TORCH_SDPA_FLEX_ENGINE``, measured faster there, or
    ``None``: a bias with dBias at Sq·Skv ≤ 1k·1k (on the H200, bf16, D = 128, S = 1k: flex
    219 TFLOP/s, cuDNN 205; from S = 4k on cuDNN is faster: 221 against 208, and 209 against
    100 at 16k).

    Example:
        >>> import hipdnn_graph as hg
        >>> g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, compute_data_type=hg.DataType.FLOAT)
        >>> q = g.tensor(name="Q", dim=[1, 2, 1024, 128])
        >>> k, v, o, do = (g.tensor_like(q, n) for n in ("K", "V", "O", "dO"))
        >>> st = g.tensor(name="S", dim=[1, 2, 1024, 1], data_type=hg.DataType.FLOAT)
        >>> bias, dbias = g.tensor(name="B", dim=[1, 2, 1024, 1024]), g.tensor(name="dB")
        >>> _ = dbias.set_dim([1, 2, 1024, 1024])
        >>> for t in g.sdpa_backward(q, k, v, o, do, st, name="n", bias=bias, dBias=dbias):
        ...     _ = t.set_output(True)
        >>> g.validate()
        >>> p = SdpaProblem.from_node(g.nodes[0])
        >>> flex_deferral(p, flex_accepts=True, preferred=False)[:60]
        "node 'n': CUDNN_FRONTEND_ENGINE defers to TORCH_SDPA_FLEX_EN"
        >>> flex_deferral(p, flex_accepts=False, preferred=False) is None
        True
    """
    if preferred or not flex_accepts or not p.has("dBias"):
        return None
    if p.seq_q * p.seq_kv > _FLEX_DBIAS_PAIRS:
        return None
    return (
        f"node '{p.name}': {ENGINE_NAME} defers to TORCH_SDPA_FLEX_ENGINE: with a bias and dBias "
        "at Sq·Skv ≤ 1k·1k flex's backward measured 219 TFLOP/s against cuDNN's 205 on the "
        "H200 (bf16, D=128)"
    )


def mask_arguments(p: SdpaProblem) -> dict[str, Any]:
    """The node's mask window as cuDNN's ``sdpa``/``sdpa_backward`` arguments (the alignment as
    the name of a ``cudnn.diagonal_alignment`` member); empty without a mask."""
    w = p.window
    if w.left_bound is None and w.right_bound is None:
        return {}
    args: dict[str, Any] = {"diagonal_alignment": "BOTTOM_RIGHT" if w.bottom_right else "TOP_LEFT"}
    if w.left_bound is not None:
        args["diagonal_band_left_bound"] = w.left_bound + 1
    if w.right_bound is not None:
        args["diagonal_band_right_bound"] = w.right_bound
    return args
