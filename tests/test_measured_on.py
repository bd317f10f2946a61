"""Where and with what a record was measured: one owner (helpers.measure.hardware.measured_on), one shape in
every record (under "measured_on"), one reader (measured_on_of) — for every writer and every committed record."""
import json
import re
import sys
from pathlib import Path

import pytest

from helpers import records
from helpers.measure import hardware
from helpers.measure.hardware import DEVICE_FIELDS, HOST_FIELDS, MEASURED_FIELDS, MEASURED_ON, measured_on, measured_on_of
from helpers.versions import LIBRARIES

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
WHEN = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00")


def test_measured_on_says_where_when_and_with_what():
    import torch

    m = measured_on("cpu", "tiny-trained", ("psutil", "no-such-package-here"))
    assert tuple(m) == MEASURED_FIELDS and WHEN.fullmatch(m["recorded_at"])
    assert m["device"] == {**hardware.device_info("cpu").to_dict(), "free_memory": m["device"]["free_memory"]}
    assert m["device"]["kind"] == "cpu" and m["device"]["cores"] == torch.get_num_threads()
    assert m["profile"] == "tiny-trained" and m["versions"]["torch"] == torch.__version__
    assert set(LIBRARIES) | {"python", "psutil"} <= set(m["versions"])
    assert m["versions"]["no-such-package-here"] == "not installed" and m["versions"]["psutil"][0].isdigit()
    assert tuple(m["host"]) == HOST_FIELDS and m["host"]["torch_threads"] == torch.get_num_threads()
    assert m["git_commit"] is None or re.fullmatch(r"[0-9a-f]{7,40}", m["git_commit"])
    assert measured_on_of({MEASURED_ON: m}) == m                     # the reader reads back what was written


def test_the_reader_gives_none_for_what_a_record_does_not_state():
    empty = measured_on_of({})
    assert tuple(empty) == MEASURED_FIELDS and empty["device"] == dict.fromkeys(DEVICE_FIELDS)
    assert empty["recorded_at"] is None and empty["host"] is None and empty["versions"] is None
    odd = measured_on_of({MEASURED_ON: {"device": {"kind": "cpu", "name": ["x"]}, "recorded_at": 5, "host": 1}})
    assert odd["device"]["kind"] == "cpu" and odd["device"]["name"] is None and odd["recorded_at"] is None
    assert hardware.measured_label(odd) == "cpu: ?" and hardware.measured_when(odd) == "?"
    m = measured_on_of({MEASURED_ON: {"recorded_at": "2026-12-01T10:02:59+00:00",
                                      "device": {"kind": "cuda", "name": "NVIDIA H200", "cores": 132}}})
    assert hardware.measured_label(m, cores=True) == "cuda: NVIDIA H200 (132 cores)"
    assert hardware.measured_when(m) == "2026-12-01 10:02 UTC"


@pytest.fixture
def fixed(monkeypatch):
    """measured_on with its clock and commit fixed, so that every writer's copy can be compared."""
    real = hardware.measured_on
    calls = []

    def fake(device=None, profile=None, packages=()):
        calls.append((device, profile, tuple(packages)))
        return {**real(device, profile, packages), "recorded_at": "2026-12-01T10:00:00+00:00"}

    monkeypatch.setattr(hardware, "measured_on", fake)
    return calls


