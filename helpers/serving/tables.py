"""Tables of notebooks 01 and 07: the serving results as DataFrames, each with the ratio that matters and its
below / at / above label (helpers.formulas.regime). Every frame takes any value a measurement can produce."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from ..formulas import regime


# ----------------------------------------------------------------------------- serving N requests (notebook 01)

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


# ----------------------------------------------------------------------------- the KV cache on and off

def cache_on_off_frame(r):
    """helpers.serving.kv_cache.CacheOnOff: one row per way (no cache, KV cache)."""
    return pd.DataFrame([{"way": way, "prompt tokens": r.prompt_tokens, "new tokens": r.new_tokens,
                    "tokens run through the model": work, "total s": total, "same greedy tokens": r.identical_tokens}
                   for way, total, work in (("no cache", r.total_s_without_cache, r.tokens_without_cache),
                                            ("KV cache", r.total_s_with_cache, r.tokens_with_cache))])


def cache_ratio_frame(r, fit):
    """No cache ÷ cache in work and in time, their ratio labelled, and the fitted step (kv_cache.StepFit)."""
    work = regime.ratio(r.tokens_without_cache, r.tokens_with_cache)
    time_ = regime.ratio(r.total_s_without_cache, r.total_s_with_cache)
    rel, label = regime.against(time_, work)
    return pd.DataFrame([{"work ratio (no cache ÷ cache)": work, "time ratio (no cache ÷ cache)": time_,
                    "time ratio ÷ work ratio": rel, "label": label, "fixed part of a step (ms, fit)": 1e3 * fit.fixed_s,
                    "per token run (µs, fit)": 1e6 * fit.per_token_s}])


def cache_on_gpu_frame(g):
    """helpers.serving.kv_cache.CacheOnGpu: the first and last step of the run's lengths, both ways."""
    return pd.DataFrame([{"model": g.model, "GPU": g.gpu, "tokens of the step": n, "no cache (ms)": 1e3 * off,
                    "KV cache (ms)": 1e3 * on if on is not None else None,
                    "no cache compute-bound from (tokens)": g.compute_bound_from}
                   for n, off, on in ((g.first_tokens, g.no_cache_first_s, None),
                                      (g.last_tokens, g.no_cache_last_s, g.cached_last_s))])


# ----------------------------------------------------------------------------- paged attention

def simulation_frame(summaries: Sequence):
    """helpers.serving.paging.SimSummary: one row per scheme, mean sequences running ÷ contiguous."""
    base = summaries[0].mean_running if summaries else None
    rows = []
    for s in summaries:
        r, label = regime.against(s.mean_running, base)
        rows.append({"scheme": s.scheme, "capacity (token slots)": s.capacity_slots,
                     "decode steps to finish": s.steps, "mean sequences running": s.mean_running,
                     "÷ contiguous": r, "label": label, "max sequences running": s.max_running,
                     "preemptions": s.preemptions, "mean slots holding tokens": s.mean_used_slots,
                     "mean slots reserved": s.mean_reserved_slots, "mean internal waste (slots)": s.mean_internal_waste,
                     "mean stranded in holes (slots)": s.mean_external_fragmentation,
                     "holding ÷ reserved": s.used_share_of_reserved})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- continuous batching

def padding_frame(p):
    """helpers.serving.batching.Padding as a one-row table."""
    return pd.DataFrame([{"prompt padding tokens": p.padding_tokens, "finished rows' decode steps": p.finished_rows_steps,
                    "useful tokens": p.useful_tokens, "wasted share": p.wasted_share}])


def batching_frame(summaries: Sequence):
    """helpers.serving.batching.BatchingSummary: one row per way, tokens/s ÷ one after another."""
    rows = []
    for s in summaries:
        row = {"mode": s.mode, "requests": s.requests, "new tokens": s.new_tokens, "wall s": s.wall_s,
               "tokens/s": s.tokens_per_s, "forward calls": s.forward_calls, "median TTFT s": s.median_ttft_s,
               "p90 TTFT s": s.p90_ttft_s}
        if s.speedup is not None:
            row |= {"tokens/s ÷ one after another": s.speedup, "label": regime.label(s.speedup)}
        if s.same_tokens is not None:
            row["same tokens as one after another"] = s.same_tokens
        rows.append(row)
    return pd.DataFrame(rows)


def decode_on_gpu_frame(rows: Sequence):
    """helpers.serving.batching.DecodeOnGpu: one row per batch, its floor's tokens/s ÷ batch 1's."""
    one = next((r.tokens_per_s for r in rows if r.batch == 1), None)
    return pd.DataFrame([{"model": r.model, "GPU": r.gpu, "context": r.context, "batch": r.batch,
                    "weights' share of the bytes": r.weights_share, "step at its floor (ms)": 1e3 * r.step_floor_s,
                    "tokens/s at the floor": r.tokens_per_s, "÷ batch 1": regime.ratio(r.tokens_per_s, one)}
                   for r in rows])


