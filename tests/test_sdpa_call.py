"""One SDPA call description for the torch kernels (issue 39 item 3).

A plan builds each node's :class:`SdpaCall` once, from the public
:class:`hipdnn_graph.backend.SdpaProblem`, and hands it to the kernel instead of ten keywords;
a scalar the graph reads per call stays open in the call and comes with each call. The fused
ops' rules judge a :class:`FusedSdpaCase`, a name of its own (it used to shadow the public
``SdpaProblem``).
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import hipdnn_graph as hg  # noqa: E402
from hipdnn_graph.backend import SdpaProblem  # noqa: E402
from hipdnn_graph_torch_rocm import TorchSdpaEngine, kernels  # noqa: E402
from hipdnn_graph_torch_rocm.kernels import flex, fused  # noqa: E402
from hipdnn_graph_torch_rocm.kernels import math as tm  # noqa: E402
from hipdnn_graph_torch_rocm.kernels.call import PLAIN, SdpaCall  # noqa: E402

F32 = hg.DataType.FLOAT
MATH = "TORCH_SDPA_MATH_ENGINE"


def _graph(
    backward: bool = False, tensors: Callable[[hg.Graph], dict[str, Any]] | None = None, **kw: Any
) -> tuple[hg.Graph, dict[str, Any]]:
    """A validated one-node graph (Q ``[1, 2, 6, 8]``, K/V ``[1, 2, 9, 8]``) and its tensors;
    ``tensors`` declares more keyword tensors in the graph."""
    g = hg.Graph(io_data_type=F32, compute_data_type=F32, intermediate_data_type=F32)
    if tensors is not None:
        kw.update(tensors(g))
    q = g.tensor(name="Q", dim=[1, 2, 6, 8])
    k = g.tensor(name="K", dim=[1, 2, 9, 8])
    t: dict[str, Any] = {"Q": q, "K": k, "V": g.tensor_like(k, "V")}
    if backward:
        t["O"], t["dO"] = g.tensor_like(q, "O"), g.tensor_like(q, "dO")
        t["Stats"] = g.tensor(name="Stats", dim=[1, 2, 6, 1])
        outs = g.sdpa_backward(t["Q"], t["K"], t["V"], t["O"], t["dO"], t["Stats"], **kw)
    else:
        outs = list(g.sdpa(t["Q"], t["K"], t["V"], generate_stats=True, **kw))
    for out in outs:
        if out is not None:
            out.set_output(True)
    g.validate()
    return g, t


def _call(g: hg.Graph) -> SdpaCall:
    return SdpaCall.of(SdpaProblem.from_node(g.nodes[0]))


def test_the_call_of_a_node_holds_what_the_plan_fixes() -> None:
    g, _ = _graph(attn_scale=0.5, use_causal_mask_bottom_right=True, use_alibi_mask=True)
    assert _call(g) == SdpaCall(scale=0.5, alibi=True, bottom_right=True, right_bound=0)
    g, _ = _graph(diagonal_band_left_bound=3, diagonal_band_right_bound=1)
    assert _call(g) == SdpaCall(scale=1 / math.sqrt(8), left_bound=3, right_bound=1)


def test_the_backward_call_carries_the_dbias_shape() -> None:
    def bias(g: hg.Graph) -> dict[str, Any]:
        return {"bias": g.tensor(name="Bias", dim=[1, 2, 6, 9])}

    g, _ = _graph(True, lambda g: {**bias(g), "dBias": g.tensor(name="dBias", dim=[1, 2, 6, 9])})
    assert _call(g).dbias_shape == (1, 2, 6, 9)
    g, _ = _graph(True, bias)
    assert _call(g).dbias_shape is None


def _scalar(g: hg.Graph, name: str, data_type: hg.DataType = F32) -> Any:
    return g.tensor(name=name, dim=[1], is_pass_by_value=True, data_type=data_type)


def _philox(g: hg.Graph) -> dict[str, Any]:
    """Philox dropout with a runtime Seed and a constant Offset (8)."""
    offset = g.tensor(name="Offset", dim=[1], data_type=hg.DataType.INT64).set_value(8)
    return {"dropout": (0.25, _scalar(g, "Seed", hg.DataType.INT64), offset)}


def test_scalars_read_per_call_stay_open_in_the_call() -> None:
    g, _ = _graph(tensors=lambda g: {"attn_scale": _scalar(g, "scale")})
    assert _call(g).scale is None
    g, _ = _graph(tensors=lambda g: {"dropout": (g.tensor(name="mask", dim=[1, 2, 6, 9]),
                                                 _scalar(g, "ds"))})  # fmt: skip
    assert _call(g).dropout_scale is None and _call(g).dropout_p == 0.0
    g, _ = _graph(tensors=lambda g: {"dropout": (g.tensor(name="mask", dim=[1, 2, 6, 9]), 2.0)})
    assert _call(g).dropout_scale == 2.0


def test_a_philox_call_holds_its_probability_scale_and_constant_offset() -> None:
    g, _ = _graph(tensors=_philox)
    call = _call(g)
    assert (call.dropout_p, call.dropout_seed, call.dropout_offset) == (0.25, None, 8)
    assert call.dropout_scale == pytest.approx(1 / 0.75)


def test_a_plan_step_hands_its_kernel_one_call_and_reads_only_open_scalars() -> None:
    g, _t = _graph(tensors=_philox, attn_scale=0.5, use_causal_mask=True)
    g.build_operation_graph()
    (step,) = TorchSdpaEngine(MATH, None, 1).build_plan(g).steps
    assert step.static == {"call": _call(g), "compute_dtype": torch.float32}
    seed = SdpaProblem.from_node(g.nodes[0]).uid("Seed")
    assert [(key, uid) for key, uid, _ in step.runtime] == [("dropout_seed", seed)]


def test_the_math_kernel_reads_the_call_and_a_per_call_scale() -> None:
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 5, 8, generator=g, dtype=torch.float64) for _ in range(3))
    call = SdpaCall(scale=0.5, right_bound=0)
    o, stats = tm.sdpa_forward(q, k, v, call, compute_dtype=torch.float64)
    scores = (q @ k.transpose(-1, -2) * 0.5).masked_fill(
        torch.ones(5, 5, dtype=torch.bool).triu(1), -math.inf
    )
    torch.testing.assert_close(o, torch.softmax(scores, -1) @ v)
    torch.testing.assert_close(stats, torch.logsumexp(scores, -1, keepdim=True))
    open_scale = SdpaCall(right_bound=0)  # a runtime scale: given with the call
    again, _ = tm.sdpa_forward(q, k, v, open_scale, scale=0.5, compute_dtype=torch.float64)
    assert torch.equal(again, o)
    with pytest.raises(ValueError, match="leaves the scale open and none was given"):
        tm.sdpa_forward(q, k, v, open_scale)


def test_no_kernel_module_shadows_the_public_sdpa_problem() -> None:
    for info in pkgutil.iter_modules(kernels.__path__):
        module = importlib.import_module(f"{kernels.__name__}.{info.name}")
        assert not hasattr(module, "SdpaProblem"), module.__name__
    assert fused.FusedSdpaCase.__name__ == "FusedSdpaCase"


def test_the_fused_case_carries_the_call() -> None:
    q = torch.zeros(1, 2, 6, 8, dtype=torch.bfloat16)
    call = SdpaCall(scale=0.5, right_bound=0, dbias_shape=(1, 2, 6, 6))
    bias = torch.zeros(2, 6, 6)
    case = fused.FusedSdpaCase.from_tensors(q, q, q, call, bias=bias)
    assert case.call is call and case.bias_shape == (2, 6, 6) and case.dbias
    assert not fused.FusedSdpaCase.from_tensors(q, q, q, call, forward=True).dbias
    assert fused.FusedSdpaCase.from_tensors(q, q, q).call is PLAIN


def test_a_flex_head_group_divides_the_calls_dbias_shape() -> None:
    spec = flex.FlexSpec(b=1, h=4, hk=4, hv=4, sq=8, skv=8, d=16, dv=16, dtype=torch.float32,
                         device="cpu", forward=False, call=SdpaCall(dbias_shape=(1, 4, 8, 8)),
                         bias_shape=(1, 4, 8, 8))  # fmt: skip
    part = flex.group_spec(spec, 2)
    assert part.dbias_shape == part.call.dbias_shape == (1, 2, 8, 8)
    assert part.bias_shape == (1, 2, 8, 8) and part.call.scale is None
