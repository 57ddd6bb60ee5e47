"""ResampleFwdNode and ResampleBwdNode: hipDNN's rules, messages and inference (ports of hipDNN's
TestResampleFwdNode.cpp, TestResampleBwdNode.cpp and TestGraphResampleBwd.cpp, plus the exact
messages and codes of ResampleFwdNode.hpp and ResampleBwdNode.hpp), the packers' mode refusal,
and the graph builders ``resample``, ``resample_fwd`` and ``resample_bwd``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import hipdnn_graph as hg
from hipdnn_graph.descriptors.backend_descriptor import BackendDescriptor

M, P, E, D = hg.ResampleMode, hg.PaddingMode, hg.ErrorCode, hg.DataType


def _error(call: Callable[[], object]) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        call()
    return info.value


def _t(dim: list[int] | None = None, stride: list[int] | None = None, **kw: object):
    t = hg.TensorAttributes(**kw)  # type: ignore[arg-type]
    if dim is not None:
        t.set_dim(dim)
    if stride is not None:
        t.set_stride(stride)
    return t


def _fwd(attrs: hg.ResampleFwdAttributes) -> hg.ResampleFwdNode:
    return hg.ResampleFwdNode(attrs, hg.GraphAttributes())


def _bwd(attrs: hg.ResampleBwdAttributes) -> hg.ResampleBwdNode:
    return hg.ResampleBwdNode(attrs, hg.GraphAttributes())


def _members(a, pre=(1, 1), post=(1, 1), stride=(2, 2), window=(3, 3)):
    return (
        a.set_pre_padding(list(pre))
        .set_post_padding(list(post))
        .set_stride(list(stride))
        .set_window(list(window))
    )


# ----- enums ----------------------------------------------------------------------------------


def test_enums_mirror_hipdnn_frontend_numbers() -> None:
    assert [(m.name, m.value) for m in M] == [
        ("NOT_SET", 0),
        ("MAXPOOL", 1),
        ("AVGPOOL_EXCLUDE_PADDING", 2),
        ("AVGPOOL_INCLUDE_PADDING", 3),
        ("BILINEAR", 4),
        ("NEAREST", 5),
    ]
    assert [(m.name, m.value) for m in P] == [
        ("NOT_SET", 0),
        ("NEG_INF_PAD", 1),
        ("ZERO_PAD", 2),
        ("EDGE_VAL_PAD", 3),
    ]


def test_attribute_setters_refuse_bad_values() -> None:
    a = hg.ResampleFwdAttributes()
    assert _error(lambda: a.set_resample_mode(9)).code == E.INVALID_VALUE
    assert _error(lambda: a.set_padding_mode(True)).code == E.INVALID_VALUE
    assert _error(lambda: a.set_window([2.0, 2])).code == E.INVALID_VALUE
    assert _error(lambda: a.set_generate_index(1)).code == E.INVALID_VALUE
    assert a.get_window() == [] and a.get_resample_mode() == M.NOT_SET
    assert a.get_padding_mode() == P.NOT_SET and a.get_generate_index() is False


# ----- forward: TestResampleFwdNode -----------------------------------------------------------


def test_fwd_properties_keep_set_dims_and_give_index_y_s() -> None:
    a = hg.ResampleFwdAttributes()
    y = _t([1, 2, 3, 4], [5, 6, 7, 8], data_type=D.FLOAT)
    index = _t(name="IndexTensor")
    a.set_x(_t([1, 2, 3, 4], [5, 6, 7, 8], data_type=D.FLOAT)).set_y(y).set_index(index)
    _fwd(a).infer_properties_node()
    assert y.get_dim() == [1, 2, 3, 4] and index.get_dim() == [1, 2, 3, 4]
    assert y.get_stride() == [5, 6, 7, 8] and index.get_stride() == [5, 6, 7, 8]


def test_fwd_pre_validate_passes_with_int32_index() -> None:
    a = hg.ResampleFwdAttributes().set_generate_index(True)
    a.set_x(_t([2, 64, 32, 32], [65536, 1024, 32, 1])).set_y(_t([2, 64, 32, 32]))
    a.set_index(_t(data_type=D.INT32))
    _fwd(a).pre_validate_node()


def test_fwd_missing_tensors_in_order() -> None:
    a = hg.ResampleFwdAttributes()
    err = _error(_fwd(a.copy_for_node()).pre_validate_node)
    assert (err.code, err.message) == (
        E.ATTRIBUTE_NOT_SET,
        "ResampleFwdNode missing input X for pre-validation",
    )
    a.set_x(_t())
    err = _error(_fwd(a.copy_for_node()).pre_validate_node)
    assert (err.code, err.message) == (
        E.ATTRIBUTE_NOT_SET,
        "ResampleFwdNode missing output Y for pre-validation",
    )
    a.set_y(_t())
    _fwd(a).pre_validate_node()


@pytest.mark.parametrize(
    ("generate", "mode", "ok"),
    [(False, M.MAXPOOL, True), (True, M.AVGPOOL_EXCLUDE_PADDING, True), (True, M.MAXPOOL, False)],
)
def test_fwd_index_needed_only_for_maxpool_generating_one(generate, mode, ok) -> None:
    a = hg.ResampleFwdAttributes().set_generate_index(generate).set_resample_mode(mode)
    a.set_x(_t([2, 64, 32, 32], [65536, 1024, 32, 1])).set_y(_t([2, 64, 32, 32]))
    if ok:
        _fwd(a).pre_validate_node()
    else:
        err = _error(_fwd(a).pre_validate_node)
        assert (err.code, err.message) == (
            E.ATTRIBUTE_NOT_SET,
            "ResampleFwdNode missing output Index when index generation requested",
        )


def test_fwd_index_type_must_be_int8_or_int32() -> None:
    for good in (D.INT8, D.INT32):
        a = hg.ResampleFwdAttributes().set_x(_t()).set_y(_t()).set_index(_t(data_type=good))
        _fwd(a).pre_validate_node()
    a = hg.ResampleFwdAttributes().set_x(_t()).set_y(_t()).set_index(_t(data_type=D.FLOAT))
    err = _error(_fwd(a).pre_validate_node)
    assert (err.code, err.message) == (
        E.INVALID_VALUE,
        "ResampleFwdNode output Index type must be Int8 or Int32",
    )


def test_fwd_ranks() -> None:
    a = hg.ResampleFwdAttributes().set_x(_t([2, 32])).set_y(_t([2, 64, 32, 32]))
    err = _error(_fwd(a).pre_validate_node)
    assert (err.code, err.message) == (
        E.INVALID_VALUE,
        "ResampleFwdNode input X must have at least rank 3 (N, C, spatial...)",
    )
    a = hg.ResampleFwdAttributes().set_x(_t([2, 32, 32, 32])).set_y(_t([2, 64]))
    err = _error(_fwd(a).pre_validate_node)
    assert (err.code, err.message) == (
        E.INVALID_VALUE,
        "ResampleFwdNode output Y must have at least rank 3 (N, C, spatial...)",
    )


@pytest.mark.parametrize(
    ("x", "pre", "post", "stride", "window", "expected"),
    [
        ([1, 3, 32], [1], [1], [2], [3], [1, 3, 16]),
        ([1, 3, 32, 32], [1, 1], [1, 1], [2, 2], [3, 3], [1, 3, 16, 16]),
        ([1, 3, 16, 16, 16], [2, 2, 2], [2, 2, 2], [3, 3, 3], [1, 1, 1], [1, 3, 7, 7, 7]),
    ],
)
def test_fwd_infers_y_and_index_dims(x, pre, post, stride, window, expected) -> None:
    y, index = _t(), _t()
    a = hg.ResampleFwdAttributes().set_x(_t(x)).set_y(y).set_index(index)
    _members(a, pre, post, stride, window)
    _fwd(a).infer_properties_node()
    assert y.get_dim() == expected and index.get_dim() == expected


def test_fwd_strides_default_to_channels_last_without_x_strides() -> None:
    y, index = _t([2, 3, 3, 2]), _t()
    a = hg.ResampleFwdAttributes().set_x(_t([2, 3, 7, 5])).set_y(y).set_index(index)
    _fwd(a).infer_properties_node()
    assert y.get_stride() == [18, 1, 6, 3] and index.get_stride() == [18, 1, 6, 3]


def test_fwd_strides_follow_x_order() -> None:
    y, index = _t([1, 3, 16, 16]), _t()
    a = hg.ResampleFwdAttributes().set_x(_t([1, 3, 32, 32], [3072, 1024, 32, 1]))
    a.set_y(y).set_index(index)
    _fwd(a).infer_properties_node()
    assert y.get_stride() == [768, 256, 16, 1] and index.get_stride() == [768, 256, 16, 1]


def test_fwd_missing_tensors_for_inference() -> None:
    err = _error(_fwd(hg.ResampleFwdAttributes().set_y(_t())).infer_properties_node)
    assert (err.code, err.message) == (
        E.ATTRIBUTE_NOT_SET,
        "ResampleFwdNode missing x for setting properties",
    )
    err = _error(_fwd(hg.ResampleFwdAttributes().set_x(_t())).infer_properties_node)
    assert err.message == "ResampleFwdNode missing y for setting properties"


def test_fwd_inference_guards_where_hipdnn_reads_past_or_divides_by_zero() -> None:
    a = hg.ResampleFwdAttributes().set_x(_t([1, 3, 8, 8])).set_y(_t())
    _members(a, pre=[0])
    err = _error(_fwd(a).infer_properties_node)
    assert err.code == E.INVALID_VALUE and "one value per spatial dimension (2)" in err.message
    a = hg.ResampleFwdAttributes().set_x(_t([1, 3, 8, 8])).set_y(_t())
    _members(a, stride=[0, 2])
    err = _error(_fwd(a).infer_properties_node)
    assert err.message == "ResampleFwdNode: stride must be positive to infer Y dimensions"
    a = hg.ResampleFwdAttributes().set_x(_t()).set_y(_t())
    assert _error(_fwd(a).infer_properties_node).code == E.INVALID_VALUE


def test_fwd_node_type() -> None:
    assert _fwd(hg.ResampleFwdAttributes()).get_node_type() == hg.NodeType.RESAMPLE_FWD


# ----- backward: TestResampleBwdNode ----------------------------------------------------------


def _valid_bwd() -> hg.ResampleBwdAttributes:
    a = hg.ResampleBwdAttributes()
    a.set_dy(_t([1, 3, 16, 16], [768, 256, 16, 1])).set_dx(_t([1, 3, 32, 32], [3072, 1024, 32, 1]))
    return _members(a)


def test_bwd_pre_validate_passes() -> None:
    _bwd(_valid_bwd()).pre_validate_node()
    _bwd(_valid_bwd()).infer_properties_node()


def test_bwd_missing_in_order() -> None:
    cases = [
        (lambda a: a.set_dy(None), "ResampleBwdNode missing dy (input) for pre-validation"),
        (
            lambda a: a.set_resample_mode(M.MAXPOOL),
            "ResampleBwdNode missing Index input for MAXPOOL pre-validation",
        ),
        (lambda a: a.set_dx(None), "ResampleBwdNode missing dx (output) for pre-validation"),
        (
            lambda a: a.get_dy().set_dim([]),
            "ResampleBwdNode missing dy dimensions for pre-validation",
        ),
        (lambda a: a.set_pre_padding([]), "ResampleBwdNode missing pre_padding for pre-validation"),
        (
            lambda a: a.set_post_padding([]),
            "ResampleBwdNode missing post_padding for pre-validation",
        ),
        (lambda a: a.set_stride([]), "ResampleBwdNode missing stride for pre-validation"),
        (lambda a: a.set_window([]), "ResampleBwdNode missing window for pre-validation"),
    ]
    for change, message in cases:
        a = _valid_bwd()
        change(a)
        err = _error(_bwd(a).pre_validate_node)
        assert (err.code, err.message) == (E.ATTRIBUTE_NOT_SET, message)


def test_bwd_missing_members_all_at_once() -> None:
    a = hg.ResampleBwdAttributes().set_dy(_t([1, 3, 16, 16])).set_dx(_t([1, 3, 32, 32]))
    assert _error(_bwd(a).pre_validate_node).code == E.ATTRIBUTE_NOT_SET


def test_bwd_ranks_and_index() -> None:
    a = _members(hg.ResampleBwdAttributes().set_dy(_t([1, 3])).set_dx(_t()))
    err = _error(_bwd(a).pre_validate_node)
    assert (err.code, err.message) == (
        E.INVALID_VALUE,
        "ResampleBwdNode input DY must have at least rank 3 (N, C, spatial...)",
    )
    a = _valid_bwd().set_dx(_t([1, 3]))
    assert _error(_bwd(a).pre_validate_node).message == (
        "ResampleBwdNode output DX must have at least rank 3 (N, C, spatial...)"
    )
    a = _valid_bwd().set_index(_t([1, 3], data_type=D.INT32))
    assert _error(_bwd(a).pre_validate_node).message == (
        "ResampleBwdNode input Index must have at least rank 3 (N, C, spatial...)"
    )
    a = _valid_bwd().set_index(_t(data_type=D.HALF))
    err = _error(_bwd(a).pre_validate_node)
    assert (err.code, err.message) == (
        E.INVALID_VALUE,
        "ResampleBwdNode input Index type must be Int8 or Int32",
    )
    _bwd(
        _valid_bwd().set_resample_mode(M.MAXPOOL).set_index(_t(data_type=D.INT8))
    ).pre_validate_node()


def test_bwd_infers_dx_and_index() -> None:
    dx, index = _t(), _t()
    a = _members(hg.ResampleBwdAttributes().set_dy(_t([1, 3, 16, 16], [768, 1, 48, 3])))
    a.set_dx(dx).set_index(index)
    _bwd(a).infer_properties_node()
    assert dx.get_dim() == [1, 3, 31, 31]
    assert dx.get_stride() == [2883, 1, 93, 3]
    assert index.get_dim() == [1, 3, 16, 16] and index.get_stride() == [768, 1, 48, 3]


def test_bwd_stride_inference_messages() -> None:
    a = _members(hg.ResampleBwdAttributes().set_dy(_t([1, 3, 16, 16])).set_dx(_t()))
    err = _error(_bwd(a).infer_properties_node)
    assert (err.code, err.message) == (
        E.ATTRIBUTE_NOT_SET,
        "ResampleBwdNode: Cannot infer output strides - missing input strides",
    )
    a = hg.ResampleBwdAttributes().set_dy(_t([1, 3, 16, 16], [768, 256, 16, 1]))
    a.set_dx(_t([1, 3, 32]))
    err = _error(_bwd(a).infer_properties_node)
    assert (err.code, err.message) == (
        E.ATTRIBUTE_NOT_SET,
        "ResampleBwdNode: Stride dimension mismatch between input and output tensors",
    )
    err = _error(_bwd(hg.ResampleBwdAttributes().set_dx(_t())).infer_properties_node)
    assert err.message == "ResampleBwdNode missing dy for setting properties"
    err = _error(_bwd(hg.ResampleBwdAttributes().set_dy(_t())).infer_properties_node)
    assert err.message == "ResampleBwdNode missing dx for setting properties"


def test_bwd_node_type() -> None:
    assert _bwd(hg.ResampleBwdAttributes()).get_node_type() == hg.NodeType.RESAMPLE_BWD


# ----- packing: hipDNN's packers refuse modes with no backend value -----------------------------


@pytest.mark.parametrize(
    ("mode", "padding", "message"),
    [
        (M.BILINEAR, P.ZERO_PAD, "Unsupported resample mode"),
        (M.NEAREST, P.ZERO_PAD, "Unsupported resample mode"),
        (M.NOT_SET, P.ZERO_PAD, "Unsupported resample mode"),
        (M.AVGPOOL_INCLUDE_PADDING, P.EDGE_VAL_PAD, "Unsupported padding mode"),
        (M.AVGPOOL_INCLUDE_PADDING, P.NOT_SET, "Unsupported padding mode"),
    ],
)
def test_packers_refuse_unmapped_modes(mode, padding, message) -> None:
    for node in (
        _fwd(hg.ResampleFwdAttributes().set_x(_t()).set_y(_t())),
        _bwd(hg.ResampleBwdAttributes().set_dy(_t()).set_dx(_t())),
    ):
        node.attributes.set_resample_mode(mode).set_padding_mode(padding)
        ops: list[BackendDescriptor] = []
        err = _error(lambda n=node, o=ops: n.create_operation({}, o))
        assert (err.code, err.message) == (E.INVALID_VALUE, message)
        assert ops == []


# ----- builders (hipDNN's Graph) ----------------------------------------------------------------


def _graph() -> hg.Graph:
    return hg.Graph(io_data_type=D.FLOAT, compute_data_type=D.FLOAT, intermediate_data_type=D.FLOAT)


def _fwd_attrs() -> hg.ResampleFwdAttributes:
    a = hg.ResampleFwdAttributes().set_resample_mode(M.MAXPOOL).set_padding_mode(P.ZERO_PAD)
    return _members(a, (0, 0), (0, 0), (2, 2), (2, 2))


def test_resample_returns_y_and_no_index_unless_generated() -> None:
    g = _graph()
    x = g.tensor(dim=[1, 3, 4, 4], stride=[48, 16, 4, 1])
    attrs = _fwd_attrs()
    y, index = g.resample(x, attrs)
    assert (
        index is None and y.get_name() == "ResampleFwd_0::Y" and x.get_name() == "ResampleFwd_0::X"
    )
    assert attrs.get_x() is None  # the caller's attributes are copied
    y2, index2 = g.resample(y, attrs.set_generate_index(True))
    assert index2 is not None and index2.get_name() == "ResampleFwd_1::Index"
    assert index2.get_data_type() == D.INT32
    g.validate()
    assert y2.get_dim() == [1, 3, 1, 1] and index2.get_dim() == [1, 3, 1, 1]


def test_resample_fwd_clears_generate_index() -> None:
    g = _graph()
    x = g.tensor(name="x", dim=[1, 3, 4, 4], stride=[48, 16, 4, 1])
    y = g.resample_fwd(x, _fwd_attrs().set_generate_index(True))
    node = g._nodes[-1]
    assert node.attributes.get_generate_index() is False and node.attributes.get_index() is None
    g.validate()
    assert y.get_dim() == [1, 3, 2, 2]


def test_resample_bwd_builds_and_validates() -> None:
    """TestGraphResampleBwd.BuildGraph, with the newest node's MAXPOOL INDEX rule."""
    g = _graph()
    dy = g.tensor(dim=[1, 3, 16, 16], stride=[768, 256, 16, 1])
    attrs = _members(hg.ResampleBwdAttributes().set_name("ResampleBwdNode"))
    attrs.set_resample_mode(M.AVGPOOL_EXCLUDE_PADDING).set_padding_mode(P.ZERO_PAD)
    dx = g.resample_bwd(dy, attrs)
    assert dx.get_name() == "ResampleBwdNode::DX" and dx.get_is_virtual()
    g.validate()
    g2 = _graph()
    dy2 = g2.tensor(dim=[1, 3, 16, 16], stride=[768, 256, 16, 1])
    index = g2.tensor(dim=[1, 3, 16, 16], data_type=D.INT32)
    dx2 = g2.resample_bwd(dy2, attrs.set_resample_mode(M.MAXPOOL), index=index)
    assert index.get_name() == "ResampleBwdNode::INDEX"
    dx2.set_output(True)
    g2.validate()
    assert dx2.get_dim() == [1, 3, 31, 31]


def test_builders_refuse_bad_arguments() -> None:
    g = _graph()
    x = g.tensor(name="x", dim=[1, 3, 4, 4])
    assert _error(lambda: g.resample([1], _fwd_attrs())).code == E.INVALID_VALUE
    assert _error(lambda: g.resample_fwd(x, hg.ResampleBwdAttributes())).code == E.INVALID_VALUE
    assert _error(lambda: g.resample_bwd(x, hg.ResampleBwdAttributes(), index=3)).code == (
        E.INVALID_VALUE
    )
    assert _error(lambda: g.resample(x, _fwd_attrs(), bogus=1)).code == E.INVALID_VALUE
    assert g._nodes == []
