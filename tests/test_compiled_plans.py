"""Compiled plans (issue 36 item 4): hipDNN's ``SerializedExecutionPlan`` envelope around our
payload, written and read back into a graph that runs without planning; broken bytes refused
with hipDNN's code and messages; the ``HDGP`` container written with its plan and read keeping
it; a fresh process that loads a plan ranks no engine, checks no support and compiles nothing."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np
import pytest
from flatbuffers.table import Table as FbTable
from hipdnn_blobs import container as reference_container

import hipdnn_graph as hg
import hipdnn_graph.frontend as hipdnn
from hipdnn_graph.backend import engine_id
from hipdnn_graph.descriptors.compiled_plan import (
    PAYLOAD_MAGIC,
    CompiledPlanRecord,
    read_compiled_plan,
    write_compiled_plan,
    write_container,
)
from hipdnn_graph.descriptors.engine_wire import EngineConfig, read_engine_config

ROOT = Path(__file__).resolve().parents[1]
NUMPY = "NUMPY_REFERENCE_ENGINE"
KNOB = "numpy_reference.sdpa_block_q"
FAILED = "Failed to deserialize compiled plan: "


def sdpa_graph() -> tuple[hg.Graph, list[hg.TensorAttributes]]:
    f32 = hg.DataType.FLOAT
    g = hg.Graph(name="cp", io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)
    q, k, v = (g.tensor(name=n, dim=[1, 2, 8, 4]) for n in "QKV")
    o, _ = g.sdpa(q, k, v, hg.SdpaAttributes().set_name("fwd").set_attn_scale(0.5))
    o.set_output(True)
    return g, [q, k, v, o]


def pack(tensors: list[hg.TensorAttributes]) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(1)
    arrays = {t.get_uid(): rng.standard_normal(t.dim).astype(np.float32) for t in tensors[:3]}
    arrays[tensors[3].get_uid()] = np.zeros(tensors[3].dim, np.float32)
    return arrays


def built(block_q: int = 2) -> tuple[hg.Graph, list[hg.TensorAttributes]]:
    g, tensors = sdpa_graph()
    g.build_operation_graph().create_execution_plan_ext(NUMPY, {KNOB: block_q}).build_plans()
    return g, tensors


def output(g: hg.Graph, tensors: list[hg.TensorAttributes]) -> np.ndarray:
    by_name = {t.name: t for t in g.tensors}
    buffers = pack([by_name[t.name] for t in tensors])
    g.execute(buffers, None)
    return buffers[by_name[tensors[3].name].get_uid()]


def refused(data: bytes) -> hg.HipdnnError:
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph.from_compiled_plan_binary(data)
    return info.value


# ----- round trips -------------------------------------------------------------------------------


def test_loaded_plan_keeps_engine_and_knobs_and_computes_the_same() -> None:
    g, tensors = built(block_q=2)
    loaded = hg.Graph.from_compiled_plan_binary(g.to_compiled_plan_binary())
    assert loaded.get_plan_name() == NUMPY
    assert loaded.get_execution_plan_knobs() == {KNOB: 2}
    assert loaded.get_workspace_size() == g.get_workspace_size()
    np.testing.assert_array_equal(output(loaded, tensors), output(g, tensors))
    assert loaded.serialize() == g.serialize()
    assert loaded.to_compiled_plan_binary() == g.to_compiled_plan_binary()


def test_envelope_reads_as_hipdnns_schema_with_a_generic_flatbuffers_reader() -> None:
    g, _ = built()
    data = g.to_compiled_plan_binary()
    root = FbTable(data, flatbuffers.encode.Get(flatbuffers.packer.uoffset, data, 0))

    def scalar(slot: int, kind: type, default: int) -> int:
        off = root.Offset(4 + 2 * slot)
        return default if not off else int(root.Get(kind, root.Pos + off))

    def vector(slot: int, width: int, code: str) -> list[int]:
        off = root.Offset(4 + 2 * slot)
        n, start = root.VectorLen(off), root.Vector(off)
        return list(struct.unpack_from(f"<{n}{code}", data, start)) if n else []

    assert scalar(0, flatbuffers.number_types.Uint32Flags, 0) == 1  # version
    assert scalar(1, flatbuffers.number_types.Int64Flags, 0) % 2**64 == engine_id(NUMPY)
    assert scalar(2, flatbuffers.number_types.Int64Flags, 0) == g.get_workspace_size()
    assert vector(3, 8, "q") == [t.uid for t in g.graph_tensors()]
    payload = bytes(vector(4, 1, "B"))
    assert payload[:8] == PAYLOAD_MAGIC == b"HGPLAN\0\0"
    major, minor, header, graph, config, own, reserved = struct.unpack_from("<HHIIIII", payload, 8)
    assert (major, minor, header, own, reserved) == (1, 0, 32, 0, 0)
    assert payload[32 : 32 + graph] == g.serialize()
    assert read_engine_config(payload[32 + graph : 32 + graph + config]) == EngineConfig(
        engine_id(NUMPY) - 2**64, (hg.backend.KnobSetting(KNOB, 2),))  # fmt: skip
    assert root.Offset(4 + 2 * 5) == 0  # is_override_shape_enabled at its default


def test_plan_before_build_is_refused_with_hipdnns_message() -> None:
    g, _ = sdpa_graph()
    with pytest.raises(hg.HipdnnError) as info:
        g.to_compiled_plan_binary()
    assert info.value.code == hg.ErrorCode.INVALID_VALUE
    assert info.value.message == (
        "Graph has no compiled execution plan. Call build() or build_plans() first."
    )


# ----- refusals ----------------------------------------------------------------------------------


def _record(**changes: object) -> CompiledPlanRecord:
    g, _ = built()
    record = read_compiled_plan(g.to_compiled_plan_binary())
    return dataclasses.replace(record, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "ExecutionPlanDescriptor::deserializeBackendPlan() failed: plan size is zero."),
        (b"\x01\x02\x03", "Serialized execution plan FlatBuffer is invalid. "
         "(the buffer is 3 bytes, fewer than 12)"),
    ],
)  # fmt: skip
def test_empty_and_short_plans(data: bytes, message: str) -> None:
    err = refused(data)
    assert err.code == hg.ErrorCode.HIPDNN_BACKEND_ERROR and err.message == FAILED + message


def test_envelope_rules_in_hipdnns_words() -> None:
    good = write_compiled_plan(_record())
    version = good.replace(struct.pack("<I", 1), struct.pack("<I", 2), 1)
    cases = {
        version: "Serialized execution plan version is not supported.",
        write_compiled_plan(_record(tensor_uids=())): (
            "Serialized execution plan contains no tensor UIDs."),
        write_compiled_plan(_record(workspace_size=-8)): (
            "Serialized execution plan contains an invalid workspace size."),
    }  # fmt: skip
    for data, message in cases.items():
        err = refused(data)
        assert (err.code, err.message) == (hg.ErrorCode.HIPDNN_BACKEND_ERROR, FAILED + message)


def test_payload_rules() -> None:
    foreign = write_compiled_plan(_record()).replace(PAYLOAD_MAGIC, b"FUSPLAN\0")
    assert refused(foreign).message.startswith(FAILED + "the plugin payload of engine 0x")
    major = write_compiled_plan(_record()).replace(PAYLOAD_MAGIC + b"\x01", PAYLOAD_MAGIC + b"\x02")
    err = refused(major)
    assert err.code == hg.ErrorCode.UNSUPPORTED_GRAPH_FORMAT
    assert err.message == FAILED + "the plugin payload is format 2.x; this hipdnn-graph reads 1.x"
    unknown = refused(write_compiled_plan(_record(engine_id=12345)))
    assert unknown.message == FAILED + "Invalid engine ID 0x3039: no registered engine has it"
    stranger = write_compiled_plan(_record(knobs=(("no.such.knob", 1),)))
    settings = FAILED + f"the saved knob settings of engine {NUMPY}: "
    assert refused(stranger).message == (
        settings + f"Knob 'no.such.knob' is not available for engine {NUMPY}")  # fmt: skip
    forged = refused(write_compiled_plan(_record(knobs=((KNOB, -5),))))
    assert forged.code == hg.ErrorCode.HIPDNN_BACKEND_ERROR
    assert forged.message == settings + "Value -5 is out of range [0, 1048576]"


def test_a_forged_workspace_size_is_refused() -> None:
    err = refused(write_compiled_plan(_record(workspace_size=2**40)))
    assert err.code == hg.ErrorCode.HIPDNN_BACKEND_ERROR
    assert err.message == (
        FAILED + f"the plan's workspace size {2**40} is not engine {NUMPY}'s 0 for its graph "
        "(corrupt or forged)"
    )


def test_a_graph_above_the_allocation_limit_is_refused_before_any_engine_builds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = write_compiled_plan(_record())
    monkeypatch.setenv("HIPDNN_GRAPH_MAX_ALLOCATION", "256")
    err = refused(data)
    assert err.code == hg.ErrorCode.INVALID_VALUE and "HIPDNN_GRAPH_MAX_ALLOCATION" in err.message


def test_every_truncation_and_many_corruptions_raise_hipdnn_errors() -> None:
    data = write_compiled_plan(_record())
    for end in range(len(data)):
        refused(data[:end])
    rng = np.random.default_rng(5)
    for _ in range(300):
        broken = bytearray(data)
        for at in rng.integers(0, len(data), 3):
            broken[at] = int(rng.integers(0, 256))
        with contextlib.suppress(hg.HipdnnError):  # anything else fails the test
            hg.Graph.from_compiled_plan_binary(bytes(broken))


def test_a_payload_announcing_huge_sections_allocates_nothing() -> None:
    data = bytearray(write_compiled_plan(_record()))
    at = data.index(PAYLOAD_MAGIC) + 16
    data[at : at + 4] = struct.pack("<I", 2**32 - 1)  # graph_size
    err = refused(bytes(data))
    assert "(truncated or corrupt)" in err.message


# ----- the HDGP container ------------------------------------------------------------------------


def test_container_is_written_as_hipdnns_with_its_plan_and_read_keeping_it() -> None:
    g, tensors = built()
    blob = g.serialize_with_plan()
    plan = g.to_compiled_plan_binary()
    assert blob[4:8] == b"HDGP"
    root = FbTable(blob, flatbuffers.encode.Get(flatbuffers.packer.uoffset, blob, 0))
    for slot, expected in ((0, g.serialize()), (1, plan)):  # a generic reader's view
        off = root.Offset(4 + 2 * slot)
        start, n = root.Vector(off), root.VectorLen(off)
        assert blob[start : start + n] == expected and start % 8 == 0  # 8-aligned, as hipDNN
    assert hg.Graph.deserialize(reference_container(g.serialize(), plan)).embedded_plan == plan
    read = hg.Graph.deserialize(blob)
    assert read.embedded_plan == plan and read.serialize() == g.serialize()
    assert read.get_execution_plan_count() == 0  # kept, not restored, without restore_plan
    restored = hg.Graph.deserialize(blob, restore_plan=True)
    assert restored.get_plan_name() == NUMPY
    np.testing.assert_array_equal(output(restored, tensors), output(g, tensors))
    assert hg.Graph.deserialize(write_container(g.serialize())).embedded_plan is None


def test_container_with_a_foreign_plan_reads_and_refuses_to_restore() -> None:
    g, _ = built()
    blob = write_container(g.serialize(), b"opaque plan \x00\x01")
    assert hg.Graph.deserialize(blob).embedded_plan == b"opaque plan \x00\x01"
    with pytest.raises(hg.HipdnnError) as info:
        hg.Graph.deserialize(blob, restore_plan=True)
    assert info.value.code == hg.ErrorCode.HIPDNN_BACKEND_ERROR


# ----- the facade --------------------------------------------------------------------------------


def test_facade_names() -> None:
    g, _ = built()
    fg = hipdnn.Graph()
    with pytest.raises(RuntimeError, match="Call build\\(\\) or build_plans\\(\\) first"):
        fg.to_compiled_plan_binary()
    assert fg.from_compiled_plan_binary(None, g.to_compiled_plan_binary()).is_good()
    assert fg.to_compiled_plan_binary() == g.to_compiled_plan_binary()
    assert fg.get_execution_plan_engine_id() == engine_id(NUMPY)
    bad = fg.from_compiled_plan_binary(None, b"junk")
    assert bad.is_bad() and bad.get_code() == hg.ErrorCode.HIPDNN_BACKEND_ERROR
    assert fg.get_execution_plan_engine_id() == engine_id(NUMPY)  # kept on failure
    assert fg.to_binary() == g.serialize()  # the NumPy engine does not report the note
    loaded = hipdnn.Graph()
    assert loaded.from_binary(None, g.serialize_with_plan()).is_good()
    assert loaded.get_execution_plan_engine_id() == engine_id(NUMPY)


# ----- a fresh process ---------------------------------------------------------------------------


def _fresh_process(*args: str) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "compiled_plans.py"), "--small",
         "--repeats", "3", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("| engine | plan | plan ready ms | first execute ms | warm ms")
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    baseline = [c.strip() for c in lines[3].strip("|").split("|")]
    assert baseline[1] == "planned in the process" and baseline[-1] == "True"
    assert int(baseline[7]) >= 1  # the baseline asks the engine whether it supports the graph
    return dict(zip(["engine", "plan", "ready", "first", "warm", "ratio", "rankings", "checks",
                     "compiles", "builds", "matches"], cells, strict=True))  # fmt: skip


@pytest.mark.parametrize("engine", [NUMPY, "TORCH_SDPA_MATH_ENGINE"])
def test_a_fresh_process_runs_the_plan_without_planning(engine: str) -> None:
    if engine.startswith("TORCH"):
        pytest.importorskip("torch")
    row = _fresh_process("--engine", engine)
    assert (row["engine"], row["plan"]) == (engine, "compiled plan loaded")
    assert (row["rankings"], row["checks"], row["compiles"], row["matches"]) == (
        "0", "0", "0", "True")  # fmt: skip
    assert row["builds"] == "1"  # the engine makes its plan object once, from id and knobs
    assert float(row["ratio"]) > 0


def test_the_loader_counts_what_it_claims() -> None:
    """The counters are live: planning in the counting process is counted."""
    code = (
        "import sys; sys.argv=['x']; sys.path.insert(0, 'benchmarks');"
        "import compiled_plans as b, json; c = b._counted(); g, t = b.build_graph(True);"
        "g.create_execution_plans().build_plans(); print(json.dumps(c))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, check=True)  # fmt: skip
    counts = json.loads(done.stdout)
    assert counts["rankings"] == 1 and counts["support_checks"] > 0 and counts["plan_builds"] == 1


# ----- an engine with the hooks ------------------------------------------------------------------


class _ReluPlan:
    engine_name = "HOOKED_RELU_ENGINE"
    workspace_size = 0

    def __init__(self, x: int, y: int, tuned: str) -> None:
        self.x, self.y, self.tuned = x, y, tuned

    def execute(self, variant_pack: dict[int, np.ndarray], workspace: object) -> None:
        np.maximum(variant_pack[self.x], 0, out=variant_pack[self.y])


class _HookedEngine:
    """Runs a single ReLU; its build "tunes" (counted); its hooks save and restore the result."""

    name = "HOOKED_RELU_ENGINE"
    priority = 1
    array_kind = "numpy"
    behavior_notes = (hg.backend.BehaviorNote.SUPPORTS_EXECUTION_PLAN_SERIALIZATION,)

    def __init__(self) -> None:
        self.builds = self.restores = 0

    def check(self, graph: hg.Graph) -> hg.backend.Support:
        return hg.backend.Support.yes()

    def workspace_size(self, graph: hg.Graph) -> int:
        return 0

    def _uids(self, graph: hg.Graph) -> tuple[int, int]:
        node = graph.nodes[0]
        return node.inputs()[0].get_uid(), node.outputs()[0].get_uid()

    def build_plan(self, graph: hg.Graph) -> _ReluPlan:
        self.builds += 1
        return _ReluPlan(*self._uids(graph), tuned="searched")

    def serialize_plan(self, plan: _ReluPlan) -> bytes:
        return b"v1:" + plan.tuned.encode()

    def deserialize_plan(self, graph: hg.Graph, payload: bytes, knobs: object) -> _ReluPlan:
        self.restores += 1
        if not payload.startswith(b"v1:"):
            raise hg.HipdnnError(hg.ErrorCode.INVALID_VALUE, "not my bytes")
        return _ReluPlan(*self._uids(graph), tuned=payload[3:].decode() + " (restored)")


class _HookedBackend:
    name = "hooked"

    def __init__(self, engine: _HookedEngine) -> None:
        self.engine = engine

    def engines(self) -> list[_HookedEngine]:
        return [self.engine]


def _relu_graph() -> tuple[hg.Graph, hg.TensorAttributes, hg.TensorAttributes]:
    f32 = hg.DataType.FLOAT
    g = hg.Graph(name="relu", io_data_type=f32, compute_data_type=f32)
    x = g.tensor(name="x", dim=[2, 3])
    y = g.pointwise(x, mode=hg.PointwiseMode.RELU_FWD, name="r")
    y.set_output(True)
    return g, x, y


def test_hooks_restore_without_build_plan_and_to_binary_carries_the_plan() -> None:
    engine = _HookedEngine()
    with hg.backend.isolated_registry(load_entry_points=False):
        hg.backend.register_backend(_HookedBackend(engine))  # type: ignore[arg-type]
        fg = hipdnn.Graph()
        g, x, y = _relu_graph()
        fg.core_graph = g
        g.build_operation_graph().create_execution_plans().build_plans()
        assert (engine.builds, engine.restores) == (1, 0)
        blob = fg.to_binary()  # the engine reports SUPPORTS_EXECUTION_PLAN_SERIALIZATION
        assert blob[4:8] == b"HDGP" and hg.Graph.deserialize(blob).embedded_plan is not None
        loaded = hipdnn.Graph()
        assert loaded.from_binary(None, blob).is_good()  # (handle, data): the plan comes back
        assert (engine.builds, engine.restores) == (1, 1)
        core = loaded.core_graph
        plan: Any = core._state.active.plan  # type: ignore[union-attr]
        assert plan.tuned == "searched (restored)"
        a = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], np.float32)
        out = np.zeros_like(a)
        core.execute({x.get_uid(): a, y.get_uid(): out}, None)
        assert out.tolist() == [[0.0, 2.0, 0.0], [4.0, 0.0, 6.0]]
        structure_only = hipdnn.Graph()
        assert structure_only.from_binary(blob).is_good()  # (data): structure, plan kept aside
        assert structure_only.core_graph.get_execution_plan_count() == 0
        assert structure_only.core_graph.embedded_plan == core.embedded_plan


# ----- warming a loaded plan ---------------------------------------------------------------------


def _math_plan_bytes() -> bytes:
    g, _ = sdpa_graph()
    g.build_operation_graph().create_execution_plan_ext("TORCH_SDPA_MATH_ENGINE").build_plans()
    return g.to_compiled_plan_binary()


def test_a_loaded_torch_plan_runs_once_on_scratch_buffers_laid_out_as_declared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Loading warms a plan on torch tensors where a device is visible (its kernels load before
    the first execute); here the "device" is the CPU (torch.zeros ignores ``device``)."""
    torch = pytest.importorskip("torch")
    from hipdnn_graph.graph import execution

    data = _math_plan_bytes()
    zeros = torch.zeros
    monkeypatch.setattr(execution, "device_visible", lambda: True)
    monkeypatch.setattr(torch, "zeros", lambda n, dtype, device: zeros(n, dtype=dtype))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    seen: list[dict[int, Any]] = []
    original = execution.warm_up

    def spy(built: Any) -> None:
        run = built.plan.execute
        built.plan.execute = lambda p, w: (seen.append(dict(p)), run(p, w))
        original(built)
        del built.plan.execute

    monkeypatch.setattr("hipdnn_graph.graph.compiled_plans.warm_up", spy)
    loaded = hg.Graph.from_compiled_plan_binary(data)
    assert len(seen) == 1
    for spec in loaded._state.active.binder.specs:
        buffer = seen[0][spec.uid]
        assert (tuple(buffer.shape), buffer.stride()) == (spec.shape, spec.strides)
        assert buffer.dtype == torch.float32
    out = seen[0][next(t for t in loaded.tensors if t.name == "fwd::O").get_uid()]
    assert torch.all(out == 0.0)  # zeros in: uniform attention over zero values
    seen.clear()
    hg.Graph.from_compiled_plan_binary(data, warm=False)
    assert seen == []


