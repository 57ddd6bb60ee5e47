"""The small graphs ``hipdnn-graph backends`` asks engines about: one per node family, and
attention as a forward feeding a backward, a forward alone and a backward alone.

Each family has two probes: its node alone, and its node followed by a ReLU (a graph a fusing
engine takes where it leaves a single node to another engine). Each is a typical, small use of
its family (a 2x2-pooled 4x4 image, a 3x3 convolution, a
layer norm over the last two dims, ...) built in one I/O data type; the other types a family
needs (INT32 offsets and indices, an FP8 quantized output, E8M0 scales) are set explicitly. A
probe that cannot be made in a data type (a family that refuses it) is left out of that type.

Example:
    >>> import hipdnn_graph as hg
    >>> probes = probe_graphs((hg.DataType.FLOAT,))
    >>> list(probes[hg.DataType.FLOAT])[:5]
    ['SDPA fwd+bwd', 'SDPA fwd', 'SDPA bwd', 'CONVOLUTION_FPROP', 'CONVOLUTION_FPROP+POINTWISE']
    >>> [n.get_node_type().name for n in probes[hg.DataType.FLOAT]["MATMUL+POINTWISE"].nodes]
    ['MATMUL', 'POINTWISE']
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from ..errors import HipdnnError
from ..graph import Graph
from ..tensor import TensorAttributes
from ..types import (
    DataType,
    NodeType,
    NormFwdPhase,
    PaddingMode,
    PointwiseMode,
    ReductionMode,
    ResampleMode,
)

__all__ = ["SDPA_PROBES", "chained", "probe_families", "probe_graphs"]

#: the attention probes, by the words ``backends`` prints for them
SDPA_PROBES = ("SDPA fwd+bwd", "SDPA fwd", "SDPA bwd")

_F32, _I32 = DataType.FLOAT, DataType.INT32
_NCHW, _CHANNEL = [1, 4, 4, 4], [1, 4, 1, 1]


def _outputs(*tensors: TensorAttributes | None) -> None:
    for t in tensors:
        if t is not None:
            t.set_output(True)


#: a family probe's outputs, the first one the one a chained probe feeds to a ReLU
_Results = list[TensorAttributes]


def _results(*tensors: TensorAttributes | None) -> _Results:
    return [t for t in tensors if t is not None]


def _sdpa(g: Graph, kind: str) -> None:
    q = g.tensor(name="Q", dim=[1, 2, 64, 64])
    k, v = g.tensor_like(q, "K"), g.tensor_like(q, "V")
    stats: TensorAttributes | None
    if kind == "SDPA bwd":  # O and Stats are inputs
        o = g.tensor_like(q, "O")
        stats = g.tensor(name="Stats", dim=[1, 2, 64, 1], data_type=_F32)
    else:
        o, stats = g.sdpa(q, k, v, name="fwd", generate_stats=kind == "SDPA fwd+bwd")
        _outputs(o)
    if kind != "SDPA fwd":
        assert stats is not None
        _outputs(*g.sdpa_backward(q, k, v, o, g.tensor_like(q, "dO"), stats, name="bwd"))


def _eps(g: Graph) -> TensorAttributes:
    return g.tensor(name="eps", dim=[1]).set_value(1e-5)


def _channel(g: Graph, *names: str) -> list[TensorAttributes]:
    return [g.tensor(name=n, dim=_CHANNEL) for n in names]


def _conv_fprop(g: Graph) -> _Results:
    x, w = g.tensor(name="x", dim=_NCHW), g.tensor(name="w", dim=[4, 4, 3, 3])
    return _results(g.conv_fprop(x, w, pre_padding=[1, 1], post_padding=[1, 1], stride=[1, 1],
                          dilation=[1, 1]))  # fmt: skip


def _conv_dgrad(g: Graph) -> _Results:
    dy, w = g.tensor(name="dy", dim=_NCHW), g.tensor(name="w", dim=[4, 4, 3, 3])
    dx = g.conv_dgrad(dy, w, pre_padding=[1, 1], post_padding=[1, 1], stride=[1, 1],
                      dilation=[1, 1])  # fmt: skip
    return _results(dx.set_dim(_NCHW))


def _conv_wgrad(g: Graph) -> _Results:
    dy, x = g.tensor(name="dy", dim=_NCHW), g.tensor(name="x", dim=_NCHW)
    dw = g.conv_wgrad(dy, x, pre_padding=[1, 1], post_padding=[1, 1], stride=[1, 1],
                      dilation=[1, 1])  # fmt: skip
    return _results(dw.set_dim([4, 4, 3, 3]))


def _batchnorm(g: Graph) -> _Results:
    scale, bias = _channel(g, "scale", "bias")
    return _results(*g.batchnorm(g.tensor(name="x", dim=_NCHW), scale, bias, epsilon=_eps(g)))


def _batchnorm_inference(g: Graph) -> _Results:
    x = g.tensor(name="x", dim=_NCHW)
    return _results(g.batchnorm_inference(x, *_channel(g, "mean", "inv_variance", "scale", "bias")))


def _batchnorm_inference_variance(g: Graph) -> _Results:
    x = g.tensor(name="x", dim=_NCHW)
    mean, variance, scale, bias = _channel(g, "mean", "variance", "scale", "bias")
    return _results(g.batchnorm_inference_variance_ext(x, mean, variance, scale, bias, _eps(g)))


def _batchnorm_backward(g: Graph) -> _Results:
    dy, x = g.tensor(name="dy", dim=_NCHW), g.tensor(name="x", dim=_NCHW)
    scale, mean, inv_variance = _channel(g, "scale", "mean", "inv_variance")
    return _results(*g.batchnorm_backward(dy, x, scale, mean=mean, inv_variance=inv_variance))


def _pointwise(g: Graph) -> _Results:
    a, b = g.tensor(name="a", dim=[2, 8]), g.tensor(name="b", dim=[1, 8])
    return _results(g.pointwise(a, b, mode=PointwiseMode.ADD))


def _matmul(g: Graph) -> _Results:
    a, b = g.tensor(name="a", dim=[1, 8, 16]), g.tensor(name="b", dim=[1, 16, 4])
    return _results(g.matmul(a, b))


def _layernorm(g: Graph) -> _Results:
    x = g.tensor(name="x", dim=[2, 6, 4])
    scale, bias = g.tensor(name="scale", dim=[1, 6, 4]), g.tensor(name="bias", dim=[1, 6, 4])
    return _results(
        *g.layernorm(x, scale, bias, epsilon=_eps(g), forward_phase=NormFwdPhase.TRAINING)
    )


def _layernorm_backward(g: Graph) -> _Results:
    dy, x = g.tensor(name="dy", dim=[2, 6, 4]), g.tensor(name="x", dim=[2, 6, 4])
    return _results(*g.layernorm_backward(dy, x, g.tensor(name="scale", dim=[1, 6, 4])))


def _rmsnorm(g: Graph) -> _Results:
    x, scale = g.tensor(name="x", dim=[2, 6, 4]), g.tensor(name="scale", dim=[1, 1, 4])
    return _results(*g.rmsnorm(x, scale, epsilon=_eps(g), forward_phase=NormFwdPhase.TRAINING))


def _rmsnorm_backward(g: Graph) -> _Results:
    dy, x = g.tensor(name="dy", dim=[2, 6, 4]), g.tensor(name="x", dim=[2, 6, 4])
    scale = g.tensor(name="scale", dim=[1, 1, 4])
    inv_rms = g.tensor(name="inv_rms", dim=[2, 6, 1], data_type=_F32)
    return _results(*g.rmsnorm_backward(dy, x, scale, inv_rms))


def _block_scale_quantize(g: Graph) -> _Results:
    y, scale = g.block_scale_quantize(g.tensor(name="x", dim=[2, 64]), block_size=32, axis=1)
    y.set_data_type(DataType.FP8_E4M3)
    scale.set_data_type(DataType.FP8_E8M0)
    return _results(y, scale)


def _block_scale_dequantize(g: Graph) -> _Results:
    x = g.tensor(name="x", dim=[2, 64], data_type=DataType.FP8_E4M3)
    scale = g.tensor(name="scale", dim=[2, 2], data_type=DataType.FP8_E8M0)
    return _results(g.block_scale_dequantize(x, scale, block_size=[32]))


def _custom_op(g: Graph) -> _Results:
    (y,) = g.custom_op([g.tensor(name="x", dim=[4, 8])], 1, custom_op_id="probe.identity")
    return _results(y.set_dim([4, 8]).set_stride([8, 1]))


def _reduction(g: Graph) -> _Results:
    x = g.tensor(name="x", dim=[2, 8])
    return _results(g.reduction(x, mode=ReductionMode.ADD).set_dim([2, 1]).set_stride([1, 1]))


def _resample_fwd(g: Graph) -> _Results:
    y, _ = g.resample(g.tensor(name="x", dim=_NCHW),
                      resample_mode=ResampleMode.AVGPOOL_INCLUDE_PADDING,
                      padding_mode=PaddingMode.ZERO_PAD, pre_padding=[0, 0], post_padding=[0, 0],
                      stride=[2, 2], window=[2, 2])  # fmt: skip
    return _results(y)


def _resample_bwd(g: Graph) -> _Results:
    dx = g.resample_bwd(g.tensor(name="dy", dim=[1, 4, 2, 2]),
                        resample_mode=ResampleMode.AVGPOOL_INCLUDE_PADDING,
                        padding_mode=PaddingMode.ZERO_PAD, pre_padding=[0, 0],
                        post_padding=[0, 0], stride=[2, 2], window=[2, 2])  # fmt: skip
    return _results(dx)


def _moe(g: Graph) -> _Results:
    token, weight = g.tensor(name="token", dim=[1, 8, 16]), g.tensor(name="w", dim=[2, 16, 32])
    offsets = g.tensor(name="offsets", dim=[2, 1, 1], data_type=_I32)
    return _results(g.moe_grouped_matmul(token, weight, offsets, None, None))


def _moe_bwd(g: Graph) -> _Results:
    dout, token = g.tensor(name="dout", dim=[1, 8, 32]), g.tensor(name="token", dim=[1, 8, 16])
    offsets = g.tensor(name="offsets", dim=[2, 1, 1], data_type=_I32)
    return _results(g.moe_grouped_matmul_bwd(dout, token, offsets).set_dim([2, 16, 32]))


#: one probe per family other than attention, in :class:`NodeType` order
_FAMILY_PROBES: dict[NodeType, Callable[[Graph], _Results]] = {
    NodeType.CONVOLUTION_FPROP: _conv_fprop,
    NodeType.CONVOLUTION_DGRAD: _conv_dgrad,
    NodeType.CONVOLUTION_WGRAD: _conv_wgrad,
    NodeType.BATCHNORM: _batchnorm,
    NodeType.BATCHNORM_INFERENCE: _batchnorm_inference,
    NodeType.BATCHNORM_BACKWARD: _batchnorm_backward,
    NodeType.BATCHNORM_INFERENCE_VARIANCE_EXT: _batchnorm_inference_variance,
    NodeType.POINTWISE: _pointwise,
    NodeType.MATMUL: _matmul,
    NodeType.LAYER_NORM: _layernorm,
    NodeType.RMS_NORM: _rmsnorm,
    NodeType.BLOCK_SCALE_QUANTIZE: _block_scale_quantize,
    NodeType.BLOCK_SCALE_DEQUANTIZE: _block_scale_dequantize,
    NodeType.CUSTOM_OP: _custom_op,
    NodeType.REDUCTION: _reduction,
    NodeType.RESAMPLE_FWD: _resample_fwd,
    NodeType.RMS_NORM_BACKWARD: _rmsnorm_backward,
    NodeType.LAYERNORM_BACKWARD: _layernorm_backward,
    NodeType.MOE_GROUPED_MATMUL: _moe,
    NodeType.MOE_GROUPED_MATMUL_BWD: _moe_bwd,
    NodeType.RESAMPLE_BWD: _resample_bwd,
}


def _alone(fill: Callable[[Graph], _Results]) -> Callable[[Graph], None]:
    """The probe of a family: its node alone, every output a graph output."""
    return lambda g: _outputs(*fill(g))


def _chained(fill: Callable[[Graph], _Results]) -> Callable[[Graph], None]:
    """The probe of a family followed by a ReLU on its first output (what a fusing engine
    needs: it leaves a single node to the eager engine)."""

    def chain(g: Graph) -> None:
        first, *rest = fill(g)
        _outputs(g.pointwise(first, mode=PointwiseMode.RELU_FWD, name="relu"), *rest)

    return chain


def chained(family: str) -> str:
    """The name of ``family``'s chained probe: ``"MATMUL+POINTWISE"``."""
    return f"{family}+POINTWISE"


