"""Variant packs: keys, buffer kinds and every INVALID_VARIANT_PACK rule, through graph.execute."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.backend import (
    TensorSpec,
    VariantPackBinder,
    as_numpy,
    as_torch,
    is_runtime_scalar,
)

torch = pytest.importorskip("torch")

B, H, S, D = 1, 2, 8, 4
NP_TYPE = {hg.DataType.FLOAT: np.float32, hg.DataType.BFLOAT16: ml_dtypes.bfloat16}
SLOTS = ("Q", "K", "V", "O", "dO", "Stats", "dQ", "dK", "dV")
INPUTS = ("Q", "K", "V", "O", "dO", "Stats")
OUTPUTS = ("dQ", "dK", "dV")


pytestmark = pytest.mark.usefixtures("only_numpy")  # tests/conftest.py


class Producer:
    """A minimal DLPack producer that is neither NumPy nor torch."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self.array.__dlpack_device__()


class BrokenProducer:
    def __dlpack__(self, **kwargs: Any) -> Any:
        raise BufferError("device memory is not readable here")

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def make_graph(
    io: hg.DataType = hg.DataType.FLOAT,
    *,
    qkv_strides: list[int] | None = None,
    grad_strides: list[int] | None = None,
    runtime_scale: bool = False,
) -> tuple[hg.Graph, dict[str, hg.TensorAttributes]]:
    g = hg.Graph(
        name="vp",
        io_data_type=io,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    t: dict[str, hg.TensorAttributes] = {}
    for n in ("Q", "K", "V"):
        t[n] = g.tensor(name=n, dim=[B, H, S, D], stride=qkv_strides or [H * S * D, S * D, D, 1])
    t["O"] = g.tensor(name="O", dim=[B, H, S, D])
    t["dO"] = g.tensor(name="dO", dim=[B, H, S, D])
    t["Stats"] = g.tensor(name="Stats", dim=[B, H, S, 1], data_type=hg.DataType.FLOAT)
    extra: dict[str, Any] = {}
    if runtime_scale:
        t["Scale"] = g.tensor(
            name="Scale", dim=[1], stride=[1], data_type=hg.DataType.FLOAT, is_pass_by_value=True
        )
        extra["attn_scale"] = t["Scale"]
    dq, dk, dv = g.sdpa_backward(
        t["Q"], t["K"], t["V"], t["O"], t["dO"], t["Stats"], name="bwd", **extra
    )
    for n, grad in zip(OUTPUTS, (dq, dk, dv), strict=True):
        grad.set_output(True)
        if grad_strides is not None:
            grad.set_stride(grad_strides)
        t[n] = grad
    g.build()
    return g, t


def arrays(io: hg.DataType = hg.DataType.FLOAT, seed: int = 0) -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    dtype = NP_TYPE[io]
    out: dict[str, np.ndarray[Any, Any]] = {}
    for n in INPUTS:
        shape = (B, H, S, 1) if n == "Stats" else (B, H, S, D)
        a = rng.standard_normal(shape)
        out[n] = (np.abs(a) + 2).astype(np.float32) if n == "Stats" else a.astype(dtype)
    for n in OUTPUTS:
        out[n] = np.full((B, H, S, D), np.nan, dtype)
    return out


def pack(
    t: dict[str, hg.TensorAttributes], a: dict[str, Any], by: str = "tensor"
) -> dict[Any, Any]:
    return {(t[n] if by == "tensor" else t[n].get_uid()): a[n] for n in a}


def expect_error(g: hg.Graph, variant_pack: Any, message: str, workspace: Any = None) -> None:
    with pytest.raises(hg.HipdnnError) as info:
        g.execute(variant_pack, workspace)
    assert info.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
    assert str(info.value) == message


def reference_grads() -> dict[str, np.ndarray[Any, Any]]:
    g, t = make_graph()
    a = arrays()
    g.execute(pack(t, a))
    return {n: a[n] for n in OUTPUTS}


# ----- keys and buffer kinds -----
@pytest.mark.parametrize("by", ["tensor", "uid", "mixed"])
def test_keyed_by_tensor_uid_or_both(by: str) -> None:
    g, t = make_graph()
    a = arrays()
    if by == "mixed":
        variant_pack = {(t[n] if i % 2 else t[n].get_uid()): a[n] for i, n in enumerate(a)}
    else:
        variant_pack = pack(t, a, by)
    g.execute(variant_pack)
    want = reference_grads()
    for n in OUTPUTS:
        np.testing.assert_array_equal(a[n], want[n])


def test_torch_cpu_tensors_for_inputs_and_outputs() -> None:
    g, t = make_graph()
    a = arrays()
    tensors = {n: torch.from_numpy(a[n].copy()) for n in a}
    g.execute(pack(t, tensors))
    want = reference_grads()
    for n in OUTPUTS:
        np.testing.assert_array_equal(tensors[n].numpy(), want[n])


def test_torch_bfloat16_tensors() -> None:
    g, t = make_graph(hg.DataType.BFLOAT16)
    a = arrays(hg.DataType.BFLOAT16)
    tensors = {n: as_torch(a[n].copy()) for n in a}
    assert tensors["Q"].dtype == torch.bfloat16 and tensors["Stats"].dtype == torch.float32
    g.execute(pack(t, tensors))
    numpy_result = arrays(hg.DataType.BFLOAT16)
    g.execute(pack(t, numpy_result))
    for n in OUTPUTS:
        assert not torch.isnan(tensors[n]).any()
        got = tensors[n].float().numpy()
        np.testing.assert_array_equal(got, numpy_result[n].astype(np.float32))


def test_dlpack_producers_for_inputs_and_outputs() -> None:
    g, t = make_graph()
    a = arrays()
    g.execute(pack(t, {n: Producer(x) for n, x in a.items()}))
    want = reference_grads()
    for n in OUTPUTS:
        np.testing.assert_array_equal(a[n], want[n])


def test_size_one_dims_may_have_any_stride() -> None:
    g, t = make_graph()
    a = arrays()
    base = a["Stats"]
    odd = (999 * 4, S * 4, 4, 77 * 4)  # B = 1 and the last dim = 1: their strides never matter
    a["Stats"] = np.lib.stride_tricks.as_strided(base, base.shape, odd)
    g.execute(pack(t, a))
    t_stats = torch.from_numpy(base).as_strided(base.shape, (5, S, 1, 3))
    g.execute({**pack(t, a), t["Stats"]: t_stats})


def test_runtime_pass_by_value_scalar_forms() -> None:
    g, t = make_graph(runtime_scale=True)
    results = []
    for scale in (0.5, np.float32(0.5), np.array([0.5], np.float32), torch.tensor([0.5])):
        a = arrays()
        g.execute({**pack(t, a), t["Scale"]: scale})
        results.append(a["dQ"])
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    a = arrays()
    expect_error(
        g,
        {**pack(t, a), t["Scale"]: np.array([0.5, 0.25])},
        f"Variant pack tensor 'Scale' (uid {t['Scale'].get_uid()}) is pass-by-value and needs "
        "a single number",
    )


@pytest.mark.parametrize(
    ("dim", "by_value", "scalar"),
    [
        ([1], True, True),
        ([], True, True),
        ([1, 1, 1], True, True),
        ([2, 3], True, False),
        ([1], False, False),
    ],
)
def test_only_one_element_pass_by_value_tensors_bind_as_numbers(
    dim: list[int], by_value: bool, scalar: bool
) -> None:
    """A pass-by-value tensor of more elements (hipDNN's tensor_like of a host array) binds as
    an array of its declared layout; one of a single element as a number."""
    tensor = hg.TensorAttributes(
        name="s",
        dim=dim,
        stride=hg.generate_strides(dim),
        uid=7,
        data_type=hg.DataType.FLOAT,
        is_pass_by_value=by_value,
    )
    assert is_runtime_scalar(tensor) is scalar
    spec = TensorSpec.of(tensor, is_output=False)
    assert spec.pass_by_value is scalar
    binder = VariantPackBinder([spec], array_kind="numpy")
    value = np.arange(max(tensor.get_volume(), 1), dtype=np.float32).reshape(dim)
    bound = binder.bind({7: value}, None)[7]
    if scalar:
        assert type(bound) is float and bound == 0.0
    else:
        assert bound is value
        with pytest.raises(hg.HipdnnError, match=r"has shape \(4,\) but the graph declares"):
            binder.bind({7: np.zeros(4, np.float32)}, None)


# ----- every rule -----
def test_not_a_mapping() -> None:
    g, _ = make_graph()
    expect_error(
        g,
        [1, 2],
        "The variant pack must be a mapping of tensors or uids to buffers, got list",
    )


def test_missing_tensor_is_named() -> None:
    g, t = make_graph()
    a = arrays()
    del a["dO"]
    expect_error(g, pack(t, a), f"Variant pack is missing tensor 'dO' (uid {t['dO'].get_uid()})")


def test_unknown_uid_and_foreign_tensor_keys() -> None:
    g, t = make_graph()
    a = arrays()
    expect_error(
        g,
        {**pack(t, a), 999: a["Q"]},
        "Variant pack key 999 does not name a non-virtual tensor of the graph",
    )
    other = hg.Graph().tensor(name="Stranger", dim=[1])
    expect_error(
        g,
        {**pack(t, a), other: a["Q"]},
        "Variant pack tensor 'Stranger' does not name a non-virtual tensor of the graph",
    )


def test_a_tensor_of_another_graph_with_a_matching_uid_is_refused() -> None:
    g, t = make_graph()
    _, t2 = make_graph()
    a = arrays()
    variant_pack = pack(t, a)
    del variant_pack[t["Q"]]
    variant_pack[t2["Q"]] = a["Q"]  # same name and uid, but not this graph's tensor
    expect_error(
        g,
        variant_pack,
        f"Variant pack tensor 'Q' (uid {t['Q'].get_uid()}) belongs to another graph; key it by "
        "this graph's tensor or by uid",
    )


def test_virtual_tensor_key_is_refused() -> None:
    g = hg.Graph(
        name="fb",
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q, k, v, do = (g.tensor(name=n, dim=[B, H, S, D]) for n in ("Q", "K", "V", "dO"))
    o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=True)
    assert stats is not None
    grads = g.sdpa_backward(q, k, v, o, do, stats, name="bwd")
    for grad in grads:
        grad.set_output(True)
    g.build()
    a = {x: np.ones(x.get_dim(), np.float32) for x in (q, k, v, do, *grads)}
    expect_error(
        g,
        {**a, o: np.ones(o.get_dim(), np.float32)},
        "Variant pack tensor 'fwd::O' does not name a non-virtual tensor of the graph",
    )


def test_wrong_shape_strides_and_dtype_are_named() -> None:
    g, t = make_graph()
    uid = t["K"].get_uid()
    a = arrays()
    a["K"] = np.zeros((B, H, D, S), np.float32)
    expect_error(
        g,
        pack(t, a),
        f"Variant pack tensor 'K' (uid {uid}) has shape (1, 2, 4, 8) but the graph declares "
        "dims [1, 2, 8, 4]",
    )
    a = arrays()
    a["K"] = np.asfortranarray(a["K"])
    expect_error(
        g,
        pack(t, a),
        f"Variant pack tensor 'K' (uid {uid}) has strides (1, 1, 2, 16) but the graph declares "
        "strides [64, 32, 4, 1]",
    )
    a = arrays()
    a["K"] = a["K"].astype(np.float64)
    expect_error(
        g,
        pack(t, a),
        f"Variant pack tensor 'K' (uid {uid}) has dtype float64 but the graph declares FLOAT",
    )
    a = arrays()
    a["dV"] = torch.zeros(B, H, S, D, dtype=torch.float16)
    expect_error(
        g,
        pack(t, a),
        f"Variant pack tensor 'bwd::dV' (uid {t['dV'].get_uid()}) has dtype torch.float16 but the "
        "graph declares FLOAT",  # named as the caller's buffer names it (issue 23 item 17)
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([[1.0]], "is a list; pass a NumPy array, a torch tensor or a DLPack producer"),
        (BrokenProducer(), "cannot be read through DLPack: device memory is not readable here"),
    ],
    ids=["list", "broken-dlpack"],
)
def test_unusable_buffers(value: Any, message: str) -> None:
    g, t = make_graph()
    a: dict[str, Any] = dict(arrays())
    a["V"] = value
    with pytest.raises(hg.HipdnnError) as info:
        g.execute(pack(t, a))
    assert info.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
    assert f"'V' (uid {t['V'].get_uid()})" in str(info.value)
    assert str(info.value).endswith(message)


