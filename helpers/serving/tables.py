"""Tables of notebooks 01 and 07: the serving results as DataFrames, each with the ratio that matters and its
below / at / above label (helpers.formulas.regime). Every frame takes any value a measurement can produce."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from ..formulas import regime


def requests_frame(results: Sequence):
    """helpers.serving.naive.ServeResult: one row per request of each result, seconds after all arrived."""
    return pd.DataFrame([{"mode": r.mode, "request": t.rid, "prompt tokens": t.prompt_tokens, "new tokens": t.new_tokens,
                    "start s": t.start_s, "first token s (TTFT)": t.first_token_s, "finish s": t.finish_s}
                   for r in results for t in r.timings])


def serve_summary_frame(results: Sequence):
    """helpers.serving.naive.ServeResult: one row per result, its totals."""
    import statistics

    return pd.DataFrame([{"mode": r.mode, "requests": len(r.timings), "new tokens": r.new_tokens, "wall s": r.wall_s,
                    "tokens/s": r.tokens_per_s, "forward calls": r.forward_calls,
                    "median TTFT s": statistics.median(t.first_token_s for t in r.timings),
                    "last finish s": max(t.finish_s for t in r.timings)} for r in results])


def latency_frame(costs: Sequence):
    """helpers.serving.naive.LatencyCost: one row per mode."""
    return pd.DataFrame([{"mode": c.mode, "median time to first token (ms)": c.median_ttft_ms,
                    "median prefill (ms)": c.median_prefill_ms, "median decode step (ms)": c.median_decode_step_ms,
                    "tokens/s": c.tokens_per_s} for c in costs])


def cache_on_off_frame(r):
    """helpers.serving.kv_cache.CacheOnOff: one row per way (no cache, KV cache)."""
    return pd.DataFrame([{"way": way, "prompt tokens": r.prompt_tokens, "new tokens": r.new_tokens,
                    "tokens run through the model": work, "total s": total, "same greedy tokens": r.identical_tokens}
                   for way, total, work in (("no cache", r.total_s_without_cache, r.tokens_without_cache),
                                            ("KV cache", r.total_s_with_cache, r.tokens_with_cache))])


def cache_ratio_frame(r, fit):
    """No cache ÷ cache in work and in time, their ratio labelled, and the fitted step (kv_cache.step_fit)."""
    fixed_s, per_token_s = fit
    work = regime.ratio(r.tokens_without_cache, r.tokens_with_cache)
    time_ = regime.ratio(r.total_s_without_cache, r.total_s_with_cache)
    rel, label = regime.against(time_, work)
    return pd.DataFrame([{"work ratio (no cache ÷ cache)": work, "time ratio (no cache ÷ cache)": time_,
                    "time ratio ÷ work ratio": rel, "label": label, "fixed part of a step (ms, fit)": 1e3 * fixed_s,
                    "per token run (µs, fit)": 1e6 * per_token_s}])


def simulation_frame(sims: Sequence):
    """helpers.serving.paging.SimResult: one row per scheme, its means over the steps, sequences running ÷ contiguous."""
    rows = []
    for s in sims:
        m = pd.DataFrame(s.rows, columns=["used", "reserved", "internal waste", "external fragmentation"]).mean()
        r, label = regime.against(s.mean_running, sims[0].mean_running)
        rows.append({"scheme": s.scheme, "capacity (token slots)": s.capacity_slots, "decode steps to finish": s.steps,
                     "mean sequences running": s.mean_running, "÷ contiguous": r, "label": label,
                     "max sequences running": s.max_running, "preemptions": s.preemptions,
                     "mean slots holding tokens": m["used"], "mean slots reserved": m["reserved"],
                     "mean internal waste (slots)": m["internal waste"],
                     "mean stranded in holes (slots)": m["external fragmentation"],
                     "holding ÷ reserved": regime.ratio(m["used"], m["reserved"])})
    return pd.DataFrame(rows)


def chunked_frame(runs: Sequence):
    """helpers.serving.engine_runs.chunked_prefill's runs, one row per token budget."""
    first = runs[0] if runs else None
    rows = []
    for r in runs:
        gap, label = regime.against(r.worst_gap_ms, first.worst_gap_ms)
        rows.append({"token budget": r.token_budget, "long prompt tokens": r.long_prompt_tokens,
                     "prefill steps": r.prefill_steps, "largest step during its prefill (tokens)": r.largest_step_tokens,
                     "others' worst gap (ms)": r.worst_gap_ms, "÷ no chunking": gap, "label": label,
                     "others' median gap (ms)": r.median_gap_ms, "long prompt TTFT (ms)": r.long_prompt_ttft_ms,
                     "TTFT ÷ no chunking": regime.ratio(r.long_prompt_ttft_ms, first.long_prompt_ttft_ms),
                     "same tokens": r.same_tokens_as_first_budget})
    return pd.DataFrame(rows)


def cache_hits_frame(hits: dict):
    """{trace: helpers.serving.engine_caches.CacheHits}: one row per trace and cache, reused ÷ hash."""
    rows = []
    for trace, h in hits.items():
        for run in (h.radix, h.hash):
            r, label = regime.against(run.reused_tokens, h.hash.reused_tokens)
            rows.append({"trace": trace, "cache": run.cache, "prompt tokens": run.prompt_tokens,
                         "reused tokens": run.reused_tokens, "hit rate": run.hit_rate, "÷ hash": r, "label": label,
                         "copy-on-write copies": run.copy_on_write_copies, "same tokens both ways": h.same_tokens})
    return pd.DataFrame(rows)


def prefix_ttft_frame(r):
    """helpers.serving.engine_caches.PrefixTTFT as a one-row table."""
    tokens = regime.ratio(r.prefix_tokens + r.suffix_tokens, r.suffix_tokens)
    rel, label = regime.against(r.ttft_ratio, tokens)
    return pd.DataFrame([{"prefix tokens": r.prefix_tokens, "suffix tokens": r.suffix_tokens, "cache": r.cache,
                    "TTFT cold (ms)": r.ttft_cold_ms, "TTFT warm (ms)": r.ttft_warm_ms,
                    "cold ÷ warm": r.ttft_ratio, "token ratio": tokens, "÷ token ratio": rel, "label": label,
                    "same first token": r.same_first_token}])


def tokens_per_pass_frame(p):
    """helpers.formulas.speculation.TokensPerPass: eq. 1 term by term, then the closed form."""
    rows = [{"term": "the target's own token", "value": 1.0}]
    rows += [{"term": f"draft {i} kept (α^{i})", "value": a} for i, a in enumerate(p.kept, 1)]
    rows += [{"term": "E = 1 + α + … + α^k", "value": p.total},
             {"term": "closed form (1 − α^(k+1)) ÷ (1 − α)", "value": p.closed_form},
             {"term": "passes that keep all k drafts (α^k)", "value": p.whole_draft_kept}]
    return pd.DataFrame(rows)


def verify_frame(costs: Sequence):
    """Verify passes against decode steps: speculation.VerifyCost (measured) or VerifyRatio (computed)."""
    return pd.DataFrame([{"context": c.context, "batch": c.batch, "k": c.k, "decode step (ms)": c.decode_step_ms,
                          "verify pass (ms)": c.verify_pass_ms, "verify ÷ decode": c.verify_over_decode,
                          **({"decode bound by": c.decode_bound, "verify bound by": c.verify_bound}
                             if hasattr(c, "decode_bound") else {})} for c in costs])
