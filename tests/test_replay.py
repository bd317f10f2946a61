"""helpers.present.replay: live by default, recorded values in replay mode (labelled, the Run live button
measures here), long sweeps waiting for their button in marimo, recordings written atomically as JSON
records with their meta, and a missing, stale or broken recording never an error."""
from __future__ import annotations

import json

import pytest

from helpers import env, records
from helpers.measure.timing import Stats
from helpers.present import replay


def Sweep(points):          # a result of helpers (a recording rebuilds only helpers' dataclasses)
    return Stats(tuple(points))


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setattr(replay, "RESULTS", tmp_path)
    monkeypatch.delenv(replay.REPLAY_ENV, raising=False)
    monkeypatch.delenv(replay.RECORD_ENV, raising=False)
    monkeypatch.setattr(replay, "in_marimo", lambda: False)
    monkeypatch.setattr(replay.hardware, "measured_on", lambda device=None, profile=None, packages=(): {
        "recorded_at": "2026-12-01T10:00:00+00:00", "device": {"kind": str(device).split(":")[0], "name": "test box"},
        "profile": profile, "versions": {"torch": "2.99"}, "git_commit": "abc", "host": None})
    monkeypatch.setattr(replay, "_META", {})
    return tmp_path


def _record(results, monkeypatch, folder, value, device="cpu", profile="tiny-trained"):
    monkeypatch.setenv(replay.RECORD_ENV, str(results / folder))
    monkeypatch.setattr(replay, "_META", {})
    m = replay.measure("01/ttft", lambda: value, profile=profile, device=device)
    monkeypatch.delenv(replay.RECORD_ENV)
    return m


def test_live_by_default(results):
    calls = []
    m = replay.measure("01/ttft", lambda x: calls.append(x) or Sweep([x]), 3, profile="tiny", device="cpu")
    assert calls == [3] and m.value == Sweep([3]) and not m.replayed
    assert m.label == "measured in this run" and m.source("live label") == "live label"
    assert "Replayed" not in m.note().text and "replay mode" not in m.note().text


def test_recording_then_replay_returns_the_recorded_value_labelled(results, monkeypatch):
    rec = _record(results, monkeypatch, "cpu-box", Sweep([1, 2, 3]))
    assert not rec.replayed
    saved = results / "cpu-box" / "replay"
    assert (saved / "01__ttft.json").is_file() and not [p for p in saved.iterdir() if p.name.startswith(".")]
    meta = json.loads((saved / "meta.json").read_text())
    assert meta["measured_on"]["profile"] == "tiny-trained" and meta["record_format"] == records.RECORD_FORMAT
    assert set(meta) == {"record_format", "kind", "measured_on"} and meta["measured_on"]["git_commit"] == "abc"
    assert json.loads((saved / "01__ttft.json").read_text())["value"] == {
        "$dataclass": "helpers.measure.timing.Stats", "fields": {"samples": {"$tuple": [1, 2, 3]}}}

    monkeypatch.setenv(replay.REPLAY_ENV, "1")
    m = replay.measure("01/ttft", lambda: pytest.fail("replay must not measure"), profile="tiny-trained", device="cpu")
    assert m.replayed and m.value == Sweep([1, 2, 3])
    assert m.label == "recorded on cpu: test box · profile tiny-trained · 2026-12-01 10:00 UTC"
    assert m.source("live") == "replayed: " + m.label
    assert "Replayed" in m.note().text and "Run live" in m.note().text
    live = replay.measure("01/ttft", lambda: Sweep(["here"]), run=True, profile="tiny-trained", device="cpu")
    assert not live.replayed and live.value == Sweep(["here"])      # the button measures here


