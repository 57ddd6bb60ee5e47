"""hipDNN's compiled-plan envelope (``SerializedExecutionPlan``, RFC 0009) against flatc's C++:
every envelope ``write_compiled_plan`` writes passes the flatbuffers Verifier, reads back as the
record's fields, and is byte for byte what hipDNN's backend writes for them
(``ExecutionPlanDescriptor::serializeBackendPlan``: the payload vector, the uid vector, then
``CreateSerializedExecutionPlan``), rebuilt here by flatc's C++ code.

The schema below is hipDNN's envelope version 1 field for field (types and slot order, which is
all the bytes depend on): version, engine_id, workspace_size, tensor_uids, plugin_payload,
is_override_shape_enabled. Built once per toolchain and session into a temporary folder.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from cpp_oracle import Toolchain, toolchains

import hipdnn_graph as hg
from hipdnn_graph.descriptors.compiled_plan import (
    CompiledPlanRecord,
    read_compiled_plan,
    write_compiled_plan,
)

SCHEMA = """
namespace hipdnn_graph_oracle;
table SerializedExecutionPlan {
  version: uint;
  engine_id: long;
  workspace_size: long;
  tensor_uids: [long];
  plugin_payload: [ubyte];
  is_override_shape_enabled: bool = false;
}
root_type SerializedExecutionPlan;
"""

CHECKER = r"""
#include "plan_generated.h"
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>
namespace o = hipdnn_graph_oracle;
int main(int, char** argv) {
  std::ifstream in(argv[1], std::ios::binary);
  std::vector<uint8_t> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  flatbuffers::Verifier verifier(buf.data(), buf.size());
  if (!o::VerifySerializedExecutionPlanBuffer(verifier)) { std::puts("refused"); return 0; }
  auto* plan = o::GetSerializedExecutionPlan(buf.data());
  std::unique_ptr<o::SerializedExecutionPlanT> t(plan->UnPack());
  // as hipDNN's ExecutionPlanDescriptor::serializeBackendPlan: payload, uids, then the table
  flatbuffers::FlatBufferBuilder b;
  auto payload = b.CreateVector(t->plugin_payload);
  auto uids = b.CreateVector(t->tensor_uids);
  b.Finish(o::CreateSerializedExecutionPlan(b, t->version, t->engine_id, t->workspace_size, uids,
                                            payload, t->is_override_shape_enabled));
  std::printf("verified %u %lld %lld %zu %zu %d ", t->version, (long long)t->engine_id,
              (long long)t->workspace_size, t->tensor_uids.size(), t->plugin_payload.size(),
              int(t->is_override_shape_enabled));
  for (size_t i = 0; i < b.GetSize(); ++i) std::printf("%02x", b.GetBufferPointer()[i]);
  std::puts("");
}
"""

FOUND, MISSING = toolchains()


def _build(tc: Toolchain, folder: Path) -> Path:
    (folder / "plan.fbs").write_text(SCHEMA)
    (folder / "checker.cpp").write_text(CHECKER)
    run = {"check": True, "capture_output": True, "cwd": folder}
    subprocess.run([tc.flatc, "--cpp", "--gen-object-api", "plan.fbs"], **run)  # type: ignore[call-overload]
    include = ["-I", tc.include] if tc.include else []
    subprocess.run(["g++", "-std=c++17", "-O0", "-I", ".", *include, "-o", "checker",
                    "checker.cpp"], **run)  # type: ignore[call-overload]  # fmt: skip
    return folder / "checker"


PARAMS: list[Toolchain | None] = [*FOUND] or [None]


@pytest.fixture(scope="module", params=PARAMS, ids=lambda t: t.name if t else "none")
def checker(request: pytest.FixtureRequest) -> Iterator[Path]:
    if request.param is None:
        pytest.skip("no flatc + g++ toolchain: " + "; ".join(MISSING))
    with tempfile.TemporaryDirectory() as tmp:
        yield _build(request.param, Path(tmp))


def _check(checker: Path, blob: bytes) -> list[str]:
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(blob)
        f.flush()
        return subprocess.run([str(checker), f.name], check=True, capture_output=True,
                              text=True).stdout.split()  # fmt: skip


def _graph_bytes() -> bytes:
    g = hg.Graph(name="g", io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    x = g.tensor(name="x", dim=[2, 3])
    g.pointwise(x, mode=hg.PointwiseMode.RELU_FWD, name="r").set_output(True)
    return g.serialize()


RECORDS = [
    CompiledPlanRecord(2**64 - 5, 0, (1, 2), _graph_bytes()),
    CompiledPlanRecord(7, 4096, (1, 2, 2**64 - 1), _graph_bytes(), (("k", 3), ("f", 0.5))),
    CompiledPlanRecord(0, 8, (5,), _graph_bytes(), (("s", "fast"),), b"\x01" * 13, True),
]


@pytest.mark.parametrize("record", RECORDS, ids=["plain", "knobs", "engine_bytes_override"])
def test_envelope_is_cpp_canonical_and_verifies(checker: Path, record: CompiledPlanRecord) -> None:
    blob = write_compiled_plan(record)
    out = _check(checker, blob)
    assert out[0] == "verified"
    version, engine, workspace, uids, payload, override, repacked = out[1:]
    assert (int(version), int(engine) % 2**64, int(workspace)) == (
        1, record.engine_id, record.workspace_size)  # fmt: skip
    assert (int(uids), int(override)) == (len(record.tensor_uids), record.is_override_shape_enabled)
    assert int(payload) > len(record.graph)
    assert bytes.fromhex(repacked) == blob
    assert read_compiled_plan(blob) == record


def test_cpp_refuses_what_our_reader_refuses_as_unverifiable(checker: Path) -> None:
    blob = write_compiled_plan(RECORDS[1])
    for end in (8, 16, len(blob) // 2, len(blob) - 4):
        assert _check(checker, blob[:end])[0] == "refused"
        with pytest.raises(hg.HipdnnError, match="FlatBuffer is invalid"):
            read_compiled_plan(blob[:end])
