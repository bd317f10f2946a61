"""Tables of notebook 07: the serving results (frozen dataclasses, snake_case fields) as the labelled
rows and DataFrames the notebook shows. Labels are made here and nowhere else; notebooks and tests read
the results by attribute."""
from __future__ import annotations

from typing import Sequence


def _frame(rows: list[dict]):
    import pandas as pd

    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- the KV cache on and off

def cache_on_off_frame(r):
    """helpers.serving.kv_cache.CacheOnOff: one row per way (no cache, KV cache)."""
    return _frame([{"way": way, "prompt tokens": r.prompt_tokens, "new tokens": r.new_tokens, "total s": total,
                    "tokens run through the model": work, "same greedy tokens": r.identical_tokens}
                   for way, total, work in (("no cache", r.total_s_without_cache, r.tokens_without_cache),
                                            ("KV cache", r.total_s_with_cache, r.tokens_with_cache))])


# ----------------------------------------------------------------------------- the readable engine

def log_summary_frame(s):
    """helpers.serving.engine.measure.LogSummary as a one-row table."""
    return _frame([{"requests": s.requests, "steps": s.steps, "tokens/s": s.tokens_per_s,
                    "prefill chunks": s.prefill_chunks, "steps mixing prefill and decode": s.mixed_steps,
                    "preemptions": s.preemptions, "recomputed tokens": s.recomputed_tokens,
                    "peak blocks in use": s.peak_blocks, "tokens held at the peak": s.tokens_at_peak,
                    "copy-on-write copies": s.copy_on_write_copies}])


def chunked_frame(runs: Sequence):
    """helpers.serving.engine.measure.chunked_prefill's runs, one row per token budget."""
    return _frame([{"token budget": r.token_budget, "long prompt tokens": r.long_prompt_tokens,
                    "prefill steps": r.prefill_steps, "largest step during its prefill (tokens)": r.largest_step_tokens,
                    "worst gap during its prefill (ms)": r.worst_gap_ms,
                    "median gap during its prefill (ms)": r.median_gap_ms,
                    "long prompt TTFT (ms)": r.long_prompt_ttft_ms} for r in runs])


def cache_hits_frame(hits: dict):
    """{trace name: helpers.serving.engine.measure.CacheHits}: one row per trace and cache."""
    return _frame([{"trace": trace, "cache": run.cache, "prompt tokens": run.prompt_tokens,
                    "reused tokens": run.reused_tokens, "hit rate": run.hit_rate,
                    "copy-on-write copies": run.copy_on_write_copies, "same tokens both ways": h.same_tokens}
                   for trace, h in hits.items() for run in (h.radix, h.hash)])


def prefix_ttft_frame(r):
    """helpers.serving.engine.measure.PrefixTTFT as a one-row table."""
    return _frame([{"prefix tokens": r.prefix_tokens, "suffix tokens": r.suffix_tokens, "cache": r.cache,
                    "TTFT cold (ms)": r.ttft_cold_ms, "TTFT warm (ms)": r.ttft_warm_ms, "TTFT ratio": r.ttft_ratio,
                    "cached tokens per warm request": r.cached_tokens_per_warm_request,
                    "same first token": r.same_first_token}])


def speculative_frame(runs: Sequence):
    """helpers.serving.engine.measure.SpecRun rows: one per drafter (and batch)."""
    return _frame([{"drafter": r.drafter, "k": r.k, "batch": r.batch, "tokens per target pass": r.tokens_per_pass,
                    "target passes": r.target_passes, "seconds": r.seconds, "wall-clock speed-up": r.speedup,
                    "acceptance rate (kept ÷ drafted)": r.acceptance_rate, "identical to plain": r.identical_to_plain}
                   for r in runs])


def verify_frame(costs: Sequence):
    """Verify passes against decode steps: helpers.serving.engine.measure.VerifyCost (measured) or
    helpers.serving.speculative.VerifyRatio (computed, with its bounds)."""
    rows = []
    for c in costs:
        row = {"context": c.context, "batch": c.batch, "k": c.k, "decode step (ms)": c.decode_step_ms,
               "verify pass (ms)": c.verify_pass_ms, "verify ÷ decode": c.verify_over_decode}
        if hasattr(c, "decode_bound"):
            row |= {"decode bound by": c.decode_bound, "verify bound by": c.verify_bound}
        rows.append(row)
    return _frame(rows)