def test_a_recording_added_later_says_its_own_where_and_when(results, monkeypatch):
    _record(results, monkeypatch, "cpu-box", Sweep([1]))
    path = results / "cpu-box" / "replay" / "01__ttft.json"
    saved = json.loads(path.read_text())
    assert saved["measured_on"]["recorded_at"] == "2026-12-01T10:00:00+00:00"      # each recording states it
    saved["measured_on"]["recorded_at"] = "2026-12-04T09:30:00+00:00"               # one re-recorded since
    path.write_text(json.dumps(saved))
    monkeypatch.setenv(replay.REPLAY_ENV, "1")
    m = replay.measure("01/ttft", list, profile="tiny-trained", device="cpu")
    assert m.label.endswith("2026-12-04 09:30 UTC")                                # not the record's meta (12-01)
    del saved["measured_on"]                                                        # a recording from before: its record's
    path.write_text(json.dumps(saved))
    assert replay.measure("01/ttft", list, profile="tiny-trained", device="cpu").label.endswith("2026-12-01 10:00 UTC")


def test_replay_prefers_a_gpu_record_and_can_name_one(results, monkeypatch):
    _record(results, monkeypatch, "cpu-box", Sweep(["cpu"]))
    _record(results, monkeypatch, "h200", Sweep(["gpu"]), device="cuda", profile="mistral-7b-random")
    monkeypatch.setenv(replay.REPLAY_ENV, "1")
    assert replay.measure("01/ttft", list, profile="tiny-trained", device="cpu").value == Sweep(["gpu"])
    monkeypatch.setenv(replay.REPLAY_ENV, "cpu-box")
    assert replay.measure("01/ttft", list, profile="tiny-trained", device="cpu").value == Sweep(["cpu"])
    for bad in ("no-such-record", "../cpu-box", "/etc"):
        monkeypatch.setenv(replay.REPLAY_ENV, bad)
        with pytest.raises(env.EnvError, match=r"a record with replays \(h200, cpu-box\)"):
            replay.measure("01/ttft", list)


def test_a_missing_or_stale_recording_runs_live_and_says_why(results, monkeypatch):
    monkeypatch.setenv(replay.REPLAY_ENV, "1")
    m = replay.measure("01/other", lambda: 7, profile="tiny", device="cpu")
    assert m.value == 7 and not m.replayed and "no recorded run holds it" in m.why_live
    assert "Measured live in replay mode" in m.note().text
    _record(results, monkeypatch, "cpu-box", Sweep([1]))
    monkeypatch.setenv(replay.REPLAY_ENV, "1")
    path = results / "cpu-box" / "replay" / "01__ttft.json"
    good = path.read_text()
    for broken, why in ((good[:-20], "is not valid JSON"),
                        (good.replace('"seconds": ', '"seconds": "abc", "x": '), "is not the recording of 01/ttft"),
                        (good.replace('"key": "01/ttft"', '"key": "02/other"'), "is not the recording of 01/ttft"),
                        (good.replace('"record_format": 1', '"record_format": 9'), "this code reads format 1"),
                        (good.replace("helpers.measure.timing.Stats", "os.system"), "is not a result type of helpers"),
                        (good.replace('"samples"', '"points"'), "changed since it was recorded"),
                        ("[1, 2]", "holds a JSON list, not an object")):
        assert broken != good
        path.write_text(broken)
        m = replay.measure("01/ttft", lambda: 8, profile="tiny", device="cpu")
        assert m.value == 8 and not m.replayed and why in m.why_live and "cpu-box/replay/01__ttft.json" in m.why_live


def test_a_corrupt_meta_skips_that_record(results, monkeypatch):
    _record(results, monkeypatch, "cpu-box", 1)
    (results / "broken" / "replay").mkdir(parents=True)
    (results / "broken" / "replay" / "meta.json").write_text("{")
    (results / "listed" / "replay").mkdir(parents=True)
    (results / "listed" / "replay" / "meta.json").write_text("[]")
    assert [p.name for p in replay.recordings()] == ["cpu-box"]


