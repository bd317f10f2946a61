"""The engine benchmark: every configuration this machine can run, one after another, each in its own
server process (started, warmed up, measured at several concurrency levels, stopped), no manual
restarts. `make engines` runs it and writes one JSON file, atomically, with the machine and versions.

Faults are results, not crashes: a request that fails is counted in its run; a server that dies
mid-run ends that configuration (the levels it did not reach are recorded as not run, with why) and
the benchmark goes on with the next; a server that never becomes ready is recorded with its log tail.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..serving.traces import TraceRequest, agentic_trace, chat_trace
from . import client
from .metrics import ROW_COLUMNS, SLO, RunSummary, summarize
from .process import ServerError, ServerProcess
from .servers import EngineConfig


DEATH_GRACE_S = 3.0   # how long a server that refused connections is given to be seen exiting
RESULTS_DIR = Path(__file__).resolve().parents[2] / "build" / "engines"   # the repository's build/engines


@dataclass
class Plan:
    """What to run: named workloads, concurrency levels, the SLO for goodput, guidellm or not."""

    workloads: dict[str, list[TraceRequest]]
    concurrencies: tuple[int, ...]
    slo: SLO
    guidellm_workload: str | None = "fixed"
    timeout_s: float = 120.0
    notes: list[str] = field(default_factory=list)


def plan_for(device: str, quick: bool = False) -> Plan:
    """Workloads and levels sized for the device: a CPU with the tiny model (seconds per run) or a GPU
    with Mistral 7B (the talk's workload: 10 concurrent requests × 50 tokens behind a shared prefix of
    about 1,656 tokens — 1,270 words at about 1.3 tokens a word)."""
    if device == "cpu":
        n = 8 if quick else 16
        return Plan({"fixed": chat_trace(n, seed=1, prompt_words_median=48, output_tokens_median=32, sigma=0.0),
                     "chat": chat_trace(n, seed=0, prompt_words_median=48, output_tokens_median=24, max_output_tokens=64),
                     "agentic": agentic_trace(agents=4, review_rounds=1, system_words=200, proposal_tokens=24,
                                              review_tokens=12)},
                    (1, 4) if quick else (1, 4, 8), SLO(ttft_s=1.0, tpot_s=0.1), timeout_s=120.0)
    if quick:   # a lent GPU's minutes (scripts/gpu_record.sh): the talk's workload alone, alone and all at once
        return Plan({"talk": agentic_trace(agents=10, review_rounds=0, system_words=1270, proposal_tokens=50)},
                    (1, 10), SLO(ttft_s=0.5, tpot_s=0.05), timeout_s=120.0, guidellm_workload=None,
                    notes=["quick: the talk's workload at concurrency 1 and 10"])
    return Plan({"fixed": chat_trace(64, seed=1, prompt_words_median=400, output_tokens_median=128, sigma=0.0),
                 "talk": agentic_trace(agents=10, review_rounds=0, system_words=1270, proposal_tokens=50),
                 "chat": chat_trace(128, seed=0, prompt_words_median=200, output_tokens_median=160,
                                    max_output_tokens=1024),
                 "agentic": agentic_trace(agents=8, review_rounds=2, system_words=1270, proposal_tokens=128,
                                          review_tokens=32)},
                (1, 10, 32, 64), SLO(ttft_s=0.5, tpot_s=0.05), timeout_s=300.0)


def notebook_plan(device: str) -> Plan:
    """Notebook 08's run: one workload of one prompt and output length (so guidellm, which takes one
    max_tokens, sends the same requests as the client), three concurrency levels. On a CPU with the
    tiny model: 8 requests × 32 tokens per level, about a minute and a half per two servers."""
    if device == "cpu":
        return Plan({"fixed": chat_trace(8, seed=1, prompt_words_median=48, output_tokens_median=32, sigma=0.0)},
                    (1, 4, 8), SLO(ttft_s=1.0, tpot_s=0.1), timeout_s=120.0)
    return Plan({"fixed": chat_trace(64, seed=1, prompt_words_median=400, output_tokens_median=128, sigma=0.0)},
                (1, 10, 32), SLO(ttft_s=0.5, tpot_s=0.05), timeout_s=300.0)


def warm_up(srv: ServerProcess, model: str, concurrency: int = 1, timeout_s: float = 120.0) -> None:
    """Short requests, one alone and then `concurrency` together, so that lazy initialisation and the
    first batches of each size (on a CPU, kernels are set up per shape) are not timed in the first run."""
    warm_up_url(srv.base_url, model, concurrency, timeout_s)


def warm_up_url(base_url: str, model: str, concurrency: int = 1, timeout_s: float = 120.0) -> None:
    client.run_load(base_url, model, [TraceRequest(0, "Hello", 4)], 1, timeout_s)
    if concurrency > 1:
        burst = [TraceRequest(i, f"Hello number {i}, how are you today?", 8) for i in range(concurrency)]
        client.run_load(base_url, model, burst, concurrency, timeout_s)


def measure_levels(base_url: str, model: str, name: str, wname: str, reqs: Sequence[TraceRequest], plan: Plan,
                   result: dict, progress=None, alive=lambda grace_s=0.0: True, died=lambda: "the server is gone",
                   on_level=None) -> None:
    """One workload at every concurrency level of the plan against a server at base_url: each level's
    RunSummary appended to result["runs"]; a level the server did not live to see recorded as a fault.
    on_level(result), when given, is called after each level (run_all writes the file then)."""
    for c in plan.concurrencies:
        if not alive():
            result["faults"].append({"kind": "ServerDied", "detail": f"not run: {wname} at concurrency {c}; {died()}"})
            continue
        recs = client.run_load(base_url, model, reqs, c, plan.timeout_s)
        summary = summarize(recs, name, c, plan.slo)
        result["runs"].append(dict(summary.to_dict(), workload=wname))
        if summary.errors.get("connection"):
            alive(DEATH_GRACE_S)   # refused connections: let a dying server finish exiting before it is asked
        if progress is not None:
            progress.update(1)
        if on_level is not None:
            on_level(result)


def run_target(base_url: str, model: str, out: str | Path = "build/engines/target.json", device: str = "cuda",
               quick: bool = False, name: str | None = None) -> dict:
    """The same workloads and levels against a server that is already running — a multi-GPU vLLM or
    SGLang deployment, say (`vllm serve MODEL --tensor-parallel-size 4`) — written like run_all's result.
    Nothing is started or stopped here; `device` sizes the plan ("cuda": the talk's workloads)."""
    from ..hardware import device_info

    if not str(base_url).startswith(("http://", "https://")):
        raise ValueError(f"the target must be an http(s) URL such as http://HOST:8000, got {base_url!r}")
    plan = plan_for(device, quick)
    name = name or f"target {base_url}"
    result = {"config": {"name": name, "engine": "external", "model": model, "base_url": base_url},
              "ready_s": None, "runs": [], "faults": [], "example": None}
    warm_up_url(base_url, model, max(plan.concurrencies), plan.timeout_s)
    for wname, reqs in plan.workloads.items():
        measure_levels(base_url, model, name, wname, reqs, plan, result)
    data = {"recorded_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "machine": {"client": device_info("cpu").to_dict(), "server": base_url}, "profile": model,
            "profile_reason": "an external server", "versions": versions(), "slo": plan.slo.describe(),
            "concurrencies": list(plan.concurrencies), "skipped": [], "configs": [result], "complete": True}
    write_json_atomic(data, out)
    return data


def run_config(cfg: EngineConfig, plan: Plan, out_dir: Path | None = None, tokenizer: str | None = None,
               progress=None, on_level=None) -> dict:
    """Start one configuration's server, run every workload at every level, stop it. Returns a dict:
    config, ready seconds, runs (RunSummary dicts, client and guidellm), faults. on_level(result): called
    with the result so far after each level (see measure_levels)."""
    result = {"config": cfg.to_dict(), "ready_s": None, "runs": [], "faults": [], "example": None}
    srv = ServerProcess(cfg.command, name=cfg.engine, health_path=cfg.health_path,
                        ready_timeout_s=cfg.ready_timeout_s, env=cfg.env)
    try:
        srv.start()
    except ServerError as exc:
        result["faults"].append({"kind": type(exc).__name__, "detail": str(exc)[-1500:]})
        return result
    try:
        result["ready_s"] = srv.ready_s
        warm_up(srv, cfg.model, max(plan.concurrencies))
        first = next(iter(plan.workloads.values()))[0]
        ex = client.run_load(srv.base_url, cfg.model, [first], 1, plan.timeout_s)[0]
        result["example"] = {"sent_s": 0.0, "token_s": [t - ex.sent_s for t in ex.token_times],
                             "end_s": None if ex.end_s is None else ex.end_s - ex.sent_s,
                             "output_tokens": ex.output_tokens, "ttft_s": ex.ttft_s, "itl_s": ex.itl_s,
                             "error": ex.error}
        for wname, reqs in plan.workloads.items():
            measure_levels(srv.base_url, cfg.model, cfg.name, wname, reqs, plan, result, progress,
                           alive=srv.alive, died=lambda: f"the server exited with {srv.proc.returncode}. "
                                                         f"Log:\n{srv.log_tail(10)}", on_level=on_level)
            if wname == plan.guidellm_workload and tokenizer and srv.alive():
                from . import guidellm_runner

                try:
                    # guidellm through a tap: our definitions on guidellm's own requests (the same run)
                    theirs, ours, _ = guidellm_runner.run_tapped(
                        srv.base_url, tokenizer, reqs, plan.concurrencies,
                        Path(out_dir or tempfile.mkdtemp()) / _slug(cfg.name), cfg.name, plan.slo)
                    result["runs"] += [dict(s.to_dict(), workload=wname) for s in theirs + ours]
                except guidellm_runner.GuidellmError as exc:
                    result["faults"].append({"kind": "GuidellmError", "detail": str(exc)[-1500:]})
        if not srv.alive(DEATH_GRACE_S if _connection_errors(result) else 0.0):
            result["faults"].append({"kind": "ServerDied", "detail": f"exited with {srv.proc.returncode}"})
    finally:
        srv.stop()
    return result


def _connection_errors(result: dict) -> bool:
    return any(run.get("errors", {}).get("connection") for run in result["runs"])


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in name.lower()).strip("-")


