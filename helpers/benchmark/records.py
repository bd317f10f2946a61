"""The engine benchmark's records, shown: the full comparison to put beside a short live run (this
machine's `make engines` result, else the committed record), its runs as one table, a status line, and
the label a figure is stamped with. Notebook 08's live run is harness.run_all in a process of its own
(`run_live`): the servers it starts end with it, and the notebook reads the record it wrote.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .. import records
from ..measure.hardware import measured_on_of, measured_when
from .agreement import OURS
from .metrics import ROW_COLUMNS, RunSummary

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = ROOT / "build" / "engines"

# older recordings timed guidellm's requests at a relay between it and the server (its "tap"): the same
# definitions on the same requests as OURS, read from guidellm's own per-request output now
LEGACY_SOURCES = {"tap": OURS}


RECORD = records.RESULTS / "cpu-amd-epyc" / "engines.json"


def _benchmark(*args: str, capture: bool) -> subprocess.CompletedProcess:
    """`python -m helpers.benchmark.harness ARGS`: notebook 08's run (or list), the servers its own children."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "helpers.benchmark.harness", *args], env=env, text=True,
                          stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE, check=capture)


def available() -> tuple[list[dict], list[dict]]:
    """(the configurations this machine can run, [{name, why not}] for the others): servers.available().
    When the process that asks fails, none can run, and the one row says why: the notebook goes on."""
    try:
        got = json.loads(_benchmark("--list", capture=True).stdout)
        return got["configs"], got["skipped"]
    except (subprocess.CalledProcessError, ValueError, KeyError, TypeError) as exc:
        why = (getattr(exc, "stderr", None) or str(exc)).strip().splitlines()
        return [], [{"name": "every configuration", "why": f"listing the servers failed: {why[-1] if why else exc}"}]


def run_live(out: Path = RESULTS_DIR / "notebook08.json") -> dict:
    """Notebook 08's short run (plans.notebook_plan: transformers serve, vLLM); its record, faults included."""
    Path(out).unlink(missing_ok=True)      # what is read afterwards is this run's
    done = _benchmark(str(out), capture=False)
    try:
        return records.load(out, "engines", roots=(Path(out).parent,))
    except records.RecordError as exc:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"the benchmark exited with {done.returncode} and wrote no record ({exc}): {tail}") from None


def load_record(here: Path | None = None, committed: Path | None = None) -> tuple[dict | None, str]:
    """This machine's complete `make engines` result, else the committed record, and a label that says
    which; (None, why) when neither loads."""
    for path, what in ((here or RESULTS_DIR / "engines.json", "this machine's make engines run"),
                       (committed or RECORD, "the committed record")):
        try:
            data = records.load(path, "engines", roots=(Path(path).parent,))
        except records.RecordError:
            continue
        if data.get("complete") and data.get("configs"):
            return data, f"{what} ({records.shown(path)}): {measured_when(measured_on_of(data))}"
    return None, "no complete make engines result here, and no committed record"


def runs_table(data: dict):
    """Every run of a benchmark result as a DataFrame (one row per configuration, tool and level). With no
    run at all (every server failed), an empty table that still has every column, so that what reads it
    (figures, guide rules, pivots) finds nothing to compare rather than a missing column."""
    import pandas as pd

    rows = []
    for c in data.get("configs", []):
        for r in c["runs"]:
            s = RunSummary(**{k: v for k, v in r.items() if k in RunSummary.__dataclass_fields__})
            s.source = LEGACY_SOURCES.get(s.source, s.source)
            rows.append(dict(s.row(), workload=r.get("workload")))
    return pd.DataFrame(rows, columns=[*ROW_COLUMNS, "workload"])


def status_markdown(data: dict, error: str | None = None) -> str:
    """What a benchmark run did, configuration by configuration, in markdown: ready and measured, or the
    fault that stopped it (its kind, the detail with the end of the server's log), and what was not
    available here and why. `error`: the exception that stopped the whole run, if one did."""
    lines = []
    if error:
        lines.append(f"- **the benchmark did not run**: {error}")
    for c in data.get("configs", []):
        name, runs = c["config"]["name"], c["runs"]
        failed = sum(r["failed"] for r in runs)
        if runs:
            ready = f"ready in {c['ready_s']:.1f} s; " if c.get("ready_s") else ""
            lines.append(f"- **{name}**: {ready}{len(runs)} runs, {failed} failed requests "
                         f"({sum(r['run_failed'] for r in runs)} runs without any success)")
        for f in c["faults"]:
            head, _, rest = str(f["detail"]).partition("\n")
            lines.append(f"- **{name}** — {f['kind']}: {head}")
            if rest.strip():
                lines.append("\n  ```text\n" + "\n".join("  " + x for x in rest.strip().splitlines()[-12:]) + "\n  ```")
    for sk in data.get("skipped", []):
        lines.append(f"- {sk['name']}: not here — {sk['why']}")
    if not any(c["runs"] for c in data.get("configs", [])):
        lines.append("\n**No server produced a measurement here.** The figures and tables that need one say so in "
                     "place; the decision guide, the exercises and the takeaways below do not need a server.")
    return records.mask_paths("\n".join(lines)) or "- nothing was configured to run"   # a log names folders


def source_label(data: dict) -> str:
    """What a figure of an engine run says produced it: the model, the device, the profile and the servers
    (each server chose its own dtype; the record says which command started it)."""
    m = measured_on_of(data)
    profile = m["profile"] or "?"
    device = "cuda" if m["device"]["kind"] == "cuda" else "cpu"
    model = {"tiny": "tiny (Mistral architecture, random weights)",
             "mistral-7b-random": "Mistral 7B v0.1 architecture, random weights"}.get(profile, profile)
    engines = sorted({c["config"]["engine"] for c in data.get("configs", [])})
    return (f"measured: {model} · {device} · profile {profile} · "
            f"servers: {', '.join(engines) or 'none'}")