def test_in_marimo_a_long_sweep_waits_for_its_button_unless_a_matching_recording_shows(results, monkeypatch):
    from marimo._runtime.control_flow import MarimoStopError

    monkeypatch.setattr(replay, "in_marimo", lambda: True)
    with pytest.raises(MarimoStopError):
        replay.measure("01/ttft", lambda: pytest.fail("must wait for the button"), long=True,
                       profile="tiny-trained", device="cpu")
    assert replay.measure("01/ttft", lambda: 5, long=True, run=True, profile="tiny-trained", device="cpu").value == 5
    _record(results, monkeypatch, "cpu-box", Sweep(["recorded"]))
    shown = replay.measure("01/ttft", list, long=True, profile="tiny-trained", device="cpu")
    assert shown.replayed and shown.value == Sweep(["recorded"])
    with pytest.raises(MarimoStopError):       # a record of another device kind is not shown uninvited
        replay.measure("01/ttft", list, long=True, profile="tiny-trained", device="cuda")
    assert replay.measure("01/ttft", lambda: 6, profile="tiny-trained", device="cpu").value == 6   # not long: live


def test_bad_keys_and_oversized_recordings_are_refused(results, monkeypatch):
    with pytest.raises(ValueError, match="'NN/name'"):
        replay.measure("ttft", list)
    monkeypatch.setenv(replay.RECORD_ENV, str(results / "box"))
    with pytest.raises(ValueError, match="a record holds results, not a model"):
        replay.measure("01/big", lambda: "x" * (records.MAX_BYTES + 1))
    with pytest.raises(TypeError, match="cannot hold a builtins.bytes"):
        replay.measure("01/big", lambda: b"x")


@pytest.mark.parametrize("target", ["file", "/proc/nope", "/dev/null/x"])
def test_a_recording_folder_that_cannot_be_written_is_one_line(results, monkeypatch, target):
    (results / "file").write_text("")
    monkeypatch.setenv(replay.RECORD_ENV, str(results / target) if target == "file" else target)
    with pytest.raises(env.EnvError, match=r"WORKSHOP_REPLAY_RECORD=.* is not a folder this process can write"):
        replay.measure("01/x", lambda: 1)


def test_a_pickle_beside_the_records_is_never_read(results, monkeypatch):
    import pickle

    (results / "cpu-box" / "replay").mkdir(parents=True)
    records.dump(results / "cpu-box" / "replay" / "meta.json", "replay-meta",
                 {"measured_on": {"device": {"kind": "cpu"}, "profile": "tiny", "recorded_at": "2026-12-01T10:00:00+00:00"}})
    (results / "cpu-box" / "replay" / "01__ttft.pkl").write_bytes(pickle.dumps({"key": "01/ttft", "seconds": 1, "value": 5}))
    monkeypatch.setenv(replay.REPLAY_ENV, "1")
    m = replay.measure("01/ttft", lambda: 9, profile="tiny", device="cpu")
    assert m.value == 9 and not m.replayed


# the Xeon's record has no 04/larger: notebook 04 measured it after that machine's run (it runs live there);
# 05/kv_cache (moved from 07), 07/speculative, 07/cache_on_off and 07/chunked_prefill were recorded on the Xeon
# only, each with its own measured_on;
# 10/parts, 10/state_checks, 09/eviction and 09/offload retired with their measurements (issue 46)
@pytest.mark.parametrize("record, count", [("cpu-amd-epyc", 18), ("cpu-intel-xeon", 21)])
def test_every_committed_recording_loads(record, count):
    folder = records.RESULTS / record
    keys = sorted(p.stem.replace("__", "/") for p in (folder / "replay").glob("[0-9][0-9]__*.json"))
    assert len(keys) == count
    for key in keys:
        got = replay.load(key, [folder])
        assert not isinstance(got, str), got
        value, meta = got
        where = meta["measured_on"]
        assert meta["record"] == record and where["device"]["kind"] == "cpu" and where["profile"] == "tiny-trained"