# ----------------------------------------------------------------------------- the readable engine

def log_summary_frame(s):
    """helpers.serving.engine_runs.LogSummary as a one-row table."""
    return pd.DataFrame([{"requests": s.requests, "steps": s.steps, "tokens/s": s.tokens_per_s,
                    "prefill chunks": s.prefill_chunks, "steps mixing prefill and decode": s.mixed_steps,
                    "preemptions": s.preemptions, "recomputed tokens": s.recomputed_tokens, "blocks": s.blocks,
                    "blocks that prevent preemption": s.blocks_without_preemption,
                    "peak blocks in use": s.peak_blocks, "tokens held at the peak": s.tokens_at_peak,
                    "copy-on-write copies": s.copy_on_write_copies}])


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


def chunks_on_gpu_frame(rows: Sequence):
    """helpers.serving.batching.ChunkOnGpu: the whole prefill, then each chunk, at its floor."""
    return pd.DataFrame([{"model": r.model, "GPU": r.gpu, "step": "whole prompt" if i == 0 else f"chunk {i}",
                    "tokens": r.tokens, "after tokens": r.start, "floor (ms)": 1e3 * r.floor_s, "bound": r.bound}
                   for i, r in enumerate(rows)])


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


def edit_frame(e):
    """helpers.serving.engine_caches.EditHits: per cache, the tokens reused beside where its rule stops."""
    whole = e.edited_position // e.block_size * e.block_size
    return pd.DataFrame([{"cache": cache, "prompt tokens": e.prompt_tokens, "edited token": e.edited_position,
                    "reused tokens": reused, "where its rule stops": rule, "reused = rule": reused == rule}
                   for cache, reused, rule in (("radix", e.radix_reused_tokens, e.edited_position),
                                               ("hash", e.hash_reused_tokens, whole))])


def prefix_ttft_frame(r):
    """helpers.serving.engine_caches.PrefixTTFT as a one-row table."""
    tokens = regime.ratio(r.prefix_tokens + r.suffix_tokens, r.suffix_tokens)
    rel, label = regime.against(r.ttft_ratio, tokens)
    return pd.DataFrame([{"prefix tokens": r.prefix_tokens, "suffix tokens": r.suffix_tokens, "cache": r.cache,
                    "TTFT cold (ms)": r.ttft_cold_ms, "TTFT warm (ms)": r.ttft_warm_ms,
                    "cold ÷ warm": r.ttft_ratio, "token ratio": tokens, "÷ token ratio": rel, "label": label,
                    "same first token": r.same_first_token}])


def hit_on_gpu_frame(g):
    """helpers.serving.engine_caches.HitOnGpu as a one-row table."""
    time_ = regime.ratio(g.cold_s, g.warm_s)
    tokens = regime.ratio(g.prefix_tokens + g.suffix_tokens, g.suffix_tokens)
    rel, label = regime.against(time_, tokens)
    return pd.DataFrame([{"model": g.model, "GPU": g.gpu, "prefix tokens": g.prefix_tokens, "suffix tokens": g.suffix_tokens,
                    "cold (ms)": 1e3 * g.cold_s, "cold bound": g.cold_bound, "warm (ms)": 1e3 * g.warm_s,
                    "warm bound": g.warm_bound, "cold ÷ warm": time_, "token ratio": tokens, "÷ token ratio": rel,
                    "label": label}])


# ----------------------------------------------------------------------------- speculative decoding

def _kept(pair) -> str | None:
    return None if pair is None else f"{pair[0]} of {pair[1]}"


def speculative_frame(runs: Sequence):
    """helpers.serving.speculative.SpecRun: one row per prompt (or batch) and drafter."""
    return pd.DataFrame([{"prompt": r.prompt, "batch": r.batch, "drafter": r.drafter, "k": r.k,
                    "tokens per target pass": r.tokens_per_pass, "target passes": r.target_passes,
                    "transformers' target passes": r.library_passes,
                    "kept ÷ drafted": r.acceptance_rate,
                    "drafts from the prompt (kept of drafted)": _kept(r.from_prompt),
                    "drafts from its own output (kept of drafted)": _kept(r.from_output),
                    "output ends in the loop": r.loop or "–", "seconds": r.seconds,
                    "speed-up": r.speedup, "label": regime.label(r.speedup) if r.k else "–",
                    "identical to plain": r.identical_to_plain} for r in runs])


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
    rows = []
    for c in costs:
        row = {"context": c.context, "batch": c.batch, "k": c.k, "decode step (ms)": c.decode_step_ms,
               "verify pass (ms)": c.verify_pass_ms, "verify ÷ decode": c.verify_over_decode}
        if hasattr(c, "decode_bound"):
            row |= {"decode bound by": c.decode_bound, "verify bound by": c.verify_bound}
        rows.append(row)
    return pd.DataFrame(rows)
