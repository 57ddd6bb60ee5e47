"""Boolean attention masks (issue 37, item 3): an SDPA ``Bias`` of data type BOOLEAN is a mask,
True attends and False hides the key, as torch's bool ``attn_mask``. The NumPy reference and the
torch engines that run on the CPU agree with ``F.scaled_dot_product_attention`` given the same
bool mask, forward and backward; a row the mask hides completely has ``O = 0`` and
``Stats = +inf`` (the project's convention for a row that sees no key); cuDNN-frontend refuses
it by name; the graph reads and writes with BOOLEAN's number.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend import SdpaProblem

torch = pytest.importorskip("torch")
F = torch.nn.functional

DT = hg.DataType
B, H, SQ, SKV, D = 2, 3, 5, 7, 8
SCALE = 0.4
ENGINES = ["NUMPY_REFERENCE_ENGINE", "TORCH_SDPA_MATH_ENGINE"]
#: mask shapes: full, one mask for every head, one key-padding row per batch (broadcast)
SHAPES = {"full": (B, H, SQ, SKV), "per_batch": (B, 1, SQ, SKV), "keys": (B, 1, 1, SKV)}


def _mask(shape: tuple[int, ...], seed: int = 1) -> np.ndarray[Any, Any]:
    """A random mask where every query row sees at least one key."""
    mask = np.random.default_rng(seed).random(shape) > 0.4
    mask[..., 0] = True
    return mask


def _graph(
    engine: str, mask_shape: tuple[int, ...], backward: bool = False
) -> tuple[hg.Graph, dict[str, hg.TensorAttributes]]:
    g = hg.Graph(io_data_type=DT.FLOAT, intermediate_data_type=DT.FLOAT, compute_data_type=DT.FLOAT)
    q = g.tensor(name="Q", dim=[B, H, SQ, D])
    k = g.tensor(name="K", dim=[B, H, SKV, D])
    v = g.tensor_like(k, "V")
    m = g.tensor(name="M", dim=list(mask_shape), data_type=DT.BOOLEAN)
    t = {"Q": q, "K": k, "V": v, "M": m}
    if backward:
        o, do = g.tensor_like(q, "O"), g.tensor_like(q, "dO")
        stats = g.tensor(name="Stats", dim=[B, H, SQ, 1], data_type=DT.FLOAT)
        dq, dk, dv = g.sdpa_backward(q, k, v, o, do, stats, name="bwd", bias=m, attn_scale=SCALE)
        t |= {"O": o, "dO": do, "Stats": stats, "dQ": dq, "dK": dk, "dV": dv}
        for grad in (dq, dk, dv):
            grad.set_output(True)
    else:
        o, lse = g.sdpa(q, k, v, name="fwd", generate_stats=True, bias=m, attn_scale=SCALE)
        assert lse is not None
        o.set_output(True)
        lse.set_output(True)
        t |= {"O": o, "Stats": lse}
    g.set_preferred_engine_id_ext(engine)
    g.build()
    assert g.get_plan_name() == engine
    return g, t


def _inputs(seed: int = 7) -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    shapes = {"Q": (B, H, SQ, D), "K": (B, H, SKV, D), "V": (B, H, SKV, D), "dO": (B, H, SQ, D)}
    return {name: rng.standard_normal(s).astype(np.float32) for name, s in shapes.items()}


def _forward(engine: str, mask: np.ndarray[Any, Any]) -> dict[str, np.ndarray[Any, Any]]:
    g, t = _graph(engine, mask.shape)
    x = _inputs()
    pack: dict[Any, Any] = {t[n]: x[n] for n in ("Q", "K", "V")} | {t["M"]: mask}
    pack |= {t[n]: np.zeros(t[n].dim, np.float32) for n in ("O", "Stats")}
    g.execute(pack)
    return {n: pack[t[n]] for n in ("O", "Stats")}


def _torch_forward(mask: np.ndarray[Any, Any]) -> tuple[Any, Any]:
    """torch's output and log-sum-exp (natural log) of the masked scores."""
    x = {n: torch.from_numpy(a).double() for n, a in _inputs().items()}
    m = torch.from_numpy(mask)
    out = F.scaled_dot_product_attention(x["Q"], x["K"], x["V"], attn_mask=m, scale=SCALE)
    scores = (x["Q"] @ x["K"].transpose(-1, -2) * SCALE).masked_fill(~m, -torch.inf)
    return out, torch.logsumexp(scores, dim=-1, keepdim=True)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_forward_matches_torch_with_the_same_bool_mask(engine: str, shape: str) -> None:
    mask = _mask(SHAPES[shape])
    got = _forward(engine, mask)
    want_o, want_lse = _torch_forward(mask)
    np.testing.assert_allclose(got["O"], want_o.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["Stats"], want_lse.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_row_the_mask_hides_completely_sees_no_key(engine: str) -> None:
    mask = _mask(SHAPES["per_batch"])
    mask[1, 0, 2, :] = False
    got = _forward(engine, mask)
    assert not np.isnan(got["O"]).any()
    np.testing.assert_array_equal(got["O"][1, :, 2], 0.0)
    np.testing.assert_array_equal(got["Stats"][1, :, 2], np.inf)
    want_o, _ = _torch_forward(mask)  # torch's math path also gives zeros there
    np.testing.assert_allclose(got["O"], want_o.numpy(), rtol=1e-5, atol=1e-5)


def test_flex_on_the_cpu_matches_torch_with_the_same_bool_mask(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Flex reads the mask as its 0/−inf bias in Q's type (its compiled CPU path, when allowed)."""
    from hipdnn_graph_torch_rocm.kernels import flex

    monkeypatch.setenv(flex.CPU_ENV, "1")
    mask = _mask(SHAPES["per_batch"])
    mask[0, 0, 4, :] = False
    got = _forward("TORCH_SDPA_FLEX_ENGINE", mask)
    want_o, want_lse = _torch_forward(mask)
    np.testing.assert_allclose(got["O"], want_o.numpy(), rtol=1e-5, atol=1e-5)
    seen = np.isfinite(want_lse.numpy())
    np.testing.assert_allclose(got["Stats"][seen], want_lse.numpy()[seen], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got["Stats"][~seen], np.inf)


@pytest.mark.parametrize("engine", ENGINES)
def test_backward_matches_torch_autograd_with_the_same_bool_mask(engine: str) -> None:
    mask = _mask(SHAPES["per_batch"], seed=3)
    x = {n: torch.from_numpy(a).double().requires_grad_(n != "dO") for n, a in _inputs().items()}
    m = torch.from_numpy(mask)
    out = F.scaled_dot_product_attention(x["Q"], x["K"], x["V"], attn_mask=m, scale=SCALE)
    out.backward(x["dO"])
    lse = _torch_forward(mask)[1]
    g, t = _graph(engine, mask.shape, backward=True)
    pack: dict[Any, Any] = {t[n]: x[n].detach().float().numpy() for n in ("Q", "K", "V", "dO")}
    pack |= {t["M"]: mask, t["O"]: out.detach().float().numpy(), t["Stats"]: lse.float().numpy()}
    pack |= {t[n]: np.zeros(t[n].dim, np.float32) for n in ("dQ", "dK", "dV")}
    g.execute(pack)
    for name, grad in (("dQ", x["Q"].grad), ("dK", x["K"].grad), ("dV", x["V"].grad)):
        np.testing.assert_allclose(pack[t[name]], grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def test_a_boolean_bias_is_a_data_type_the_engines_take_and_an_integer_one_is_not() -> None:
    g, _ = _graph("NUMPY_REFERENCE_ENGINE", SHAPES["keys"])
    assert SdpaProblem.from_node(g.nodes[0]).data_type_problem() is None
    g = hg.Graph(io_data_type=DT.FLOAT, intermediate_data_type=DT.FLOAT, compute_data_type=DT.FLOAT)
    q = g.tensor(name="Q", dim=[B, H, SQ, D])
    bias = g.tensor(name="M", dim=[B, 1, SQ, SQ], data_type=DT.INT32)
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="fwd", bias=bias)
    o.set_output(True)
    g.build_operation_graph()
    assert SdpaProblem.from_node(g.nodes[0]).data_type_problem() == (
        "node 'fwd': Bias has data type INT32"
    )


def test_cudnn_frontend_refuses_a_boolean_bias_by_name() -> None:
    from hipdnn_graph_torch_rocm.cudnn_fe.rules import node_refusal

    g = hg.Graph(io_data_type=DT.BFLOAT16, intermediate_data_type=DT.FLOAT,
                 compute_data_type=DT.FLOAT)  # fmt: skip
    q = g.tensor(name="Q", dim=[2, 4, 64, 64])
    mask = g.tensor(name="M", dim=[2, 1, 64, 64], data_type=DT.BOOLEAN)
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), name="n", bias=mask,
                  generate_stats=True)  # fmt: skip
    o.set_output(True)
    g.build_operation_graph()
    assert node_refusal(SdpaProblem.from_node(g.nodes[0]), preferred=False) == (
        "node 'n': cuDNN's SDPA adds a bias of a float type; it takes no BOOLEAN mask"
    )


def test_a_graph_with_a_boolean_mask_reads_and_writes_both_ways() -> None:
    g, _ = _graph("NUMPY_REFERENCE_ENGINE", SHAPES["per_batch"])
    text = g.to_json()
    mask = next(t for t in json.loads(text)["tensors"] if t["name"] == "M")
    assert mask["data_type"] == "boolean"
    for back in (hg.Graph.from_json(text), hg.Graph.deserialize(g.serialize())):
        assert next(t for t in back.tensors if t.name == "M").get_data_type() is DT.BOOLEAN
        assert back.to_json() == text
        assert back.serialize() == g.serialize()
