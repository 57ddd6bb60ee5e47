"""The family of docs/adding-a-family.md (``examples/clamp_family``), built, validated, run on the
NumPy reference and the torch engine, carried on hipDNN's wire as a custom op; and the
mechanism it uses (issue 39, item 5): a family that is not hipDNN's needs its four modules,
its docs page and its tests, and nothing else.
"""

from __future__ import annotations

import doctest
import importlib
import json
import os
import subprocess
import sys
from enum import IntEnum
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hipdnn_graph as hg
from hipdnn_graph.attributes import NodeAttributes
from hipdnn_graph.descriptors.node_spec import node_specs
from hipdnn_graph.nodes import custom_family
from hipdnn_graph.nodes.custom_family import (
    CustomFamilyNode,
    custom_family_spec,
    lift_custom_op,
    register_custom_family,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
sys.path.append(str(EXAMPLES))  # last: its scripts shadow no module

# the family is imported by name from examples/ (not an installed distribution)
numpy_family = importlib.import_module("clamp_family.numpy_family")
torch_family = importlib.import_module("clamp_family.torch_family")
ClampAttributes = importlib.import_module("clamp_family.attributes").ClampAttributes
_node = importlib.import_module("clamp_family.node")
CLAMP_RECIPE, CLAMP_SPEC, ClampNode, clamp = (
    _node.CLAMP_RECIPE,
    _node.CLAMP_SPEC,
    _node.ClampNode,
    _node.clamp,
)
from test_layering import private_imports  # noqa: E402

#: the family's files, as the walkthrough names them
FAMILY_FILES = (
    "examples/clamp_family/attributes.py",
    "examples/clamp_family/node.py",
    "examples/clamp_family/numpy_family.py",
    "examples/clamp_family/torch_family.py",
    "docs/adding-a-family.md",
    "tests/test_family_walkthrough.py",
)
MODULES = [f"clamp_family.{Path(p).stem}" for p in FAMILY_FILES[:4]]
F = hg.DataType.FLOAT


# --8<-- [start:graph]
def _graph(io: hg.DataType = F, **bounds: Any) -> tuple[hg.Graph, hg.TensorAttributes, Any]:
    """x -> exp -> clamp -> neg -> z."""
    g = hg.Graph(name="walk", io_data_type=io, intermediate_data_type=F, compute_data_type=F)
    x = g.tensor(name="x", dim=[2, 3, 4])
    h = g.pointwise(x, mode=hg.PointwiseMode.EXP, name="exp")
    y = clamp(g, h, name="clip", **(bounds or {"lower": 0.5, "upper": 2.0}))
    z = g.pointwise(y, mode=hg.PointwiseMode.NEG, name="neg")
    z.set_output(True)
    return g, x, z


def _expected(x: np.ndarray[Any, Any], lower: float = 0.5, upper: float = 2.0) -> Any:
    return -np.clip(np.exp(x.astype(np.float64)), lower, upper)


# --8<-- [end:graph]


def test_using_the_family() -> None:
    pytest.importorskip("torch")
    # --8<-- [start:use]
    import clamp_family.numpy_family  # the NumPy reference runs clamp nodes
    import clamp_family.torch_family  # so do the torch engines
    from clamp_family.node import clamp

    f = hg.DataType.FLOAT
    g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
    x = g.tensor(name="x", dim=[2, 3])
    y = clamp(g, g.pointwise(x, mode=hg.PointwiseMode.EXP), lower=0.5, upper=2.0, name="clip")
    y.set_output(True)
    g.build()  # validated, lowered to descriptors, a plan chosen among the engines that run it
    assert g.get_plan_name() in ("TORCH_EAGER_ENGINE", "TORCH_FUSION_ENGINE")
    # --8<-- [end:use]
    assert clamp_family.numpy_family.FAMILIES and clamp_family.torch_family.FAMILIES


@pytest.mark.parametrize("name", MODULES)
def test_the_examples_docstrings_run(name: str) -> None:
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    for test in doctest.DocTestFinder(exclude_empty=True).find(module, name):
        runner.run(test, out=report.append)
    results = runner.summarize(verbose=False)
    assert results.attempted > 0 and results.failed == 0, "".join(report)


# --8<-- [start:build]
def test_the_builder_names_and_infers_as_hipdnn_does() -> None:
    g, _, _ = _graph()
    g.validate()
    node = g.nodes[1]
    assert isinstance(node, ClampNode)
    assert node.get_node_type() == hg.NodeType.CUSTOM_OP
    assert [t.get_name() for t in node.inputs()] == ["exp::OUT_0"]
    y = node.outputs()[0]
    assert (y.get_name(), y.get_dim(), y.get_stride(), y.get_is_virtual()) == (
        "clip::Y",
        [2, 3, 4],
        [12, 4, 1],
        True,
    )
    assert y.get_data_type() == F and node.attributes.compute_data_type == F
    unnamed = hg.Graph(io_data_type=F, compute_data_type=F)
    t = unnamed.tensor(dim=[2])
    assert clamp(unnamed, t, upper=1).get_name() == "Clamp_0::Y"
    assert t.get_name() == "Clamp_0::X"


# --8<-- [end:build]


def test_the_builder_copies_the_callers_attributes() -> None:
    given = ClampAttributes(name="mine").set_lower(-1)
    g = hg.Graph(io_data_type=F, compute_data_type=F)
    clamp(g, g.tensor(name="x", dim=[3]), given, upper=4.0)
    assert (given.get_upper(), given.get_x()) == (None, None)
    assert (g.nodes[0].attributes.lower, g.nodes[0].attributes.upper) == (-1.0, 4.0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda g, x: clamp(g, "x", lower=0), "clamp() takes tensor X, then ClampAttributes"),
        (
            lambda g, x: clamp(g, x, hg.MatmulAttributes()),
            "clamp() expects ClampAttributes attributes, got MatmulAttributes",
        ),
        (lambda g, x: clamp(g, x, lowest=0), "clamp() got an unknown keyword 'lowest'"),
        (
            lambda g, x: clamp(g, x, lower=float("inf")),
            "ClampAttributes: lower must be a finite number, got inf",
        ),
        (
            lambda g, x: clamp(g, x, upper=True),
            "ClampAttributes: upper must be a finite number, got True",
        ),
        (
            lambda g, x: g.add_family(CLAMP_RECIPE, x),
            "clamp() takes its tensors as a list, got TensorAttributes",
        ),
    ],
)
def test_the_builder_refuses_with_the_familys_messages(call: Any, message: str) -> None:
    g = hg.Graph(io_data_type=F, compute_data_type=F)
    x = g.tensor(name="x", dim=[3])
    with pytest.raises(hg.HipdnnError) as err:
        call(g, x)
    assert (err.value.code, err.value.message) == (hg.ErrorCode.INVALID_VALUE, message)
    assert g.nodes == []


