"""The `vllm bench serve` cross-check: vLLM's own benchmark client against ours on the same server and
the same requests, straight to the server and through the tap (which times its requests with our
definitions on the same run), at each concurrency level of the plan."""
from __future__ import annotations

from pathlib import Path

from . import client
from .metrics import summarize, vllm_bench_view
from .plans import Deadline, Plan
from .servers import EngineConfig


def crosscheck_vllm_bench(base_url: str, cfg: EngineConfig, plan: Plan, result: dict, work: Path,
                          deadline: Deadline, tokenizer: str | None, cpus: set[int] | None = None) -> list[dict]:
    """`vllm bench serve` on the plan's cross-check workload at each level, every load generator on `cpus`:
    our client straight to the server ("our client's own run") and vllm bench straight to it ("vllm
    bench, direct"), alternated `plan.crosscheck_repeats` times (each reading the mean of its runs, the
    runs kept), then vllm bench through a tap ("vllm bench" beside "ours on the tap" and "vLLM's
    definitions on the tap": the same requests timed by both, ours one relay hop nearer the server).
    A failure is a recorded fault."""
    from . import vllm_env
    from .tap import Tap

    out = []
    wname = next((w for w in (plan.crosscheck_workload, plan.guidellm_workload) if w in plan.workloads), None)
    if wname is None:
        return out                        # the workloads asked for (--workloads) have none it takes
    reqs = plan.trace(wname)
    ms = lambda v: None if v is None else v * 1e3  # noqa: E731
    means = lambda bench: {k: bench.get(f"mean_{k}_ms") for k in ("ttft", "tpot", "itl", "e2el")}  # noqa: E731
    ours_ms = lambda s: {"ttft": ms(s.ttft_s["ttft_mean"]), "tpot": ms(s.itl_s["itl_mean"]),  # noqa: E731
                         "itl": ms(s.itl_pooled_s), "e2el": ms(s.e2e_s["e2e_mean"])}   # a RunSummary, as vllm bench's
    for c in plan.concurrencies:
        if deadline.passed():
            result["faults"].append({"kind": "Deadline", "detail": f"vllm bench serve at concurrency {c} not run"})
            break
        bench = lambda url: vllm_env.run_bench_serve(url, cfg.model, tokenizer or cfg.model, reqs, c, work,  # noqa: E731
                                                     plan.slo, timeout_s=min(600.0, deadline.left()), cpus=cpus)
        own, direct = [], []
        try:
            for _ in range(plan.crosscheck_repeats):       # alternated: a slow moment falls on both tools
                own.append(ours_ms(summarize(client.run_load(base_url, cfg.model, reqs, c, plan.timeout_s,
                                                             deadline_s=max(deadline.left(), 1), cpus=cpus),
                                             cfg.name, c, plan.slo)))
                direct.append(means(bench(base_url)))
            with Tap(base_url, cpus=cpus) as tap:
                theirs = bench(tap.base_url)
        except (vllm_env.BenchServeError, RuntimeError) as exc:
            result["faults"].append({"kind": "BenchServeError", "detail": str(exc)[-1500:]})
            break
        tapped = summarize(tap.records, cfg.name, c, plan.slo)
        view = vllm_bench_view(tap.records)
        out.append({
            "concurrency": c, "requests": len(reqs), "completed (vllm bench)": theirs.get("completed"),
            "vllm bench": means(theirs), "vllm bench, direct": _mean_runs(direct),
            "vllm bench goodput req/s": theirs.get("request_goodput"),
            "vLLM's definitions on the tap": {k: ms(view[f"{k}_mean"]) for k in ("ttft", "tpot", "itl", "e2el")},
            "ours on the tap": ours_ms(tapped), "our client's own run": _mean_runs(own),
            "runs": {"our client's own run": own, "vllm bench, direct": direct}})
    return out


def _mean_runs(runs: list[dict]) -> dict:
    """Each figure's mean over runs (None where no run has it)."""
    vals = {k: [r[k] for r in runs if r.get(k) is not None] for k in runs[0]}
    return {k: sum(v) / len(v) if v else None for k, v in vals.items()}
