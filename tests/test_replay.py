"""helpers.present.replay: live by default, recorded values in replay mode (labelled, the Run live button
measures here), long sweeps waiting for their button in marimo, recordings written atomically with their
meta, and a missing or stale recording never an error."""
from __future__ import annotations

import json
import pickle
from dataclasses import dataclass

import pytest

from helpers.present import replay


@dataclass
class Sweep:
    points: list


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setattr(replay, "RESULTS", tmp_path)
    monkeypatch.delenv(replay.REPLAY_ENV, raising=False)
    monkeypatch.delenv(replay.RECORD_ENV, raising=False)
    monkeypatch.setattr(replay, "_interactive", lambda: False)
    monkeypatch.setattr(replay, "record_meta", lambda profile, device: {
        "recorded_at": "2026-12-01T10:00:00+00:00", "device": f"{device}: test box",
        "device_kind": str(device).split(":")[0], "profile": profile, "git_commit": "abc"})
    monkeypatch.setattr(replay, "_RECORDER", replay._Recorder())
    return tmp_path


def _record(results, monkeypatch, folder, value, device="cpu", profile="tiny-trained"):
    monkeypatch.setenv(replay.RECORD_ENV, str(results / folder))
    monkeypatch.setattr(replay, "_RECORDER", replay._Recorder())
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
    assert (saved / "01__ttft.pkl").is_file() and not list(saved.glob("*.tmp"))
    assert json.loads((saved / "meta.json").read_text())["profile"] == "tiny-trained"

    monkeypatch.setenv(replay.REPLAY_ENV, "1")
    m = replay.measure("01/ttft", lambda: pytest.fail("replay must not measure"), profile="tiny-trained", device="cpu")
    assert m.replayed and m.value == Sweep([1, 2, 3])
    assert m.label == "recorded on cpu: test box · profile tiny-trained · 2026-12-01 10:00:00 UTC"
    assert m.source("live") == "replayed: " + m.label
    assert "Replayed" in m.note().text and "Run live" in m.note().text
    live = replay.measure("01/ttft", lambda: Sweep(["here"]), run=True, profile="tiny-trained", device="cpu")
    assert not live.replayed and live.value == Sweep(["here"])      # the button measures here


def test_replay_prefers_a_gpu_record_and_can_name_one(results, monkeypatch):
    _record(results, monkeypatch, "cpu-box", Sweep(["cpu"]))
    _record(results, monkeypatch, "h200", Sweep(["gpu"]), device="cuda", profile="mistral-7b-random")
    monkeypatch.setenv(replay.REPLAY_ENV, "1")
    assert replay.measure("01/ttft", list, profile="tiny-trained", device="cpu").value == Sweep(["gpu"])
    monkeypatch.setenv(replay.REPLAY_ENV, "cpu-box")
    assert replay.measure("01/ttft", list, profile="tiny-trained", device="cpu").value == Sweep(["cpu"])
    monkeypatch.setenv(replay.REPLAY_ENV, "no-such-record")
    with pytest.raises(ValueError, match="neither 1 nor a recorded run with replays; recorded: h200, cpu-box"):
        replay.measure("01/ttft", list)


def test_a_missing_or_stale_recording_runs_live_and_says_why(results, monkeypatch):
    monkeypatch.setenv(replay.REPLAY_ENV, "1")
    m = replay.measure("01/other", lambda: 7, profile="tiny", device="cpu")
    assert m.value == 7 and not m.replayed and "no recorded run holds it" in m.why_live
    assert "Measured live in replay mode" in m.note().text
    _record(results, monkeypatch, "cpu-box", 1)
    monkeypatch.setenv(replay.REPLAY_ENV, "1")
    (results / "cpu-box" / "replay" / "01__ttft.pkl").write_bytes(pickle.dumps({"seconds": 1.0})[:-3])  # truncated
    m = replay.measure("01/ttft", lambda: 8, profile="tiny", device="cpu")
    assert m.value == 8 and "no longer loads" in m.why_live


def test_a_corrupt_meta_skips_that_record(results, monkeypatch):
    _record(results, monkeypatch, "cpu-box", 1)
    (results / "broken" / "replay").mkdir(parents=True)
    (results / "broken" / "replay" / "meta.json").write_text("{")
    assert [p.name for p in replay.recordings()] == ["cpu-box"]


def test_in_marimo_a_long_sweep_waits_for_its_button_unless_a_matching_recording_shows(results, monkeypatch):
    from marimo._runtime.control_flow import MarimoStopError

    monkeypatch.setattr(replay, "_interactive", lambda: True)
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
    with pytest.raises(ValueError, match="should return its results, not a model"):
        replay.measure("01/big", lambda: b"x" * (replay.MAX_BYTES + 1))