@pytest.mark.parametrize(
    ("make", "code", "message"),
    [
        (
            lambda a: a.set_x(None),
            hg.ErrorCode.ATTRIBUTE_NOT_SET,
            "ClampNode missing input X for pre-validation",
        ),
        (
            lambda a: a.set_y(None),
            hg.ErrorCode.ATTRIBUTE_NOT_SET,
            "ClampNode missing output Y for pre-validation",
        ),
        (
            lambda a: a.set_lower(None).set_upper(None),
            hg.ErrorCode.ATTRIBUTE_NOT_SET,
            "ClampNode needs a lower or an upper bound",
        ),
        (
            lambda a: a.set_lower(3).set_upper(-3),
            hg.ErrorCode.INVALID_VALUE,
            "ClampNode: lower bound 3.0 is greater than upper bound -3.0",
        ),
        (
            lambda a: a.get_y().set_dim([3, 1]),
            hg.ErrorCode.INVALID_VALUE,
            "ClampNode: Y dims [3, 1] differ from X dims [3]",
        ),
    ],
)
def test_validation_runs_the_rules_in_order(make: Any, code: hg.ErrorCode, message: str) -> None:
    g = hg.Graph(io_data_type=F, compute_data_type=F)
    y = clamp(g, g.tensor(name="x", dim=[3]), lower=0.0, upper=1.0, name="c")
    y.set_output(True)
    make(g.nodes[0].attributes)
    with pytest.raises(hg.HipdnnError) as err:
        g.validate()
    assert (err.value.code, err.value.message) == (code, message)


