"""`make bench`'s serving section (scripts/bench.py): the headline figure of each optimization, measured on
the active profile (tiny on a CPU), written to build/bench/serving.json. Workloads and sizes are notebook
07's (helpers.serving.measured.workload), so the bench and the notebook measure the same thing.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Sequence

from helpers.engine.llm import Engine, EngineArgs
from helpers.engine.request import SamplingParams
from helpers.serving.measured import Workload, chat_requests, paged_trace, workload

BATCHING_ROUNDS = 2   # the bench's batching figures: each way's fastest of two interleaved rounds


def bench_serving() -> dict:
    from helpers.measure import models
    from helpers.serving import batching, speculative

    loaded = models.load()
    w = workload(loaded.profile, loaded.device)
    m, tok = loaded.model, loaded.tokenizer
    reqs = chat_requests(tok, w)
    res = batching.compare_batching(m, reqs, w.slots, rounds=BATCHING_ROUNDS)
    seq, static, cont = res["sequential"], res["static"], res["continuous"]
    spec_tokens, spec_passes = speculative.speculate(m, speculative.prompts(tok)[0].ids, w.decode_tokens, k=w.spec_k)
    fit = fit_counts(*paged_trace(tok, w), w.max_output)
    eng = engine_figures(loaded, w)
    return {
        "model": loaded.label, "profile": loaded.profile,
        "continuous_batching_speedup": cont.tokens_per_s / seq.tokens_per_s,
        "static_batching_speedup": static.tokens_per_s / seq.tokens_per_s,
        "spec_tokens_per_target_pass": len(spec_tokens) / spec_passes,
        "paged_over_contiguous_sequences": fit.ratio,
        **eng.pop("headline"),
        "details": {
            "engine": eng,
            "batching": dict(zip(res, batching.batching_frame(res.values(), seq).to_dict("records"))),
            "slots": w.slots, "requests": w.requests, "batching_rounds": BATCHING_ROUNDS,
            "speculative_prompt_lookup": {"k": w.spec_k, "new_tokens": len(spec_tokens), "target_passes": spec_passes},
            "paged_fit": asdict(fit),
        },
    }


@dataclass(frozen=True)
class FitCounts:
    contiguous: int
    paged: int
    ratio: float                     # paged ÷ contiguous


def fit_counts(requests, capacity_slots: int, max_tokens: int, block_size: int = 16) -> FitCounts:
    """How many of these sequences, at their full final length, fit at once in `capacity_slots`, taken in
    order until the next does not fit: contiguous (each reserves prompt + max_tokens slots) against paged
    (each holds ceil((prompt + output) / block_size) blocks of a pool of capacity_slots // block_size)."""
    def count(sizes, room):
        n = 0
        for size in sizes:
            if size > room:
                break
            room -= size
            n += 1
        return n

    contiguous = count((len(r.prompt) + max_tokens for r in requests), capacity_slots)
    paged = count((-(-(len(r.prompt) + r.max_new_tokens) // block_size) for r in requests), capacity_slots // block_size)
    return FitCounts(contiguous, paged, paged / max(1, contiguous))


ENGINE_REQUESTS = 16      # the engine against transformers' continuous batching: chat requests ...
ENGINE_CONCURRENT = 8     # ... at most this many at once, in both
ENGINE_ROUNDS = 3         # interleaved rounds, each way's fastest


def against_transformers_cb(model, requests, concurrent: int = 8, max_batch_tokens: int = 512,
                            rounds: int = 2) -> dict:
    """Output tokens/s of the engine and of transformers' continuous-batching manager on the same
    requests, at most `concurrent` at once, the same token budget per step and blocks of 16 tokens;
    `rounds` interleaved, each its fastest (a shared machine only slows a run down). Both compute in a
    worker thread (helpers.serving.batching.in_worker_thread says why)."""
    from helpers.serving.batching import in_worker_thread, same_tokens, serve_continuous
    from helpers.serving.engine_runs import serve

    args = EngineArgs(block_size=16, max_num_seqs=concurrent, max_batch_tokens=max_batch_tokens, prefix_cache=None)
    in_worker_thread(serve, model, requests[:2], args)                 # warm-up, both
    serve_continuous(model, requests[:2], max_batch_tokens, concurrent=concurrent)
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(in_worker_thread(serve, model, requests, args)[0])
        theirs.append(serve_continuous(model, requests, max_batch_tokens, concurrent=concurrent))
    a, b = min(ours, key=lambda r: r.wall_s), min(theirs, key=lambda r: r.wall_s)
    return {"engine_tokens_per_s": a.tokens_per_s, "transformers_cb_tokens_per_s": b.tokens_per_s,
            "ratio": a.tokens_per_s / b.tokens_per_s, "engine_steps": a.forward_calls,
            "same_tokens": same_tokens(a, b), "concurrent": concurrent, "requests": len(requests), "rounds": rounds}


@dataclass(frozen=True)
class GenerateCheck:
    identical: bool
    requests: int
    identical_requests: int
    prompt_lengths: list[int]
    new_tokens_each: int
    steps: int


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


def engine_figures(loaded, w: Workload) -> dict:
    """The readable engine's (helpers.engine) figures: greedy tokens identical to generate; output
    tokens/s at ENGINE_CONCURRENT requests ÷ transformers' continuous-batching manager on the same ones;
    TTFT with a w.prefix_tokens shared prefix cold ÷ warm; the radix and hash caches on the agentic trace;
    prompt lookup's tokens per target pass and wall-clock speed-up on the copy-edit prompt
    (helpers.serving.speculative.prompts). `headline` holds the flat numbers."""
    import torch

    from helpers.serving import engine_caches, speculative, traces

    m, tok = loaded.model, loaded.tokenizer
    reqs = chat_requests(tok, replace(w, requests=ENGINE_REQUESTS))
    same = identical_to_generate(m, [r.prompt for r in reqs[:8]], 16)
    vs = against_transformers_cb(m, reqs, ENGINE_CONCURRENT, rounds=ENGINE_ROUNDS)
    g = torch.Generator().manual_seed(0)
    prefix = torch.randint(3, m.config.vocab_size, (w.prefix_tokens,), generator=g).tolist()
    suffixes = [torch.randint(3, m.config.vocab_size, (w.suffix_tokens,), generator=g).tolist() for _ in range(4)]
    ttft = engine_caches.prefix_ttft(m, prefix, suffixes)
    trace = traces.agentic_trace(agents=4, review_rounds=2, seed=0)
    ids = traces.token_ids(tok, trace)
    rounds = [[p for p, r in zip(ids, trace) if r.round == k] for k in sorted({r.round for r in trace})]
    caches = engine_caches.cache_hits(m, rounds)
    spec = speculative.speculative_runs(m, speculative.prompts(tok)[:1], w.decode_tokens, k=w.spec_k,
                                        draft_layers=w.draft_layers, library=False)
    lookup = spec[spec["drafter"].str.startswith("prompt lookup")].iloc[0]
    return {"headline": {"engine_identical_to_generate": same.identical,
                         "engine_over_transformers_cb": vs["ratio"],
                         "engine_prefix_ttft_ratio": ttft.ttft_ratio,
                         "engine_spec_prompt_lookup_tokens_per_pass": lookup["tokens per target pass"],
                         "engine_spec_prompt_lookup_speedup": lookup["speed-up"],
                         "engine_radix_over_hash_reused_tokens": caches.radix.reused_tokens
                         / max(1, caches.hash.reused_tokens)},
            "identical_to_generate": asdict(same),
            "against_transformers_cb": vs,
            "prefix_ttft": asdict(ttft), "prefix_caches_agentic": asdict(caches), "speculative": spec.to_dict("records")}
