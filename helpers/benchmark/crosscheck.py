"""The `vllm bench serve` cross-check: vLLM's own benchmark client against ours on the same server and
the same requests, at each concurrency level of the plan, three ways:

- **alternated**: our client's run straight to the server, then vllm bench's, `plan.crosscheck_repeats`
  times (a slow moment of the machine falls on both tools): their means compared, and vllm bench's runs
  against each other (its own run-to-run spread, the noise any comparison of two runs carries);
- **side by side**: our client at the same concurrency, round after round, for as long as one vllm bench
  run lasts (the server holds both loads at once): while both stream, both time the same decode steps of
  the server, and only their own timing of each chunk can differ (`shared_steps`);
- **ours on its requests**: our definitions (`metrics.summarize`) on vllm bench's own per-request times,
  from its `--save-detailed` output (`vllm_env.bench_records`).
"""
from __future__ import annotations

import concurrent.futures
import statistics
from pathlib import Path

from . import client, vllm_env
from .agreement import FIGURES
from .metrics import RunSummary, summarize
from .plans import Deadline, Plan
from .servers import EngineConfig



def means_ms(s: RunSummary) -> dict:
    """A run's means read as vllm bench names its own: TTFT; TPOT, our per-request ITL; ITL, every gap
    pooled; E2EL, our end-to-end latency."""
    ms = lambda v: None if v is None else v * 1e3  # noqa: E731
    return {"ttft": ms(s.ttft_s["ttft_mean"]), "tpot": ms(s.itl_s["itl_mean"]), "itl": ms(s.itl_pooled_s),
            "e2el": ms(s.e2e_s["e2e_mean"])}


def bench_means(result: dict) -> dict:
    return {k: result.get(f"mean_{k}_ms") for k in FIGURES}


def shared_steps(mine: list, theirs: list) -> dict:
    """Each side's mean gap between chunks over the steps both sides streamed at once (its requests'
    records, one clock): the same decode steps of one server, timed by two clients. Each overlap of a
    request of ours and one of theirs is cut half a step inside its ends (between steps, where no chunk
    arrives); it counts when both saw as many chunks in it — the same steps (where they did not, the
    server put two tokens in one chunk of one of them: its doing, not the clients'). A side that idles
    longer between its requests leaves the other's stream alone (faster) for longer, so their means over
    all requests differ by more than their timing does; over the shared steps they do not."""
    ok = [[r.chunk_times for r in recs if r.ok and len(r.chunk_times) > 1] for recs in (mine, theirs)]
    steps = [b - a for side in ok for t in side for a, b in zip(t, t[1:])]
    half = statistics.median(steps) / 2 if steps else 0.0
    ours = their = gaps = other = 0
    for t in ok[0]:
        for u in ok[1]:
            lo, hi = max(t[0], u[0]) + half, min(t[-1], u[-1]) - half
            x, y = [v for v in t if lo <= v <= hi], [v for v in u if lo <= v <= hi]
            if len(x) == len(y) > 1:
                ours, their, gaps = ours + x[-1] - x[0], their + y[-1] - y[0], gaps + len(x) - 1
            elif min(len(x), len(y)) > 1:
                other += max(len(x), len(y)) - 1
    return {"ours": ours / gaps * 1e3 if gaps else None, "vllm bench": their / gaps * 1e3 if gaps else None,
            "gaps": gaps, "gaps left out": other}


def side_by_side(bench, ours, deadline: Deadline) -> dict:
    """`ours()` (one pass of our client's load) over and over while `bench()` (one vllm bench run) runs
    on another thread; both tools' means over the time vllm bench's requests took (ours: those sent and
    answered inside it — one clock, time.perf_counter, for both processes on Linux), and over the steps
    both streamed at once (`shared_steps`)."""
    mine = []
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(bench)
        while not running.done() and not deadline.passed():
            mine += ours()
        theirs = running.result()
    starts = theirs["start_times"]
    t0, t1 = min(starts), max(s + d for s, d in zip(starts, theirs["latencies"]))
    inside = [r for r in mine if r.sent_s >= t0 and r.end_s is not None and r.end_s <= t1]
    shared = shared_steps(inside, vllm_env.bench_records(theirs))
    return {"ours": means_ms(summarize(inside)) if inside else None, "vllm bench": bench_means(theirs),
            "our requests": sum(r.ok for r in inside), "its requests": theirs.get("completed"), "shared steps": shared}


def crosscheck_vllm_bench(base_url: str, cfg: EngineConfig, plan: Plan, result: dict, work: Path,
                          deadline: Deadline, tokenizer: str | None, cpus: set[int] | None = None) -> list[dict]:
    """The three comparisons of the module docstring at each level, every load generator on `cpus`; one
    dict per level (the runs kept, their means). A failure is a recorded fault."""
    out = []
    wname = next((w for w in (plan.crosscheck_workload, plan.guidellm_workload) if w in plan.workloads), None)
    if wname is None:
        return out                        # the workloads asked for (--workloads) have none it takes
    reqs = plan.trace(wname)
    for c in plan.concurrencies:
        if deadline.passed():
            result["faults"].append({"kind": "Deadline", "detail": f"vllm bench serve at concurrency {c} not run"})
            break
        bench = lambda: vllm_env.run_bench_serve(base_url, cfg.model, tokenizer or cfg.model, reqs, c, work,  # noqa: E731
                                                 plan.slo, timeout_s=min(600.0, deadline.left()), cpus=cpus)
        ours = lambda: client.run_load(base_url, cfg.model, reqs, c, plan.timeout_s,  # noqa: E731
                                       deadline_s=max(deadline.left(), 1), cpus=cpus)
        runs = {"our client's own run": [], "vllm bench, direct": [], "ours on its requests": []}
        try:
            for _ in range(plan.crosscheck_repeats):       # alternated: a slow moment falls on both tools
                runs["our client's own run"].append(means_ms(summarize(ours(), cfg.name, c)))
                theirs = bench()
                runs["vllm bench, direct"].append(bench_means(theirs))
                runs["ours on its requests"].append(means_ms(summarize(vllm_env.bench_records(theirs), cfg.name, c)))
            together = side_by_side(bench, ours, deadline)
        except (vllm_env.BenchServeError, RuntimeError, KeyError, ValueError) as exc:
            result["faults"].append({"kind": "BenchServeError", "detail": f"{type(exc).__name__}: {exc}"[-1500:]})
            break
        out.append({"concurrency": c, "requests": len(reqs), "completed (vllm bench)": theirs.get("completed"),
                    "vllm bench goodput req/s": theirs.get("request_goodput"),
                    **{k: _mean_runs(v) for k, v in runs.items()}, "runs": runs, "side by side": together})
    return out


def _mean_runs(runs: list[dict]) -> dict:
    """Each figure's mean over runs (None where no run has it)."""
    vals = {k: [r[k] for r in runs if r.get(k) is not None] for k in FIGURES}
    return {k: sum(v) / len(v) if v else None for k, v in vals.items()}