# --8<-- [start:run]
def test_the_numpy_reference_runs_the_family() -> None:
    g, x, z = _graph(lower=None, upper=1.5)
    g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    assert g.get_plan_name() == "NUMPY_REFERENCE_ENGINE"
    xs = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    out = np.empty((2, 3, 4), np.float32)
    g.execute({x: xs, z: out})
    np.testing.assert_allclose(out, _expected(xs, -np.inf, 1.5), rtol=1e-6)
    assert float(out.min()) == -1.5  # exp(x) > 1.5 somewhere: the bound, exactly


def test_the_torch_engine_matches_the_reference() -> None:
    torch = pytest.importorskip("torch")
    xs = np.random.default_rng(5).standard_normal((2, 3, 4)).astype(np.float16)
    outs = {}
    for engine in ("NUMPY_REFERENCE_ENGINE", "TORCH_EAGER_ENGINE"):
        g, x, z = _graph(io=hg.DataType.HALF)
        g.set_preferred_engine_id_ext(engine).build()
        assert g.get_plan_name() == engine
        if engine == "TORCH_EAGER_ENGINE":
            out = torch.empty(2, 3, 4, dtype=torch.float16)
            g.execute({x: torch.from_numpy(xs), z: out})
            outs[engine] = out.numpy()
        else:
            outs[engine] = np.empty((2, 3, 4), np.float16)
            g.execute({x: xs, z: outs[engine]})
    np.testing.assert_array_equal(outs["TORCH_EAGER_ENGINE"], outs["NUMPY_REFERENCE_ENGINE"])
    np.testing.assert_allclose(outs["NUMPY_REFERENCE_ENGINE"], _expected(xs), rtol=2e-3)


# --8<-- [end:run]


def test_the_torch_lowering_refuses_what_it_does_not_run() -> None:
    g = hg.Graph(io_data_type=hg.DataType.INT32, compute_data_type=F)
    clamp(g, g.tensor(name="x", dim=[3]), lower=0, name="c").set_output(True)
    g.validate()
    assert torch_family.clamp_refusal(g.nodes[0]) == (
        "node 'c': tensor 'x' (slot X) is INT32; this lowering takes BFLOAT16, DOUBLE, FLOAT, HALF"
    )


# --8<-- [start:wire]
def test_hipdnns_wire_carries_the_family_as_a_custom_op() -> None:
    g, _, _ = _graph()
    node = json.loads(g.to_json())["nodes"][1]
    data = bytes(node.pop("data"))
    assert node == {
        "compute_data_type": "float",
        "custom_op_id": "example.clamp",
        "input_tensor_uids": [2],
        "name": "clip",
        "output_tensor_uids": [3],
        "type": "CustomOpAttributes",
    }
    assert data == b'{"inputs":["X"],"members":{"lower":0.5,"upper":2.0},"outputs":["Y"]}'
    assert len(node_specs()) == 23  # the family is not one of the wire's


# --8<-- [end:wire]


@pytest.mark.parametrize("form", ["bytes", "json", "descriptor"])
def test_the_family_reads_back_from_each_form(form: str) -> None:
    g, _, _ = _graph(lower=-1.5, upper=0.125)
    blob, text = g.serialize(), g.to_json()
    if form == "bytes":
        back = hg.Graph.deserialize(blob)
    elif form == "json":
        back = hg.Graph.from_json(text)
    else:
        desc = g.build_operation_graph().get_operation_graph_descriptor()
        back = hg.Graph.from_operation_graph_descriptor(desc)
    node = back.nodes[1]
    assert isinstance(node, ClampNode)
    a = node.attributes
    assert (a.name, a.lower, a.upper, a.compute_data_type) == ("clip", -1.5, 0.125, F)
    assert (a.get_x().get_name(), a.get_y().get_name()) == ("exp::OUT_0", "clip::Y")
    assert (back.serialize(), back.to_json()) == (blob, text)