def _built(name: str, io: DataType, fill: Callable[[Graph], None]) -> Graph | None:
    label = name.lower().replace(" ", "_").replace("+", "_")
    g = Graph(name=f"probe_{io.name.lower()}_{label}", io_data_type=io,
              intermediate_data_type=_F32, compute_data_type=_F32)  # fmt: skip
    try:
        fill(g)
        g.build_operation_graph()
    except HipdnnError:  # the family does not take this data type
        return None
    return g


def probe_graphs(types: Iterable[DataType]) -> dict[DataType, dict[str, Graph]]:
    """The probe graphs in each of ``types``, by type then by what they probe: the
    :data:`SDPA_PROBES`, the name of every other family (``"POINTWISE"``, ...) and its
    :func:`chained` name, each graph lowered (``build_operation_graph()``); a probe its family
    refuses in a type is absent from that type."""
    probes: dict[DataType, dict[str, Graph]] = {}
    for io in types:
        built: dict[str, Graph | None] = {}
        for what in SDPA_PROBES:
            built[what] = _built(what, io, functools.partial(_sdpa, kind=what))
        for kind, fill in _FAMILY_PROBES.items():
            built[kind.name] = _built(kind.name, io, _alone(fill))
            built[chained(kind.name)] = _built(chained(kind.name), io, _chained(fill))
        probes[io] = {k: g for k, g in built.items() if g is not None}
    return probes


def probe_families() -> list[str]:
    """The names of the families that have probes of their own (all but attention's two), in
    :class:`NodeType` order."""
    return [kind.name for kind in _FAMILY_PROBES]
