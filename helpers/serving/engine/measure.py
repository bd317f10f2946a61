"""The engine measured: against transformers (`generate`, its continuous-batching manager), its prefix
cache's time to first token, its two caches on one trace, its speculative decoding — the figures of
`make bench` (helpers.serving.bench) and notebook 07. Not part of the engine's mechanism.
"""
from __future__ import annotations

import statistics
import time
from typing import Sequence

from ..naive import Request as ServeRequest, RequestTiming, ServeResult
from . import speculative
from .llm import Engine, EngineArgs
from .request import SamplingParams


def serve(model, requests: Sequence[ServeRequest], args: EngineArgs = EngineArgs()) -> tuple[ServeResult, Engine]:
    """Serve helpers.serving requests (all arrived at 0) through a fresh engine, greedy, exactly
    max_new_tokens each; their timings in seconds after the start, as the other ways of serving report."""
    e = Engine(model, args)
    t0 = time.perf_counter()
    reqs = [e.add(r.prompt, SamplingParams(max_tokens=r.max_new_tokens, ignore_eos=True), rid=r.rid) for r in requests]
    e.run()
    timings = [RequestTiming(r.rid, len(r.prompt), len(r.output), r.admitted_s - t0, r.token_times[0] - t0,
                             r.token_times[-1] - t0, r.output) for r in reqs]
    for t, r in zip(timings, reqs):
        t.token_times = [x - t0 for x in r.token_times]
    wall = max(t.finish_s for t in timings)
    return ServeResult("readable engine", timings, wall, e.runner.forwards), e


def identical_to_generate(model, prompts: Sequence[Sequence[int]], new_tokens: int,
                          args: EngineArgs = EngineArgs()) -> dict:
    """The engine's greedy tokens for all prompts served together against transformers' generate on each
    prompt alone (never stopping early): whether every token is the same, and per prompt."""
    import torch
    from transformers.utils import logging

    e = Engine(model, args)
    got = e.generate(prompts, SamplingParams(max_tokens=new_tokens, ignore_eos=True))
    level = logging.get_verbosity()
    logging.set_verbosity_error()          # generate warns that eos_token_id -1 is not a real token
    try:
        want = []
        for p in prompts:
            ids = torch.tensor([list(p)], device=next(model.parameters()).device)
            with torch.inference_mode():
                out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                                     do_sample=False, eos_token_id=-1, pad_token_id=0)
            want.append(out[0, ids.shape[1]:].tolist())
    finally:
        logging.set_verbosity(level)
    same = [a == b for a, b in zip(got, want)]
    return {"identical": all(same), "requests": len(prompts), "identical requests": sum(same),
            "prompt lengths": [len(p) for p in prompts], "new tokens each": new_tokens, "steps": len(e.log)}


def against_transformers_cb(model, requests: Sequence[ServeRequest], concurrent: int = 8,
                            max_batch_tokens: int = 512, rounds: int = 2) -> dict:
    """Output tokens/s of the engine and of transformers' continuous-batching manager on the same
    requests, at most `concurrent` at once, the same token budget per step and blocks of 16 tokens;
    `rounds` interleaved, each its fastest (a shared machine only slows a run down). Both compute in a
    worker thread (helpers.serving.batching.in_worker_thread says why)."""
    from ..batching import in_worker_thread, same_tokens, serve_continuous

    args = EngineArgs(block_size=16, max_num_seqs=concurrent, max_batch_tokens=max_batch_tokens, prefix_cache=None)
    in_worker_thread(serve, model, requests[:2], args)                 # warm-up, both
    serve_continuous(model, requests[:2], max_batch_tokens, concurrent=concurrent)
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(in_worker_thread(serve, model, requests, args)[0])
        theirs.append(serve_continuous(model, requests, max_batch_tokens, concurrent=concurrent))
    a, b = min(ours, key=lambda r: r.wall_s), min(theirs, key=lambda r: r.wall_s)
    return {"engine tokens/s": a.tokens_per_s, "transformers CB tokens/s": b.tokens_per_s,
            "ratio": a.tokens_per_s / b.tokens_per_s, "engine steps": a.forward_calls,
            "same tokens": same_tokens(a, b), "concurrent": concurrent, "requests": len(requests),
            "rounds": rounds, "engine": a, "transformers CB": b}