def test_without_the_family_a_reader_sees_hipdnns_custom_op(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    g, _, _ = _graph()
    blob = g.serialize()
    monkeypatch.delitem(custom_family._FAMILIES, "example.clamp")
    back = hg.Graph.deserialize(blob)
    node = back.nodes[1]
    assert type(node) is hg.CustomOpNode and node.attributes.custom_op_id == "example.clamp"
    assert back.serialize() == blob  # hipDNN's custom op, as it was written
    with pytest.raises(hg.NotSupportedError) as err:
        back.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    assert "custom op 'example.clamp' is plugin-defined: hipDNN defines no math for it" in str(
        err.value
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            b"clamp",
            "custom op 'example.clamp' (op): its data is not the family's payload "
            "(Expecting value: line 1 column 1 (char 0))",
        ),
        (
            b'{"inputs":["X"],"members":{"lowest":1},"outputs":["Y"]}',
            "custom op 'example.clamp' (op): ClampAttributes has no member 'lowest'",
        ),
        (
            b'{"inputs":["X"],"members":{"name":"n"},"outputs":["Y"]}',
            "custom op 'example.clamp' (op): ClampAttributes has no member 'name'",
        ),
        (
            b'{"inputs":["X"],"members":{"lower":"low"},"outputs":["Y"]}',
            "custom op 'example.clamp' (op): ClampAttributes: lower must be a finite number, "
            "got 'low'",
        ),
        (
            b'{"inputs":["W"],"members":{},"outputs":["Y"]}',
            "custom op 'example.clamp' (op): slots ['W'] do not name its 1 tensors among ['X']",
        ),
        (
            b'{"inputs":["X"],"members":{},"outputs":[]}',
            "custom op 'example.clamp' (op): slots [] do not name its 1 tensors among ['Y']",
        ),
    ],
)
def test_a_payload_that_is_not_the_familys_is_refused_by_name(data: bytes, message: str) -> None:
    g = hg.Graph(io_data_type=F, compute_data_type=F, intermediate_data_type=F)
    x = g.tensor(name="x", dim=[3])
    (y,) = g.custom_op([x], 1, custom_op_id="example.clamp", data=data, name="op")
    y.set_dim([3]).set_stride([1]).set_output(True)
    blob = g.serialize()  # a raw custom op of the family's id: written as given
    with pytest.raises(hg.HipdnnError) as err:
        hg.Graph.deserialize(blob)
    assert (err.value.code, err.value.message) == (hg.ErrorCode.INVALID_VALUE, message)


class _NegAttributes(NodeAttributes):
    """A second family, registered without engine records: X in, Y out, no members."""

    class InputNames(IntEnum):
        X = 0

    class OutputNames(IntEnum):
        Y = 0


class _NegNode(CustomFamilyNode[Any]):
    family_id = "test.neg"
    name_prefix = "Neg"


_NegNode.spec = custom_family_spec("NegNode", _NegAttributes, _NegNode)
register_custom_family(_NegNode)


def test_an_engine_without_the_familys_record_refuses_it_by_name() -> None:
    from hipdnn_graph_numpy_reference.families import family_of
    from hipdnn_graph_torch_rocm.families import refusal

    g = hg.Graph(io_data_type=F, compute_data_type=F)
    x, y = g.tensor(name="x", dim=[2]), g.tensor(name="y", dim=[2])
    attrs = _NegAttributes(name="n")
    attrs._set_input(attrs.InputNames.X, x)._set_output(attrs.OutputNames.Y, y)
    node = g.add_node(_NegNode(attrs))
    y.set_output(True)
    with pytest.raises(hg.NotSupportedError) as err:
        g.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    assert "node 'n': custom family 'test.neg' nodes have no NumPy reference" in str(err.value)
    with pytest.raises(hg.HipdnnError) as missing:
        family_of(node)
    assert missing.value.message == "reference rule for custom family 'test.neg' not found"
    assert refusal(node) == "no torch lowering for custom family 'test.neg' nodes (node 'n')"


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"family_id": "neg"}, "Bad: family_id must be '<plugin>.<operation>', got 'neg'"),
        ({"family_id": "a.b"}, "Bad: set Bad.spec = custom_family_spec(..., make_node=Bad) first"),
        (
            {"family_id": "example.clamp", "spec": "own"},
            "custom family 'example.clamp' is already registered by clamp_family.node.ClampNode",
        ),
    ],
)
def test_registration_refuses_what_would_lie(attributes: dict[str, Any], message: str) -> None:
    bad = type("Bad", (CustomFamilyNode,), {k: v for k, v in attributes.items() if k != "spec"})
    if attributes.get("spec") == "own":
        bad.spec = custom_family_spec("Bad", ClampAttributes, bad)
    with pytest.raises(hg.HipdnnError) as err:
        register_custom_family(bad)
    assert (err.value.code, err.value.message) == (hg.ErrorCode.INVALID_VALUE, message)
    assert register_custom_family(ClampNode) is ClampNode  # again: nothing happens


