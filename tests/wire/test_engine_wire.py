"""hipDNN's engine-side schemas (``EngineConfig``, ``KnobSetting``, ``KnobValue``, ``Knob``,
``EngineDetails``) against flatc's code for the unmodified schemas (see ``engine_oracle.py``):
what :mod:`hipdnn_graph.descriptors.engine_wire` writes verifies and is what hipDNN's C++ packs
for the same content (byte for byte, with every toolchain), reads in flatc's Python code as the
record it was written from, and reads back as that record; blobs flatc's Python builder makes
in another layout read as their content; broken blobs are refused with ``HipdnnError``."""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import flatbuffers
import pytest
from conftest import act_on
from cpp_oracle import toolchains
from engine_oracle import EngineCppOracle, engine_schema_folder, python_modules
from schema_copies import verdict

from hipdnn_graph import ErrorCode, HipdnnError
from hipdnn_graph.backend.knobs import (
    FloatConstraint,
    IntConstraint,
    Knob,
    KnobSetting,
    StringConstraint,
)
from hipdnn_graph.descriptors.engine_wire import (
    EngineCandidate,
    EngineCandidatePage,
    EngineConfig,
    EngineDetails,
    read_engine_config,
    read_engine_details,
    read_knob,
    write_engine_config,
    write_engine_details,
    write_knob,
)

KNOBS = (
    Knob("flex.block_m", 64, "rows", IntConstraint(0, 128, valid_values=(0, 16, 64, 128))),
    Knob("tile", 32, "", IntConstraint(16, 512, 16)),
    Knob("alpha", 0.5, "a float", FloatConstraint(-1.0, 2.5)),
    Knob("mode", "fast", "choices", StringConstraint(16, ("fast", "exact")), deprecated=True),
    Knob("free", "", "no constraint"),
    Knob("zero", 0, "", IntConstraint(0, 0)),
    Knob("neg", -7.25),
    Knob("name", "", "", StringConstraint(0)),
)
SETTINGS = (
    KnobSetting("tile", 64),
    KnobSetting("zero", 0),
    KnobSetting("alpha", 0.0),
    KnobSetting("beta", -1e300),
    KnobSetting("mode", ""),
    KnobSetting("layout", "nhwc"),
    KnobSetting("big", -(2**63)),
)
PAGE = EngineCandidatePage(
    "g-1", "dev0", "gfx942", '{"m": 1}', "{}", total_count=2**40, offset=3,
    candidates=(EngineCandidate("c0", SETTINGS[:2], "{}"), EngineCandidate("c1", (), "")),
    engine_name="E", engine_descriptor_id="",
)  # fmt: skip
_BARE_PAGE = EngineCandidatePage("a", "b", "c", "d", "e")
CASES: dict[str, tuple[str, Any]] = {
    "config_empty": ("config", EngineConfig(0)),
    "config_full": ("config", EngineConfig(-5, SETTINGS, "time")),
    "config_one": ("config", EngineConfig(0xE722795AD5156F59 - 2**64, (SETTINGS[0],))),
    "details_empty": ("details", EngineDetails(0)),
    "details_full": ("details", EngineDetails(42, KNOBS, (0, 2, 4), "MY_ENGINE", PAGE)),
    "details_page_only": (
        "details",
        EngineDetails(1, candidate_page=EngineCandidatePage(*"abcde")),
    ),
    **{f"knob_{i}": ("knob", k) for i, k in enumerate(KNOBS)},
}
WRITE: dict[str, Callable[[Any], bytes]] = {
    "config": write_engine_config,
    "details": write_engine_details,
    "knob": write_knob,
}
READ: dict[str, Callable[[bytes], Any]] = {
    "config": read_engine_config,
    "details": read_engine_details,
    "knob": read_knob,
}


@pytest.fixture(scope="module")
def engine_schemas(hipdnn_schemas: Path) -> Path:
    folder = engine_schema_folder()
    act_on(verdict(None if folder else "hipDNN's engine schemas are not beside its schemas"))
    assert folder is not None
    return folder


@pytest.fixture(scope="module")
def cpp_engine(engine_schemas: Path) -> list[EngineCppOracle]:
    found, missing = toolchains()
    if not found:
        pytest.skip("no C++ wire oracle can be built: " + "; ".join(missing))
    return [EngineCppOracle(tc, engine_schemas) for tc in found]


