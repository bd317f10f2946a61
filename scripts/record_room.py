"""Record what the room needs, on the default profile, into workshop/results/<device>/ (commit it):

    python scripts/record_room.py times     # make record-times: run_times.json
    python scripts/record_room.py replay    # make record-replay: replay/ (helpers.present.replay)

- times: `make run` twice — first with nothing cached (a fresh model cache, so the tiny model is built and
  trained as on a newcomer's machine), then cached — seconds per notebook and per section, with where
  and with what (helpers.measure.hardware.measured_on) and the load average at the end. `make export`
  then regenerates the guide's tables from it.
- replay: `make run` once with WORKSHOP_REPLAY_RECORD set: every measurement behind helpers.present.replay is
  saved, for replay mode (WORKSHOP_REPLAY=1) on a machine with no GPU or no time; then `make run` once in
  replay mode, its seconds per notebook written beside the recordings (replay/run_times.json): what the
  room waits for when every long cell shows its recording.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def one_run(env: dict) -> dict:
    """One `make run` (scripts/notebooks.py run) and its build/run.json; SystemExit when it refused its settings
    (its one line printed, exit 2) or a notebook failed."""
    result = ROOT / "build" / "run.json"
    result.unlink(missing_ok=True)                 # never an earlier run's file read as this one's
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "notebooks.py"), "run"], cwd=ROOT, env=env)
    if r.returncode == 2:                          # a refused setting, already said in one line: nothing ran
        raise SystemExit(2)
    from helpers import records

    if not result.is_file():
        raise SystemExit(f"record: make run wrote no {result.relative_to(ROOT)} (exit {r.returncode}); nothing recorded")
    try:
        data = records.load(result, "run", roots=(result.parent,))
    except records.RecordError as exc:
        raise SystemExit(f"record: {exc} (make run exited {r.returncode}); nothing recorded") from None
    failed = [n["notebook"] for n in data["notebooks"] if not n["ok"]]
    if r.returncode or failed:
        raise SystemExit(f"record-times: a notebook failed ({', '.join(failed) or r.returncode}); nothing recorded")
    return data


def record_folder() -> Path:
    """workshop/results/<device>: 'cpu-amd-epyc' on this CPU, 'h200' on an NVIDIA H200 (as make record names it)."""
    from helpers.measure.hardware import device_info

    info = device_info()
    slug = re.sub(r"[^a-z0-9]+", "-", re.sub(r"\(r\)|\(tm\)|cpu @.*$|^nvidia ", "", info.name.lower())).strip("-")
    return ROOT / "workshop" / "results" / f"{'cpu-' if info.kind == 'cpu' else ''}{slug or info.kind}"


SET_HERE = ("WORKSHOP_PROFILE", "WORKSHOP_REPLAY", "WORKSHOP_REPLAY_RECORD")   # the runs' own, not the caller's


def base_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in SET_HERE}
    env["HF_HUB_OFFLINE"] = env.get("HF_HUB_OFFLINE", "1")
    return env


def replay() -> int:
    import shutil

    from helpers import records
    from helpers.measure.hardware import MEASURED_ON, measured_on, measured_on_of

    folder = record_folder()
    shutil.rmtree(folder / "replay", ignore_errors=True)      # a new set, not a mix with an older one
    env = base_env()
    env["WORKSHOP_REPLAY_RECORD"] = str(folder)
    one_run(env)
    n = len([p for p in (folder / "replay").glob("[0-9][0-9]__*.json")])
    print(f"record-replay: {n} measurements in {(folder / 'replay').relative_to(ROOT)}")
    env = base_env()
    env["WORKSHOP_REPLAY"] = "1"
    run = one_run(env)
    seconds = {nb["notebook"]: nb["seconds"] for nb in run["notebooks"]}
    data = {MEASURED_ON: measured_on(profile=measured_on_of(run)["profile"]),
            "load_average_after": round(os.getloadavg()[0], 1),
            "total_s": round(sum(seconds.values()), 1), "notebooks": seconds}
    records.dump(folder / "replay" / "run_times.json", "replay-run-times", data)
    print(f"record-replay: every notebook in replay mode took {data['total_s']:.0f} s in all")
    return 0


def times() -> int:
    from helpers import records
    from helpers.measure.hardware import MEASURED_ON, measured_on, measured_on_of

    env = base_env()
    with tempfile.TemporaryDirectory(prefix="workshop-cache-") as cache:
        env["WORKSHOP_CACHE"] = cache
        first = one_run(env)
        cached = one_run(env)
    out = record_folder() / "run_times.json"
    out.parent.mkdir(parents=True, exist_ok=True)

    def per_notebook(run: dict) -> dict:
        return {n["notebook"]: {"seconds": n["seconds"], "sections": n.get("sections", {})} for n in run["notebooks"]}

    data = {MEASURED_ON: measured_on(profile=measured_on_of(cached)["profile"]),
            "load_average_after": round(os.getloadavg()[0], 1),
            "first": per_notebook(first), "cached": per_notebook(cached)}
    records.dump(out, "run-times", data)
    print(f"record-times: wrote {out.relative_to(ROOT)}; run `make export` to regenerate the guide's tables")
    return 0


def main(argv=None) -> int:
    import argparse

    from cli_common import fail_lines
    from helpers.command import CliError, Parser, fail

    ap = Parser(prog="python scripts/record_room.py", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("times", "replay"))
    try:
        a = ap.parse_args(argv)
    except CliError as exc:
        return fail(str(exc))
    from unittest import mock

    from helpers import preflight

    with mock.patch.dict(os.environ):      # the runs set these themselves: checked without them, then restored
        for name in SET_HERE:
            os.environ.pop(name, None)
        problems = preflight.setting_problems()
    if problems:                           # refused before anything is deleted or run, as preflight says it
        return fail_lines("\n".join(problems))
    return times() if a.what == "times" else replay()


if __name__ == "__main__":
    sys.exit(main())