def test_every_writer_puts_the_one_shape_under_the_one_key(tmp_path, monkeypatch, fixed):
    from servebench import harness
    from helpers.present import replay

    import bench as bench_script  # scripts/bench.py

    written = {}
    # replay's recordings (make record-replay)
    monkeypatch.setenv(replay.RECORD_ENV, str(tmp_path / "rec"))
    monkeypatch.delenv(replay.REPLAY_ENV, raising=False)
    monkeypatch.setattr(replay, "_META", {})
    replay.measure("01/x", lambda: 1, profile="tiny", device="cpu")
    written["replay"] = records.load(tmp_path / "rec" / "replay" / "meta.json", "replay-meta", roots=(tmp_path,))
    # make bench's sections
    monkeypatch.setattr(bench_script, "SECTIONS", {"fake": lambda: {"device": "cpu", "profile": "tiny", "x": 1.0}})
    assert bench_script.run(["fake"], tmp_path / "bench") == 0
    written["bench"] = records.load(tmp_path / "bench" / "fake.json", "bench", roots=(tmp_path,))
    # make engines' record, before its first level
    written["engines"] = harness.new_record(harness.PLANS["live"], "cpu", "tiny-trained", "set", [])
    # make record-times and make record-replay (their runs of every notebook faked: one notebook, one second)
    import record_room  # scripts/record_room.py

    run = {MEASURED_ON: {"profile": "tiny-trained"}, "notebooks": [{"notebook": "01_a", "seconds": 1.0, "sections": {}}]}
    monkeypatch.setattr(record_room, "one_run", lambda env: run)
    monkeypatch.setattr(record_room, "record_folder", lambda: tmp_path / "room")
    monkeypatch.setattr(record_room, "ROOT", tmp_path)                # where it says it wrote
    assert record_room.times() == 0 and record_room.replay() == 0
    written["run times"] = records.load(tmp_path / "room" / "run_times.json", "run-times", roots=(tmp_path,))
    written["replay run times"] = records.load(tmp_path / "room" / "replay" / "run_times.json", "replay-run-times",
                                               roots=(tmp_path,))
    # a recorded run's meta.json (make record, make gpu-record)
    import record_meta  # scripts/record_meta.py

    monkeypatch.setenv("WORKSHOP_PROFILE", "tiny")
    assert record_meta.main([str(tmp_path / "record"), "cpu test"]) == 0
    written["record"] = records.load(tmp_path / "record" / "meta.json", "record-meta", roots=(tmp_path,))

    for what, data in written.items():
        m = data[MEASURED_ON]
        assert tuple(m) == MEASURED_FIELDS, what
        assert tuple(m["device"]) == DEVICE_FIELDS and tuple(m["host"]) == HOST_FIELDS, what
        assert m["recorded_at"] == "2026-12-01T10:00:00+00:00" and m["device"]["kind"] == "cpu", what
        assert not {"recorded_at", "machine", "device_kind", "versions", "git_commit", "measured_at"} & set(data), what
    assert written["bench"]["device"] == "cpu" and written["bench"]["x"] == 1.0     # the section's own, kept
    assert written["run times"]["cached"] == {"01_a": {"seconds": 1.0, "sections": {}}}
    assert written["replay run times"]["notebooks"] == {"01_a": 1.0} and written["record"]["gpu"] == "cpu test"
    assert written["run times"][MEASURED_ON]["profile"] == "tiny-trained" == written["replay run times"][MEASURED_ON]["profile"]
    assert written["record"][MEASURED_ON]["profile"] == "tiny"
    assert written["replay"][MEASURED_ON]["profile"] == "tiny" and written["engines"][MEASURED_ON]["profile"] == "tiny-trained"
    assert set(written["engines"][MEASURED_ON]["versions"]) - set(written["replay"][MEASURED_ON]["versions"]) \
        == set(harness.PACKAGES)                      # the engines add their servers' packages, nothing else
    assert [c[2] for c in fixed] == [(), (), harness.PACKAGES, (), (), ()]
    from report import write_run_json  # scripts/report.py: build/run.json, make run's own
    run_json = records.load(write_run_json([("01_a", True, 1.0, "")], tmp_path, "tiny", "cpu"), "run", roots=(tmp_path,))
    assert tuple(run_json[MEASURED_ON]) == MEASURED_FIELDS and run_json[MEASURED_ON]["profile"] == "tiny"


def _committed() -> list[Path]:
    out = []
    for p in sorted(records.RESULTS.rglob("*.json")):
        if p.parent.name == "replay" and p.name[:2].isdigit():
            continue                                   # a recording's value, not a record's meta
        if p.name == "key_figures.json":
            continue                                   # figures only; its record's meta.json says where
        out.append(p)
    return out


def test_the_committed_records_are_all_found():
    names = {str(p.relative_to(records.RESULTS)) for p in _committed()}
    for record in ("cpu-amd-epyc", "cpu-intel-xeon"):
        assert {f"{record}/meta.json", f"{record}/run_times.json", f"{record}/replay/meta.json",
                f"{record}/replay/run_times.json"} <= names
    assert {"cpu-intel-xeon/engines.json", "cpu-amd-epyc/roofline.json", "cpu-amd-epyc/serving.json"} <= names


@pytest.mark.parametrize("path", _committed(), ids=lambda p: str(p.relative_to(records.RESULTS)))
def test_every_committed_record_has_the_one_shape(path):
    data = records.load(path, roots=(records.RESULTS,))
    raw = json.loads(path.read_text())
    m = raw[MEASURED_ON]
    assert tuple(m) == MEASURED_FIELDS
    assert not {"recorded_at", "machine", "device_kind", "versions", "git_commit", "measured_at", "meta"} & set(raw)
    assert WHEN.fullmatch(m["recorded_at"])
    assert m["device"] is None or (tuple(m["device"]) == DEVICE_FIELDS and m["device"]["kind"] in ("cpu", "cuda", "mps")
                                   and isinstance(m["device"]["name"], str) and m["device"]["name"])
    assert m["host"] is None or tuple(m["host"]) == HOST_FIELDS
    assert m["profile"] is None or m["profile"] in ("tiny", "tiny-trained", "small", "mistral-7b", "mistral-7b-random")
    if m["versions"] is not None and m["device"] is not None and m["device"]["torch_version"] is not None:
        assert m["versions"]["torch"] == m["device"]["torch_version"]
    assert m["git_commit"] is None or re.fullmatch(r"[0-9a-f]{7,40}", m["git_commit"])
    assert measured_on_of(data) == {**m, "device": m["device"] or dict.fromkeys(DEVICE_FIELDS)}