@pytest.mark.parametrize("warm", ["false", 0, None])
def test_warm_must_be_a_bool(warm: Any) -> None:
    """``warm="false"`` is refused, never read as a truthy string that warms."""
    pytest.importorskip("torch")
    data = _math_plan_bytes()
    with pytest.raises(hg.HipdnnError) as err:
        hg.Graph.from_compiled_plan_binary(data, warm=warm)
    assert err.value.code == hg.ErrorCode.INVALID_VALUE
    assert err.value.message == (
        f"warm must be a bool (True or False), got {type(warm).__name__} {warm!r}"
    )


def test_warming_skips_host_engines_and_a_failure_is_left_to_the_first_execute(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("torch")
    from hipdnn_graph.graph import execution

    g, _ = built()
    monkeypatch.setattr(execution, "device_visible", lambda: True)
    calls: list[int] = []
    g._state.active.plan.execute = lambda p, w: calls.append(1)  # type: ignore[method-assign]
    execution.warm_up(g._state.active)  # the NumPy reference holds host arrays: not warmed
    assert calls == []
    loaded_bytes = _math_plan_bytes()
    monkeypatch.setattr(execution, "_scratch", lambda spec, torch: 1 / 0)
    with caplog.at_level("DEBUG", logger="hipdnn_graph.graph.execution"):
        loaded = hg.Graph.from_compiled_plan_binary(loaded_bytes)
    assert "warming TORCH_SDPA_MATH_ENGINE's plan failed: ZeroDivisionError" in caplog.text
    assert loaded.get_plan_name() == "TORCH_SDPA_MATH_ENGINE"
