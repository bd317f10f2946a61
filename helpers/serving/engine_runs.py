"""The readable engine measured serving: its step log read, and chunked prefill (notebook 07, `make bench`)."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace
from typing import Sequence

import pandas as pd

from ..engine.llm import Engine, EngineArgs
from ..engine.request import SamplingParams
from .naive import RequestTiming, ServeResult
from .traces import TraceRequest


@dataclass(frozen=True)
class ChunkedRun:
    token_budget: int
    long_prompt_tokens: int
    prefill_steps: int
    largest_step_tokens: int         # the largest step during its prefill
    worst_gap_ms: float | None       # the others' worst gap between tokens during its prefill
    median_gap_ms: float | None
    long_prompt_ttft_ms: float
    same_tokens_as_first_budget: bool = True   # every request's tokens those of the first budget


def serve(model, requests: Sequence[TraceRequest], args: EngineArgs = EngineArgs()) -> tuple[ServeResult, Engine]:
    """Serve helpers.serving requests (all arrived at 0) through a fresh engine, greedy, exactly
    max_new_tokens each; their timings in seconds after the start, as the other ways of serving report."""
    e = Engine(model, args)
    t0 = time.perf_counter()
    reqs = [e.add(r.prompt, SamplingParams(max_tokens=r.max_new_tokens, ignore_eos=True), rid=r.rid)
            for r in requests]
    e.run()
    timings = [RequestTiming(r.rid, len(r.prompt), len(r.output), r.admitted_s - t0, r.token_times[0] - t0,
                             r.token_times[-1] - t0, r.output) for r in reqs]
    return ServeResult("readable engine", timings, max((t.finish_s for t in timings), default=0.0), e.runner.forwards), e


def chunked_prefill(model, shorts: Sequence[Sequence[int]], long_prompt: Sequence[int], new_tokens: int,
                    arrive_after_steps: int, budgets: Sequence[int], block_size: int = 16,
                    repeats: int = 2) -> list[ChunkedRun]:
    """Short requests decoding, then a long prompt arriving `arrive_after_steps` steps later, once per
    token budget: the others' gaps between tokens while it is prefilled, its TTFT and prefill steps, and
    whether every request made the first budget's tokens. Each budget `repeats` times, interleaved, each
    time figure its smallest."""
    runs = [_chunked_run(model, shorts, long_prompt, new_tokens, arrive_after_steps, b, block_size)
            for _ in range(repeats) for b in budgets]
    out = []
    for j in range(len(budgets)):
        mine = [r for r, _ in runs[j::len(budgets)]]
        best = {key: min(getattr(r, key) for r in mine) for key in ("worst_gap_ms", "median_gap_ms", "long_prompt_ttft_ms")
                if all(getattr(r, key) is not None for r in mine)}
        same = all(tokens == runs[0][1] for _, tokens in runs[j::len(budgets)])
        out.append(replace(mine[0], **best, same_tokens_as_first_budget=same))
    return out


def _chunked_run(model, shorts, long_prompt, new_tokens, arrive_after_steps, budget, block_size):
    """One run of chunked_prefill at one token budget: its ChunkedRun and every request's tokens."""
    one = SamplingParams(max_tokens=new_tokens, ignore_eos=True)
    e = Engine(model, EngineArgs(block_size, max_num_seqs=len(shorts) + 1, max_batch_tokens=budget,
                                 prefix_cache=None))
    e.generate([list(long_prompt)[:budget]], SamplingParams(max_tokens=2, ignore_eos=True))   # warm-up
    first = len(e.log)
    rs = [e.add(list(p), one) for p in shorts]
    for _ in range(arrive_after_steps):
        e.step()
    long = e.add(list(long_prompt), one)
    e.run()
    t0, t1 = long.arrival_s, long.token_times[0]
    gaps = [b - a for r in rs for a, b in zip(r.token_times, r.token_times[1:]) if b >= t0 and a <= t1]
    during = [s for s in e.log[first:] if long.rid in s["prefill"]]
    return ChunkedRun(budget, len(long_prompt), len(during), max(s["tokens"] for s in during),
                      1e3 * max(gaps) if gaps else None, 1e3 * statistics.median(gaps) if gaps else None,
                      1e3 * (t1 - t0)), [r.output for r in rs + [long]]


def blocks_without_preemption(requests: Sequence[TraceRequest], block_size: int, max_num_seqs: int = 1) -> int:
    """KV blocks that hold the `max_num_seqs` longest requests at their full length (prompt and every token it
    makes): with that many no running request runs out of blocks, so none is preempted; with 1, the fewest
    that let each request run alone."""
    return sum(sorted((-(-(len(r.prompt) + r.max_new_tokens) // block_size) for r in requests), reverse=True)[:max_num_seqs])


def log_summary(e: Engine, result: ServeResult, requests: Sequence[TraceRequest] = ()) -> pd.DataFrame:
    """An engine run's step log summed up, one row; with the `requests`, the blocks that would have prevented every
    preemption."""
    log = e.log
    peak = max(log, key=lambda s: s["blocks used"], default={"blocks used": 0, "tokens held": 0})
    return pd.DataFrame([{
        "requests": len(result.timings), "steps": len(log), "tokens/s": result.tokens_per_s,
        "prefill chunks": sum(len(s["prefill"]) for s in log),
        "steps mixing prefill and decode": sum(1 for s in log if s["prefill"] and s["decode"]),
        "preemptions": sum(len(s["preempted"]) for s in log),
        "recomputed tokens": sum(r.lost_tokens for r in e.scheduler.finished), "blocks": e.args.blocks,
        "blocks that prevent preemption": blocks_without_preemption(requests, e.args.block_size, e.args.max_num_seqs)
        if requests else None,
        "peak blocks in use": peak["blocks used"], "tokens held at the peak": peak["tokens held"],
        "copy-on-write copies": e.kv.copies}])
