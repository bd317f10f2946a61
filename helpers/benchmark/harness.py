"""The engine benchmark: every configuration this machine can run, one after another, each in its own
server process (started, warmed up, measured at several concurrency levels, stopped), no manual
restarts. `make engines` runs it and writes one JSON file, atomically, with the machine and versions.

Faults are results, not crashes: a request that fails is counted in its run; a server that dies
mid-run ends that configuration (the levels it did not reach are recorded as not run, with why) and
the benchmark goes on with the next; a server that never becomes ready is recorded with its log tail.
"""
from __future__ import annotations

import datetime as dt
import os
import tempfile
import time
from pathlib import Path
from typing import Sequence

from .. import checks, records
from ..serving.traces import TraceRequest
from . import client, workloads
from .crosscheck import crosscheck_vllm_bench
from .findings import as_json, key_figures
from .metrics import summarize, vllm_bench_view
from .plans import CPU_SHAREGPT_SCALE, Deadline, Plan, plan_for, runs_some_workload
from .process import SPINNER_NICE, ServerError, ServerProcess, client_cpus, yield_spinners
from .servers import EngineConfig


DEATH_GRACE_S = 3.0   # how long a server that refused connections is given to be seen exiting
RESULTS_DIR = Path(__file__).resolve().parents[2] / "build" / "engines"   # the repository's build/engines


def warm_up(base_url: str, model: str, concurrency: int = 1, timeout_s: float = 120.0,
            deadline_s: float | None = None) -> None:
    """Short requests, one alone and then `concurrency` together, so that lazy initialisation and the
    first batches of each size (on a CPU, kernels are set up per shape) are not timed in the first run."""
    client.run_load(base_url, model, [TraceRequest(0, "Hello", 4)], 1, timeout_s, deadline_s=deadline_s)
    if concurrency > 1:
        burst = [TraceRequest(i, f"Hello number {i}, how are you today?", 8) for i in range(concurrency)]
        client.run_load(base_url, model, burst, concurrency, timeout_s, deadline_s=deadline_s)


def measure_levels(base_url: str, model: str, name: str, wname: str, plan: Plan, result: dict, progress=None,
                   alive=lambda grace_s=0.0: True, died=lambda: "the server is gone",
                   deadline: Deadline | None = None, on_level=None, cpus: set[int] | None = None) -> None:
    """One workload at every closed-loop concurrency level of the plan, then at every open-loop request
    rate it has, against a server at base_url: each level's RunSummary (with every request's figures)
    appended to result["runs"] and `on_level()` called (it writes the result so far); a level the server
    did not live to see, or that the deadline left no time for, recorded as a fault."""
    deadline = deadline or Deadline(plan.deadline_s)
    levels = [(i, c, None) for i, c in enumerate(plan.concurrencies)]
    levels += [(100 + j, None, rate) for j, rate in enumerate(plan.rates.get(wname, ()))]
    for index, c, rate in levels:
        what = f"{wname} at concurrency {c}" if rate is None else f"{wname} at {rate:g} requests/s"
        if not alive():
            result["faults"].append({"kind": "ServerDied", "detail": f"not run: {what}; {died()}"})
            continue
        if deadline.passed():
            result["faults"].append({"kind": "Deadline", "detail": f"not run: {what}; {deadline.why()}"})
            continue
        reqs = plan.trace(wname, index)
        if rate is not None:     # open loop: every request sent at its Poisson time, none waits for another
            reqs = workloads.poisson(reqs, rate, seed=index)
            c = len(reqs)
        recs = client.run_load(base_url, model, reqs, c, plan.timeout_s, honour_arrivals=rate is not None,
                               deadline_s=deadline.left(), cpus=cpus)
        summary = summarize(recs, name, c, plan.slo, rate=rate, detail=True)
        result["runs"].append(dict(summary.to_dict(), workload=wname, vllm_view=vllm_bench_view(recs)))
        if summary.errors.get("connection"):
            alive(DEATH_GRACE_S)   # refused connections: let a dying server finish exiting before it is asked
        if progress is not None:
            progress.update(1)
        if on_level is not None:
            on_level()


def check_out_path(out: str | Path) -> Path:
    """`out` as a Path if a result can be written there (its folder made when missing), else a ValueError
    that says why — checked before a run, not after it."""
    path = Path(out)
    if path.is_dir():
        raise ValueError(f"--out {str(out)!r} is a folder; give a file such as build/engines/engines.json")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise ValueError(f"cannot write the result to {str(out)!r}: {exc.strerror or exc}") from None
    return path


def _interrupted(data: dict, out: Path) -> None:
    data["interrupted"] = True
    write_json_atomic(data, out)


