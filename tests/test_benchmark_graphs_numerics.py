"""hipDNN's small benchmark graph files (every valid one within ``RUN_BOUND`` elements: the
samples and the correctness graphs) run on the NumPy reference through ``Graph.execute`` and
match torch in float64.

The torch side reads what each node computes from the file itself (parsed with :mod:`json`, in
the file's own layout), never from the project's reading of it, so a misread field shows as a
wrong number. Inputs are random (``make_inputs``), rounded to their storage types; the
statistics a backward node reads (O and Stats; mean and inverse variance) are set to the
forward's values, so that torch's autograd of the forward is the reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import benchmark_graph_corpus as corpus
import numpy as np
import pytest
from family_reference_cases import assert_close, run

import hipdnn_graph as hg
from hipdnn_graph.testing import graph_outputs, make_inputs

torch = pytest.importorskip("torch")
F = torch.nn.functional

RUNNABLE = [f for f in corpus.FILES if corpus.runnable(f)]

Node = dict[str, Any]
Arrays = dict[int, np.ndarray[Any, Any]]
#: ``{output uid: (float64 reference, number of terms summed per element)}``
Expected = dict[int, tuple[Any, int]]


def _t(array: np.ndarray[Any, Any], grad: bool = False) -> Any:
    return torch.from_numpy(np.asarray(array, dtype=np.float64)).requires_grad_(grad)


def _params(node: Node) -> dict[str, Any]:
    """The node's non-tensor fields, wherever the file's layout puts them."""
    found = {k: v for k, v in node.items() if k not in ("inputs", "outputs")}
    for group in ("attributes", "parameters"):
        found.update(node.get(group, {}))
    return found


def _uid(node: Node, name: str) -> int:
    return corpus.node_uids(node)[f"{name}_tensor_uid"]


def _store(arrays: Arrays, uid: int, value: Any) -> None:
    """Write a float64 tensor into the input array of ``uid`` (rounded to its type)."""
    target = arrays[uid]
    target[...] = value.detach().numpy().reshape(target.shape).astype(target.dtype)


def _attention(node: Node, arrays: Arrays, q: Any, k: Any, v: Any) -> tuple[Any, Any]:
    """O and the natural-log logsumexp of the scaled, biased, causally masked scores (K and V
    heads repeated for GQA), as the file's node asks."""
    p = _params(node)
    assert not p.get("alibi_mask") and not p.get("padding_mask")  # none in the files that run
    assert p.get("dropout_probability") is None and p.get("left_bound") is None
    assert p.get("right_bound") is None and p["diagonal_alignment"] == "TOP_LEFT"
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    scale = p["attn_scale_value"]
    scores = (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale) * q @ k.transpose(-1, -2)
    bias = node["inputs"]["attn_mask_tensor_uid"]
    if bias is not None:
        scores = scores + _t(arrays[bias])
    if p["causal_mask"] or p["causal_mask_bottom_right"]:
        sq, skv = scores.shape[-2:]
        shift = skv - sq if p["causal_mask_bottom_right"] else 0
        hidden = torch.ones(sq, skv, dtype=torch.bool).triu(1 + shift)  # key after query
        scores = scores.masked_fill(hidden, -math.inf)
    return torch.softmax(scores, -1) @ v, torch.logsumexp(scores, -1, keepdim=True)


def _sdpa(node: Node, arrays: Arrays, doc: dict[str, Any]) -> Expected:
    q, k, v = (_t(arrays[_uid(node, x)]) for x in "qkv")
    o, stats = _attention(node, arrays, q, k, v)
    want = {_uid(node, "o"): (o, k.shape[2])}
    if node["outputs"]["stats_tensor_uid"] is not None:
        want[_uid(node, "stats")] = (stats, k.shape[2])
    return want


def _sdpa_backward(node: Node, arrays: Arrays, doc: dict[str, Any]) -> Expected:
    q, k, v = (_t(arrays[_uid(node, x)], grad=True) for x in "qkv")
    o, stats = _attention(node, arrays, q, k, v)
    _store(arrays, _uid(node, "o"), o)  # Stats keeps the file's dims ([B, H, Sq] here)
    _store(arrays, _uid(node, "stats"), stats)
    o.backward(_t(arrays[_uid(node, "do")]))
    terms = k.shape[2]
    return {_uid(node, f"d{x}"): (t.grad, terms) for x, t in zip("qkv", (q, k, v), strict=True)}


def _normalized(node: Node, x: Any) -> tuple[int, ...]:
    count = _params(node)["normalized_dim_count"]
    return tuple(range(x.dim() - count, x.dim()))


