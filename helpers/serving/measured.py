"""`make bench`'s serving section: the headline figure of each optimization, measured on the active
profile (tiny on a CPU), written to build/bench/serving.json by scripts/bench.py.

Workloads and sizes are the notebook's (`workload`), so the bench and notebook 07 measure the same thing.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class Workload:
    """Sizes of every measurement, chosen for the profile: small on the tiny model and a CPU."""

    # More requests than slots, as a server has: the queue is where continuous batching pays (a freed
    # slot is refilled at once) and where static batching waits for each batch's slowest request.
    requests: int = 64            # chat trace requests for batching
    slots: int = 16               # batch slots: static batch size = continuous batching's concurrency
    prompt_words: int = 40        # chat trace median prompt words
    output_tokens: int = 32       # chat trace median output tokens
    max_output: int = 96
    prefix_tokens: int = 1000     # shared prefix for the prefix-reuse TTFT
    suffix_tokens: int = 32
    decode_tokens: int = 48       # KV cache on/off and speculative decoding
    spec_k: int = 4
    draft_layers: int = 2
    long_prompt: int = 512        # chunked prefill
    chunk_budget: int = 64


BATCHING_ROUNDS = 2   # the bench's batching figures: each way's fastest of two interleaved rounds


def workload(profile: str, device: str = "cpu") -> Workload:
    """The tiny sizes for the tiny profiles anywhere and for every locally built profile on a CPU (the
    small model too: the GPU sizes would take it an hour there); on a 7B profile or a CUDA GPU, batches
    and prompts grow."""
    from ..measure.local_models import LOCAL_PROFILES, TINY_PROFILES

    if profile in TINY_PROFILES or (profile in LOCAL_PROFILES and not str(device).startswith("cuda")):
        return Workload()
    # twice the CPU's slots and a queue as long, outputs kept short enough that serving the 64 one after
    # another stays under two minutes for Mistral 7B (64 × 64 tokens at ~20 ms a step)
    return Workload(requests=64, slots=32, prompt_words=200, output_tokens=64, max_output=256,
                    prefix_tokens=4000, suffix_tokens=64, decode_tokens=128, spec_k=5, draft_layers=8,
                    long_prompt=4096, chunk_budget=512)


def chat_requests(tokenizer, w: Workload, seed: int = 1):
    from . import batching, traces

    reqs = traces.chat_trace(w.requests, seed=seed, prompt_words_median=w.prompt_words,
                             output_tokens_median=w.output_tokens, max_output_tokens=w.max_output)
    return batching.requests_from_ids(traces.token_ids(tokenizer, reqs), [r.max_new_tokens for r in reqs])


PAGED_REQUESTS = 64         # the chat trace the paged-attention comparison replays
PAGED_CAPACITY_LONGEST = 6  # its KV memory: room for this many of the longest possible requests at once


def paged_trace(tokenizer, w: Workload) -> tuple[list, int]:
    """The paged-attention comparison's input, for notebook 07 and the bench alike: the seeded chat
    trace's requests as paging.SimRequest (real token counts, max_tokens = w.max_output) and the KV
    capacity in token slots both schemes share, PAGED_CAPACITY_LONGEST × (max_output + longest prompt)."""
    from dataclasses import replace

    from .paging import sim_requests

    reqs = chat_requests(tokenizer, replace(w, requests=PAGED_REQUESTS))
    sims = sim_requests([len(r.prompt) for r in reqs], [r.max_new_tokens for r in reqs], w.max_output)
    return sims, PAGED_CAPACITY_LONGEST * (w.max_output + max(r.prompt_tokens for r in sims))


def paged_fit(tokenizer, w: Workload, capacity_slots: int | None = None, block_size: int | None = None):
    """How many of the chat trace's requests fit at once (helpers.serving.paging.FitCounts), contiguous (prompt + max_output reserved)
    against paged (their real lengths, in blocks of PAGE_SIZE), in paged_trace's capacity unless given."""
    from .batching import PAGE_SIZE
    from .paging import fit_counts

    sims, capacity = paged_trace(tokenizer, w)
    return fit_counts(sims, capacity if capacity_slots is None else capacity_slots, block_size or PAGE_SIZE)


