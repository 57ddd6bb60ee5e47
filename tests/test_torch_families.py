"""The torch lowerings of every family against float64 torch math (``torch.nn.functional`` and
autograd), on the CPU, in float32, float16 and bfloat16, and the same graphs through the eager
engine (``Graph.execute``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch_family_cases as cases  # noqa: E402

import hipdnn_graph as hg  # noqa: E402
from hipdnn_graph.backend import isolated_registry, register_backend  # noqa: E402
from hipdnn_graph_torch_rocm import create_backend  # noqa: E402
from hipdnn_graph_torch_rocm.families import lower as lower_node  # noqa: E402
from hipdnn_graph_torch_rocm.families import refusal  # noqa: E402

IO = [hg.DataType.FLOAT, hg.DataType.HALF, hg.DataType.BFLOAT16]
IO_IDS = ["fp32", "fp16", "bf16"]


@pytest.fixture
def only_torch() -> Iterator[None]:
    with isolated_registry(load_entry_points=False):
        register_backend(create_backend())
        yield


def lower(g: hg.Graph, inputs: dict[Any, Any]) -> dict[Any, Any]:
    """The one node's lowering on its inputs in their storage types; outputs in theirs."""
    (node,) = g.nodes
    assert refusal(node) is None
    slots = node.attributes.tensors_by_slot()
    args = {}
    for slot, t in slots.items():
        if t in inputs:
            args[slot] = inputs[t].to(cases.TORCH_TYPES[t.data_type])
        elif t.value is not None:
            args[slot] = t.value
    got = lower_node(node, args)
    return {t: got[s].to(cases.TORCH_TYPES.get(t.data_type, torch.float64))
            for s, t in slots.items() if any(t is o for o in node.outputs())}  # fmt: skip


def check(g: hg.Graph, inputs: dict[Any, Any], refs: dict[Any, Any], io: hg.DataType) -> None:
    got = lower(g, inputs)
    for t, want in refs.items():
        err = cases.max_rel_error(got[t], want)
        assert err <= cases.tolerance(io), f"{t.name}: relative error {err:.2e}"


ALL_MODES = sorted(m for m in hg.PointwiseMode if m != hg.PointwiseMode.NOT_SET)


@pytest.mark.parametrize("mode", ALL_MODES, ids=[m.name for m in ALL_MODES])
def test_pointwise_every_mode_float32(mode: hg.PointwiseMode) -> None:
    g, inputs, refs = cases.build_pointwise(mode, hg.DataType.FLOAT)
    check(g, inputs, refs, hg.DataType.FLOAT)


LOW_MODES = [hg.PointwiseMode.GELU_FWD, hg.PointwiseMode.ADD, hg.PointwiseMode.SWISH_BWD,
             hg.PointwiseMode.BINARY_SELECT]  # fmt: skip


@pytest.mark.parametrize("io", IO[1:], ids=IO_IDS[1:])
@pytest.mark.parametrize("mode", LOW_MODES)
def test_pointwise_low_precision(mode: hg.PointwiseMode, io: hg.DataType) -> None:
    g, inputs, refs = cases.build_pointwise(mode, io)
    check(g, inputs, refs, io)


def test_pointwise_parameters_are_honoured() -> None:
    xv = torch.linspace(-3, 3, 64, dtype=torch.float64)
    f = torch.nn.functional
    m = hg.PointwiseMode
    relu = {"relu_lower_clip": 0.5, "relu_upper_clip": 2.0, "relu_lower_clip_slope": 0.1}
    for mode, params, want in [
        (m.RELU_FWD, relu, torch.where(xv > 0.5, xv, 0.5 + 0.1 * (xv - 0.5)).clamp(max=2.0)),
        (m.SWISH_FWD, {"swish_beta": 2.0}, xv * torch.sigmoid(2.0 * xv)),
        (m.ELU_FWD, {"elu_alpha": 0.5}, f.elu(xv, alpha=0.5)),
        (m.SOFTPLUS_FWD, {"softplus_beta": 3.0}, f.softplus(xv, beta=3.0)),
    ]:
        g = cases.graph(hg.DataType.FLOAT)
        g.pointwise(g.tensor(name="x", dim=[64]), mode=mode, name="p", **params).set_output(True)
        g.validate()
        (node,) = g.nodes
        got = lower_node(node, {"IN_0": xv.float()})["OUT_0"]
        assert cases.max_rel_error(got, want) < 1e-6, mode.name


