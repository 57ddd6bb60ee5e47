"""The NumPy reference refuses every custom op: its math is plugin-defined, opaque to hipDNN."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph_numpy_reference.families import custom_op as module
from hipdnn_graph_numpy_reference.families.custom_op import custom_op_refusal, run_custom_op


def test_every_custom_op_is_refused_by_name() -> None:
    g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
                 intermediate_data_type=hg.DataType.FLOAT)  # fmt: skip
    x = g.tensor(name="x", dim=[2, 3])
    (y,) = g.custom_op([x], 1, custom_op_id="example.identity", name="ident")
    y.set_dim([2, 3]).set_stride([3, 1]).set_output(True)
    g.validate()
    node = g.nodes[0]
    assert isinstance(node, hg.CustomOpNode)
    with pytest.raises(hg.HipdnnError) as info:
        run_custom_op(node, {"IN_0": np.ones((2, 3))})
    assert info.value.code == hg.ErrorCode.GRAPH_NOT_SUPPORTED
    assert info.value.message == (
        "node 'ident': custom op 'example.identity' is plugin-defined: hipDNN defines no math "
        "for it"
    )
    unnamed = hg.CustomOpNode(hg.CustomOpAttributes())
    assert custom_op_refusal(unnamed) == (
        "custom op '(no custom_op_id)' is plugin-defined: hipDNN defines no math for it"
    )


def test_module_examples() -> None:
    assert doctest.testmod(module).failed == 0