def test_engine_registration_refuses_what_would_lie() -> None:
    from hipdnn_graph_numpy_reference.families import ReferenceFamily, register_family

    run = numpy_family.run_clamp
    cases = [
        (
            ReferenceFamily(hg.NodeType.CUSTOM_OP, run, family_id="nowhere.op"),
            "reference record for custom family 'nowhere.op': no family of that id is "
            "registered (import its node module first)",
        ),
        (
            ReferenceFamily(hg.NodeType.POINTWISE, run, family_id="example.clamp"),
            "reference record for custom family 'example.clamp': a family that is not hipDNN's "
            "has a family_id and node type CUSTOM_OP (got POINTWISE)",
        ),
        (
            ReferenceFamily(hg.NodeType.CUSTOM_OP, run),
            "reference record for custom family '': a family that is not hipDNN's has a "
            "family_id and node type CUSTOM_OP (got CUSTOM_OP)",
        ),
        (
            ReferenceFamily(hg.NodeType.CUSTOM_OP, lambda n, i: {}, family_id="example.clamp"),
            "reference record for custom family 'example.clamp': another record is registered "
            "for it",
        ),
    ]
    for record, message in cases:
        with pytest.raises(hg.HipdnnError) as err:
            register_family(record)
        assert (err.value.code, err.value.message) == (hg.ErrorCode.INVALID_VALUE, message)
    assert register_family(*numpy_family.FAMILIES) == numpy_family.FAMILIES


def test_the_spec_refuses_a_slot_the_family_lacks() -> None:
    with pytest.raises(hg.HipdnnError) as err:
        custom_family_spec("ClampNode", ClampAttributes, ClampNode, optional=["Z"])
    assert err.value.message == "ClampNode has no slot 'Z'"
    spec = custom_family_spec("ClampNode", ClampAttributes, ClampNode, pass_by_value=["X"])
    assert spec.pass_by_value_slots == frozenset({"X"})
    assert [(s.name, s.output, s.required) for s in CLAMP_SPEC.slots] == [
        ("X", False, True),
        ("Y", True, True),
    ]


class _ScaleAttributes(NodeAttributes):
    """A family with a pass-by-value slot: Y = X * S."""

    class InputNames(IntEnum):
        X = 0
        S = 1

    class OutputNames(IntEnum):
        Y = 0


class _ScaleNode(CustomFamilyNode[Any]):
    family_id = "test.scale"


_ScaleNode.spec = custom_family_spec(
    "ScaleNode", _ScaleAttributes, _ScaleNode, pass_by_value=("S",)
)


def test_a_registered_familys_scalar_slots_take_numbers() -> None:
    a = _ScaleAttributes()
    with pytest.raises(hg.HipdnnError) as err:  # before registration: no slot takes a number
        a._set_input(a.InputNames.S, 0.5)
    assert err.value.message == (
        "Slot S expects a TensorAttributes, got float (this node has no scalar slot that takes "
        "a number)"
    )
    register_custom_family(_ScaleNode)
    a._set_input(a.InputNames.S, 0.5)
    scale = a.inputs[a.InputNames.S]
    assert (scale.get_value(), scale.get_is_pass_by_value()) == (0.5, True)
    with pytest.raises(hg.HipdnnError) as err:
        a._set_input(a.InputNames.X, 0.5)
    assert err.value.message == (
        "Slot X expects a TensorAttributes, got float (numbers go to the scalar slots only: S)"
    )
    assert len(node_specs()) == 23


