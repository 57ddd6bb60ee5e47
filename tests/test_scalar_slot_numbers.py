"""A Python number in a scalar slot (issue 41, item 20).

Every input slot that a family's ``NodeSpec`` declares pass-by-value (epsilon, momentum, the
SDPA scales, seed and offset) takes a Python or NumPy number wherever a tensor can be given: the
builder keywords, the attributes' setters and hipDNN's Python API (``hipdnn_graph.frontend``).
The number becomes a constant pass-by-value tensor, so the graph is the one built with
``TensorAttributes().set_value(number)``: the same wire bytes and the same results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
import hipdnn_graph.frontend as hipdnn
from hipdnn_graph.attributes.base import scalar_slots
from hipdnn_graph.descriptors.node_spec import node_specs
from hipdnn_graph.testing import make_inputs

F = hg.DataType.FLOAT
#: a scalar as the caller gives it: the number itself, or the constant tensor it stands for
Scalar = Callable[[float], Any]


def _number(value: float) -> float:
    return value


def _tensor(value: float) -> hg.TensorAttributes:
    return hg.TensorAttributes().set_value(value)


def _graph(name: str) -> hg.Graph:
    return hg.Graph(name=name, io_data_type=F, intermediate_data_type=F, compute_data_type=F)


def _outputs(g: hg.Graph, *tensors: hg.TensorAttributes | None) -> hg.Graph:
    for t in tensors:
        if t is not None:
            t.set_output(True)
    return g


def rmsnorm(s: Scalar) -> hg.Graph:
    g = _graph("rmsnorm")
    x, scale = g.tensor(name="x", dim=[2, 8]), g.tensor(name="s", dim=[1, 8])
    y, inv_rms = g.rmsnorm(x, scale, epsilon=s(1e-3), forward_phase=hg.NormFwdPhase.TRAINING)
    return _outputs(g, y, inv_rms)


def layernorm(s: Scalar) -> hg.Graph:
    g = _graph("layernorm")
    x = g.tensor(name="x", dim=[2, 8])
    scale, bias = g.tensor(name="s", dim=[1, 8]), g.tensor(name="b", dim=[1, 8])
    attrs = hg.LayernormAttributes().set_epsilon(s(1e-3))
    y, mean, inv_var = g.layernorm(x, scale, bias, attrs, forward_phase=hg.NormFwdPhase.TRAINING)
    return _outputs(g, y, mean, inv_var)


def layernorm_backward(s: Scalar) -> hg.Graph:
    g = _graph("layernorm_backward")
    dy, x = g.tensor(name="dy", dim=[2, 8]), g.tensor(name="x", dim=[2, 8])
    attrs = hg.LayernormBackwardAttributes().set_normalized_dim_count(1)
    outs = g.layernorm_backward(dy, x, g.tensor(name="s", dim=[1, 8]), attrs, epsilon=s(1e-3))
    return _outputs(g, *outs)


def batchnorm(s: Scalar) -> hg.Graph:
    g = _graph("batchnorm")
    x = g.tensor(name="x", dim=[4, 3, 2, 2])
    scale, bias, prev_mean, prev_var = (g.tensor(name=n, dim=[1, 3, 1, 1]) for n in "sbmv")
    outs = g.batchnorm(x, scale, bias, epsilon=s(1e-3), momentum=s(0.25),
                       prev_running_mean=prev_mean, prev_running_variance=prev_var)  # fmt: skip
    assert outs[3] is not None  # a number for the momentum adds the running statistics
    return _outputs(g, *outs)


def batchnorm_inference_variance(s: Scalar) -> hg.Graph:
    g = _graph("batchnorm_inference_variance")
    x = g.tensor(name="x", dim=[4, 3, 2, 2])
    m, v, gamma, beta = (g.tensor(name=n, dim=[1, 3, 1, 1]) for n in ("m", "v", "gamma", "beta"))
    return _outputs(g, g.batchnorm_inference_variance_ext(x, m, v, gamma, beta, s(1e-3)))


def sdpa_forward(s: Scalar) -> hg.Graph:
    g = _graph("sdpa_forward")
    q = g.tensor(name="Q", dim=[1, 2, 8, 4])
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    mask = g.tensor(name="mask", dim=[1, 2, 8, 8])
    attrs = hg.SdpaAttributes().set_dropout(mask, s(4 / 3))
    o, stats = g.sdpa(q, k, v, attrs, generate_stats=True)
    return _outputs(g, o, stats)


def sdpa_philox(s: Scalar) -> hg.Graph:
    g = _graph("sdpa_philox")
    q = g.tensor(name="Q", dim=[1, 2, 8, 4])
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    attrs = hg.SdpaAttributes().set_generate_stats(False).set_dropout(0.25, s(7), s(3))
    o, _ = g.sdpa(q, k, v, attrs)
    return _outputs(g, o)


def sdpa_backward(s: Scalar) -> hg.Graph:
    g = _graph("sdpa_backward")
    q, k, v, o, do = (g.tensor(name=n, dim=[1, 2, 8, 4]) for n in ("Q", "K", "V", "O", "dO"))
    stats = g.tensor(name="Stats", dim=[1, 2, 8, 1])
    mask = g.tensor(name="mask", dim=[1, 2, 8, 8])
    attrs = hg.SdpaBackwardAttributes().set_dropout(mask, s(2.0), s(0.5))
    return _outputs(g, *g.sdpa_backward(q, k, v, o, do, stats, attrs))


#: node type -> the graphs that put numbers in its scalar slots
BUILDERS: dict[hg.NodeType, list[Callable[[Scalar], hg.Graph]]] = {
    hg.NodeType.RMS_NORM: [rmsnorm],
    hg.NodeType.LAYER_NORM: [layernorm],
    hg.NodeType.LAYERNORM_BACKWARD: [layernorm_backward],
    hg.NodeType.BATCHNORM: [batchnorm],
    hg.NodeType.BATCHNORM_INFERENCE_VARIANCE_EXT: [batchnorm_inference_variance],
    hg.NodeType.SDPA_FWD: [sdpa_forward, sdpa_philox],
    hg.NodeType.SDPA_BWD: [sdpa_backward],
}
CASES = [build for builds in BUILDERS.values() for build in builds]


def test_every_family_with_scalar_slots_is_covered() -> None:
    with_scalars = {
        getattr(spec.make_node, "node_type", None)
        for spec in node_specs().values()
        if spec.pass_by_value_slots
    }
    assert with_scalars == set(BUILDERS)


def _run(g: hg.Graph) -> dict[str, np.ndarray[Any, Any]]:
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    assert g.get_plan_name() == "NUMPY_REFERENCE_ENGINE"
    inputs = make_inputs(g, np.random.default_rng(0))
    return {t.name: np.asarray(a) for t, a in g.run(inputs).items()}


@pytest.mark.parametrize("build", CASES, ids=[b.__name__ for b in CASES])
def test_a_number_is_the_constant_tensor_it_stands_for(build: Callable[[Scalar], hg.Graph]) -> None:
    given, spelled_out = build(_number), build(_tensor)
    given.validate()
    for node in given.nodes:
        scalars = scalar_slots(type(node.attributes))
        for slot, tensor in node.attributes.inputs.items():
            if slot.name in scalars:
                assert tensor.value is not None and tensor.get_is_pass_by_value(), slot.name
    assert given.serialize() == spelled_out.serialize()
    got, expected = _run(given), _run(spelled_out)
    assert got.keys() == expected.keys() and got
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_a_number_for_the_attention_scale_stays_attn_scale_value() -> None:
    # hipDNN's set_attn_scale(float) overload: the value, not a tensor in the Attn_scale slot
    attrs = hg.SdpaAttributes().set_attn_scale(0.5)
    assert (attrs.attn_scale_value, attrs.get_attn_scale()) == (0.5, None)


def test_numpy_numbers_are_taken_and_keep_their_type() -> None:
    attrs = hg.RMSNormAttributes().set_epsilon(np.float64(1e-5))
    epsilon = attrs.get_epsilon()
    assert epsilon is not None
    assert (epsilon.value, epsilon.get_data_type()) == (1e-5, hg.DataType.DOUBLE)
    half = hg.LayernormAttributes().set_epsilon(np.float32(0.5)).get_epsilon()  # type: ignore[arg-type]
    assert half is not None and (half.value, half.get_data_type()) == (0.5, hg.DataType.FLOAT)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: hg.RMSNormAttributes().set_x(2.0),  # type: ignore[arg-type]
         "Slot X expects a TensorAttributes, got float (numbers go to the scalar slots only: "
         "EPSILON)"),
        (lambda: hg.RMSNormAttributes().set_epsilon(True),
         "Slot EPSILON expects a TensorAttributes, got bool"),
        (lambda: hg.RMSNormAttributes().set_epsilon("1e-5"),  # type: ignore[arg-type]
         "Slot EPSILON expects a TensorAttributes, got str"),
        (lambda: hg.MatmulAttributes().set_a(1),  # type: ignore[arg-type]
         "Slot A expects a TensorAttributes, got int (this node has no scalar slot that takes a "
         "number)"),
        (lambda: hg.BatchnormAttributes().set_scale(1.0),  # type: ignore[arg-type]
         "Slot SCALE expects a TensorAttributes, got float (numbers go to the scalar slots only: "
         "EPSILON, MOMENTUM)"),
    ],
)  # fmt: skip
def test_other_values_and_other_slots_are_refused(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    assert info.value.code == hg.ErrorCode.INVALID_VALUE
    assert info.value.message == message


def test_the_issue_example_runs() -> None:
    g = _graph("issue")
    x, s = g.tensor(name="x", dim=[2, 8]), g.tensor(name="s", dim=[1, 8])
    y, _ = g.rmsnorm(x, s, epsilon=1e-5, forward_phase=hg.NormFwdPhase.INFERENCE)
    y.set_output(True)
    xs = np.arange(16, dtype=np.float32).reshape(2, 8)
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    out = g.run({x: xs, s: np.ones((1, 8), np.float32)})[y]
    expected = xs / np.sqrt(np.mean(xs.astype(np.float64) ** 2, axis=1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_hipdnn_python_api_takes_numbers_in_scalar_slots() -> None:
    g = hipdnn.Graph()
    x = g.tensor(hipdnn.Tensor.create([2, 8], hipdnn.DataType.FLOAT).set_name("x"))
    s = g.tensor(hipdnn.Tensor.create([1, 8], hipdnn.DataType.FLOAT).set_name("s"))
    attrs = hipdnn.RMSNormAttributes().set_forward_phase(hipdnn.NormFwdPhase.INFERENCE)
    y, _ = g.rmsnorm(x, s, attrs.set_epsilon(1e-5))
    y.set_output(True)
    m, v, gamma, beta = (hipdnn.Tensor.create([1, 3, 1, 1], hipdnn.DataType.FLOAT) for _ in "mvgb")
    x4 = hipdnn.Tensor.create([2, 3, 2, 2], hipdnn.DataType.FLOAT)
    attributes = hipdnn.BatchnormInferenceAttributesVarianceExt()
    z = g.batchnorm_inference_variance_ext(x4, m, v, gamma, beta, 1e-5, attributes)
    z.set_output(True)
    g.validate()
    epsilons = [n.attributes.get_epsilon() for n in g.core_graph.nodes]
    as_float32 = float(np.float32(1e-5))  # a float is a FLOAT constant (set_value)
    assert [(e.value, e.get_is_pass_by_value()) for e in epsilons] == [(as_float32, True)] * 2
