"""The engine benchmark's records, read and shown: notebook 08's live run (servebench in a process of its
own: `run_live`, whose servers end with it), this machine's `make engines` record or the committed one,
their runs as tables (one row per run, one per level with the median and spread of its repeats), a
status list, and the provenance a caption carries (machine, date, load).
"""
from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd

from .. import records
from ..formulas.regime import against, ratio_columns
from ..measure.hardware import measured_label, measured_on_of, measured_when
from . import metrics

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = ROOT / "build" / "engines"
RECORD = records.RESULTS / "cpu-intel-xeon" / "engines.json"    # the committed record
STOP_S = 20.0                 # a Ctrl-C of the notebook: how long the benchmark is given to end its servers


def _servebench(*args: str) -> subprocess.CompletedProcess:
    """`python -m servebench ARGS` in a process of its own; a KeyboardInterrupt here (the notebook's Stop)
    is passed on to it as SIGINT, and it is killed if it has not ended within STOP_S."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, "-m", "servebench", *args], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate()
    except BaseException:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def available() -> tuple[list[dict], list[dict]]:
    """(the configurations this machine can run, [{name, why not}] for the others), asked of servebench.
    When that fails, none can run, and the one row says why: the notebook goes on."""
    done = _servebench("list")
    try:
        got = json.loads(done.stdout)
        return got["configs"], got["skipped"]
    except (ValueError, KeyError, TypeError):
        why = (done.stderr or "no output").strip().splitlines()
        return [], [{"name": "every configuration", "why": f"listing the servers failed: {why[-1] if why else '?'}"}]


def run_live(out: Path = RESULTS_DIR / "live.json") -> dict:
    """Notebook 08's live run (servebench's plan `live`); its record, faults included."""
    Path(out).unlink(missing_ok=True)      # what is read afterwards is this run's
    done = _servebench("run", "--out", str(out))     # its summary table: the notebook shows its own
    try:
        return records.load(out, "engines", roots=(Path(out).parent,))
    except records.RecordError as exc:
        tail = "\n".join((done.stderr or "").strip().splitlines()[-5:])
        raise RuntimeError(f"the benchmark exited with {done.returncode} and wrote no record ({exc}): {tail}") from None


def load_record() -> tuple[dict | None, str]:
    """This machine's complete `make engines` record, else the committed one, and which; (None, why) when
    neither loads."""
    for path, what in ((RESULTS_DIR / "engines.json", "this machine's make engines record"), (RECORD, "the committed record")):
        try:
            data = records.load(path, "engines", roots=(Path(path).parent,))
        except records.RecordError:
            continue
        if data.get("complete") and data.get("configs"):
            return data, f"{what} ({records.shown(path)})"
    return None, "no complete make engines record here, and no committed one"


DEFAULT_SLO = metrics.SLO(1.0, 0.1)


def slo_of(data: dict) -> metrics.SLO:
    """The SLO a run was planned with (TTFT s, TPOT s; an older record's `slo_s`); DEFAULT_SLO where none reads."""
    got = (data.get("plan") or {}).get("slo") or data.get("slo_s")
    return metrics.SLO(*got) if got and len(got) == 2 else DEFAULT_SLO     # one-sample regime: a list cut to one


RUN_COLUMNS = ("configuration", "tool", "workload", "concurrency", "rate asked", "repeat", "trace", "achieved rate",
               "others", "requests", "failed", "seconds", "output tok/s", "req/s", "TTFT mean ms", "TTFT p90 ms",
               "ITL mean ms", "ITL p90 ms", "E2E mean ms", "norm. latency ms/token", "SLO attained")


def runs_table(data: dict, slo: metrics.SLO | None = None):
    """Every run with requests as one row (configuration, tool, level, repeat, its figures); an empty table
    with every column when there is none."""
    slo = slo or slo_of(data)
    return pd.DataFrame([{"configuration": c["config"]["name"], "tool": metrics.tool(r), "workload": r.get("workload"),
                          "concurrency": None if r.get("rate") is not None else r.get("concurrency"), "rate asked": r.get("rate"),
                          "repeat": r.get("repeat", 0), "trace": r.get("trace"), "achieved rate": r.get("achieved_rate"),
                          "others": r.get("others"), **metrics.run_figures(r, slo)}
                         for c in data.get("configs") or [] for r in c.get("runs") or [] if r.get("requests_detail") is not None],
                        columns=list(RUN_COLUMNS))


LEVEL_FIGURES = ("output tok/s", "TTFT mean ms", "ITL mean ms", "E2E mean ms")


def levels_table(data: dict, slo: metrics.SLO | None = None, workload: str | None = "chat", tool: str | None = None):
    """One row per configuration, tool and level: how many runs and requests, seconds per run, the median
    of its runs' figures with their spread ((largest − smallest) ÷ median), the SLO attainment of all its
    requests, the achieved rate and whether the rate was held (open loop), the most others used meanwhile,
    and the trace the level ran (the same on every level of a run made by servebench)."""
    t = runs_table(data, slo)
    t = t[(t["workload"] == workload) if workload else t["workload"].notna()]
    t = t[t["tool"] == tool] if tool else t
    keys = ["configuration", "tool", "workload", "concurrency", "rate asked"]
    figures = {c: (f, how) for f in LEVEL_FIGURES for c, how in ((f, metrics.median), (f"{f.split()[0]} spread", metrics.spread))}
    out = t.assign(within=t["SLO attained"] * t["requests"]).groupby(keys, sort=False, dropna=False).agg(**{
        "runs": ("requests", "size"), "requests per run": ("requests", "median"), "failed": ("failed", "sum"),
        "seconds per run": ("seconds", metrics.median), **figures, "within": ("within", "sum"),
        "requests": ("requests", "sum"), "achieved rate": ("achieved rate", metrics.median),
        "others max": ("others", lambda s: pd.to_numeric(s).max()),
        "trace": ("trace", lambda s: s.iloc[0] if s.nunique(dropna=False) == 1 else "mixed")}).reset_index()
    rate = out["rate asked"].astype(float)
    out["SLO attained"] = out["within"] / out["requests"]      # of all its requests (failed ones included)
    out["achieved rate"] = out["achieved rate"].where(rate.notna())
    out["held"] = [metrics.held(r if r == r else None, a, n) for r, a, n in zip(rate, out["achieved rate"], out["requests"])]
    return out.astype({"requests per run": int})[keys + ["runs", "requests per run", "failed", "seconds per run", *figures,
                                                         "SLO attained", "achieved rate", "held", "others max", "trace"]]


def goodput_table(levels):
    """DistServe's goodput per configuration (and tool) from the open-loop levels: the highest held achieved
    rate with ≥ 90 % of requests within the SLO (nan: none), beside the rates held and not held."""
    open_loop = levels[levels["rate asked"].notna()].groupby(["configuration", "tool"], sort=False)
    return pd.DataFrame([(name, tool, metrics.distserve_goodput(zip(g["achieved rate"], g["SLO attained"], g["held"])),
                          int(g["held"].sum()), len(g) - int(g["held"].sum())) for (name, tool), g in open_loop],
                        columns=["configuration", "tool", "DistServe goodput req/s", "rates held", "rates not held"])


def ranking(levels, concurrency: int):
    """One closed-loop level's configurations by median output tok/s, highest first, each ÷ the highest
    with its label (a sorted table: what a ranking is)."""
    t = levels[(levels["concurrency"] == concurrency) & levels["rate asked"].isna()]
    out = t.sort_values("output tok/s", ascending=False)[["configuration", "tool", "output tok/s", "output spread", "runs"]]
    out = out.assign(best=out["output tok/s"].max())
    return ratio_columns(out, "output tok/s", "best", "÷ best").drop(columns="best")


def provenance(data: dict) -> str:
    """Where, when and under what load a record was measured: 'cpu: AMD EPYC (2 cores), 2026-12-02 09:50 UTC,
    profile tiny-trained; load average 1.16 at start, 1.8 at end; others used at most 0.05 of the cores: idle'."""
    m, load = measured_on_of(data), data.get("load_average") or {}
    start, end = ("?" if load.get(k) is None else f"{load[k]:g}" for k in ("start", "end"))
    others, idle = data.get("others_max"), data.get("idle")
    state = ("idle" if idle else "under load") if idle is not None else "load per run not recorded: not shown as idle"
    return (f"{measured_label(m, cores=True)}, {measured_when(m)}, profile {m['profile'] or '?'}; load average {start} at start, "
            f"{end} at end" + ("" if others is None else f"; others used at most {others:.2f} of the cores") + f": {state}")


def source_label(data: dict) -> str:
    """What a figure or table of an engine run is stamped with: the model, the device, the servers' dtypes
    and the provenance."""
    m = measured_on_of(data)
    profile = m["profile"] or "?"
    model = {"tiny": "tiny (Mistral architecture, random weights)",
             "tiny-trained": "tiny-trained (Mistral architecture, 20 M parameters)",
             "mistral-7b-random": "Mistral 7B v0.1 architecture, random weights"}.get(profile, profile)
    dtype = "fp32" if m["device"]["kind"] != "cuda" else "bf16"
    return f"measured: {model} · {dtype} · {provenance(data)}"


def status_markdown(data: dict, error: str | None = None) -> str:
    """What a run did, configuration by configuration: ready and measured, or the fault that stopped it
    (with the end of the server's log), and what was not available here and why."""
    lines = [f"- **the benchmark did not run**: {error}"] if error else []
    for c in data.get("configs") or []:
        name, runs = c["config"]["name"], c.get("runs") or []
        failed = sum(sum(1 for x in r.get("requests_detail") or [] if not x) for r in runs)
        if runs:
            ready = f"ready in {c['ready_s']:.1f} s; " if c.get("ready_s") else ""
            lines.append(f"- **{name}**: {ready}{len(runs)} runs, {failed} failed requests")
        for f in c.get("faults") or []:
            head, _, rest = str(f["detail"]).partition("\n")
            lines.append(f"- **{name}** — {f['kind']}: {head}")
            if rest.strip():
                lines.append("\n  ```text\n" + "\n".join("  " + x for x in rest.strip().splitlines()[-12:]) + "\n  ```")
    skipped = pd.DataFrame(data.get("skipped") or [], columns=["name", "why"])     # one line per reason
    lines += [f"- {', '.join(names)}: not here — {w}" for w, names in skipped.groupby("why", sort=False)["name"]]
    if data.get("interrupted"):
        lines.append("- **interrupted**: the runs that finished are shown")
    if not any(c.get("runs") for c in data.get("configs") or []):
        lines.append("\n**No server produced a measurement here.** The tables and figures that need one say so.")
    return records.mask_paths("\n".join(lines)) or "- nothing was configured to run"


BASELINE, BATCHING = "HF transformers serve", "HF transformers serve + continuous batching"


def _closed(levels, name: str):
    t = levels[(levels["configuration"] == name) & levels["rate asked"].isna()]
    return t.drop_duplicates("concurrency").set_index("concurrency")


def batching_table(levels, off: str = BASELINE, on: str = BATCHING):
    """Continuous batching off against on at each closed-loop level both ran: output tok/s and mean ITL of
    each (medians of their runs), on ÷ off with its label."""
    a, b = _closed(levels, off), _closed(levels, on)
    rows = []
    for c in sorted(set(a.index) & set(b.index)):
        row = {"concurrency": c}
        for f, short in (("output tok/s", "tok/s"), ("ITL mean ms", "ITL ms"), ("TTFT mean ms", "TTFT ms")):
            r, lab = against(b.at[c, f], a.at[c, f])
            row.update({f"{short} off": a.at[c, f], f"{short} on": b.at[c, f], f"{short} on ÷ off": r,
                        f"{short} label": lab})
        rows.append(row)
    return pd.DataFrame(rows, columns=["concurrency"] + [f"{s} {k}" for s in ("tok/s", "ITL ms", "TTFT ms")
                                                         for k in ("off", "on", "on ÷ off", "label")])


def queue_table(levels, name: str = BASELINE):
    """One request at a time under a closed loop of c clients: by Little's law each request spends c service
    times in the server (c = throughput × time in system, one served at a time), so its TTFT is its own at
    concurrency 1 plus (c − 1) answers, E2E at 1 each. Measured against that, at each level above 1."""
    t = _closed(levels, name)
    rows = []
    if 1 in t.index:
        ttft1, e2e1 = t.at[1, "TTFT mean ms"], t.at[1, "E2E mean ms"]
        for c in sorted(x for x in t.index if x > 1):
            law = ttft1 + (c - 1) * e2e1
            r, lab = against(t.at[c, "TTFT mean ms"], law)
            rows.append({"concurrency": c, "TTFT at 1 ms": ttft1, "E2E at 1 ms": e2e1, "TTFT ms": t.at[c, "TTFT mean ms"],
                         "TTFT by the law ms": law, "measured ÷ law": r, "label": lab})
    return pd.DataFrame(rows, columns=["concurrency", "TTFT at 1 ms", "E2E at 1 ms", "TTFT ms", "TTFT by the law ms",
                                       "measured ÷ law", "label"])


def client_source(name: str = "stream_one") -> str:
    """The source of one function of servebench/client.py, read as text (helpers never imports servebench):
    the lesson notebook 08 shows; "" when the file is not here."""
    path = ROOT / "servebench" / "client.py"
    try:
        text = path.read_text()
    except OSError:
        return ""
    node = next((n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.AsyncFunctionDef | ast.FunctionDef)
                 and n.name == name), None)
    return ast.get_source_segment(text, node) if node else ""