def test_torch_tensor_on_another_device_is_refused() -> None:
    g, t = make_graph()
    a: dict[str, Any] = dict(arrays())
    a["V"] = torch.empty(B, H, S, D, device="meta")
    expect_error(
        g,
        pack(t, a),
        f"Variant pack tensor 'V' (uid {t['V'].get_uid()}) is on meta, but this engine runs on "
        "the CPU",
    )


def test_read_only_output() -> None:
    g, t = make_graph()
    a = arrays()
    a["dK"].setflags(write=False)
    expect_error(
        g, pack(t, a), f"Variant pack output 'bwd::dK' (uid {t['dK'].get_uid()}) is read-only"
    )


@pytest.mark.parametrize(
    ("out", "other", "kind"),
    [("dQ", "Q", "input"), ("dV", "dO", "input"), ("dK", "dQ", "output"), ("dQ", "dV", "output")],
)
def test_output_aliasing_another_tensor(out: str, other: str, kind: str) -> None:
    g, t = make_graph()
    a = arrays()
    a[out] = a[other]
    first, second = (out, other) if kind == "input" else sorted((out, other), key=OUTPUTS.index)
    label = {n: f"'{t[n].get_name()}' (uid {t[n].get_uid()})" for n in SLOTS}
    expect_error(
        g,
        pack(t, a),
        f"Variant pack output {label[first]} shares memory with {kind} {label[second]}; outputs "
        "must not alias other tensors",
    )