def prefix_ttft(model, prefix: Sequence[int], suffixes: Sequence[Sequence[int]], block_size: int = 16,
                cache: str = "radix") -> dict:
    """Time to first token of prefix + suffix, cold (prefix caching off) and warm (the prefix left in the
    cache by an earlier request with another suffix), medians over the suffixes; one step each (the
    token budget holds the whole prompt), the same first token both ways."""
    if len(suffixes) < 2:
        raise ValueError("give at least two suffixes: the first request warms the cache, the others are timed")
    budget = len(prefix) + max(len(s) for s in suffixes)
    one = SamplingParams(max_tokens=1, ignore_eos=True)

    def ttft(engine, prompt):
        r = engine.add(list(prompt), one)
        engine.run()
        return r.token_times[0] - r.arrival_s, r.output[0], r.cached_tokens

    cold_e = Engine(model, EngineArgs(block_size=block_size, max_batch_tokens=budget, prefix_cache=None))
    warm_e = Engine(model, EngineArgs(block_size=block_size, max_batch_tokens=budget, prefix_cache=cache))
    ttft(cold_e, list(prefix) + list(suffixes[0]))                    # warm-up (first shapes), untimed
    ttft(warm_e, list(prefix) + list(suffixes[0]))                    # leaves the prefix in the cache
    cold, warm, same, hits = [], [], True, []
    for s in suffixes[1:]:
        c, tc, _ = ttft(cold_e, list(prefix) + list(s))
        w, tw, hit = ttft(warm_e, list(prefix) + list(s))
        cold.append(c)
        warm.append(w)
        hits.append(hit)
        same &= tc == tw
    c, w = statistics.median(cold), statistics.median(warm)
    return {"prefix tokens": len(prefix), "suffix tokens": len(suffixes[1]), "cache": cache,
            "TTFT cold (ms)": 1e3 * c, "TTFT warm (ms)": 1e3 * w, "TTFT ratio": c / w,
            "cached tokens per warm request": hits, "same first token": same}


def cache_hits(model, prompts_by_round: Sequence[Sequence[Sequence[int]]], block_size: int = 16,
               new_tokens: int = 4) -> dict:
    """The same rounds of prompts (each round served after the last) through the radix and the hash
    cache: prompt tokens reused by each, and whether both gave the same tokens."""
    out, tokens = {}, {}
    for kind in ("radix", "hash"):
        e = Engine(model, EngineArgs(block_size=block_size, prefix_cache=kind))
        tokens[kind] = [e.generate(list(r), SamplingParams(max_tokens=new_tokens, ignore_eos=True))
                        for r in prompts_by_round]
        total = sum(len(p) for r in prompts_by_round for p in r)
        out[kind] = {"prompt tokens": total, "reused tokens": e.cache.hit_tokens,
                     "hit rate": e.cache.hit_tokens / total, "copy-on-write copies": e.kv.alloc.copies}
    out["same tokens"] = tokens["radix"] == tokens["hash"]
    return out


def speculative_figures(model, prompt: Sequence[int], new_tokens: int, k: int = 4, draft_layers: int = 2,
                        ngram: int = 3, batch: int = 1) -> list[dict]:
    """Plain decoding, prompt lookup and the early-exit draft on `batch` copies of one prompt, greedy:
    tokens per target pass, target passes, wall-clock speed-up over plain decoding (same loop, no draft)
    and whether the tokens are the plain ones. Each timed after a short untimed warm-up."""
    params = SamplingParams(max_tokens=new_tokens, ignore_eos=True)
    blocks = batch * -(-(len(prompt) + new_tokens + k) // 16)     # the draft's cache, blocks of 16 tokens
    drafters = {"prompt lookup": lambda: speculative.PromptLookup(ngram),
                "draft model": lambda: speculative.DraftModel(model, num_layers=draft_layers, num_blocks=blocks)}
    speculative.generate(model, [list(prompt)[:16]] * batch, SamplingParams(max_tokens=4, ignore_eos=True))
    plain = speculative.generate(model, [list(prompt)] * batch, params)
    rows = [{"drafter": "none (plain decoding)", "k": 0, "batch": batch, "tokens per target pass": 1.0,
             "target passes": plain.target_passes, "seconds": plain.seconds, "wall-clock speed-up": 1.0,
             "identical to plain": True}]
    for name, make in drafters.items():
        speculative.generate(model, [list(prompt)[:16]] * batch, SamplingParams(max_tokens=4, ignore_eos=True),
                             k=k, drafter=make())
        res = speculative.generate(model, [list(prompt)] * batch, params, k=k, drafter=make())
        kept = sum(a for _, a in res.rounds)
        drafted = sum(d for d, _ in res.rounds)
        rows.append({"drafter": res.drafter, "k": k, "batch": batch, "tokens per target pass": res.tokens_per_pass,
                     "target passes": res.target_passes, "seconds": res.seconds,
                     "wall-clock speed-up": plain.seconds / res.seconds,
                     "acceptance rate (kept ÷ drafted)": kept / drafted if drafted else 0.0,
                     "identical to plain": res.outputs == plain.outputs})
    return rows


def timeline(log: list[dict]) -> list[dict]:
    """The engine's step log as one row per request per step: what it was doing (prefill with its chunk
    size, decode, waiting, preempted) between the step's start and end, seconds after the first step."""
    if not log:
        return []
    t0 = log[0]["start_s"]
    rows = []
    for s in log:
        span = {"step": s["step"], "start_s": s["start_s"] - t0, "end_s": s["end_s"] - t0}
        rows += [{**span, "request": r, "state": "prefill", "tokens": n} for r, n in s["prefill"].items()]
        rows += [{**span, "request": r, "state": "decode", "tokens": 1} for r in s["decode"]]
        rows += [{**span, "request": r, "state": "preempted", "tokens": 0} for r in s["preempted"]]
        rows += [{**span, "request": r, "state": "waiting", "tokens": 0} for r in s["waiting"]
                 if r not in s["preempted"]]
    return rows
