"""What the engine benchmark runs: a Plan names the workloads, the closed-loop concurrency levels, the
open-loop request rates, the SLO, and which configurations the other tools (guidellm, `vllm bench
serve`) also measure; `plan_for` sizes one for a device, `notebook_plan` keeps notebook 08's live run short.
Plans are data: helpers.benchmark.harness runs them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..serving.traces import TraceRequest, chat_trace
from . import workloads
from .metrics import SLO


@dataclass
class Plan:
    """What to run. A workload is a list of requests, or a function of the level's index that returns one: a
    fresh trace per level, so that a prefix cache warmed by one level does not serve the next."""

    workloads: dict[str, Any]
    concurrencies: tuple[int, ...]
    slo: SLO
    guidellm_workload: str | None = "fixed"
    timeout_s: float = 120.0          # one request at most
    deadline_s: float = 1800.0        # one configuration's whole run (after its server is ready) at most
    rates: dict[str, tuple[float, ...]] = field(default_factory=dict)   # open loop: workload -> req/s
    tools_configs: tuple[str, ...] | None = None   # configurations guidellm measures too (None: every one)
    crosscheck: str | None = None     # the vLLM configuration `vllm bench serve` measures
    crosscheck_workload: str | None = None   # on this workload (None: guidellm's)
    crosscheck_repeats: int = 1       # our client's and vllm bench's direct runs, alternated, per level
    only: dict[str, tuple[str, ...]] = field(default_factory=dict)   # workload -> the configurations that run it
    configs: tuple[str, ...] | None = None    # the configurations to run (None: every one available)
    notes: list[str] = field(default_factory=list)

    def trace(self, name: str, level: int = 0) -> list[TraceRequest]:
        w = self.workloads[name]
        return list(w(level) if callable(w) else w)


class Deadline:

    def __init__(self, seconds: float):
        self.seconds, self.end = seconds, time.perf_counter() + seconds

    def left(self) -> float:
        return self.end - time.perf_counter()

    def passed(self) -> bool:
        return self.left() <= 0

    def why(self) -> str:
        return f"the run's deadline of {self.seconds:g} s had passed (Plan.deadline_s, --deadline-s)"


CPU_SHAREGPT_SCALE = 0.1    # the tiny model on a shared 2-core CPU: ShareGPT's lengths ÷ 10 (≈ 16 prompt, 34 output tokens)
CPU_CROSSCHECK_REQUESTS = 32  # vllm bench serve's cross-check: fixed's shape, 4 × its requests (a mean, not one batch)
CPU_CROSSCHECK_REPEATS = 3    # two runs of 32 differ by up to 10–20 % in mean TTFT at c4–c8: the mean of three each
TOOLS_CONFIGS = ("HF transformers serve + continuous batching", "vLLM default")


def runs_some_workload(plan: Plan, config: str) -> bool:
    return any(config in plan.only.get(w, (config,)) for w in plan.workloads)


def plan_for(device: str, quick: bool = False) -> Plan:
    """Workloads and levels sized for the device. A CPU with the tiny model: a one-length workload for
    guidellm and vLLM bench (on the configurations they measure), ShareGPT-like chat (lengths ×
    CPU_SHAREGPT_SCALE) closed loop and open loop, the agentic workload behind a 1,200-token system prompt
    (within the 2,048 tokens vLLM is given). A GPU with Mistral 7B: the talk's own (10 concurrent requests
    × 50 tokens behind a 1,656-token shared prefix) and ShareGPT at its published lengths."""
    if device == "cpu":
        return Plan({"fixed": chat_trace(8, seed=1, prompt_words_median=48, output_tokens_median=32, sigma=0.0),
                     "chat": lambda level: workloads.sharegpt_trace(8, seed=level, scale=CPU_SHAREGPT_SCALE,
                                                                    max_output_tokens=128),
                     "agentic": lambda level: workloads.agentic(4, 1, 1200, 24, 12, seed=level),
                     "crosscheck": chat_trace(CPU_CROSSCHECK_REQUESTS, seed=2, prompt_words_median=48,
                                              output_tokens_median=32, sigma=0.0)},
                    (1, 4) if quick else (1, 4, 8), SLO(ttft_s=1.0, tpot_s=0.1), timeout_s=120.0,
                    deadline_s=600.0 if quick else 900.0, rates={"chat": (2.0, 8.0) if quick else (1.0, 4.0, 16.0)},
                    tools_configs=TOOLS_CONFIGS, crosscheck="vLLM default", crosscheck_workload="crosscheck",
                    crosscheck_repeats=CPU_CROSSCHECK_REPEATS, only={"fixed": TOOLS_CONFIGS, "crosscheck": ()})
    if quick:   # a lent GPU's minutes (scripts/gpu_record.sh): the talk's workload alone, alone and all at once
        return Plan({"talk": workloads.agentic(10, 0, 1656, 50, 16)}, (1, 10), SLO(ttft_s=0.5, tpot_s=0.05),
                    timeout_s=120.0, guidellm_workload=None, notes=["quick: the talk's workload at concurrency 1 and 10"])
    return Plan({"fixed": chat_trace(64, seed=1, prompt_words_median=400, output_tokens_median=128, sigma=0.0),
                 "talk": workloads.agentic(10, 0, 1656, 50, 16),
                 "chat": lambda level: workloads.sharegpt_trace(128, seed=level, max_prompt_tokens=3072,
                                                                max_output_tokens=1024),
                 "agentic": lambda level: workloads.agentic(8, 2, 1656, 128, 32, seed=level)},
                (1, 10, 32, 64), SLO(ttft_s=0.5, tpot_s=0.05), timeout_s=300.0, deadline_s=3600.0,
                rates={"chat": (2.0, 4.0, 8.0, 16.0, 32.0)}, crosscheck="vLLM default")


def notebook_plan(device: str) -> Plan:
    """Notebook 08's live run, kept short (it runs in CI twice): on a CPU with the tiny model, the agentic
    workload (4 agents, a review round) and ShareGPT-like chat at concurrency 1 and 4, chat also open loop
    at 2 and 8 requests/s, on transformers serve off and on and the vLLM default; guidellm on the
    one-length workload for transformers serve with continuous batching. The other vLLM configurations
    (prefix caching off, fp8 KV, n-gram) are make engines' (its record is shown beside)."""
    if device == "cpu":
        return Plan({"fixed": chat_trace(8, seed=1, prompt_words_median=48, output_tokens_median=32, sigma=0.0),
                     "chat": lambda level: workloads.sharegpt_trace(4, seed=level, scale=CPU_SHAREGPT_SCALE,
                                                                    max_output_tokens=64),
                     "agentic": lambda level: workloads.agentic(4, 1, 1200, 24, 12, seed=level)},
                    (1, 4), SLO(ttft_s=1.0, tpot_s=0.1), timeout_s=120.0, deadline_s=420.0, rates={"chat": (2.0, 8.0)},
                    tools_configs=TOOLS_CONFIGS[:1], only={"fixed": TOOLS_CONFIGS[:1]},
                    configs=("HF transformers serve", "HF transformers serve + continuous batching", "vLLM default"))
    return Plan({"fixed": chat_trace(64, seed=1, prompt_words_median=400, output_tokens_median=128, sigma=0.0),
                 "agentic": lambda level: workloads.agentic(8, 1, 1656, 64, 16, seed=level)},
                (1, 10, 32), SLO(ttft_s=0.5, tpot_s=0.05), timeout_s=300.0, deadline_s=1200.0)