def test_partially_overlapping_output_views() -> None:
    g, t = make_graph()
    a = arrays()
    buf = np.zeros(B * H * S * D + D, np.float32)
    a["dQ"] = buf[: B * H * S * D].reshape(B, H, S, D)
    a["dK"] = buf[D:].reshape(B, H, S, D)  # shifted by one row: overlaps dQ
    with pytest.raises(hg.HipdnnError, match=r"'bwd::dQ' .* shares memory with output 'bwd::dK'"):
        g.execute(pack(t, a))


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_interleaved_views_of_one_buffer_are_accepted(kind: str) -> None:
    """Q, K, V packed as [B, H, S, 3, D] and dQ, dK, dV likewise: views interleave, never alias."""
    packed = [H * S * 3 * D, S * 3 * D, 3 * D, 1]
    g, t = make_graph(qkv_strides=packed, grad_strides=packed)
    a = arrays()
    qkv = np.stack([a["Q"], a["K"], a["V"]], axis=3)
    dqkv = np.full((B, H, S, 3, D), np.nan, np.float32)
    views: dict[str, Any] = dict(a)
    for i, n in enumerate(("Q", "K", "V")):
        views[n] = qkv[:, :, :, i, :]
        views["d" + n] = dqkv[:, :, :, i, :]
    if kind == "torch":
        views = {n: torch.from_numpy(x) for n, x in views.items()}
    before = qkv.copy()
    g.execute(pack(t, views))
    want = reference_grads()
    for i, n in enumerate(OUTPUTS):
        np.testing.assert_array_equal(dqkv[:, :, :, i, :], want[n])
    np.testing.assert_array_equal(qkv, before)


