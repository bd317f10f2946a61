"""What the benchmark runs (a `Plan`) and the run, the record written after every run. Every level and rate
runs the same requests (ShareGPT-like prompt lengths, Kwon et al., SOSP 2023, Fig. 11a, × `scale`; one
output length), repeated; each run notes the load average at its start and end and the share of the cores
other processes used (`others`); a client run's prompts start with a word of their own (no prefix cache
carries one run into the next). Faults are results: counted, and a server that dies ends its configuration.
"""
from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
import os
import random
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import psutil

from helpers import records
from helpers.benchmark.metrics import IDLE_OTHERS
from helpers.serving.traces import agentic_trace, chat_trace

from . import client, process, servers, tools

SHAREGPT_MEAN_PROMPT_TOKENS, TOKENS_PER_WORD = 161.31, 1.05   # Kwon et al. 2023, Fig. 11a; Mistral's tokenizer
PACKAGES = ("guidellm", "fastapi", "uvicorn", "aiohttp", "psutil", "vllm", "sglang")
HF, HF_CB, VLLM = "HF transformers serve", "HF transformers serve + continuous batching", "vLLM default"


@dataclass
class Plan:
    name: str
    concurrencies: tuple[int, ...]
    rates: tuple[float, ...]              # open loop, requests/s
    requests: int = 16                    # per run: the chat trace
    repeats: int = 3
    output_tokens: int = 32
    scale: float = 0.1                    # ShareGPT's prompt lengths × scale
    configs: tuple[str, ...] | None = None       # None: every one available
    client: tuple[str, ...] | None = None        # what our client measures on chat (None: every configuration)
    guidellm: tuple[str, ...] = ()               # ... guidellm, every level and rate
    agentic: tuple[str, ...] = ()                # the agentic trace (prefix caching), our client
    slo: tuple[float, float] = (1.0, 0.1)        # TTFT s, TPOT s
    timeout_s: float = 120.0
    deadline_s: float = 900.0                    # one configuration, after its server is ready


CPU_VLLM = ("vLLM, prefix caching off", VLLM, "vLLM + fp8 KV cache", "vLLM + n-gram speculation")
PLANS = {   # live: notebook 08, about two minutes on two cores; record: make engines; quick: its pipeline in minutes
    "live": Plan("live", (1, 4), (2.0, 8.0), configs=(HF, HF_CB)),
    "record": Plan("record", (1, 4, 8), (4.0, 16.0), requests=48, guidellm=(HF, HF_CB, "readable engine") + CPU_VLLM,
                   client=(HF_CB, VLLM), agentic=("vLLM, prefix caching off", VLLM)),
    "quick": Plan("quick", (1, 4), (4.0,), repeats=2, configs=(HF_CB, VLLM), guidellm=(HF_CB,), agentic=(VLLM,),
                  deadline_s=300.0),
    "gpu": Plan("gpu", (1, 10, 32), (2.0, 8.0, 32.0), requests=128, output_tokens=128, scale=1.0, slo=(0.5, 0.05),
                agentic=("vLLM, prefix caching off", VLLM, "SGLang"), timeout_s=300.0, deadline_s=1800.0),
    "gpu-quick": Plan("gpu-quick", (1, 10), (), requests=40, repeats=2, output_tokens=64, scale=1.0, slo=(0.5, 0.05),
                      timeout_s=300.0, deadline_s=600.0),
}


def chat(plan: Plan) -> list[dict]:
    """The plan's chat trace: log-normal prompt lengths (σ = 1) whose mean is ShareGPT's × scale, one output length."""
    median_words = SHAREGPT_MEAN_PROMPT_TOKENS * plan.scale / math.exp(0.5) / TOKENS_PER_WORD
    trace = chat_trace(plan.requests, seed=0, prompt_words_median=median_words, sigma=1.0, max_prompt_words=1400)
    return [{"prompt": r.prompt, "max_tokens": plan.output_tokens} for r in trace]


def agentic(seed: int = 0) -> list[dict]:
    """The talk's agentic branching: 4 proposals behind a 1,200-token system prompt, then 4 reviews of them all."""
    trace = agentic_trace(agents=4, review_rounds=1, seed=seed, system_words=round(1200 / TOKENS_PER_WORD),
                          proposal_tokens=24, review_tokens=12)
    return [{"prompt": r.prompt, "max_tokens": r.max_new_tokens, "round": r.round} for r in trace]


def fingerprint(requests: list[dict]) -> str:
    """The same requests, the same 12 hex digits (prompts and lengths, before any salt)."""
    return hashlib.sha256(repr([(r["prompt"], r["max_tokens"]) for r in requests]).encode()).hexdigest()[:12]


def salted(requests: list[dict], salt: str) -> list[dict]:   # the same requests, a first word of their own
    return [dict(r, prompt=f"{salt} {r['prompt']}") for r in requests]