@pytest.fixture(scope="module")
def generated(engine_schemas: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    found, _ = toolchains()
    if not found:
        pytest.skip("no flatc found")
    package = python_modules(found[0].flatc, engine_schemas, tmp_path_factory.mktemp("py"))
    return lambda name: importlib.import_module(f"{package.__name__}.{name}")


@pytest.mark.parametrize("case", sorted(CASES))
def test_written_bytes_are_what_hipdnns_cpp_packs(cpp_engine: list[Any], case: str) -> None:
    kind, record = CASES[case]
    blob = WRITE[kind](record)
    for oracle in cpp_engine:
        assert oracle.repack(kind, blob) == blob, oracle.toolchain.name
    assert READ[kind](blob) == record


# ----- flatc's Python code: an independent reader and another writer ----------------------------


def _text(value: bytes | None) -> str:
    return "" if value is None else value.decode()


def _py_value(gen: Any, tag: int, table: Any) -> Any:
    cls = {1: "IntValue", 2: "FloatValue", 3: "StringValue"}[tag]
    obj = getattr(gen(cls), cls)()
    obj.Init(table.Bytes, table.Pos)
    return _text(obj.Value()) if tag == 3 else obj.Value()


def _py_setting(gen: Any, s: Any) -> KnobSetting:
    return KnobSetting(_text(s.KnobId()), _py_value(gen, s.ValueType(), s.Value()))


def _py_knob(gen: Any, k: Any) -> Knob:
    constraint: Any = None
    tag = k.ConstraintType()
    if tag:
        cls = {1: "IntConstraint", 2: "FloatConstraint", 3: "StringConstraint"}[tag]
        c = getattr(gen(cls), cls)()
        table = k.Constraint()
        c.Init(table.Bytes, table.Pos)
        if tag == 1:
            values = tuple(c.ValidValues(i) for i in range(c.ValidValuesLength()))
            constraint = IntConstraint(c.MinValue(), c.MaxValue(), c.Step(), values)
        elif tag == 2:
            constraint = FloatConstraint(c.MinValue(), c.MaxValue())
        else:
            values = tuple(_text(c.ValidValues(i)) for i in range(c.ValidValuesLength()))
            constraint = StringConstraint(c.MaxLength(), values)
    default = _py_value(gen, k.DefaultValueType(), k.DefaultValue())
    return Knob(_text(k.KnobId()), default, _text(k.Description()), constraint,
                deprecated=bool(k.Deprecated()))  # fmt: skip


def _py_read(gen: Any, kind: str, blob: bytes) -> Any:
    if kind == "knob":
        return _py_knob(gen, gen("Knob").Knob.GetRootAs(blob, 0))
    if kind == "config":
        c = gen("EngineConfig").EngineConfig.GetRootAs(blob, 0)
        knobs = tuple(_py_setting(gen, c.Knobs(i)) for i in range(c.KnobsLength()))
        return EngineConfig(c.EngineId(), knobs, _text(c.RankingMetric()))
    d = gen("EngineDetails").EngineDetails.GetRootAs(blob, 0)
    page = None
    p = d.CandidatePage()
    if p is not None:
        candidates = []
        for i in range(p.CandidatesLength()):
            c = p.Candidates(i)
            settings = tuple(
                _py_setting(gen, c.KnobSettings(j)) for j in range(c.KnobSettingsLength())
            )
            candidates.append(EngineCandidate(_text(c.Id()), settings, _text(c.KernelFeatures())))
        page = EngineCandidatePage(
            _text(p.GraphId()), _text(p.DeviceId()), _text(p.DeviceArch()),
            _text(p.ProblemFeatures()), _text(p.DeviceFeatures()), p.TotalCount(), p.Offset(),
            tuple(candidates), _text(p.EngineName()), _text(p.EngineDescriptorId()),
        )  # fmt: skip
    return EngineDetails(
        d.EngineId(),
        tuple(_py_knob(gen, d.Knobs(i)) for i in range(d.KnobsLength())),
        tuple(d.BehaviorNotes(i) for i in range(d.BehaviorNotesLength())),
        _text(d.Name()),
        page,
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_flatcs_python_code_reads_the_record(generated: Any, case: str) -> None:
    kind, record = CASES[case]
    assert _py_read(generated, kind, WRITE[kind](record)) == record


def _py_write_value(gen: Any, b: Any, value: Any) -> tuple[int, int]:
    if isinstance(value, str):
        text = b.CreateString(value)
        m = gen("StringValue")
        m.StringValueStart(b)
        m.StringValueAddValue(b, text)
        return 3, m.StringValueEnd(b)
    m = gen("FloatValue" if isinstance(value, float) else "IntValue")
    name = "FloatValue" if isinstance(value, float) else "IntValue"
    getattr(m, name + "Start")(b)
    getattr(m, name + "AddValue")(b, value)
    return (2 if isinstance(value, float) else 1), getattr(m, name + "End")(b)


def _py_write_config(gen: Any, config: EngineConfig) -> bytes:
    """An ``EngineConfig`` the way flatc's Python builder lays it out (fields in slot order,
    defaults written): valid, not canonical."""
    b = flatbuffers.Builder(0)
    b.ForceDefaults(True)
    ks = gen("KnobSetting")
    offsets = []
    for s in config.knobs:
        knob_id = b.CreateString(s.knob_id)
        tag, value = _py_write_value(gen, b, s.value)
        ks.KnobSettingStart(b)
        ks.KnobSettingAddKnobId(b, knob_id)
        ks.KnobSettingAddValueType(b, tag)
        ks.KnobSettingAddValue(b, value)
        offsets.append(ks.KnobSettingEnd(b))
    ec = gen("EngineConfig")
    ec.EngineConfigStartKnobsVector(b, len(offsets))
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    vector = b.EndVector()
    metric = b.CreateString(config.ranking_metric)
    ec.EngineConfigStart(b)
    ec.EngineConfigAddEngineId(b, config.engine_id)
    ec.EngineConfigAddKnobs(b, vector)
    ec.EngineConfigAddRankingMetric(b, metric)
    b.Finish(ec.EngineConfigEnd(b))
    return bytes(b.Output())


@pytest.mark.parametrize("case", ["config_empty", "config_full", "config_one"])
def test_another_layout_reads_as_its_content_and_writes_canonical(
    generated: Any, cpp_engine: list[Any], case: str
) -> None:
    _, record = CASES[case]
    blob = _py_write_config(generated, record)
    assert blob != write_engine_config(record)
    assert read_engine_config(blob) == record
    assert cpp_engine[0].repack("config", blob) == write_engine_config(record)


# ----- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["config_full", "details_full", "knob_0"])
def test_broken_blobs_are_refused_with_hipdnn_error(cpp_engine: list[Any], case: str) -> None:
    kind, record = CASES[case]
    blob = WRITE[kind](record)
    rng = random.Random(case)
    for cut in range(0, len(blob), max(1, len(blob) // 40)):
        with pytest.raises(HipdnnError) as info:
            READ[kind](blob[:cut])
        assert info.value.code in (ErrorCode.UNSUPPORTED_GRAPH_FORMAT, ErrorCode.INVALID_VALUE)
    for _ in range(60):
        flipped = bytearray(blob)
        flipped[rng.randrange(len(blob))] ^= 1 << rng.randrange(8)
        try:
            READ[kind](bytes(flipped))
        except HipdnnError as err:
            assert err.code in (ErrorCode.UNSUPPORTED_GRAPH_FORMAT, ErrorCode.INVALID_VALUE)
            assert err.message.startswith(("Invalid hipDNN", "Graph has", "Knob", "Value"))


def test_an_unknown_union_type_is_refused_by_name() -> None:
    blob = bytearray(write_engine_config(EngineConfig(1, (KnobSetting("k", 5),))))
    tag_at = blob.index(b"\x01", 0)  # the value's union tag (the only 1-byte field)
    candidates = [i for i, byte in enumerate(blob) if byte == 1]
    for i in candidates:
        probe = bytearray(blob)
        probe[i] = 9
        try:
            read_engine_config(bytes(probe))
        except HipdnnError as err:
            if "union type 9" in err.message:
                assert err.message == (
                    "Invalid hipDNN engine config: a knob setting's value has union type 9, "
                    "not a KnobValue"
                )
                break
    else:
        pytest.fail(f"no byte was the union tag (first 1 at {tag_at})")