def run_target(base_url: str, model: str, out: str | Path = "build/engines/target.json", device: str = "cuda",
               quick: bool = False, name: str | None = None, deadline_s: float | None = None) -> dict:
    """The same workloads and levels against a server that is already running — a multi-GPU vLLM or
    SGLang deployment, say (`vllm serve MODEL --tensor-parallel-size 4`) — written like run_all's result,
    after every level. Nothing is started or stopped here; `device` sizes the plan ("cuda": the talk's
    workloads); the whole run ends by the plan's deadline (or `deadline_s`), however the server stalls."""
    client.check_base_url(base_url)
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"the model name the server serves is needed (--model), got {model!r}")
    out = check_out_path(out)
    plan = plan_for(device, quick)
    if deadline_s is not None:
        plan.deadline_s = checks.number(deadline_s, "deadline_s", positive=True, unit="seconds")
    name = name or f"target {base_url}"
    result = {"config": {"name": name, "engine": "external", "model": model, "base_url": base_url},
              "ready_s": None, "runs": [], "faults": [], "example": None}
    data = dict(new_result(plan, "cpu", model, "an external server"), configs=[result], deadline_s=plan.deadline_s)
    data["machine"] = {"client": data["machine"], "server": base_url}
    deadline = Deadline(plan.deadline_s)
    try:
        warm_up(base_url, model, max(plan.concurrencies), plan.timeout_s, deadline.left())
        for wname in plan.workloads:
            measure_levels(base_url, model, name, wname, plan, result, deadline=deadline,
                           on_level=lambda: write_json_atomic(data, out))
    except KeyboardInterrupt:
        _interrupted(data, out)
        raise
    data["complete"] = True
    write_json_atomic(data, out)
    return data


def new_config_result(cfg: EngineConfig) -> dict:
    return {"config": cfg.to_dict(), "ready_s": None, "runs": [], "faults": [], "example": None}


def run_config(cfg: EngineConfig, plan: Plan, out_dir: Path | None = None, tokenizer: str | None = None,
               progress=None, result: dict | None = None, on_level=None) -> dict:
    """Start one configuration's server, run every workload at every level, stop it. Returns a dict:
    config, ready seconds, runs (RunSummary dicts: our client's, and guidellm's and ours on its requests
    where the plan asks), the server's own prefix-cache counters per workload (vLLM's /metrics), the
    `vllm bench serve` cross-check (plan.crosscheck), faults — `result`, when given, filled in place as
    each level ends (`on_level()` called then). Everything after the server is ready ends by the
    plan's deadline."""
    from . import vllm_env

    result = new_config_result(cfg) if result is None else result
    srv = ServerProcess(cfg.command, name=cfg.engine, health_path=cfg.health_path,
                        ready_timeout_s=cfg.ready_timeout_s, env=cfg.env)
    try:
        srv.start()
    except ServerError as exc:
        result["faults"].append({"kind": type(exc).__name__, "detail": str(exc)[-1500:]})
        return result
    work = Path(out_dir or tempfile.mkdtemp()) / _slug(cfg.name)
    try:
        deadline = Deadline(plan.deadline_s)
        result["ready_s"] = srv.ready_s
        warm_up(srv.base_url, cfg.model, max(plan.concurrencies), plan.timeout_s, deadline.left())
        cpus = client_cpus(srv.pid)       # beside a server that pins its compute, the load runs elsewhere
        result["client_cpus"] = sorted(cpus) if cpus else None
        # on the cores it shares with the load, the server's busy-waiting processes give way to it
        reniced = yield_spinners(srv.pid, cfg.spinners) if cpus else []
        result["spinners_nice"] = {t: SPINNER_NICE for t in cfg.spinners} if reniced else None
        assert runs_some_workload(plan, cfg.name), cfg.name        # run_all leaves the others out
        first = plan.trace(next(w for w in plan.workloads if cfg.name in plan.only.get(w, (cfg.name,))))[0]
        ex = client.run_load(srv.base_url, cfg.model, [first], 1, plan.timeout_s, deadline_s=max(deadline.left(), 1),
                             cpus=cpus)[0]
        result["example"] = {"sent_s": 0.0, "token_s": [t - ex.sent_s for t in ex.token_times],
                             "end_s": None if ex.end_s is None else ex.end_s - ex.sent_s,
                             "output_tokens": ex.output_tokens, "ttft_s": ex.ttft_s, "itl_s": ex.itl_s,
                             "error": ex.error}
        for wname in plan.workloads:
            if wname in plan.only and cfg.name not in plan.only[wname]:
                continue
            before = vllm_env.prefix_cache_counters(srv.base_url)
            measure_levels(srv.base_url, cfg.model, cfg.name, wname, plan, result, progress,
                           alive=srv.alive, died=lambda: f"the server exited with {srv.proc.returncode}. "
                                                         f"Log:\n{srv.log_tail(10)}",
                           deadline=deadline, on_level=on_level, cpus=cpus)
            hits = vllm_env.counter_delta(before, vllm_env.prefix_cache_counters(srv.base_url))
            if hits is not None:
                result.setdefault("prefix_cache", {})[wname] = hits
            if wname != plan.guidellm_workload or not srv.alive() or deadline.passed():
                continue
            if tokenizer and (plan.tools_configs is None or cfg.name in plan.tools_configs):
                from . import guidellm_runner

                try:      # guidellm's figures, and ours on its requests (its per-request output)
                    theirs, ours, _ = guidellm_runner.run(srv.base_url, tokenizer, plan.trace(wname), plan.concurrencies,
                                                          work, cfg.name, plan.slo, min(600.0, deadline.left()), cpus)
                    result["runs"] += [dict(s.to_dict(), workload=wname) for s in theirs + ours]
                except guidellm_runner.GuidellmError as exc:
                    result["faults"].append({"kind": "GuidellmError", "detail": str(exc)[-1500:]})
            if on_level is not None:
                on_level()
        if cfg.name == plan.crosscheck and cfg.engine == "vllm" and srv.alive() and not deadline.passed():
            result["crosscheck"] = crosscheck_vllm_bench(srv.base_url, cfg, plan, result, work, deadline, tokenizer,
                                                         cpus)
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
    """The run's record, written whole after every level (helpers.records.dump: atomic, so a reader never
    sees a half-written file, and an interrupted run leaves the last complete one)."""
    return records.dump(path, "engines", data)