def test_lifting_leaves_every_other_node_alone() -> None:
    g, _, _ = _graph()
    assert all(lift_custom_op(n) is n for n in g.nodes)


def test_the_family_is_its_files_alone() -> None:
    """The walkthrough's claim: the family is these files, and nothing outside them names it."""
    assert sorted(p.name for p in (EXAMPLES / "clamp_family").iterdir() if p.suffix) == sorted(
        Path(p).name for p in FAMILY_FILES[:4]
    )
    for path in FAMILY_FILES:
        assert (ROOT / path).is_file(), path
    page = (ROOT / "docs" / "adding-a-family.md").read_text()
    for path in FAMILY_FILES[:4]:
        assert f'--8<-- "{path}"' in page, path  # the page shows each file as it is
    for folder in ("hipdnn_graph", "backends"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text()
            for word in ("ClampNode", "ClampAttributes", "example.clamp", "import clamp_family"):
                assert word not in text, f"{path.relative_to(ROOT)} names {word}"
    modules = [ROOT / p for p in FAMILY_FILES[:4]]
    assert [p for m in modules for p in private_imports(m.relative_to(ROOT), m.read_text())] == []


def test_the_family_works_from_its_files_alone() -> None:
    """A fresh interpreter that imports the family's modules, and nothing else of this test,
    builds, validates and runs a clamp graph on the NumPy reference and the torch engine."""
    pytest.importorskip("torch")
    script = """
import numpy as np, hipdnn_graph as hg
import clamp_family.numpy_family, clamp_family.torch_family
from clamp_family.node import clamp
f = hg.DataType.FLOAT
out = {}
for engine in ("NUMPY_REFERENCE_ENGINE", "TORCH_EAGER_ENGINE"):
    g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
    x = g.tensor(name="x", dim=[4])
    y = clamp(g, x, lower=-1.0, upper=1.0)
    y.set_output(True)
    g.set_preferred_engine_id_ext(engine).build()
    xs = np.array([-3.0, -0.5, 0.5, 3.0], np.float32)
    if engine.startswith("TORCH"):
        import torch
        buf = torch.empty(4)
        g.execute({x: torch.from_numpy(xs), y: buf})
        out[engine] = buf.tolist()
    else:
        buf = np.empty(4, np.float32)
        g.execute({x: xs, y: buf})
        out[engine] = buf.tolist()
print(out)
"""
    paths = [str(EXAMPLES), str(ROOT), str(ROOT / "backends")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    expected = [-1.0, -0.5, 0.5, 1.0]
    assert done.stdout.strip() == str(
        {"NUMPY_REFERENCE_ENGINE": expected, "TORCH_EAGER_ENGINE": expected}
    )


@pytest.mark.gpu
@pytest.mark.parametrize("engine", ["TORCH_EAGER_ENGINE", "TORCH_FUSION_ENGINE"])
def test_the_torch_engines_run_the_family_on_the_gpu(engine: str) -> None:
    """On a CUDA or ROCm device, node by node and fused by Inductor, in bfloat16: the result is
    the NumPy reference's on the same inputs (exp, clamp and neg each round to bfloat16)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA or ROCm device")
    xs = torch.randn(2, 3, 4, dtype=torch.bfloat16)
    ref, rx, rz = _graph(io=hg.DataType.BFLOAT16)
    ref.set_preferred_engine_id_ext("NUMPY_REFERENCE_ENGINE").build()
    expected = torch.empty(2, 3, 4, dtype=torch.bfloat16)
    ref.execute({rx: xs, rz: expected})
    g, x, z = _graph(io=hg.DataType.BFLOAT16)
    g.set_preferred_engine_id_ext(engine).build()
    assert g.get_plan_name() == engine
    out = torch.full((2, 3, 4), float("nan"), dtype=torch.bfloat16, device="cuda")
    g.execute({x: xs.cuda(), z: out})
    torch.cuda.synchronize()
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-2, atol=1e-2)