@pytest.mark.parametrize("io", IO, ids=IO_IDS)
def test_matmul_with_batch_broadcasting(io: hg.DataType) -> None:
    check(*cases.build_matmul(io), io)


def test_matmul_batch_of_a_proper_divisor_repeats_each_batch() -> None:
    """hipDNN's CPU reference reads batch ``i // (c / d)`` of an operand of batch dim ``d``
    (each batch serves consecutive batches of C); the lowering raised before."""
    g = cases.graph(hg.DataType.FLOAT)
    a, b = g.tensor(name="a", dim=[2, 3, 1, 2]), g.tensor(name="b", dim=[4, 1, 2, 1])
    c = g.matmul(a, b, name="mm")
    c.set_output(True)
    g.validate()
    av, bv = (
        cases.rand([2, 3, 1, 2], hg.DataType.FLOAT, 1),
        cases.rand([4, 1, 2, 1], hg.DataType.FLOAT, 2),
    )
    want = av.repeat_interleave(2, dim=0) @ bv.repeat_interleave(3, dim=1)
    check(g, {a: av, b: bv}, {c: want}, hg.DataType.FLOAT)


@pytest.mark.parametrize("mode", sorted(m for m in hg.ReductionMode if m.value),
                         ids=lambda m: m.name)  # fmt: skip
@pytest.mark.parametrize("io", [hg.DataType.FLOAT, hg.DataType.BFLOAT16], ids=["fp32", "bf16"])
def test_reduction_every_mode(mode: hg.ReductionMode, io: hg.DataType) -> None:
    check(*cases.build_reduction(mode, io), io)


@pytest.mark.parametrize("kind", ["fprop", "dgrad", "wgrad"])
@pytest.mark.parametrize("spatial", [1, 2, 3])
def test_convolution_geometry(kind: str, spatial: int) -> None:
    check(*cases.build_conv(kind, spatial, hg.DataType.FLOAT), hg.DataType.FLOAT)


@pytest.mark.parametrize("kind", ["fprop", "dgrad", "wgrad"])
@pytest.mark.parametrize("io", IO, ids=IO_IDS)
def test_convolution_groups_and_flipped_kernel(kind: str, io: hg.DataType) -> None:
    g, inputs, refs = cases.build_conv(kind, 2, io, groups=2, mode=hg.ConvolutionMode.CONVOLUTION)
    check(g, inputs, refs, io)


@pytest.mark.parametrize("kind", ["training", "inference", "variance", "backward"])
@pytest.mark.parametrize("io", IO, ids=IO_IDS)
def test_batchnorm(kind: str, io: hg.DataType) -> None:
    check(*cases.build_batchnorm(kind, io), io)


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("io", IO, ids=IO_IDS)
def test_layernorm(io: hg.DataType, training: bool) -> None:
    check(*cases.build_layernorm(io, training), io)


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("io", IO, ids=IO_IDS)
def test_rmsnorm(io: hg.DataType, training: bool) -> None:
    check(*cases.build_rmsnorm(io, training, bias=training), io)