def versions() -> dict:
    """Library versions that shape the figures: the preflight's list plus the serving stack."""
    from importlib import metadata

    from ..versions import library_versions

    out = library_versions()
    for pkg in ("guidellm", "fastapi", "uvicorn", "aiohttp", "psutil", "vllm", "sglang"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


DEFINITIONS = {
    "TTFT": "first chunk with text − request sent (queueing + prefill)",
    "ITL (per request)": "(last text chunk − first) ÷ (output tokens − 1); vLLM bench calls it TPOT, guidellm ITL",
    "ITL pooled": "every inter-token gap of every request, pooled: Σ(last − first) ÷ Σ(tokens − 1)",
    "E2E": "stream closed − request sent",
    "normalized latency": "mean of E2E ÷ output tokens per request (Kwon et al., SOSP 2023, §6.1)",
    "SLO attainment": "share of the run's requests (failed ones included) with TTFT and per-request ITL within the SLO",
    "req/s in SLO": "requests meeting the SLO ÷ the run's wall time (vLLM bench's --goodput)",
    "DistServe goodput": "the highest open-loop request rate whose SLO attainment is ≥ 90 % (Zhong et al., OSDI 2024, §2)",
    "a failed request": "an HTTP error, a timeout, a lost connection, a malformed reply, a stream cut before it said "
                        "it was complete, a token count the stream contradicts, or no text",
    "vLLM bench's view": "its TTFT counts a first chunk with empty text, its E2EL ends at the last chunk with choices "
                         "(not the stream's close), its ITL pools every gap between such chunks, and a 200 stream "
                         "with choices but no text is a success (metrics.vllm_bench_view)",
}


def describe_workload(plan: Plan, name: str) -> dict:
    reqs = plan.trace(name)
    out = {"requests": len(reqs), "prompt_words_total": sum(len(r.prompt.split()) for r in reqs),
           "output_tokens_asked": sum(r.max_new_tokens for r in reqs), "rounds": len({r.round for r in reqs}),
           "fresh trace per level": callable(plan.workloads[name]), "rates req/s": list(plan.rates.get(name, ()))}
    if name == "chat":
        out["sharegpt"] = workloads.sharegpt_summary(reqs, CPU_SHAREGPT_SCALE if len(reqs) <= 16 else 1.0)
    if name in plan.only:
        out["run by"] = list(plan.only[name])
    return out


def prefix_model(plan: Plan, name: str, block_sizes=(16, 128)) -> dict | None:
    """The workload's prompts (its first level, in the order one client sends them) replayed through a radix
    tree, token-granular and rounded to whole blocks (helpers.engine.radix.hit_rate): the share of prompt
    tokens a prefix cache could serve. 128 is the block vLLM's CPU build uses here, 16 its GPU default.
    An upper bound for a server: requests in flight together cannot hit each other's uncomputed blocks."""
    from ..measure import local_models
    from ..engine.radix import hit_rate

    try:
        tok = local_models.load_tokenizer(local_models.build_tiny())
    except Exception:  # noqa: BLE001 - the replay is a side figure; the benchmark goes on without it
        return None
    ids = [list(tok(r.prompt).input_ids) for r in plan.trace(name)]
    out = {"prompt tokens": sum(map(len, ids)), "radix (token-granular)": hit_rate(ids, block_size=1).hit_rate}
    for b in block_sizes:
        out[f"blocks of {b}"] = hit_rate(ids, block_size=b).hit_rate
    return out


def new_result(plan: Plan, device: str, profile: str, reason: str, skipped: list[dict] | None = None) -> dict:
    """A benchmark result before any configuration ran: the machine, the profile, the versions, the plan's
    SLO, levels, rates and workloads, the definitions used; `configs` empty, `complete` False (run_all
    fills it in)."""
    from ..measure.hardware import device_info

    return {"recorded_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "machine": device_info(device).to_dict(), "profile": profile, "profile_reason": reason,
            "versions": versions(), "slo": plan.slo.describe(), "slo_s": [plan.slo.ttft_s, plan.slo.tpot_s],
            "concurrencies": list(plan.concurrencies), "rates": {k: list(v) for k, v in plan.rates.items()},
            "workloads": {k: describe_workload(plan, k) for k in plan.workloads},
            "definitions": DEFINITIONS, "load_average_at_start": _load(), "skipped": list(skipped or []),
            "configs": [], "complete": False}


def _load() -> list[float] | None:
    """The machine's 1, 5 and 15-minute load averages (how busy it was: figures measured on a loaded
    machine are slower, and two runs of one load differ more)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run_all(profile: str | None = None, out: str | Path = "build/engines/engines.json", quick: bool = False,
            include: Sequence[str] = ("transformers", "readable", "vllm", "sglang"), use_guidellm: bool = True,
            plan=None, deadline_s: float | None = None) -> dict:
    """Every configuration available here, in turn; the whole result written atomically to `out` as each
    level ends, so that a run interrupted (Ctrl-C: the file says `interrupted`) or stopped keeps every
    level that finished. `out` is checked before anything runs; each configuration ends by its deadline."""
    from tqdm.auto import tqdm

    from ..measure.models import resolve_profile
    from . import guidellm_runner, servers

    out = check_out_path(out)
    name, reason = resolve_profile(profile)
    configs, skipped = servers.available(profile, tuple(include))
    device = "cuda" if any(c.needs_cuda for c in configs) else "cpu"
    plan = plan(device) if callable(plan) else plan or plan_for(device, quick)   # a Plan, or a function of the device
    if deadline_s is not None:
        plan.deadline_s = checks.number(deadline_s, "deadline_s", positive=True, unit="seconds")
    if plan.configs is not None:
        skipped += [{"name": c.name, "why": "not in this plan (make engines runs it)"} for c in configs
                    if c.name not in plan.configs]
        configs = [c for c in configs if c.name in plan.configs]
    # a configuration that none of the plan's workloads runs on (`--workloads fixed`: guidellm's workload,
    # run only by the configurations the tools measure) is said, not started
    idle = [c for c in configs if not runs_some_workload(plan, c.name)]
    skipped += [{"name": c.name, "why": "runs none of this plan's workloads (" + "; ".join(
        f"{w} only on {', '.join(plan.only[w])}" if w in plan.only else w for w in plan.workloads) + ")"}
        for c in idle]
    configs = [c for c in configs if c not in idle]
    tokenizer = None
    if use_guidellm and guidellm_runner.guidellm_bin():
        try:
            tokenizer = str(servers.serve_folder(profile, weights=False))   # guidellm reads the tokenizer only
        except Exception as exc:  # noqa: BLE001 - recorded
            skipped.append({"name": "guidellm", "why": str(exc)})
    elif use_guidellm:
        skipped.append({"name": "guidellm", "why": "guidellm is not installed"})
    data = new_result(plan, device, name, reason, skipped)
    data["deadline_s"] = plan.deadline_s
    data["prefix_model"] = {w: prefix_model(plan, w) for w in plan.workloads if w == "agentic"}
    t0 = time.perf_counter()

    def save():
        data["seconds"] = round(time.perf_counter() - t0, 1)
        data["load_average_now"] = _load()
        write_json_atomic(data, out)

    levels = sum(len(plan.concurrencies) + len(plan.rates.get(w, ())) for w in plan.workloads)
    bar = tqdm(total=len(configs) * levels, desc="engines", unit="run")
    try:
        for cfg in configs:
            result = new_config_result(cfg)
            data["configs"].append(result)           # in the file from its first level on
            run_config(cfg, plan, out.parent / "guidellm", tokenizer, bar, result=result, on_level=save)
            save()
    except KeyboardInterrupt:
        data["seconds"] = round(time.perf_counter() - t0, 1)
        _interrupted(data, out)
        raise
    finally:
        bar.close()
    data["complete"] = True
    data["figures"] = as_json(key_figures(data))
    save()
    return data
