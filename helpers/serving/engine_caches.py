"""The engine's prefix caches measured: the TTFT a cached prefix saves (and on a GPU, computed), the radix
tree against chained block hashes on rounds of prompts and on a prompt served again with one token changed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from ..engine.llm import Engine, EngineArgs
from ..engine.request import SamplingParams
from ..formulas.regime import against, ratio


@dataclass(frozen=True)
class PrefixTTFT:
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
    cache: str                       # "radix" or "hash"
    prompt_tokens: int
    reused_tokens: int
    hit_rate: float                  # reused ÷ prompt tokens
    copy_on_write_copies: int
    hits: list[int]                  # reused tokens per request, in arrival order
    lengths: list[int]               # prompt tokens per request


@dataclass(frozen=True)
class CacheHits:
    radix: CacheRun
    hash: CacheRun
    same_tokens: bool                # both caches gave the same tokens


def prefix_ttft(model, prefix: Sequence[int], suffixes: Sequence[Sequence[int]], block_size: int = 16,
                cache: str = "radix") -> PrefixTTFT:
    """Time to first token of prefix + suffix, cold (prefix caching off) and warm (the prefix left in the
    cache by an earlier request with another suffix), the fastest over the suffixes (a shared machine only
    slows a run down); one step each (the token budget holds the whole prompt), the same first token."""
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
    runs = [(ttft(cold_e, list(prefix) + list(s)), ttft(warm_e, list(prefix) + list(s))) for s in suffixes[1:]]
    c, w = min(cold[0] for cold, _ in runs), min(warm[0] for _, warm in runs)
    return PrefixTTFT(len(prefix), len(suffixes[1]), cache, 1e3 * c, 1e3 * w, ratio(c, w), [warm[2] for _, warm in runs],
                      all(cold[1] == warm[1] for cold, warm in runs))


def cache_hits(model, prompts_by_round: Sequence[Sequence[Sequence[int]]], block_size: int = 16,
               new_tokens: int = 4) -> CacheHits:
    """The same rounds of prompts (each round after the last) through the radix and the hash cache: tokens
    reused (in all and per request) and whether both gave the same tokens."""
    out, tokens = {}, {}
    lengths = [len(p) for r in prompts_by_round for p in r]
    total = sum(lengths)
    for kind in ("radix", "hash"):
        e, reqs = Engine(model, EngineArgs(block_size=block_size, prefix_cache=kind)), []
        for r in prompts_by_round:
            reqs += [e.add(list(p), SamplingParams(max_tokens=new_tokens, ignore_eos=True)) for p in r]
            e.run()
        tokens[kind] = [q.output for q in reqs]
        out[kind] = CacheRun(kind, total, e.cache.hit_tokens, e.cache.hit_tokens / total, e.kv.copies,
                             [q.cached_tokens for q in reqs], lengths)
    return CacheHits(out["radix"], out["hash"], tokens["radix"] == tokens["hash"])


def edit_hits(model, prompt: Sequence[int], edit_at: int, block_size: int = 16) -> pd.DataFrame:
    """A prompt served once, then again with the token at `edit_at` changed: per cache the tokens it reuses beside
    where its rule stops (radix: at the edit; hashes: at the last whole block before it)."""
    edited = list(prompt)
    edited[edit_at] = (edited[edit_at] + 1) % model.config.vocab_size
    reused = {}
    for kind in ("radix", "hash"):
        e = Engine(model, EngineArgs(block_size=block_size, prefix_cache=kind))
        e.generate([list(prompt)], SamplingParams(max_tokens=1, ignore_eos=True))
        r = e.add(edited, SamplingParams(max_tokens=1, ignore_eos=True))
        e.run()
        reused[kind] = r.cached_tokens
    rule = {"radix": edit_at, "hash": edit_at // block_size * block_size}
    return pd.DataFrame([{"cache": kind, "prompt tokens": len(prompt), "edited token": edit_at, "reused tokens": n,
                          "where its rule stops": rule[kind], "reused = rule": n == rule[kind]}
                         for kind, n in reused.items()])


def hit_on_gpu(model, gpu: str, prefix_tokens: int, suffix_tokens: int, dtype: str = "bf16") -> pd.DataFrame:
    """A prefix hit on a GPU, each prefill at its roofline floor (kv_cache.gpu_floor): cold, the whole prompt; warm,
    the suffix over the cached prefix; cold ÷ warm against the token ratio, labelled."""
    from ..formulas.gpus import get_gpu
    from ..formulas.specs import get_spec
    from .kv_cache import gpu_floor

    cold = gpu_floor(model, gpu, prefix_tokens + suffix_tokens, 0, dtype)
    warm = gpu_floor(model, gpu, suffix_tokens, prefix_tokens, dtype)
    time_, tokens = ratio(cold.seconds, warm.seconds), ratio(prefix_tokens + suffix_tokens, suffix_tokens)
    rel, label = against(time_, tokens)
    return pd.DataFrame([{"model": get_spec(model).name, "GPU": get_gpu(gpu).name, "prefix tokens": prefix_tokens,
                          "suffix tokens": suffix_tokens, "cold (ms)": 1e3 * cold.seconds, "cold bound": cold.bound,
                          "warm (ms)": 1e3 * warm.seconds, "warm bound": warm.bound, "cold ÷ warm": time_,
                          "token ratio": tokens, "÷ token ratio": rel, "label": label}])