# ----- the binder directly (torch kind, as a torch engine gets it) -----
def _spec(uid: int, name: str, shape: tuple[int, ...], strides: tuple[int, ...], out: bool) -> Any:
    return TensorSpec(uid, name, shape, strides, hg.DataType.FLOAT, is_output=out)


def test_torch_kind_binder_converts_and_checks_interleaved_outputs() -> None:
    specs = [
        _spec(1, "X", (4, 2), (2, 1), False),
        _spec(2, "A", (4, 2), (4, 1), True),
        _spec(3, "B", (4, 2), (4, 1), True),
    ]
    binder = VariantPackBinder(specs, array_kind="torch")
    x = np.ones((4, 2), np.float32)
    buf = torch.zeros(4, 4)
    bound = binder.bind({1: x, 2: buf[:, 0:2], 3: buf[:, 2:4]}, None)
    assert all(isinstance(v, torch.Tensor) for v in bound.values())
    assert bound[1].data_ptr() == x.ctypes.data  # zero-copy
    with pytest.raises(hg.HipdnnError, match="'A' \\(uid 2\\) shares memory with output 'B'"):
        binder.bind({1: x, 2: buf[:, 0:2], 3: buf[:, 1:3]}, None)
    with pytest.raises(hg.HipdnnError, match="'A' \\(uid 2\\) shares memory with input 'X'"):
        flat = torch.zeros(16)
        binder.bind({1: flat[:8].view(4, 2), 2: flat.view(4, 4)[:, 0:2], 3: buf[:, 2:4]}, None)


def test_as_numpy_and_as_torch_round_trip_bfloat16_zero_copy() -> None:
    a = np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16).reshape(2, 3)
    t = as_torch(a)
    assert t.dtype == torch.bfloat16
    back = as_numpy(t)
    assert back.dtype == a.dtype and np.shares_memory(back, a)
    np.testing.assert_array_equal(back, a)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                                  "float8_e5m2fnuz", "float8_e8m0fnu"])  # fmt: skip
def test_as_numpy_and_as_torch_round_trip_fp8_zero_copy(name: str) -> None:
    """The FP8 types (E8M0 scales too) pass between NumPy (ml_dtypes) and torch as views of
    their bits, strided views included (torch.from_numpy refused them: the torch engines could
    not take NumPy block-scale buffers)."""
    a = np.array([[0.5, 2.0, 4.0], [1.0, 8.0, 0.25]]).astype(getattr(ml_dtypes, name))[:, ::2]
    t = as_torch(a)
    assert t.dtype == getattr(torch, name) and t.stride() == (3, 2)
    assert t.float().tolist() == [[0.5, 4.0], [1.0, 0.25]]
    back = as_numpy(t)
    assert back.dtype == a.dtype and np.shares_memory(back, a)
    np.testing.assert_array_equal(back.astype(np.float64), a.astype(np.float64))