def _layernorm(node: Node, arrays: Arrays, doc: dict[str, Any]) -> Expected:
    x, scale, bias = (_t(arrays[_uid(node, n)]) for n in ("x", "scale", "bias"))
    eps_uid = _uid(node, "epsilon")
    eps = next(t["value"] for t in doc["tensors"] if t["uid"] == eps_uid)
    dims = _normalized(node, x)
    shape = x.shape[dims[0] :]
    y = F.layer_norm(x, shape, scale.reshape(shape), bias.reshape(shape), eps)
    mean = x.mean(dims, keepdim=True)
    inv = 1.0 / torch.sqrt(x.var(dims, unbiased=False, keepdim=True) + eps)
    terms = math.prod(shape)
    return {
        _uid(node, "y"): (y, terms),
        _uid(node, "mean"): (mean, terms),
        _uid(node, "inv_variance"): (inv, terms),
    }


def _layernorm_backward(node: Node, arrays: Arrays, doc: dict[str, Any]) -> Expected:
    """The file's node has no epsilon: the given statistics are those of ``eps = 1e-5``."""
    eps = 1e-5
    x, scale = (_t(arrays[_uid(node, n)], grad=True) for n in ("x", "scale"))
    dims = _normalized(node, x)
    shape = x.shape[dims[0] :]
    bias = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
    plain = x.detach()
    _store(arrays, _uid(node, "mean"), plain.mean(dims, keepdim=True))
    inv = 1.0 / torch.sqrt(plain.var(dims, unbiased=False, keepdim=True) + eps)
    _store(arrays, _uid(node, "inv_variance"), inv)
    F.layer_norm(x, shape, scale.reshape(shape), bias, eps).backward(_t(arrays[_uid(node, "dy")]))
    terms = x.numel()
    return {
        _uid(node, "dx"): (x.grad, terms),
        _uid(node, "dscale"): (scale.grad, terms),
        _uid(node, "dbias"): (bias.grad, terms),
    }


def _reduction(node: Node, arrays: Arrays, doc: dict[str, Any]) -> Expected:
    assert _params(node)["mode"] in ("ADD", "add")
    x = _t(arrays[_uid(node, "in")])
    out = next(t for t in doc["tensors"] if t["uid"] == _uid(node, "out"))
    dims = tuple(i for i, (a, b) in enumerate(zip(x.shape, out["dims"], strict=True)) if a != b)
    return {out["uid"]: (x.sum(dims, keepdim=True), math.prod(x.shape[i] for i in dims))}


def _resample(node: Node, arrays: Arrays, doc: dict[str, Any]) -> Expected:
    """Average pooling that counts only the elements inside the tensor (zero padding)."""
    p = _params(node)
    assert (p["resample_mode"], p["padding_mode"]) == ("AVGPOOL_EXCLUDE_PADDING", "ZERO_PAD")
    x = _t(arrays[_uid(node, "x")])
    (top, left), (bottom, right) = p["pre_padding"], p["post_padding"]
    window, stride = p["window"], p["stride"]

    def pooled_sum(t: Any) -> Any:
        return F.avg_pool2d(F.pad(t, (left, right, top, bottom)), window, stride) * math.prod(
            window
        )

    counted = pooled_sum(torch.ones_like(x))
    return {_uid(node, "y"): (pooled_sum(x) / counted, math.prod(window))}


REFERENCES: dict[str, Callable[[Node, Arrays, dict[str, Any]], Expected]] = {
    "SdpaAttributes": _sdpa,
    "SdpaBackwardAttributes": _sdpa_backward,
    "LayernormAttributes": _layernorm,
    "LayernormBackwardAttributes": _layernorm_backward,
    "ReductionAttributes": _reduction,
    "ResampleFwdAttributes": _resample,
}


def test_the_small_files_cover_every_family_of_the_valid_ones() -> None:
    kinds = {n["type"] for f in RUNNABLE for n in corpus.doc(f)["nodes"]}
    assert kinds == set(REFERENCES)
    assert len(RUNNABLE) == 22


@pytest.mark.parametrize("rel", RUNNABLE)
def test_runs_on_the_numpy_reference_and_matches_torch_in_float64(rel: str) -> None:
    doc = corpus.doc(rel)
    (node,) = doc["nodes"]
    g = hg.Graph.from_json(corpus.text(rel))
    g.validate()
    outputs = set(graph_outputs(g))
    inputs = {t: v for t, v in make_inputs(g, np.random.default_rng(7)).items() if t not in outputs}
    arrays = {t.uid: v for t, v in inputs.items()}
    want = REFERENCES[node["type"]](node, arrays, doc)  # sets the given statistics in place
    got = {t.uid: (t, array) for t, array in run(g, inputs).items()}
    assert sorted(got) == sorted(want)
    compute = hg.DataType[node["compute_data_type"].upper()]
    for uid, (reference, terms) in want.items():
        tensor, array = got[uid]
        expected = reference.detach().reshape(array.shape).numpy()
        assert_close(array, expected, tensor.data_type, compute, terms=terms)
