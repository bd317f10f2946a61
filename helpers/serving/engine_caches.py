"""The readable engine's prefix caches (helpers.engine.prefix_cache) measured: the time to first token a
cached prefix saves (and what it saves on a GPU, computed: hit_on_gpu), the radix tree against chained
block hashes on rounds of prompts and on a prompt served again with one token changed, each read by rule
(helpers.formulas.verdicts). The figures of notebook 07 and `make bench`; not part of the engine's mechanism.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..engine.llm import Engine, EngineArgs
from ..engine.request import SamplingParams
from ..formulas.verdicts import Verdict, change_verdict, factor, share, speed, times_as


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


@dataclass(frozen=True)
class EditHits:
    prompt_tokens: int
    edited_position: int
    block_size: int
    radix_reused_tokens: int
    hash_reused_tokens: int


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


def edit_hits(model, prompt: Sequence[int], edit_at: int, block_size: int = 16) -> EditHits:
    """A prompt served once, then again with the token at `edit_at` changed: the tokens each cache
    reuses for the edited prompt (radix: up to the edit; hashes: up to the last whole block before it)."""
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


def hit_on_gpu(model, gpu: str, prefix_tokens: int, suffix_tokens: int, dtype: str = "bf16") -> Verdict:
    """A prefix hit on a GPU, computed at the roofline floor (helpers.formulas.roofline.step_floor of
    helpers.formulas.stepcost.forward_cost): the cold prefill of prefix + suffix against the warm one of the
    suffix over the cached prefix, their ratio against the token ratio, and what bounds each."""
    from ..formulas.gpus import get_gpu
    from ..formulas.roofline import step_floor
    from ..formulas.stepcost import forward_cost

    g = get_gpu(gpu)
    peak, _ = g.peak_flops(dtype)
    cold = step_floor(forward_cost(model, prefix_tokens + suffix_tokens, 0, 1, dtype), peak, g.bandwidth)
    warm = step_floor(forward_cost(model, suffix_tokens, prefix_tokens, 1, dtype), peak, g.bandwidth)
    tokens = (prefix_tokens + suffix_tokens) / suffix_tokens
    ratio = cold.seconds / warm.seconds
    return Verdict(f"on an {g.name} the cold prefill of {prefix_tokens + suffix_tokens:,} tokens takes "
                   f"{1e3 * cold.seconds:,.2f} ms at its floor ({cold.bound}-bound), the warm {suffix_tokens}-token "
                   f"suffix {1e3 * warm.seconds:,.2f} ms ({warm.bound}-bound): {factor(ratio)}, "
                   f"{times_as(ratio, tokens, 'the token ratio').words} ({factor(tokens)})", "engine_caches.on_gpu",
                   {"cold_s": cold.seconds, "warm_s": warm.seconds, "ratio": ratio, "token_ratio": tokens})
