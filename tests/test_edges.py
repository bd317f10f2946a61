"""Every command line of scripts/, slides/ and scripts/engines_guide.py against hostile input (issue 33): one
line on stderr, `error: …` saying what was wrong and what is allowed, exit status 2, never a traceback — and
nothing measured, run or deleted before the input is checked."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def script(path: str):
    """A script of the repository imported as a module (its main() called here, as its command line would)."""
    spec = importlib.util.spec_from_file_location(Path(path).stem + "_under_test", ROOT / path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def run(*args, env=None, timeout=120) -> subprocess.CompletedProcess:
    full = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=full, timeout=timeout)


@pytest.fixture
def blocker(tmp_path):
    """A file where a folder is expected."""
    path = tmp_path / "a-file"
    path.write_text("x")
    return path


# ----------------------------------------------------------------------------- make slides

@pytest.mark.parametrize("args, needle", [
    (["--out", "/proc/nope"], "error: --out '/proc/nope' is not a folder this process can write (No such file or "
                              "directory); allowed: a writable folder"),
    (["--out", "{blocker}"], "is not a folder this process can write (File exists)"),
    (["--out", "{blocker}/x"], "is not a folder this process can write (Not a directory)"),
    (["--readme", "/proc/x/y.png"], "error: --readme's folder '/proc/x' is not a folder this process can write"),
    (["--bogus"], "error: python slides/figures.py: unrecognized arguments: --bogus"),
])
def test_slides_figures_refuses_where_it_cannot_write(capsys, tmp_path, blocker, args, needle):
    figures = script("slides/figures.py")          # these were tracebacks out of mkdir and savefig
    args = [a.replace("{blocker}", str(blocker)) for a in args]
    if "--out" not in args:
        args += ["--out", str(tmp_path / "out")]
    assert figures.main(args) == 2
    assert needle in one_line(capsys.readouterr().err)


def test_slides_build_says_what_to_run_first(capsys, tmp_path, monkeypatch):
    build = script("slides/build.py")
    monkeypatch.setattr(build, "OUT", tmp_path)
    for content, needle in ((None, "numbers.json not found: run `python slides/figures.py` first"),
                            ("{", "cannot read"), ("[1, 2]", "is not what slides/figures.py writes"),
                            ('{"a": {"text": "x"}}', "placeholders with no figure in numbers.json")):
        if content is not None:
            (tmp_path / "numbers.json").write_text(content)
        monkeypatch.setattr(sys, "argv", ["build.py"])
        assert build.main([]) == 2                  # FileNotFoundError, JSONDecodeError, ValueError tracebacks
        assert needle in one_line(capsys.readouterr().err)
    assert build.main(["--bogus"]) == 2
    assert one_line(capsys.readouterr().err) == "error: python slides/build.py: unrecognized arguments: --bogus"


# ----------------------------------------------------------------------------- scripts/

@pytest.mark.parametrize("argv, needle", [
    (["bogus"], "error: python scripts/notebooks.py: argument cmd: invalid choice: 'bogus'"),
    ([], "error: python scripts/notebooks.py: the following arguments are required: cmd"),
    (["run", "--timeout", "abc"], "error: python scripts/notebooks.py run: argument --timeout: must be a positive whole number"),
])
def test_notebooks_script_argument_errors_are_one_line(capsys, monkeypatch, argv, needle):
    notebooks = script("scripts/notebooks.py")     # argparse printed its usage too: two lines
    monkeypatch.setattr(sys, "argv", ["notebooks.py", *argv])
    assert notebooks.main() == 2
    assert one_line(capsys.readouterr().err).startswith(needle)


def test_make_run_refuses_every_bad_variable_before_a_notebook_runs(capsys, monkeypatch):
    """A notebook control's variable out of range stopped that notebook mid-run; now make run refuses it first,
    every refused variable one line, the lines preflight shows."""
    from helpers import preflight

    notebooks = script("scripts/notebooks.py")
    monkeypatch.setenv("WORKSHOP_OVERHEAD_PCT", "31")
    monkeypatch.setenv("WORKSHOP_CACHE", "/proc/nope")
    monkeypatch.setattr(notebooks, "_execute", lambda *a: pytest.fail("a notebook ran"))
    assert notebooks.run(["02"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"error: {p}" for p in preflight.setting_problems()] and len(err) == 2, err
    assert err[0].startswith("error: WORKSHOP_CACHE='/proc/nope' is not a folder")
    assert err[1].startswith("error: WORKSHOP_OVERHEAD_PCT='31' is not allowed; allowed: a whole number from 0 to 30")


@pytest.mark.parametrize("argv, needle", [
    (["--out", "/proc/nope", "capacity"], "error: --out '/proc/nope' is not a folder this process can write"),
    (["nonsense"], "error: unknown section(s) nonsense; allowed: roofline, capacity"),
    (["--bogus"], "error: python scripts/bench.py: unrecognized arguments: --bogus"),
])
def test_bench_refuses_before_any_section_runs(capsys, monkeypatch, argv, needle):
    bench = script("scripts/bench.py")              # --out /proc/nope was a traceback out of mkdir
    monkeypatch.setattr(bench, "run", lambda *a: pytest.fail("a section ran"))
    monkeypatch.setattr(sys, "argv", ["bench.py", *argv])
    assert bench.main() == 2
    assert one_line(capsys.readouterr().err).startswith(needle)


def test_record_room_refuses_bad_settings_before_it_deletes_the_recordings(capsys, monkeypatch, tmp_path):
    """record-replay removed the old recordings first, then ran make run, which refused the setting: a typo
    lost the committed set. Now the settings are checked first, and nothing is touched."""
    room = script("scripts/record_room.py")
    (tmp_path / "replay").mkdir()
    (tmp_path / "replay" / "kept.json").write_text("{}")
    monkeypatch.setattr(room, "record_folder", lambda: tmp_path)
    monkeypatch.setattr(room, "one_run", lambda env: pytest.fail("make run started"))
    monkeypatch.setenv("WORKSHOP_CELL_TIMEOUT", "abc")
    monkeypatch.setenv("WORKSHOP_REPLAY", "whatever")            # the runs set this one themselves: not refused
    assert room.main(["replay"]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("error: WORKSHOP_CELL_TIMEOUT='abc' is not allowed; allowed: a whole number from 1 to 86,400")
    assert (tmp_path / "replay" / "kept.json").exists()
    assert room.main(["bogus"]) == 2
    assert one_line(capsys.readouterr().err).startswith("error: python scripts/record_room.py: argument what: invalid "
                                                       "choice: 'bogus'")


def test_record_room_never_reads_an_earlier_runs_result(monkeypatch, tmp_path):
    room = script("scripts/record_room.py")
    monkeypatch.setattr(room, "ROOT", tmp_path)
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "run.json").write_text(json.dumps({"notebooks": [{"notebook": "00", "ok": True}]}))
    monkeypatch.setattr(room.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1))
    with pytest.raises(SystemExit, match="make run wrote no build/run.json"):
        room.one_run({})                         # the stale file from before was deleted, not read as this run's
    monkeypatch.setattr(room.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 2))
    with pytest.raises(SystemExit) as stop:
        room.one_run({})                         # make run refused its settings and said so: exit 2, no second line
    assert stop.value.code == 2


@pytest.mark.parametrize("argv, needle", [
    ([], "error: python scripts/record_meta.py: the following arguments are required: dest, gpu"),
    (["/proc/x", "H200"], "error: DEST '/proc/x/figures' is not a folder this process can write"),
])
def test_record_meta_arguments(capsys, argv, needle):
    meta = script("scripts/record_meta.py")         # IndexError on a missing argument
    assert meta.main(argv) == 2
    assert one_line(capsys.readouterr().err).startswith(needle)


@pytest.mark.parametrize("argv, needle", [
    (["--big", "nonsense"], "error: unknown model 'nonsense'"),
    (["--context", "-5"], "error: python scripts/record_key_figures.py: argument --context: must be a positive whole"),
    (["--out", "/proc/x"], "error: --out '/proc/x' is not a folder this process can write"),
])
def test_record_key_figures_refuses_before_it_measures(capsys, monkeypatch, argv, needle):
    from helpers.measure import microbench

    figures = script("scripts/record_key_figures.py")  # --big nonsense failed after the bandwidth and FLOP/s runs
    monkeypatch.setattr(microbench, "read_benchmark", lambda *a: pytest.fail("measured"))
    assert figures.main(argv) == 2
    assert one_line(capsys.readouterr().err).startswith(needle)


def test_extract_austen_arguments_and_a_bad_package(tmp_path):
    r = run("scripts/extract_austen.py")          # IndexError, then CalledProcessError, tracebacks both
    assert r.returncode == 2 and one_line(r.stderr) == "error: the following arguments are required: deb"
    (tmp_path / "x.deb").write_text("not a package")
    r = run("scripts/extract_austen.py", str(tmp_path / "x.deb"))
    assert r.returncode == 2 and one_line(r.stderr).startswith("error: ")
    assert str(tmp_path / "x.deb") in r.stderr


# ----------------------------------------------------------------------------- python scripts/engines_guide.py

def test_benchmark_guide_refuses_what_is_not_a_record(tmp_path):
    guide_md = tmp_path / "engines.md"
    guide_md.write_text((ROOT / "workshop" / "engines.md").read_text())
    before = guide_md.read_text()
    (tmp_path / "plain.json").write_text("{}")
    (tmp_path / "empty.json").write_text('{"record_format": 1, "kind": "engines"}')
    (tmp_path / "bad.json").write_text('{"record_format": 1, "kind": "engines", "configs": [1]}')
    for record, needle in ((tmp_path / "none.json", "No such file or directory"), (ROOT / "README.md", "README.md is not valid JSON"),
                           (tmp_path / "plain.json", "plain.json is record format None"),
                           (tmp_path / "empty.json", "is not a make engines record (a JSON object with its configs)"),
                           (tmp_path / "bad.json", "is not a make engines record (TypeError")):
        r = run("scripts/engines_guide.py", "--record", str(record), "--write", str(guide_md))
        assert r.returncode == 2 and needle in one_line(r.stderr), r.stderr
    assert guide_md.read_text() == before                      # nothing written
    r = run("scripts/engines_guide.py", "--write", "/proc/nope.md")
    assert r.returncode == 2 and one_line(r.stderr).startswith("error: cannot read /proc/nope.md")
