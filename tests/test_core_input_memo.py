"""Issue 11 item 2: the rules that read only input tensors run once per set of input tensors in
a validate() pass (hipdnn_graph.nodes.input_memo), and that never changes what validate() says.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

import pytest
from sdpa_graph_cases import SHAPE, forward_backward, new_graph, redim

import hipdnn_graph as hg
from hipdnn_graph.changes import changed_at
from hipdnn_graph.nodes import sdpa_rules as r
from hipdnn_graph.nodes.input_memo import InputRuleMemo
from hipdnn_graph.nodes.sdpa_base import SdpaNode

NODES: list[type[SdpaNode[Any]]] = [hg.SdpaBwdNode, hg.SdpaFwdNode]


def _every_slot_set(node: type[SdpaNode[Any]]) -> Any:
    a = node.spec.attributes_cls()
    for slot in a.InputNames:
        a.inputs[slot] = hg.TensorAttributes(name=f"in {slot.name}")
    for slot in a.OutputNames:
        a.outputs[slot] = hg.TensorAttributes(name=f"out {slot.name}")
    return a


def _what_rule_reads(rule: r.Rule) -> tuple[set[str], list[str]]:
    """The methods a rule calls on its attributes argument, and every other use of it."""
    fn = ast.parse(textwrap.dedent(inspect.getsource(rule))).body[0]
    assert isinstance(fn, ast.FunctionDef)
    name = fn.args.args[0].arg
    getters: set[str] = set()
    called = set()
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == name
        ):
            assert not node.args and not node.keywords, ast.unparse(node)
            getters.add(node.func.attr)
            called.add(id(node.func.value))
    others = [
        ast.unparse(node)
        for node in ast.walk(fn)
        if isinstance(node, ast.Name) and node.id == name and id(node) not in called
    ]
    return getters, others


@pytest.mark.parametrize("node", NODES, ids=lambda n: n.__name__)
def test_the_input_rules_read_nothing_but_input_tensors(node: type[SdpaNode[Any]]) -> None:
    """What makes skipping them safe: each calls only getters of the node's input slots."""
    a = _every_slot_set(node)
    inputs = {id(t) for t in a.inputs.values()}
    shared = [rule for rule in (*node.rules, *node.checks) if rule in r.INPUT_RULES]
    assert shared, "the memo has nothing to skip"
    for rule in shared:
        getters, others = _what_rule_reads(rule)
        assert others == [], f"{rule.__name__} uses its attributes otherwise: {others}"
        for getter in getters:
            assert getter.startswith("get_"), f"{rule.__name__} calls {getter}"
            assert id(getattr(a, getter)()) in inputs, f"{rule.__name__}: {getter} is no input"


@pytest.mark.parametrize("node", NODES, ids=lambda n: n.__name__)
def test_the_rules_a_node_still_runs_are_the_others_in_order(node: type[SdpaNode[Any]]) -> None:
    assert node._rules_per_node == tuple(x for x in node.rules if x not in r.INPUT_RULES)
    assert node._checks_per_node == tuple(x for x in node.checks if x not in r.INPUT_RULES)


def test_the_key_follows_slots_identities_and_changes() -> None:
    q, k = hg.TensorAttributes(name="q"), hg.TensorAttributes(name="k")
    key = InputRuleMemo.key
    rules = ("rules",)
    a = hg.SdpaBackwardAttributes().set_q(q).set_k(k)
    assert key(rules, a) == key(rules, hg.SdpaBackwardAttributes().set_q(q).set_k(k))
    assert key(rules, a) != key(rules, hg.SdpaBackwardAttributes().set_q(k).set_k(q))
    assert key(rules, a) != key(rules, hg.SdpaBackwardAttributes().set_q(q).set_v(k))
    assert key(rules, a) != key(("checks",), a)
    before = key(rules, a)
    k.set_dim([1, 2, 3, 4])
    assert key(rules, a) != before


def test_a_tensor_that_never_changed_has_change_time_zero_in_the_key() -> None:
    """A tensor made with keywords (or copied) has no change time yet: it reads 0, as
    changes.changed_at says, and the next change shows in the key."""
    q = hg.TensorAttributes(name="q", dim=[1, 2, 3, 4], data_type=hg.DataType.HALF)
    assert changed_at(q) == 0
    a = hg.SdpaBackwardAttributes().set_q(q)
    before = InputRuleMemo.key(("rules",), a)
    assert before == InputRuleMemo.key(("rules",), a)
    assert changed_at(q) == 0
    q.set_dim([1, 2, 3, 5])
    assert InputRuleMemo.key(("rules",), a) != before