def bench_serving() -> dict:
    import torch

    from ..measure import models
    from . import batching, prefix_reuse, speculative

    loaded = models.load()
    w = workload(loaded.profile, loaded.device)
    m, tok = loaded.model, loaded.tokenizer
    reqs = chat_requests(tok, w)
    res = batching.compare_batching(m, reqs, w.slots, rounds=BATCHING_ROUNDS)
    seq, static, cont = res["sequential"], res["static"], res["continuous"]
    g = torch.Generator().manual_seed(0)
    vocab = m.config.vocab_size
    prefix = torch.randint(3, vocab, (w.prefix_tokens,), generator=g)
    suffix = torch.randint(3, vocab, (w.suffix_tokens,), generator=g)
    pre = prefix_reuse.prefix_reuse(m, prefix, suffix)
    from ..measure.quality import eval_ids

    text = eval_ids(tok, 160)
    spec = speculative.speculate(m, text, w.decode_tokens, k=w.spec_k)
    fit = paged_fit(tok, w)
    eng = engine_figures(loaded, w)
    return {
        "model": loaded.label, "profile": loaded.profile,
        "continuous_batching_speedup": cont.tokens_per_s / seq.tokens_per_s,
        "static_batching_speedup": static.tokens_per_s / seq.tokens_per_s,
        "prefix_cache_ttft_ratio": pre.ttft_ratio,
        "spec_tokens_per_target_pass": spec.tokens_per_pass,
        "paged_over_contiguous_sequences": fit.ratio,
        **eng.pop("headline"),
        "details": {
            "engine": eng,
            "batching": {k: asdict(batching.summarize(v, seq)) for k, v in res.items()},
            "batching_identical_to_sequential": {"continuous": batching.same_tokens(cont, seq),
                                                 "static": batching.same_tokens(static, seq)},
            "slots": w.slots, "requests": w.requests, "batching_rounds": BATCHING_ROUNDS,
            "prefix_reuse": asdict(pre), "speculative_prompt_lookup": asdict(spec), "paged_fit": asdict(fit),
        },
    }


ENGINE_REQUESTS = 16      # the engine against transformers' continuous batching: chat requests ...
ENGINE_CONCURRENT = 8     # ... at most this many at once, in both
ENGINE_ROUNDS = 3         # interleaved rounds, each way's fastest


def engine_figures(loaded, w: Workload) -> dict:
    """The readable engine's (helpers.engine) figures: greedy tokens identical to generate; output
    tokens/s at ENGINE_CONCURRENT requests ÷ transformers' continuous-batching manager on the same ones;
    TTFT with a w.prefix_tokens shared prefix cold ÷ warm; the radix and hash caches on the agentic trace;
    prompt lookup's tokens per target pass and wall-clock speed-up. `headline` holds the flat numbers."""
    import torch
    from dataclasses import replace

    from . import traces
    from ..measure.quality import eval_ids
    from . import engine_caches, engine_runs, speculative

    m, tok = loaded.model, loaded.tokenizer
    reqs = chat_requests(tok, replace(w, requests=ENGINE_REQUESTS))
    same = engine_runs.identical_to_generate(m, [r.prompt for r in reqs[:8]], 16)
    vs = engine_runs.against_transformers_cb(m, reqs, ENGINE_CONCURRENT, rounds=ENGINE_ROUNDS)
    g = torch.Generator().manual_seed(0)
    prefix = torch.randint(3, m.config.vocab_size, (w.prefix_tokens,), generator=g).tolist()
    suffixes = [torch.randint(3, m.config.vocab_size, (w.suffix_tokens,), generator=g).tolist() for _ in range(4)]
    ttft = engine_caches.prefix_ttft(m, prefix, suffixes)
    trace = traces.agentic_trace(agents=4, review_rounds=2, seed=0)
    ids = traces.token_ids(tok, trace)
    rounds = [[p for p, r in zip(ids, trace) if r.round == k] for k in sorted({r.round for r in trace})]
    caches = engine_caches.cache_hits(m, rounds)
    spec = speculative.speculative_runs(m, eval_ids(tok, 160), w.decode_tokens, k=w.spec_k,
                                       draft_layers=w.draft_layers)
    lookup = next(r for r in spec if r.drafter.startswith("prompt lookup"))
    runs = ("engine", "transformers_cb")      # the two ServeResults: their every timing stays out of the JSON
    return {"headline": {"engine_identical_to_generate": same.identical,
                         "engine_over_transformers_cb": vs.ratio,
                         "engine_prefix_ttft_ratio": ttft.ttft_ratio,
                         "engine_spec_prompt_lookup_tokens_per_pass": lookup.tokens_per_pass,
                         "engine_spec_prompt_lookup_speedup": lookup.speedup,
                         "engine_radix_over_hash_reused_tokens": caches.radix.reused_tokens
                         / max(1, caches.hash.reused_tokens)},
            "identical_to_generate": asdict(same),
            "against_transformers_cb": {f.name: getattr(vs, f.name) for f in fields(vs) if f.name not in runs},
            "prefix_ttft": asdict(ttft), "prefix_caches_agentic": asdict(caches), "speculative": [asdict(r) for r in spec]}