def write_json_atomic(data: dict, path: str | Path) -> Path:
    """Write JSON to a temporary file beside `path`, then rename it over `path` (a reader never sees a
    half-written file, and an interrupted run leaves the last complete one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, default=str)
            f.write("\n")
        os.chmod(tmp, 0o644)     # mkstemp makes it private; a result is for everyone to read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def versions() -> dict:
    """Library versions that shape the figures: the preflight's list plus the serving stack."""
    from importlib import metadata

    from ..preflight import library_versions

    out = library_versions()
    for pkg in ("guidellm", "fastapi", "uvicorn", "httpx", "vllm", "sglang"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def new_result(plan: Plan, device: str, profile: str, reason: str, skipped: list[dict] | None = None) -> dict:
    """A benchmark result before any configuration ran: the machine, the profile, the versions, the plan's
    SLO, levels and workloads; `configs` empty, `complete` False (run_all fills it in)."""
    from ..hardware import device_info

    return {"recorded_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "machine": device_info(device).to_dict(), "profile": profile, "profile_reason": reason,
            "versions": versions(), "slo": plan.slo.describe(), "concurrencies": list(plan.concurrencies),
            "workloads": {k: {"requests": len(v), "prompt_words_total": sum(len(r.prompt.split()) for r in v),
                              "output_tokens_asked": sum(r.max_new_tokens for r in v)}
                          for k, v in plan.workloads.items()},
            "skipped": list(skipped or []), "configs": [], "complete": False}


def run_all(profile: str | None = None, out: str | Path = "build/engines/engines.json", quick: bool = False,
            include: Sequence[str] = ("transformers", "vllm", "sglang"), use_guidellm: bool = True,
            plan=None) -> dict:
    """Every configuration available here, in turn; the whole result written atomically to `out` (and
    rewritten after each level of each configuration, so an interrupted run keeps what finished)."""
    from tqdm.auto import tqdm

    from ..models import resolve_profile
    from . import guidellm_runner, servers

    configs, skipped = servers.available(profile, tuple(include))
    device = "cuda" if any(c.needs_cuda for c in configs) else "cpu"
    plan = plan(device) if callable(plan) else plan or plan_for(device, quick)   # a Plan, or a function of the device
    name, reason = resolve_profile(profile)
    tokenizer = None
    if use_guidellm and guidellm_runner.guidellm_bin():
        try:
            tokenizer = str(servers.serve_folder(profile, weights=False))   # guidellm reads the tokenizer only
        except Exception as exc:  # noqa: BLE001 - recorded
            skipped.append({"name": "guidellm", "why": str(exc)})
    elif use_guidellm:
        skipped.append({"name": "guidellm", "why": "guidellm is not installed"})
    out = Path(out)
    data = new_result(plan, device, name, reason, skipped)
    t0 = time.perf_counter()
    bar = tqdm(total=len(configs) * len(plan.workloads) * len(plan.concurrencies), desc="engines", unit="run")
    try:
        for cfg in configs:
            def level_done(partial: dict) -> None:   # this configuration so far, beside the finished ones
                write_json_atomic({**data, "configs": [*data["configs"], partial],
                                   "seconds": round(time.perf_counter() - t0, 1)}, out)

            data["configs"].append(run_config(cfg, plan, out.parent / "guidellm", tokenizer, bar, level_done))
            data["seconds"] = round(time.perf_counter() - t0, 1)
            write_json_atomic(data, out)
    finally:
        bar.close()
    data["complete"] = True
    data["seconds"] = round(time.perf_counter() - t0, 1)
    write_json_atomic(data, out)
    return data


def runs_table(data: dict):
    """Every run of a benchmark result as a DataFrame (one row per configuration, tool and level). With no
    run at all (every server failed), an empty table that still has every column, so that what reads it
    (figures, guide rules, pivots) finds nothing to compare rather than a missing column."""
    import pandas as pd

    rows = []
    for c in data.get("configs", []):
        for r in c["runs"]:
            s = RunSummary(**{k: v for k, v in r.items() if k in RunSummary.__dataclass_fields__})
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
    return "\n".join(lines) or "- nothing was configured to run"


def source_label(data: dict) -> str:
    """What produced a benchmark's figures: model · dtype · device · profile, and the servers."""
    from ..models import default_dtype

    profile = data.get("profile", "?")
    device = "cuda" if (data.get("machine") or {}).get("kind") == "cuda" else "cpu"
    model = {"tiny": "tiny (Mistral architecture, random weights)",
             "mistral-7b-random": "Mistral 7B v0.1 architecture, random weights"}.get(profile, profile)
    engines = sorted({c["config"]["engine"] for c in data.get("configs", [])})
    return (f"measured: {model} · {default_dtype(profile, device)} · {device} · profile {profile} · "
            f"servers: {', '.join(engines) or 'none'}")