# ----- failed executes leave data alone; inputs are never written -----
@pytest.mark.parametrize("broken", ["dV-dtype", "V-strides", "V-shape"])
def test_a_failed_execute_leaves_caller_data_unchanged(broken: str) -> None:
    g, t = make_graph()
    a = arrays()
    snapshot = {n: x.copy() for n, x in a.items()}
    variant_pack = pack(t, a)
    if broken == "dV-dtype":
        variant_pack[t["dV"]] = np.zeros((B, H, S, D), np.float64)
    elif broken == "V-strides":
        variant_pack[t["V"]] = a["V"][..., ::-1]  # wrong strides
    else:
        variant_pack[t["V"]] = np.zeros((B, H, S, D + 1), np.float32)
    with pytest.raises(hg.HipdnnError):
        g.execute(variant_pack)
    for n, x in a.items():
        assert x.tobytes() == snapshot[n].tobytes(), n


@pytest.mark.parametrize("kind", ["numpy", "torch", "dlpack"])
def test_execution_never_modifies_inputs(kind: str) -> None:
    g, t = make_graph()
    a = arrays()
    snapshot = {n: a[n].tobytes() for n in INPUTS}
    for n in INPUTS:
        a[n].setflags(write=kind != "numpy")  # read-only inputs are fine
    wrap: Any = {"numpy": lambda x: x, "torch": torch.from_numpy, "dlpack": Producer}[kind]
    variant_pack = {t[n]: (wrap(x) if n in INPUTS else x) for n, x in a.items()}
    g.execute(variant_pack)
    for n in INPUTS:
        assert a[n].tobytes() == snapshot[n], n
    for n in OUTPUTS:
        assert not np.isnan(a[n]).any()


def test_aliasing_is_checked_again_when_the_buffers_change() -> None:
    g, t = make_graph()
    a = arrays()
    g.execute(pack(t, a))
    g.execute(pack(t, a))  # the same buffers again: fine
    a["dK"] = a["K"]
    with pytest.raises(hg.HipdnnError, match=r"'bwd::dK' .* shares memory with input 'K'"):
        g.execute(pack(t, a))


def test_a_bool_key_is_not_a_uid() -> None:
    # True == 1 in Python, but a pack keyed by True names no tensor (issue 11, item 6)
    g = hg.Graph(
        io_data_type=hg.DataType.FLOAT,
        intermediate_data_type=hg.DataType.FLOAT,
        compute_data_type=hg.DataType.FLOAT,
    )
    q = g.tensor(name="Q", dim=[1, 1, 4, 8])
    o, _ = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
    o.set_output(True)
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    a = np.ones((1, 1, 4, 8), np.float32)
    with pytest.raises(hg.HipdnnError) as err:
        g.run({True: a, 2: a, 3: a})
    assert err.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
    assert err.value.message == (
        "Variant pack key True does not name a non-virtual tensor of the graph"
    )
    assert set(g.run({1: a, 2: a, 3: a})) == {o}


def test_the_split_modules_keep_the_variant_pack_import_path() -> None:
    # variant_pack.py was split by purpose (issue 39: no module over 500 lines): the specs and
    # the per-buffer checks live in modules of their own, still importable from the old path
    from hipdnn_graph.backend import pack_checks, tensor_spec, variant_pack

    assert variant_pack.TensorSpec is tensor_spec.TensorSpec
    assert variant_pack.is_runtime_scalar is tensor_spec.is_runtime_scalar
    spec = tensor_spec.TensorSpec(
        uid=7, name="S", shape=(1,), strides=(1,), data_type=hg.DataType.FLOAT, is_output=False
    )
    assert tensor_spec.scalar_value(np.float32(0.5), spec) == 0.5
    with pytest.raises(hg.HipdnnError) as err:
        tensor_spec.scalar_value(np.zeros(2), spec)
    assert err.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
    assert err.value.message == (
        "Variant pack tensor 'S' (uid 7) is pass-by-value and needs a single number"
    )
    with pytest.raises(hg.HipdnnError) as err:
        pack_checks.check_workspace(object(), 8)
    assert err.value.code == hg.ErrorCode.INVALID_VARIANT_PACK
    assert err.value.message == (
        "The workspace is a object; pass a buffer (a NumPy array, a torch tensor, a bytearray) "
        "of at least 8 bytes"
    )
