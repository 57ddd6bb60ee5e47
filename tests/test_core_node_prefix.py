"""Each node class's default-name prefix (``<prefix>_<index>``): the class name without
``Node`` unless the class names another, as hipDNN names its node kinds."""

from __future__ import annotations

from typing import Any

import pytest

import hipdnn_graph as hg
from hipdnn_graph.nodes import Node

#: hipDNN's default-name prefix of every node kind
PREFIXES = {
    hg.BatchnormNode: "Batchnorm",
    hg.BatchnormBackwardNode: "BatchnormBackward",
    hg.BatchnormInferenceNode: "BatchnormInference",
    hg.BatchnormInferenceVarianceNode: "BatchnormInferenceVarianceExt",
    hg.BlockScaleDequantizeNode: "BlockScaleDequantize",
    hg.BlockScaleQuantizeNode: "BlockScaleQuantize",
    hg.ConvolutionDgradNode: "ConvolutionDgrad",
    hg.ConvolutionFpropNode: "ConvolutionFprop",
    hg.ConvolutionWgradNode: "ConvolutionWgrad",
    hg.CustomOpNode: "CustomOp",
    hg.LayerNormNode: "Layernorm",
    hg.LayernormBackwardNode: "LayernormBackward",
    hg.MatmulNode: "Matmul",
    hg.MoeGroupedMatmulNode: "MoeGroupedMatmul",
    hg.MoeGroupedMatmulBwdNode: "MoeGroupedMatmulBwd",
    hg.PointwiseNode: "Pointwise",
    hg.ReductionNode: "Reduction",
    hg.ResampleBwdNode: "ResampleBwd",
    hg.ResampleFwdNode: "ResampleFwd",
    hg.RMSNormNode: "RMSNorm",
    hg.RMSNormBackwardNode: "RMSNormBackward",
    hg.SdpaBwdNode: "SdpaBwd",
    hg.SdpaFwdNode: "SdpaFwd",
}


@pytest.mark.parametrize("node", PREFIXES, ids=lambda n: n.__name__)
def test_prefix(node: type[Node[Any]]) -> None:
    assert node.name_prefix == PREFIXES[node]


def test_a_new_node_class_takes_its_name() -> None:
    class ExampleScaleNode(Node):  # type: ignore[type-arg]
        pass

    class Renamed(ExampleScaleNode):
        name_prefix = "Scaled"

    assert ExampleScaleNode.name_prefix == "ExampleScale"
    assert Renamed.name_prefix == "Scaled"
    assert Node.name_prefix == "Node"