def _shared_inputs(count: int) -> tuple[hg.Graph, list[hg.TensorAttributes]]:
    """A forward node and ``count`` backward nodes reading its O and Stats and one Q, K, V, dO."""
    g = new_graph("shared")
    q, k, v = (g.tensor(name=n, dim=SHAPE) for n in "QKV")
    o, stats = g.sdpa(q, k, v, name="fwd")
    assert stats is not None
    do = g.tensor(name="dO", dim=SHAPE)
    for i in range(count):
        g.sdpa_backward(q, k, v, o, do, stats, name=f"bwd{i}")
    return g, [q, k, v, o, do, stats]


def test_a_node_with_other_input_tensors_is_checked_in_full() -> None:
    g, (q, _, v, o, do, stats) = _shared_inputs(3)
    k2 = g.tensor(name="K2", dim=[SHAPE[0], SHAPE[1], SHAPE[2], 4])  # head dim 4
    g.sdpa_backward(q, k2, v, o, do, stats, name="odd")
    with pytest.raises(hg.HipdnnError) as info:
        g.validate()
    assert info.value.message == f"SdpaBwdNode: head_dim mismatch between Q and K: {SHAPE[3]} vs 4"


def test_a_shared_tensor_changed_after_validate_is_checked_again() -> None:
    g, (_, k, *_) = _shared_inputs(4)
    g.validate()
    redim(k, [SHAPE[0], SHAPE[1], SHAPE[2], 4])
    assert not g.is_validated
    with pytest.raises(hg.HipdnnError) as info:
        g.validate()
    assert info.value.message == f"SdpaFwdNode: head_dim mismatch between Q and K: {SHAPE[3]} vs 4"


def test_a_tensor_changed_by_inference_is_checked_again_in_the_same_pass() -> None:
    """The backward node passes its input rules while O has no dims (do_matches_o compares only
    dims both tensors have); once the forward node has inferred O, the same tensors are new to
    the memo, so a node reading them runs those rules again."""
    g = forward_backward()
    fwd, bwd = g.nodes  # insertion order: validate() has not sorted them
    assert bwd.attributes.get_o().get_dim() == []
    memo = InputRuleMemo()
    bwd.pre_validate_node(memo)
    assert memo.key(bwd.rules, bwd.attributes) in memo
    fwd.validate_node(memo)  # infers O
    assert bwd.attributes.get_o().get_dim() == SHAPE
    assert memo.key(bwd.rules, bwd.attributes) not in memo


def test_validate_gives_the_same_error_with_and_without_the_memo() -> None:
    """Every node of a graph that fails late: the memo changes nothing of the first error."""
    g, (q, k, v, o, _, stats) = _shared_inputs(3)
    bad = g.tensor(name="dO2", dim=[SHAPE[0], SHAPE[1], SHAPE[2] + 1, SHAPE[3]])
    g.sdpa_backward(q, k, v, o, bad, stats, name="late")
    with pytest.raises(hg.HipdnnError) as with_memo:
        g.validate()
    for node in g.nodes:
        try:
            node.validate_node()  # no memo: every rule of every node
        except hg.HipdnnError as err:
            assert (err.code, err.message) == (with_memo.value.code, with_memo.value.message)
            break
    else:
        pytest.fail("no node failed without the memo")


def test_passed_compares_with_the_last_slots_that_passed_as_carefully_as_the_keys() -> None:
    """The memo's shortcut (the slots that passed last, copied, and their change times) answers
    as the keys do: the same tensors in the same slots, for the same class and rule list, and
    none changed since."""
    q, k = (hg.TensorAttributes(name=n, dim=[1, 2, 3, 4]) for n in "qk")
    rules = ("rules",)
    memo = InputRuleMemo()
    first = hg.SdpaBackwardAttributes().set_q(q).set_k(k)
    assert not memo.passed(rules, first)
    memo.record(rules, first)
    assert memo.passed(rules, first)
    assert memo.passed(rules, hg.SdpaBackwardAttributes().set_q(q).set_k(k))
    assert not memo.passed(rules, hg.SdpaBackwardAttributes().set_q(k).set_k(q))
    assert not memo.passed(rules, hg.SdpaBackwardAttributes().set_q(q))
    assert not memo.passed(rules, hg.SdpaAttributes().set_q(q).set_k(k))
    assert not memo.passed(("checks",), first)
    first.set_k(q)  # the memo kept a copy of the slots that passed
    assert memo.passed(rules, hg.SdpaBackwardAttributes().set_q(q).set_k(k))
    k.set_dim([1, 2, 3, 5])
    assert not memo.passed(rules, hg.SdpaBackwardAttributes().set_q(q).set_k(k))