def arrivals(requests: list[dict], rate: float, seed: int = 0) -> list[dict]:
    """The same requests arriving as one Poisson sample (seeded), scaled so that its mean gap is 1 ÷ rate."""
    rng = random.Random(seed)
    gaps = [rng.expovariate(1.0) for _ in requests[1:]]
    at = [0.0, *itertools.accumulate(g * len(gaps) / rate / sum(gaps) for g in gaps)]
    return [dict(r, at=t) for r, t in zip(requests, at)]


def _busy() -> tuple[float, float, float]:
    """(wall clock, CPU seconds every process has used, CPU seconds this benchmark's processes have used)."""
    t = psutil.cpu_times()
    total = sum(t) - t.idle - getattr(t, "iowait", 0.0)
    own = os.times()
    mine = own.user + own.system + own.children_user + own.children_system       # children reaped included
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            mine += sum(p.cpu_times()[:2])
    return time.perf_counter(), total, mine


def load_average() -> float | None:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


class Load:
    """Around one run: the load average at its start and end, and the share of the cores others used."""

    def __enter__(self):
        self.start, self.before = load_average(), _busy()
        return self

    def __exit__(self, *exc):
        after, cores = _busy(), psutil.cpu_count() or 1
        wall = max(after[0] - self.before[0], 1e-9)
        others = ((after[1] - self.before[1]) - (after[2] - self.before[2])) / wall / cores
        self.note = {"load_average": [self.start, load_average()], "others": round(min(max(others, 0.0), 1.0), 3)}


def run_entry(tool: str, workload: str, rows: list, duration_s: float, sends: list[float], trace: str, repeat: int,
              load: dict, concurrency: int | None = None, rate: float | None = None, errors: dict | None = None) -> dict:
    """One run as the record keeps it: each request's [TTFT, ITL, E2E, tokens] (None: failed), and where it ran."""
    sends = sorted(sends) if rate is not None and len(sends) > 1 and max(sends) > min(sends) else None
    achieved = sends and (len(sends) - 1) / (sends[-1] - sends[0])
    return {"tool": tool, "workload": workload, "concurrency": concurrency, "rate": rate, "repeat": repeat,
            "trace": trace, "duration_s": duration_s, "achieved_rate": achieved,
            "requests_detail": [r and [round(v, 6) if isinstance(v, float) else v for v in r] for r in rows],
            "errors": errors or {}, **load}


def _client_run(srv, cfg, plan, requests, workload, repeat, deadline, cpus, concurrency=None, rate=None) -> dict:
    reqs = salted(requests, f"run-{workload}-{concurrency}-{rate}-{repeat}")
    reqs = arrivals(reqs, rate, seed=repeat) if rate is not None else reqs
    with Load() as load, process.pinned(cpus):
        replies = client.run(srv.base_url, cfg.model, reqs, concurrency, plan.timeout_s, max(deadline - time.perf_counter(), 1))
    errors: dict = {}
    for r in replies:
        errors.update({r.error: errors.get(r.error, 0) + 1} if r.error else {})
    duration = max(r.end for r in replies) - min(r.sent for r in replies)
    return run_entry("client", workload, [r.row() for r in replies], duration, [r.sent for r in replies],
                     fingerprint(requests), repeat, load.note, concurrency, rate, errors)


class Remote:
    """A server already running (--target): measured as it is, nothing started or stopped."""

    def __init__(self, base_url: str):
        self.base_url, self.pid, self.ready_s = base_url.rstrip("/"), None, None
        self.start = self.stop = lambda: None
        self.alive = lambda: True


