"""Run times from records, never typed (helpers.present.run_times): section seconds read from an executed
notebook's own cell timings, every committed record's run times read, the agenda fitting on the slowest,
the guide's table and each notebook's header made from them."""
from __future__ import annotations

import re

import pytest

from helpers import records
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import agenda  # noqa: E402  (scripts/agenda.py)
import notebooks  # noqa: E402  (scripts/notebooks.py)
from helpers.present import run_times  # noqa: E402

NOTEBOOKS = sorted(p.stem for p in agenda.NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def test_section_times_come_from_the_cells_own_timings():
    def cell(src, start, end):
        return {"source": src, "metadata": {"execution": {"iopub.execute_input": f"2026-12-01T10:00:{start}Z",
                                                          "shell.execute_reply": f"2026-12-01T10:00:{end}Z"}}}

    nb = {"cells": [cell("import torch", "00.0", "02.5"),
                    cell('mo.md("""\n## 1 · Memory\n""")', "02.5", "02.6"),
                    cell("sweep()", "03.0", "13.0"), cell("plot()", "13.0", "14.0"),
                    cell('mo.md("""\n## Exercises\n""")', "14.0", "14.1"), {"source": "never ran", "metadata": {}}]}
    assert notebooks.section_times(nb) == {"set-up": 2.5, "1 · Memory": 11.1, "Exercises": 0.1}


def test_both_cpu_records_are_read_with_their_machines():
    times = {t.record: t for t in run_times.run_times()}
    assert {"cpu-amd-epyc", "cpu-intel-xeon"} <= set(times)
    epyc, xeon = times["cpu-amd-epyc"], times["cpu-intel-xeon"]
    assert epyc.device == "AMD EPYC" and xeon.device == "Intel Xeon"
    for t in (epyc, xeon):
        assert t.measured["profile"] == "tiny-trained" and set(t.cached) == set(NOTEBOOKS)
        assert t.measured["device"]["kind"] == "cpu" and not t.is_gpu
    assert epyc.label == "cpu: AMD EPYC (2 cores)" and epyc.measured["recorded_at"] == "2026-12-01T11:45:42+00:00"
    # the values are the records' own (workshop/results/cpu-intel-xeon/README.md quotes the same)
    assert xeon.notebook_seconds("08") == 65.0 and xeon.notebook_seconds("00", "first") == 80.2
    assert xeon.notebook_seconds("03", "first") is None            # not kept by that record: never invented
    assert epyc.notebook_seconds("00", "first") == 453.3


def test_every_slot_covers_its_talk_and_its_live_sections_on_every_record():
    times = run_times.run_times()
    a = agenda.load()
    for f in agenda.fit(a, times):
        assert f.run_minutes is not None, f"{f.slot.id}: a live section has no recorded run time"
        assert f.fits, f"{f.slot.id}: needs {f.need_minutes:.1f} min, has {f.slot.minutes:g}"
    for t in times:
        for f in agenda.fit(a, [t]):
            assert f.fits, f"{f.slot.id} does not fit on {t.device}"


def test_replay_mode_runs_every_notebook_in_under_three_minutes_on_every_record():
    """The room with no time: each committed record of `make record-replay`'s replay-mode run."""
    for t in run_times.run_times():
        assert t.replay is not None, f"{t.record}: no replay-mode run recorded (make record-replay)"
        assert set(t.replay) == set(t.cached)               # every notebook
        assert sum(t.replay.values()) < 180


def test_the_table_lists_every_record_first_cached_and_replay(tmp_path):
    nb = {"seconds": 20.0, "sections": {}}
    records.dump(tmp_path / "cpu-x" / "run_times.json", "run-times", {
        "measured_on": {"recorded_at": "2026-12-01T00:00:00+00:00", "device": {"kind": "cpu", "name": "Box X", "cores": 2},
                        "profile": "tiny-trained"}, "load_average_after": 1.5,
        "first": {"01_a": {"seconds": 200.0, "sections": {}}}, "cached": {"01_a": nb, "02_b": nb}})
    plain = notebooks.run_times_table(run_times.run_times(tmp_path))
    assert "| `01_a` | 3.3 min | 20 s | – |" in plain and "| `02_b` | – | 20 s | – |" in plain
    records.dump(tmp_path / "cpu-x" / "replay" / "run_times.json", "replay-run-times",
                 {"notebooks": {"01_a": 4.2, "02_b": 5.9}})
    records.dump(tmp_path / "cpu-y" / "run_times.json", "run-times", {
        "measured_on": {"device": {"kind": "cpu", "name": "Box Y"}}, "first": {}, "cached": {"01_a": {"seconds": 7.0, "sections": {}}}})
    table = notebooks.run_times_table(run_times.run_times(tmp_path))
    assert "| notebook | Box X: first run | cached | replay mode | Box Y: first run | cached | replay mode |" in table
    assert "| `01_a` | 3.3 min | 20 s | 4 s | – | 7 s | – |" in table and "10 s for all 2 notebooks" in table
    assert "on cpu: Box X (2 cores), profile tiny-trained, 2026-12-01, load average 1.5 at the end" in table
    assert "on cpu: Box Y, profile ?, ?" in table            # what an older record does not state reads '?'
    assert notebooks.run_times_table([]).startswith("_No recorded run times yet")


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_each_header_is_a_table_of_every_records_times_and_no_gpu_it_does_not_have(stem):
    table = run_times.header(stem[:2])
    times = run_times.run_times()
    for t in times:
        cells = [t.notebook_seconds(stem[:2]), t.notebook_seconds(stem[:2], "first"), t.replay_seconds(stem[:2])]
        row = " | ".join("–" if c is None else run_times.seconds(c) for c in cells)
        assert f"| {t.device} (`workshop/results/{t.record}/run_times.json`) | {row} |" in table
    assert "| machine | cached run | first run | replay mode |" in table
    if not any(t.is_gpu for t in times):
        assert "| a GPU | not recorded yet |" in table
    assert not re.search(r"\b(few|several|about|under|minutes? on)\b", table)     # nothing typed


def test_a_record_that_cannot_be_read_is_left_out(tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "run_times.json").write_text("{")
    assert run_times.run_times(tmp_path) == []