@pytest.mark.parametrize("spatial", [1, 2, 3])
@pytest.mark.parametrize("padding", cases.PADDING_MODES, ids=lambda p: p.name)
@pytest.mark.parametrize("mode", cases.RESAMPLE_MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("kind", ["fwd", "bwd"])
def test_resample_against_torch_pooling(kind: str, mode: hg.ResampleMode,
                                        padding: hg.PaddingMode, spatial: int) -> None:  # fmt: skip
    """Every pooling (and its gradient) against F.max_pool/avg_pool on an explicitly padded
    float64 input and autograd; MAXPOOL's INDEX exactly."""
    check(*cases.build_resample(kind, mode, padding, spatial, hg.DataType.FLOAT),
          hg.DataType.FLOAT)  # fmt: skip


@pytest.mark.parametrize("io", IO, ids=IO_IDS)
@pytest.mark.parametrize("mode", cases.RESAMPLE_MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("kind", ["fwd", "bwd"])
def test_resample_in_every_type_channels_last(kind: str, mode: hg.ResampleMode,
                                              io: hg.DataType) -> None:  # fmt: skip
    pad = hg.PaddingMode
    padding = pad.ZERO_PAD if mode == hg.ResampleMode.MAXPOOL else pad.NEG_INF_PAD
    check(*cases.build_resample(kind, mode, padding, 2, io, channels_last=True), io)


@pytest.mark.parametrize("compute", [hg.DataType.HALF, hg.DataType.BFLOAT16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("mode", cases.RESAMPLE_MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("kind", ["fwd", "bwd"])
def test_resample_computes_in_a_16_bit_compute_type(kind: str, mode: hg.ResampleMode,
                                                    compute: hg.DataType) -> None:  # fmt: skip
    """A 16-bit compute type (which the NumPy reference does not take): the math runs in it
    (results of that type) and agrees with float64 torch to its rounding; a MAXPOOL window of
    padding alone gives that type's lowest finite value."""
    g, inputs, refs = cases.build_resample(kind, mode, hg.PaddingMode.ZERO_PAD, 2, compute)
    (node,) = g.nodes
    node.attributes.set_compute_data_type(compute)
    dtype = cases.TORCH_TYPES[compute]
    args = {s: inputs[t].to(dtype if t.data_type == compute else torch.int32)
            for s, t in node.attributes.tensors_by_slot().items() if t in inputs}  # fmt: skip
    got = lower_node(node, args)
    for slot, t in node.attributes.tensors_by_slot().items():
        if t in refs:
            if slot != "INDEX":
                assert got[slot].dtype == dtype, slot
            err = cases.max_rel_error(got[slot], refs[t])
            assert err <= cases.tolerance(compute), f"{slot}: relative error {err:.2e}"
    if kind == "fwd" and mode == hg.ResampleMode.MAXPOOL:
        f, h = hg.DataType.FLOAT, compute
        g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=h)
        y = g.resample_fwd(g.tensor(name="x", dim=[1, 1, 2]), resample_mode=mode, window=[1],
                           padding_mode=hg.PaddingMode.NEG_INF_PAD, stride=[1],
                           pre_padding=[1], post_padding=[0])  # fmt: skip
        y.set_output(True)
        g.validate()
        out = lower_node(g.nodes[0], {"X": torch.ones(1, 1, 2)})
        assert out["Y"].tolist() == [[[torch.finfo(dtype).min, 1.0, 1.0]]]


def test_virtual_intermediates_are_rounded_to_their_declared_type() -> None:
    """exp(x) through a virtual bf16 intermediate, then log: the bf16 rounding shows."""
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, intermediate_data_type=hg.DataType.BFLOAT16,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    x = g.tensor(name="x", dim=[256])
    y = g.pointwise(g.pointwise(x, mode=hg.PointwiseMode.EXP), mode=hg.PointwiseMode.LOG)
    y.set_data_type(hg.DataType.FLOAT).set_output(True)
    g.validate()
    from hipdnn_graph_torch_rocm.family_program import FamilyProgram

    g.build_operation_graph()
    xv = torch.linspace(-2, 2, 256)
    (got,) = FamilyProgram(g).results({x.get_uid(): xv})
    want = torch.log(torch.exp(xv).to(torch.bfloat16).float())
    assert torch.allclose(got, want, rtol=1e-6, atol=1e-6)
    assert (got - xv).abs().max() > 1e-3  # the bf16 rounding shows


@pytest.mark.usefixtures("only_torch")
@pytest.mark.parametrize("family", ["matmul", "conv", "layernorm", "batchnorm"])
def test_eager_engine_through_execute_with_numpy_and_torch(family: str) -> None:
    build = {
        "matmul": lambda: cases.build_matmul(hg.DataType.FLOAT),
        "conv": lambda: cases.build_conv("fprop", 2, hg.DataType.FLOAT),
        "layernorm": lambda: cases.build_layernorm(hg.DataType.FLOAT, True),
        "batchnorm": lambda: cases.build_batchnorm("training", hg.DataType.FLOAT),
    }[family]
    for as_numpy in (True, False):
        g, inputs, refs = build()
        g.build_operation_graph().create_execution_plans().check_support().build_plans()
        assert g.get_plan_name() == "TORCH_EAGER_ENGINE"
        feed = {t: v.float() for t, v in inputs.items()}
        before = {t: v.clone() for t, v in feed.items()}
        outs = {t: torch.full(t.dim, float("nan")) for t in refs}
        pack = {**feed, **outs}
        if as_numpy:
            pack = {t: v.numpy() for t, v in pack.items()}
        g.execute(pack)
        for t, want in refs.items():
            got = torch.as_tensor(pack[t])
            assert cases.max_rel_error(got, want) < 1e-5, t.name
        for t in feed:
            assert torch.equal(torch.as_tensor(pack[t]), before[t]), f"input {t.name} written"


@pytest.mark.parametrize("mode", [hg.PointwiseMode.ADD, hg.PointwiseMode.GELU_FWD,
                                  hg.PointwiseMode.EXP, hg.PointwiseMode.RELU_FWD,
                                  hg.PointwiseMode.SWISH_FWD])  # fmt: skip
def test_one_kernel_16_bit_modes_round_once_as_the_compute_type_says(
    mode: hg.PointwiseMode,
) -> None:
    """bf16 in and out, FLOAT compute: the uncast kernel gives exactly float32 math rounded
    once to bf16."""
    g, inputs, _ = cases.build_pointwise(mode, hg.DataType.BFLOAT16)
    got = next(iter(lower(g, inputs).values()))
    (node,) = g.nodes
    args = [inputs[t].float() for s, t in node.attributes.tensors_by_slot().items() if t in inputs]
    f = torch.nn.functional
    fp32 = {
        hg.PointwiseMode.ADD: lambda a, b: a + b,
        hg.PointwiseMode.GELU_FWD: f.gelu,
        hg.PointwiseMode.EXP: torch.exp,
        hg.PointwiseMode.RELU_FWD: torch.relu,
        hg.PointwiseMode.SWISH_FWD: f.silu,
    }[mode](*args)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, fp32.to(torch.bfloat16))


# ----- block scale: bit for bit the NumPy reference -----
D = hg.DataType


def _reference(node: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    from hipdnn_graph_numpy_reference.families import reference_family

    return reference_family(node.get_node_type()).run(node, inputs)


def _quantize_case(compute: D, y_type: D, scale_type: D, **kw: Any) -> None:
    """The lowering's Y and SCALE against the reference's, bit for bit, in their types."""
    g, x, _ = cases.build_quantize(compute, y_type, scale_type, **kw)
    (node,) = g.nodes
    assert refusal(node) is None
    xv = cases.numpy_values(x, cases.wide(list(x.dim), seed=int(y_type) * 7 + int(scale_type)))
    want = _reference(node, {"X": xv})
    got = lower_node(node, {"X": cases.as_torch(xv)})
    for slot in ("Y", "SCALE"):
        cases.assert_same_bits(got[slot], want[slot], f"{slot} ({y_type.name}, {scale_type.name})")


@pytest.mark.parametrize("scale_type", cases.QUANTIZE_SCALE, ids=lambda t: t.name)
@pytest.mark.parametrize("y_type", cases.QUANTIZE_Y, ids=lambda t: t.name)
@pytest.mark.parametrize("compute", [D.FLOAT, D.DOUBLE], ids=["fp32", "fp64"])
def test_block_scale_quantize_is_bit_exact(compute: D, y_type: D, scale_type: D) -> None:
    """Every Y and scale type torch holds, both compute types: saturation, round-up scales,
    all-zero blocks, ties (a DOUBLE quotient rounds once to HALF: torch's cast rounded twice)."""
    _quantize_case(compute, y_type, scale_type)


@pytest.mark.parametrize("x_type", [D.HALF, D.BFLOAT16, D.FP8_E4M3, D.INT8, D.INT32],
                         ids=lambda t: t.name)  # fmt: skip
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_block_scale_quantize_x_types_and_axes(x_type: D, axis: int) -> None:
    dims = [(64, 6, 4), (4, 64, 6), (4, 6, 64)][axis]
    _quantize_case(D.FLOAT, D.FP8_E5M2, D.FP8_E8M0, x_type=x_type, axis=axis, dims=dims)


def test_double_quotients_round_once_to_half() -> None:
    """torch's float64-to-float16 cast goes through float32 and can round twice; NumPy's (the
    reference's) rounds once. 1 + 2^-11 + 2^-40 is above the tie between two halves: once, it
    rounds up; through float32 (1 + 2^-11, the tie) it rounds to even, down."""
    from hipdnn_graph_torch_rocm.families.block_scale import _to_storage

    q = torch.tensor([1 + 2**-11 + 2**-40, -(1 + 2**-11 + 2**-40), 1 + 2**-11], dtype=torch.float64)
    assert q.to(torch.float16).tolist() == [1.0, -1.0, 1.0]  # torch: twice
    got = _to_storage(torch, q, torch.float16, -65504.0, 65504.0)
    assert got.tolist() == [1 + 2**-10, -(1 + 2**-10), 1.0]


@pytest.mark.parametrize("scale_type", cases.QUANTIZE_SCALE, ids=lambda t: t.name)
@pytest.mark.parametrize("x_type", [*cases.QUANTIZE_Y, D.DOUBLE], ids=lambda t: t.name)
@pytest.mark.parametrize("compute", [D.FLOAT, D.DOUBLE], ids=["fp32", "fp64"])
def test_block_scale_dequantize_is_bit_exact(compute: D, x_type: D, scale_type: D) -> None:
    for negative, block in ((False, (32,)), (True, (2, 3, 32))):
        g, (x, s), _ = cases.build_dequantize(compute, x_type, scale_type, negative=negative,
                                              block=block)  # fmt: skip
        (node,) = g.nodes
        assert refusal(node) is None
        xv = cases.numpy_values(x, cases.wide(list(x.dim), seed=3))
        raw = cases.wide(list(s.dim), seed=4)
        sv = cases.numpy_values(s, (raw.round() % 9) if negative else abs(raw) + 2.0**-20)
        want = _reference(node, {"X": xv, "SCALE": sv})
        got = lower_node(node, {"X": cases.as_torch(xv), "SCALE": cases.as_torch(sv)})
        cases.assert_same_bits(got["Y"], want["Y"], f"Y ({x_type.name}, negative={negative})")


def _reason(node: Any) -> str | None:
    return refusal(node)


@pytest.mark.parametrize("y_type", cases.NO_TORCH, ids=lambda t: t.name)
def test_block_scale_types_torch_lacks_are_refused_by_name(y_type: D) -> None:
    g, _, _ = cases.build_quantize(D.FLOAT, y_type, D.FP8_E8M0)
    packed = (" (its float4_e2m1fn_x2 packs two elements per byte)"
              if y_type == D.FP4_E2M1 else "")  # fmt: skip
    assert _reason(g.nodes[0]) == (
        f"node 'q': tensor 'q::Y' (slot Y) is {y_type.name}, which torch has no dtype for{packed}"
    )
    dg, _, _ = cases.build_dequantize(D.FLOAT, y_type, D.FP8_E8M0)
    assert _reason(dg.nodes[0]) == (
        f"node 'dq': tensor 'x' (slot X) is {y_type.name}, which torch has no dtype for{packed}"
    )


def test_block_scale_refusals_are_the_references() -> None:
    g, _, _ = cases.build_quantize(D.HALF, D.FP8_E4M3, D.FP8_E8M0)
    assert _reason(g.nodes[0]) == (
        "node 'q': compute data type HALF: hipDNN's block-scale references compute in FLOAT or "
        "DOUBLE only"
    )
    g, _, _ = cases.build_quantize(D.FLOAT, D.FP8_E4M3, D.FP8_E4M3)
    assert _reason(g.nodes[0]) == (
        "node 'q': SCALE data type FP8_E4M3: hipDNN's quantize reference takes BFLOAT16, "
        "FLOAT, FP8_E8M0, HALF"
    )


def test_a_non_finite_x_is_refused_as_the_reference_refuses_it() -> None:
    g, x, _ = cases.build_quantize(D.FLOAT, D.FP8_E4M3, D.FP8_E8M0)
    (node,) = g.nodes
    xv = torch.zeros(x.dim)
    xv[1, 2, 3] = float("inf")
    with pytest.raises(hg.HipdnnError) as err:
        lower_node(node, {"X": xv})
    assert err.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED
    assert str(err.value).endswith(
        "BlockScaleQuantizeNode 'q': the torch lowering does not run it: X holds NaN or ±inf, "
        "which hipDNN's quantize reference refuses"
    )


def test_custom_ops_are_refused_with_the_references_reason() -> None:
    node = hg.CustomOpNode(hg.CustomOpAttributes().set_name("op").set_custom_op_id("ex.rope"))
    assert _reason(node) == (
        "node 'op': custom op 'ex.rope' is plugin-defined: hipDNN defines no math for it"
    )


def _conv_node(mode: Any = None, pre: list[int] | None = None, y_type: Any = None) -> Any:
    g = hg.Graph(io_data_type=hg.DataType.BFLOAT16, intermediate_data_type=hg.DataType.FLOAT,
                 compute_data_type=hg.DataType.FLOAT)  # fmt: skip
    x = g.tensor(name="x", dim=[1, 4, 6, 6])
    w = g.tensor(name="w", dim=[8, 4, 3, 3])
    kw: dict[str, Any] = {} if mode is None else {"convolution_mode": mode}
    pre = pre or [1, 1]
    y = g.conv_fprop(x, w, name="conv", pre_padding=pre, post_padding=[1, 1], stride=[1, 1],
                     dilation=[1, 1], **kw)  # fmt: skip
    y.set_output(True).set_dim([1, 8, 5 + pre[0], 5 + pre[1]])  # 6 + pre + 1 - 3 + 1
    if y_type is not None:
        y.set_data_type(y_type)
    g.validate()
    return g.nodes[0]


def test_the_convolution_writer_is_only_made_where_cudnn_can_write_y() -> None:
    """No writer for a flipped kernel, unequal padding or a Y of another type than the product
    (cuDNN's output call would not be F.conv2d's); on CPU tensors the writer copies the
    lowering's result into the caller's buffer."""
    from hipdnn_graph_torch_rocm.families import convolution as conv

    assert conv.prepare_conv_fprop_writer(_conv_node(hg.ConvolutionMode.CONVOLUTION)) is None
    assert conv.prepare_conv_fprop_writer(_conv_node(pre=[0, 1])) is None
    assert conv.prepare_conv_fprop_writer(_conv_node(y_type=hg.DataType.FLOAT)) is None
    node = _conv_node()
    write = conv.prepare_conv_fprop_writer(node)
    assert write is not None
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 4, 6, 6, generator=gen).bfloat16()
    w = torch.randn(8, 4, 3, 3, generator=gen).bfloat16()
    y = torch.full((1, 8, 6, 6), float("nan"), dtype=torch.bfloat16)
    write({"X": x, "W": w}, {"Y": y})
    assert torch.equal(y, conv.prepare_conv_fprop(node)({"X": x, "W": w})["Y"])