def run_config(cfg: servers.EngineConfig, plan: Plan, result: dict, work: Path, save, server=None) -> None:
    """Start one configuration's server (or measure `server`, one already running), run what the plan asks
    of it, stop it; `result` filled in place, `save()` after every run."""
    srv = server or process.ServerProcess(cfg.command, name=cfg.engine, ready_timeout_s=cfg.ready_timeout_s,
                                          env=cfg.env, log_dir=work)
    try:
        srv.start()
    except process.ServerError as exc:
        result["faults"].append({"kind": type(exc).__name__, "detail": str(exc)[-1500:]})
        return
    try:
        result["ready_s"], deadline = srv.ready_s, time.perf_counter() + plan.deadline_s
        requests, top = chat(plan), max(plan.concurrencies)
        client.run(srv.base_url, cfg.model, [{"prompt": "Hello", "max_tokens": 4}], 1, plan.timeout_s)   # lazy set-up
        client.run(srv.base_url, cfg.model, salted(requests[:top], "warm-up"), top, plan.timeout_s)
        cpus = process.client_cpus(srv.pid) if srv.pid else None   # beside a server that pins its compute, elsewhere
        result["client_cpus"] = sorted(cpus) if cpus else None
        if cpus and process.yield_spinners(srv.pid, cfg.spinners):
            result["spinners_nice"] = {t: process.SPINNER_NICE for t in cfg.spinners}
        ex = client.run(srv.base_url, cfg.model, salted(requests[:1], "example"), 1, plan.timeout_s)[0]
        row = ex.row() or [None, None]
        result["example"] = {"token_s": [t - ex.sent for t in ex.chunks], "ttft_s": row[0], "itl_s": row[1],
                             "tokens": ex.tokens, "error": ex.error}
        jobs = []
        for repeat in range(plan.repeats):          # repeat after repeat: a slow moment falls on every level
            if plan.client is None or cfg.name in plan.client:
                jobs += [("chat", dict(concurrency=c), repeat) for c in plan.concurrencies]
                jobs += [("chat", dict(rate=r), repeat) for r in plan.rates]
            jobs += [("agentic", dict(concurrency=c), repeat) for c in (1, 4) if cfg.name in plan.agentic]
        for workload, level, repeat in jobs:
            if not srv.alive() or time.perf_counter() > deadline:
                break
            result["runs"].append(_client_run(srv, cfg, plan, requests if workload == "chat" else agentic(), workload,
                                              repeat, deadline, cpus, **level))
            save()
        if cfg.name in plan.guidellm and srv.alive() and time.perf_counter() < deadline:
            def add(run):
                result["runs"].append(dict(run, trace=fingerprint(requests)))
                save()
            try:
                tools.guidellm(srv.base_url, cfg.model, requests, plan, work / "guidellm", cpus,
                               deadline - time.perf_counter(), add)
            except tools.ToolError as exc:
                result["faults"].append({"kind": "ToolError", "detail": str(exc)[-1500:]})
        if not srv.alive():
            result["faults"].append({"kind": "ServerDied", "detail": f"exited with {srv.proc.returncode}. "
                                                                     f"Log:\n{srv.log_tail(10)}"})
        elif time.perf_counter() > deadline:
            result["faults"].append({"kind": "Deadline", "detail": f"{plan.deadline_s:g} s passed; what was left not run"})
    finally:
        srv.stop()


def new_record(plan: Plan, device: str, profile: str, reason: str, skipped: list[dict]) -> dict:
    from helpers.measure.hardware import MEASURED_ON, measured_on

    return {MEASURED_ON: measured_on(device, profile, PACKAGES), "profile_reason": reason,
            "plan": {**asdict(plan), "trace": fingerprint(chat(plan)), "agentic_trace": fingerprint(agentic())},
            "cores": psutil.cpu_count(), "idle_others": IDLE_OTHERS, "load_average": {"start": load_average()},
            "skipped": list(skipped), "configs": [], "complete": False, "interrupted": False}


def finish(data: dict, t0: float) -> None:
    """Seconds, the load average at the end, and `idle`: whether every run's others stayed ≤ IDLE_OTHERS."""
    runs = [r for c in data["configs"] for r in c["runs"]]
    data["seconds"] = round(time.perf_counter() - t0, 1)
    data["load_average"]["end"] = load_average()
    data["others_max"] = max((r.get("others", 0.0) for r in runs), default=None)
    data["idle"] = bool(runs) and all(r.get("others", 1.0) <= IDLE_OTHERS for r in runs)


def measure(plan: Plan, out: Path, profile: str | None = None, include=servers.ENGINES, state: dict | None = None,
            target: tuple[str, str] | None = None) -> dict:
    """Every configuration the plan names and this machine can run (or `target`: (URL, model) of a server
    running elsewhere, our client only), the record written to `out` after every run (and kept in `state`)."""
    from helpers.measure.models import resolve_profile

    if target:
        configs, skipped, (name, reason) = [servers.EngineConfig(f"target {target[0]}", "external", [], target[1],
                                                                 "a server running elsewhere")], [], (target[1], "")
        plan = replace(plan, client=None, guidellm=(), agentic=())
    else:
        (name, reason), (configs, skipped) = resolve_profile(profile), servers.available(profile, tuple(include))
    if plan.configs is not None and not target:
        skipped += [{"name": c.name, "why": f"not in the {plan.name} plan"} for c in configs if c.name not in plan.configs]
        configs = [c for c in configs if c.name in plan.configs]
    data = new_record(plan, "cuda" if any(c.needs_cuda for c in configs) else "cpu", name, reason, skipped)
    data["server"], t0 = target and target[0], time.perf_counter()   # a target's machine is not seen from here
    (state if state is not None else {}).update(data=data, t0=t0)

    def save():
        finish(data, t0)
        records.dump(out, "engines", data)

    for cfg in configs:
        result = {"config": cfg.to_dict(), "ready_s": None, "runs": [], "faults": [], "example": None}
        data["configs"].append(result)
        run_config(cfg, plan, result, out.parent / "work" / "".join(ch if ch.isalnum() else "-" for ch in cfg.name),
                   save, server=Remote(target[0]) if target else None)
    data["complete"] = True
    save()
    return data
