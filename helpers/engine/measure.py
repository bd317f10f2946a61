"""The engine measured: against transformers (`generate`, its continuous-batching manager), its prefix
cache's time to first token, its two caches on one trace, its speculative decoding — the figures of
`make bench` (helpers.serving.measured) and notebook 07. Not part of the engine's mechanism.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace
from typing import Sequence

from ..formulas.speculation import pays, round_cost
from ..formulas.verdicts import Verdict, change_verdict, share, speed, times_as
from ..serving.naive import Request as ServeRequest, RequestTiming, ServeResult
from . import speculative
from .llm import Engine, EngineArgs
from .request import SamplingParams


@dataclass(frozen=True)
class LogSummary:
    """What an engine run's step log says."""

    requests: int
    steps: int
    tokens_per_s: float
    prefill_chunks: int
    mixed_steps: int                 # steps mixing prefill chunks with decode rows
    preemptions: int
    recomputed_tokens: int           # computed again because of the preemptions
    peak_blocks: int                 # the most KV blocks in use at once
    tokens_at_peak: int              # tokens those blocks held
    copy_on_write_copies: int


@dataclass(frozen=True)
class GenerateCheck:
    """The engine's greedy tokens against transformers' generate, prompt by prompt."""

    identical: bool
    requests: int
    identical_requests: int
    prompt_lengths: list[int]
    new_tokens_each: int
    steps: int


@dataclass(frozen=True)
class AgainstCB:
    """The engine against transformers' continuous-batching manager on the same requests."""

    engine_tokens_per_s: float
    transformers_cb_tokens_per_s: float
    ratio: float                     # engine ÷ transformers
    engine_steps: int
    same_tokens: float               # share of requests with identical tokens
    concurrent: int
    requests: int
    rounds: int
    engine: ServeResult              # each way's fastest run
    transformers_cb: ServeResult


@dataclass(frozen=True)
class PrefixTTFT:
    """Time to first token of prefix + suffix, cold (no prefix cache) and warm (the prefix cached)."""

    prefix_tokens: int
    suffix_tokens: int
    cache: str
    ttft_cold_ms: float
    ttft_warm_ms: float
    ttft_ratio: float                # cold ÷ warm
    cached_tokens_per_warm_request: list[int]
    same_first_token: bool


@dataclass(frozen=True)
class CacheRun:
    """One prefix cache on rounds of prompts."""

    cache: str                       # "radix" or "hash"
    prompt_tokens: int
    reused_tokens: int
    hit_rate: float                  # reused ÷ prompt tokens
    copy_on_write_copies: int
    hits: list[int]                  # reused tokens per request, in arrival order
    lengths: list[int]               # prompt tokens per request


@dataclass(frozen=True)
class CacheHits:
    """The radix tree and the block hashes on the same rounds of prompts."""

    radix: CacheRun
    hash: CacheRun
    same_tokens: bool                # both caches gave the same tokens


@dataclass(frozen=True)
class ChunkedRun:
    """A long prompt arriving while short requests decode, at one token budget."""

    token_budget: int
    long_prompt_tokens: int
    prefill_steps: int
    largest_step_tokens: int         # the largest step during its prefill
    worst_gap_ms: float | None       # the others' worst gap between tokens during its prefill
    median_gap_ms: float | None
    long_prompt_ttft_ms: float


@dataclass(frozen=True)
class SpecRun:
    """One drafter through the engine's speculative loop, greedy (drafter "none": plain decoding)."""

    drafter: str
    k: int
    batch: int
    tokens_per_pass: float           # tokens per target pass
    target_passes: int
    seconds: float
    speedup: float                   # wall clock, over plain decoding
    acceptance_rate: float | None    # kept ÷ drafted (None for plain decoding)
    identical_to_plain: bool


@dataclass(frozen=True)
class EditHits:
    """A prompt served again with one token changed: the tokens each cache reuses."""

    prompt_tokens: int
    edited_position: int
    block_size: int
    radix_reused_tokens: int
    hash_reused_tokens: int


@dataclass(frozen=True)
class VerifyCost:
    """A verify pass of k + 1 rows per sequence against a one-row decode step, measured."""

    context: int
    batch: int
    k: int
    decode_step_ms: float
    verify_pass_ms: float
    verify_over_decode: float


