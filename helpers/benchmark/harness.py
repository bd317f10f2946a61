"""The engine benchmark: every configuration this machine can run, each in its own server process
(started, warmed up, measured at each level, stopped); the record written atomically after every level.
Faults are results: a failed request is counted, a server that dies or is never ready ends its
configuration (with why, and its log) and the benchmark goes on with the next.
"""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Sequence

from .. import records
from ..serving.traces import TraceRequest
from . import client, workloads
from .findings import as_json, key_figures
from .metrics import DEFINITIONS, summarize, vllm_bench_view
from .plans import CPU_SHAREGPT_SCALE, Deadline, Plan, plan_for, runs_some_workload
from .process import SPINNER_NICE, ServerError, ServerProcess, client_cpus, yield_spinners
from .servers import EngineConfig


DEATH_GRACE_S = 3.0   # how long a server that refused connections is given to be seen exiting


def warm_up(base_url: str, model: str, concurrency: int = 1, timeout_s: float = 120.0,
            deadline_s: float | None = None) -> None:
    """One short request, then `concurrency` together: lazy set-up (per shape, on a CPU) is not timed."""
    client.run_load(base_url, model, [TraceRequest(0, "Hello", 4)], 1, timeout_s, deadline_s=deadline_s)
    if concurrency > 1:
        burst = [TraceRequest(i, f"Hello number {i}, how are you today?", 8) for i in range(concurrency)]
        client.run_load(base_url, model, burst, concurrency, timeout_s, deadline_s=deadline_s)


def measure_levels(base_url: str, model: str, name: str, wname: str, plan: Plan, result: dict, progress=None,
                   alive=lambda grace_s=0.0: True, died=lambda: "the server is gone",
                   deadline: Deadline | None = None, on_level=None, cpus: set[int] | None = None) -> None:
    """One workload at each closed-loop level, then each open-loop rate: a RunSummary appended to
    result["runs"] per level (then `on_level()`); a level the server or the deadline did not allow, a fault."""
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


def _interrupted(data: dict, out: Path) -> None:
    data["interrupted"] = True
    write_json_atomic(data, out)


def new_config_result(cfg: EngineConfig) -> dict:
    return {"config": cfg.to_dict(), "ready_s": None, "runs": [], "faults": [], "example": None}


def run_config(cfg: EngineConfig, plan: Plan, out_dir: Path | None = None, tokenizer: str | None = None,
               progress=None, result: dict | None = None, on_level=None, crosscheck=None) -> dict:
    """Start one configuration's server, run every workload at every level (guidellm, vLLM's prefix-cache
    counters and `crosscheck`, make engines' `vllm bench serve`, where the plan asks), stop it; `result`
    filled in place."""
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
        if crosscheck and cfg.name == plan.crosscheck and cfg.engine == "vllm" and srv.alive() and not deadline.passed():
            result["crosscheck"] = crosscheck(srv.base_url, cfg, plan, result, work, deadline, tokenizer,
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
    return records.dump(path, "engines", data)


# the distributions an engine run notes beside helpers.versions.LIBRARIES: its clients and servers
PACKAGES = ("guidellm", "fastapi", "uvicorn", "aiohttp", "psutil", "vllm", "sglang")


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
    """The share of the workload's prompt tokens a prefix cache could serve (its first level through a radix
    tree, helpers.engine.radix.hit_rate; token-granular and in blocks: 128 vLLM's CPU build, 16 its GPU
    default): an upper bound."""
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
    """An engine run's record before its first level: where and with what it runs (measured_on, with the
    servers' and clients' packages), the plan, and no configuration yet."""
    from ..measure.hardware import MEASURED_ON, measured_on

    return {MEASURED_ON: measured_on(device, profile, PACKAGES), "profile_reason": reason,
            "slo": plan.slo.describe(), "slo_s": [plan.slo.ttft_s, plan.slo.tpot_s],
            "concurrencies": list(plan.concurrencies), "rates": {k: list(v) for k, v in plan.rates.items()},
            "workloads": {k: describe_workload(plan, k) for k in plan.workloads},
            "definitions": DEFINITIONS, "load_average_at_start": _load(), "skipped": list(skipped or []),
            "configs": [], "complete": False}


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run_all(profile: str | None = None, out: str | Path = "build/engines/engines.json", quick: bool = False,
            include: Sequence[str] = ("transformers", "readable", "vllm", "sglang"), use_guidellm: bool = True,
            plan=None, deadline_s: float | None = None, crosscheck=None) -> dict:
    """Every configuration available here, in turn, written to `out` as each level ends (Ctrl-C: `interrupted`)."""
    from tqdm.auto import tqdm

    from ..measure.models import resolve_profile
    from . import guidellm_runner, servers

    out = Path(out)
    name, reason = resolve_profile(profile)
    configs, skipped = servers.available(profile, tuple(include))
    device = "cuda" if any(c.needs_cuda for c in configs) else "cpu"
    plan = plan(device) if callable(plan) else plan or plan_for(device, quick)   # a Plan, or a function of the device
    plan.deadline_s = deadline_s or plan.deadline_s
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
            run_config(cfg, plan, out.parent / "guidellm", tokenizer, bar, result=result, on_level=save,
                       crosscheck=crosscheck)
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


if __name__ == "__main__":     # notebook 08's live run (helpers.benchmark.records), in a process of its own
    import json
    import sys

    from .plans import notebook_plan
    from .servers import available

    if sys.argv[1] == "--list":
        configs, skipped = available()
        print(json.dumps({"configs": [c.to_dict() for c in configs], "skipped": skipped}))
    else:
        run_all(out=sys.argv[1], include=("transformers", "vllm"), plan=notebook_plan)