def serve(model, requests: Sequence[ServeRequest], args: EngineArgs = EngineArgs()) -> tuple[ServeResult, Engine]:
    """Serve helpers.serving requests (all arrived at 0) through a fresh engine, greedy, exactly
    max_new_tokens each; their timings in seconds after the start, as the other ways of serving report."""
    e = Engine(model, args)
    t0 = time.perf_counter()
    reqs = [e.add(r.prompt, SamplingParams(max_tokens=r.max_new_tokens, ignore_eos=True), rid=r.rid)
            for r in requests]
    e.run()
    timings = [RequestTiming(r.rid, len(r.prompt), len(r.output), r.admitted_s - t0, r.token_times[0] - t0,
                             r.token_times[-1] - t0, r.output) for r in reqs]
    for t, r in zip(timings, reqs):
        t.token_times = [x - t0 for x in r.token_times]
    wall = max(t.finish_s for t in timings)
    return ServeResult("readable engine", timings, wall, e.runner.forwards), e


def blocks_needed(requests: Sequence[ServeRequest], block_size: int) -> int:
    """The fewest KV blocks that let each request run alone (its prompt and every token it makes)."""
    return max(-(-(len(r.prompt) + r.max_new_tokens) // block_size) for r in requests)


def log_summary(e: Engine, result: ServeResult) -> LogSummary:
    """What an engine run's step log says: steps, prefill chunks, steps mixing prefill and decode rows,
    preemptions and the tokens they made it compute again, the peak of blocks in use, block copies."""
    log = e.log
    peak = max(log, key=lambda s: s["blocks used"])
    return LogSummary(len(result.timings), len(log), result.tokens_per_s,
                      prefill_chunks=sum(len(s["prefill"]) for s in log),
                      mixed_steps=sum(1 for s in log if s["prefill"] and s["decode"]),
                      preemptions=sum(len(s["preempted"]) for s in log),
                      recomputed_tokens=sum(r.lost_tokens for r in e.scheduler.finished),
                      peak_blocks=peak["blocks used"], tokens_at_peak=peak["tokens held"],
                      copy_on_write_copies=e.kv.alloc.copies)


def identical_to_generate(model, prompts: Sequence[Sequence[int]], new_tokens: int,
                          args: EngineArgs = EngineArgs()) -> GenerateCheck:
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
    return GenerateCheck(all(same), len(prompts), sum(same), [len(p) for p in prompts], new_tokens, len(e.log))


def against_transformers_cb(model, requests: Sequence[ServeRequest], concurrent: int = 8,
                            max_batch_tokens: int = 512, rounds: int = 2) -> AgainstCB:
    """Output tokens/s of the engine and of transformers' continuous-batching manager on the same
    requests, at most `concurrent` at once, the same token budget per step and blocks of 16 tokens;
    `rounds` interleaved, each its fastest (a shared machine only slows a run down). Both compute in a
    worker thread (helpers.serving.batching.in_worker_thread says why)."""
    from ..serving.batching import in_worker_thread, same_tokens, serve_continuous

    args = EngineArgs(block_size=16, max_num_seqs=concurrent, max_batch_tokens=max_batch_tokens, prefix_cache=None)
    in_worker_thread(serve, model, requests[:2], args)                 # warm-up, both
    serve_continuous(model, requests[:2], max_batch_tokens, concurrent=concurrent)
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(in_worker_thread(serve, model, requests, args)[0])
        theirs.append(serve_continuous(model, requests, max_batch_tokens, concurrent=concurrent))
    a, b = min(ours, key=lambda r: r.wall_s), min(theirs, key=lambda r: r.wall_s)
    return AgainstCB(a.tokens_per_s, b.tokens_per_s, a.tokens_per_s / b.tokens_per_s, a.forward_calls,
                     same_tokens(a, b), concurrent, len(requests), rounds, engine=a, transformers_cb=b)


def prefix_ttft(model, prefix: Sequence[int], suffixes: Sequence[Sequence[int]], block_size: int = 16,
                cache: str = "radix") -> PrefixTTFT:
    """Time to first token of prefix + suffix, cold (prefix caching off) and warm (the prefix left in the
    cache by an earlier request with another suffix), the fastest over the suffixes (a shared machine only
    slows a run down); one step each (the token budget holds the whole prompt), the same first token."""
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
    c, w = min(cold), min(warm)
    return PrefixTTFT(len(prefix), len(suffixes[1]), cache, 1e3 * c, 1e3 * w, c / w, hits, same)


def cache_hits(model, prompts_by_round: Sequence[Sequence[Sequence[int]]], block_size: int = 16,
               new_tokens: int = 4) -> CacheHits:
    """The same rounds of prompts (each round served after the last) through the radix and the hash
    cache: prompt tokens reused by each (in all and per request, in arrival order), and whether both
    gave the same tokens."""
    out, tokens = {}, {}
    prompts = [list(p) for r in prompts_by_round for p in r]
    for kind in ("radix", "hash"):
        e = Engine(model, EngineArgs(block_size=block_size, prefix_cache=kind))
        reqs, tokens[kind] = [], []
        for r in prompts_by_round:
            batch = [e.add(list(p), SamplingParams(max_tokens=new_tokens, ignore_eos=True)) for p in r]
            e.run()
            reqs += batch
            tokens[kind] += [q.output for q in batch]
        total = sum(len(p) for p in prompts)
        out[kind] = CacheRun(kind, total, e.cache.hit_tokens, e.cache.hit_tokens / total, e.kv.alloc.copies,
                             [q.cached_tokens for q in reqs], [len(p) for p in prompts])
    return CacheHits(out["radix"], out["hash"], tokens["radix"] == tokens["hash"])


def chunked_prefill(model, shorts: Sequence[Sequence[int]], long_prompt: Sequence[int], new_tokens: int,
                    arrive_after_steps: int, budgets: Sequence[int], block_size: int = 16,
                    repeats: int = 2) -> list[ChunkedRun]:
    """Short requests decoding, then a long prompt arriving `arrive_after_steps` steps later, once per
    token budget: the short ones' worst and median gap between tokens while the long one is prefilled,
    its own TTFT and the steps its prefill took (chunks of at most the budget, less the decode rows).
    Each budget `repeats` times, interleaved, each time figure its smallest (load only adds)."""
    runs = [_chunked_run(model, shorts, long_prompt, new_tokens, arrive_after_steps, b, block_size)
            for _ in range(repeats) for b in budgets]
    out = []
    for j in range(len(budgets)):
        mine = runs[j::len(budgets)]
        best = {key: min(getattr(r, key) for r in mine) for key in ("worst_gap_ms", "median_gap_ms", "long_prompt_ttft_ms")
                if all(getattr(r, key) is not None for r in mine)}
        out.append(replace(mine[0], **best))
    return out


def _chunked_run(model, shorts, long_prompt, new_tokens, arrive_after_steps, budget, block_size) -> ChunkedRun:
    """One run of chunked_prefill at one token budget."""
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
                      1e3 * (t1 - t0))


def speculative_runs(model, prompt: Sequence[int], new_tokens: int, k: int = 4, draft_layers: int = 2,
                        ngram: int = 3, batch: int = 1, repeats: int = 2) -> list[SpecRun]:
    """Plain decoding, prompt lookup and the early-exit draft on `batch` copies of one prompt, greedy:
    tokens per target pass, target passes, wall-clock speed-up over plain decoding (same loop, no draft)
    and whether the tokens are the plain ones. After a short untimed warm-up, the three run `repeats`
    times interleaved, each timed by its fastest run (a shared machine only slows a run down)."""
    params = SamplingParams(max_tokens=new_tokens, ignore_eos=True)
    blocks = batch * -(-(len(prompt) + new_tokens + k) // 16)     # the draft's cache, blocks of 16 tokens
    drafters = {"none": lambda: None, "prompt lookup": lambda: speculative.PromptLookup(ngram),
                "draft model": lambda: speculative.DraftModel(model, num_layers=draft_layers, num_blocks=blocks)}
    for make in drafters.values():
        speculative.generate(model, [list(prompt)[:16]] * batch, SamplingParams(max_tokens=4, ignore_eos=True),
                             k=k, drafter=make())
    runs = {name: [] for name in drafters}
    for _ in range(repeats):
        for name, make in drafters.items():
            runs[name].append(speculative.generate(model, [list(prompt)] * batch, params, k=k, drafter=make()))
    best = {name: min(r, key=lambda x: x.seconds) for name, r in runs.items()}
    plain = best.pop("none")
    rows = [SpecRun("none (plain decoding)", 0, batch, 1.0, plain.target_passes, plain.seconds, 1.0, None, True)]
    for res in best.values():
        kept = sum(a for _, a in res.rounds)
        drafted = sum(d for d, _ in res.rounds)
        rows.append(SpecRun(res.drafter, k, batch, res.tokens_per_pass, res.target_passes, res.seconds,
                            plain.seconds / res.seconds, kept / drafted if drafted else 0.0,
                            res.outputs == plain.outputs))
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


def edit_hits(model, prompt: Sequence[int], edit_at: int, block_size: int = 16) -> EditHits:
    """A prompt served once, then again with the token at `edit_at` changed: the tokens each cache
    reuses for the edited prompt (radix: up to the edit; hashes: up to the last whole block before it)."""
    if not 0 <= edit_at < len(prompt) - 1:
        raise ValueError(f"edit_at must be a position in 0..{len(prompt) - 2}, got {edit_at}")
    edited = list(prompt)
    edited[edit_at] = (edited[edit_at] + 1) % model.config.vocab_size
    reused = {}
    for kind in ("radix", "hash"):
        e = Engine(model, EngineArgs(block_size=block_size, prefix_cache=kind))
        e.generate([list(prompt)], SamplingParams(max_tokens=1, ignore_eos=True))
        r = e.add(edited, SamplingParams(max_tokens=1, ignore_eos=True))
        e.run()
        reused[kind] = r.cached_tokens
    return EditHits(len(prompt), edit_at, block_size, reused["radix"], reused["hash"])


def verify_cost(model, k: int, context: int, batch: int, repeats: int = 5) -> VerifyCost:
    """What a verify pass costs on this machine: one forward of `batch` sequences with `context` cached
    tokens each, k + 1 new rows per sequence, against the same with one row (a decode step); each the
    fastest of `repeats`. The measured twin of helpers.formulas.speculation.verify_step_ratio."""
    from .kv import PagedKVCache
    from .runner import Chunk, Runner

    kv = PagedKVCache.for_model(model, batch * -(-(context + k + 1) // 16), 16)
    runner = Runner(model, kv)
    for b in range(batch):
        kv.alloc.allocate(b, context + k + 1)

    def best(n: int) -> float:
        chunks = [Chunk(kv.table(b), [5] * n, context, n) for b in range(batch)]
        runner.forward(chunks)                              # warm-up (first shapes)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            runner.forward(chunks)
            times.append(time.perf_counter() - t0)
        return min(times)

    one, many = best(1), best(k + 1)
    return VerifyCost(context, batch, k, 1e3 * one, 1e3 * many, many / one)


# ----------------------------------------------------------------------------- what each run says, by rule
# (helpers.formulas.verdicts: the words come from the numbers, with the change margin named there)

def blocks_without_preemption(requests: Sequence[ServeRequest], block_size: int, max_num_seqs: int) -> int:
    """KV blocks that hold the `max_num_seqs` longest requests at their full length (prompt and every token):
    with that many no running request can run out of blocks, so none is preempted."""
    needs = sorted((-(-(len(r.prompt) + r.max_new_tokens) // block_size) for r in requests), reverse=True)
    return sum(needs[:max_num_seqs])


def log_reading(s: LogSummary, args: EngineArgs, requests: Sequence[ServeRequest]) -> list[Verdict]:
    """What an engine run's step log shows: prompts cut into chunks, preemptions against the blocks that
    would have prevented them (blocks_without_preemption), and how full the blocks in use were at the peak."""
    running = min(args.max_num_seqs, len(requests))
    need = blocks_without_preemption(requests, args.block_size, args.max_num_seqs)
    bound = f"{need} blocks hold the {running} longest requests at full length, and from there none is preempted"
    out = [Verdict(f"{s.prefill_chunks} prefill chunks for {s.requests} requests: "
                   + ("prompts longer than what the step's token budget had left were cut"
                      if s.prefill_chunks > s.requests else "every prompt prefilled in one step"),
                   "engine.chunks", {"chunks": s.prefill_chunks, "requests": s.requests}),
           Verdict((f"{s.preemptions} preemptions with {args.blocks} blocks ({s.recomputed_tokens:,} tokens computed "
                    f"again); {bound}" if s.preemptions else f"no preemption with {args.blocks} blocks; {bound}"),
                   "engine.preemptions", {"preemptions": s.preemptions, "blocks": args.blocks, "needed": need})]
    slots = s.peak_blocks * args.block_size
    filled = share(s.tokens_at_peak, slots, f"the {slots:,} slots of the blocks in use")
    out.append(Verdict(f"at the peak, {s.peak_blocks} of {args.blocks} blocks were in use and their tokens filled "
                       f"{filled.words}: each request's last block is partly empty", "share", filled.evidence))
    return out


def chunked_reading(one: ChunkedRun, chunked: ChunkedRun) -> list[Verdict]:
    """The long prompt prefilled in one step against in chunks: the largest step the others waited on (the
    schedule), their worst gap between tokens each way and against the long prompt's whole prefill, and the
    long prompt's own time to first token (helpers.formulas.verdicts.speed)."""
    out = [Verdict(f"the largest step during the long prompt's prefill computed {one.largest_step_tokens:,} tokens "
                   f"in one step and {chunked.largest_step_tokens:,} with a {chunked.token_budget}-token budget "
                   f"({chunked.prefill_steps} chunks)", "engine.schedule",
                   {"one": one.largest_step_tokens, "chunked": chunked.largest_step_tokens})]
    if one.worst_gap_ms is not None and chunked.worst_gap_ms is not None:
        gap = speed(chunked.worst_gap_ms, one.worst_gap_ms, "shorter", "longer", "as long")
        stall = times_as(one.worst_gap_ms, one.long_prompt_ttft_ms, "the long prompt's whole prefill (its TTFT)")
        out.append(Verdict(f"the others' worst gap between tokens was {gap.words} with chunks "
                           f"({chunked.worst_gap_ms:,.1f} against {one.worst_gap_ms:,.1f} ms); in one step it was "
                           f"{stall.words}", "speed", {**gap.evidence, "stall_over_prefill": stall.evidence["ratio"]}))
    else:
        out.append(Verdict("no other request made a token while the long prompt was prefilled: no gap to compare",
                           "engine.gaps", {}))
    ttft = speed(chunked.long_prompt_ttft_ms, one.long_prompt_ttft_ms, "shorter", "longer", "as long")
    out.append(Verdict(f"the long prompt's own TTFT was {ttft.words} with chunks ({chunked.long_prompt_ttft_ms:,.1f} "
                       f"against {one.long_prompt_ttft_ms:,.1f} ms)", "speed", ttft.evidence))
    return out


def hits_reading(runs: dict[str, CacheHits], block_size: int) -> list[Verdict]:
    """Each trace's share of prompt tokens reused (its band, helpers.formulas.verdicts.share) by the tree and
    the hashes, and how far apart the two caches are per request, against one block."""
    out = []
    for name, r in runs.items():
        tree, hashed = share(r.radix.reused_tokens, r.radix.prompt_tokens), share(r.hash.reused_tokens,
                                                                                  r.hash.prompt_tokens)
        diff = [a - b for a, b in zip(r.radix.hits, r.hash.hits)]
        apart = (f"per request the tree reused {min(diff)} to {max(diff)} tokens more than the hashes"
                 + (f", less than one {block_size}-token block" if max(diff) < block_size and min(diff) >= 0 else ""))
        out.append(Verdict(f"the {name} trace reused {tree.words} of its prompt tokens with the radix tree, "
                           f"{hashed.words} with block hashes; {apart}", "share",
                           {"radix": tree.evidence["fraction"], "hash": hashed.evidence["fraction"],
                            "min_difference": min(diff), "max_difference": max(diff), "block_size": block_size}))
    return out


def edit_reading(e: EditHits) -> Verdict:
    """Where each cache stopped on the edited prompt: the tree at the edit itself, the hashes at the last whole
    block before it (what each one's rule says it must), checked against what they reused."""
    whole = e.edited_position // e.block_size * e.block_size
    tree = "up to the edit" if e.radix_reused_tokens == e.edited_position else "NOT up to the edit"
    hashed = (f"the {whole // e.block_size} whole blocks before it" if e.hash_reused_tokens == whole
              else "NOT the whole blocks before it")
    return Verdict(f"the tree reused {e.radix_reused_tokens} tokens ({tree}), the hashes {e.hash_reused_tokens} "
                   f"({hashed})", "engine.edit", {"radix": e.radix_reused_tokens, "hash": e.hash_reused_tokens,
                                                  "edit": e.edited_position, "whole_blocks_tokens": whole})


TOKEN_RATIO_WHY = {
    "lower": "below the token ratio: the suffix still attends to the whole prefix, and a step pays a fixed part "
             "whatever its tokens",
    "about equal": "at the token ratio (within the change margin): the step's time followed its tokens",
    "higher": "above the token ratio: the cold prefill cost more per token than the warm step (its attention "
              "grows with the whole prompt)",
}


def ttft_reading(p: PrefixTTFT) -> list[Verdict]:
    """The time to first token a hit saved (helpers.formulas.verdicts.speed) and that saving against the
    token ratio (prefix + suffix) ÷ suffix, read with the change margin."""
    ttft = speed(p.ttft_warm_ms, p.ttft_cold_ms)
    tokens = (p.prefix_tokens + p.suffix_tokens) / p.suffix_tokens
    against = times_as(p.ttft_ratio, tokens, "the token ratio")
    return [Verdict(f"the hit made the time to first token {ttft.words} ({p.ttft_warm_ms:,.2f} against "
                    f"{p.ttft_cold_ms:,.2f} ms)", "speed", ttft.evidence),
            Verdict(f"that is {against.words} ({tokens:,.1f}×), "
                    f"{TOKEN_RATIO_WHY[change_verdict(against.evidence['ratio'])]}", "times_as",
                    {**against.evidence, "token_ratio": tokens})]


def speculative_reading(rows: Sequence[SpecRun], verify: Sequence[VerifyCost], draft_share: float) -> list[Verdict]:
    """Each drafter's runs: tokens per target pass against 1, the wall clock against plain decoding at the same
    batch (helpers.formulas.verdicts.speed), and what the measured verify pass predicts for it
    (helpers.formulas.speculation.pays: a round's tokens against its cost in decode steps — the verify pass, and
    for a draft model k draft steps of `draft_share` of a step each)."""
    cost = {v.batch: v.verify_over_decode for v in verify}
    plain = {r.batch: r for r in rows if not r.k}
    out = []
    for r in rows:
        if not r.k:
            continue
        wall = speed(r.seconds, plain[r.batch].seconds, than="plain decoding")
        lookup = r.drafter.startswith("prompt lookup")           # no model: its drafts cost no step
        drafts = 0.0 if lookup else r.k * draft_share
        said = [f"{r.drafter} at batch {r.batch}: {r.tokens_per_pass:.2f} tokens per target pass "
                + ("(above 1: drafts were kept)" if r.tokens_per_pass > 1 else "(1: no draft kept)"),
                f"{wall.words} on the wall clock"]
        evidence = {"tokens_per_pass": r.tokens_per_pass, **wall.evidence}
        if r.batch in cost:
            steps = round_cost(cost[r.batch], r.k, 0.0 if lookup else draft_share)
            v = pays(r.tokens_per_pass, steps)
            said.append(f"a round costs {steps:.2f} decode steps here (verify {cost[r.batch]:.2f}"
                        + (f" + {r.k} drafts × {draft_share:.2f}" if drafts else "") + f"), so it {v.words}")
            evidence.update(pass_cost_steps=steps, predicted=v.evidence["ratio"])
        out.append(Verdict(", ".join(said), "speculative", evidence))
    return out
