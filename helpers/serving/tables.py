"""Tables of notebooks 01 and 07: the serving results (frozen dataclasses, snake_case fields) as the labelled
rows and DataFrames the notebook shows. Labels are made here and nowhere else; notebooks and tests read
the results by attribute."""
from __future__ import annotations

from typing import Sequence


def _frame(rows: list[dict]):
    import pandas as pd

    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- serving N requests (notebook 01)

def requests_frame(results: Sequence):
    """helpers.serving.naive.ServeResult: one row per request of each result, seconds after all arrived."""
    return _frame([{"mode": r.mode, "request": t.rid, "prompt tokens": t.prompt_tokens, "new tokens": t.new_tokens,
                    "start s": t.start_s, "first token s (TTFT)": t.first_token_s, "finish s": t.finish_s}
                   for r in results for t in r.timings])


def serve_summary_frame(results: Sequence):
    """helpers.serving.naive.ServeResult: one row per result, its totals."""
    import statistics

    return _frame([{"mode": r.mode, "requests": len(r.timings), "new tokens": r.new_tokens, "wall s": r.wall_s,
                    "tokens/s": r.tokens_per_s, "forward calls": r.forward_calls,
                    "median TTFT s": statistics.median(t.first_token_s for t in r.timings),
                    "last finish s": max(t.finish_s for t in r.timings)} for r in results])


def latency_frame(costs: Sequence):
    """helpers.serving.naive.LatencyCost: one row per mode."""
    return _frame([{"mode": c.mode, "median time to first token (ms)": c.median_ttft_ms,
                    "median prefill (ms)": c.median_prefill_ms, "median decode step (ms)": c.median_decode_step_ms,
                    "tokens/s": c.tokens_per_s} for c in costs])


# ----------------------------------------------------------------------------- the KV cache on and off

def cache_on_off_frame(r):
    """helpers.serving.kv_cache.CacheOnOff: one row per way (no cache, KV cache)."""
    return _frame([{"way": way, "prompt tokens": r.prompt_tokens, "new tokens": r.new_tokens, "total s": total,
                    "tokens run through the model": work, "same greedy tokens": r.identical_tokens}
                   for way, total, work in (("no cache", r.total_s_without_cache, r.tokens_without_cache),
                                            ("KV cache", r.total_s_with_cache, r.tokens_with_cache))])


# ----------------------------------------------------------------------------- paged attention

def simulation_frame(summaries: Sequence):
    """helpers.serving.paging.SimSummary: one row per scheme."""
    return _frame([{"scheme": s.scheme, "capacity (token slots)": s.capacity_slots, "decode steps to finish": s.steps,
                    "mean sequences running": s.mean_running, "max sequences running": s.max_running,
                    "preemptions": s.preemptions, "mean slots used by tokens": s.mean_used_slots,
                    "mean slots reserved": s.mean_reserved_slots, "mean internal waste (slots)": s.mean_internal_waste,
                    "mean external fragmentation (slots)": s.mean_external_fragmentation,
                    "used share of reserved": s.used_share_of_reserved} for s in summaries])


# ----------------------------------------------------------------------------- continuous batching

def padding_frame(p):
    """helpers.serving.batching.Padding as a one-row table."""
    return _frame([{"prompt padding tokens": p.padding_tokens, "finished rows' decode steps": p.finished_rows_steps,
                    "useful tokens": p.useful_tokens, "wasted share": p.wasted_share}])


def batching_frame(summaries: Sequence):
    """helpers.serving.batching.BatchingSummary: one row per way of serving."""
    rows = []
    for s in summaries:
        row = {"mode": s.mode, "requests": s.requests, "new tokens": s.new_tokens, "wall s": s.wall_s,
               "tokens/s": s.tokens_per_s, "forward calls": s.forward_calls, "median TTFT s": s.median_ttft_s,
               "p90 TTFT s": s.p90_ttft_s}
        if s.speedup is not None:
            row["speed-up (tokens/s)"] = s.speedup
        if s.same_tokens is not None:
            row["same tokens as one after another"] = s.same_tokens
        rows.append(row)
    return _frame(rows)


# ----------------------------------------------------------------------------- KV-cache quantization

def kv_bytes_frame(rows: Sequence):
    """helpers.serving.kv_quant.SchemeBytes: one row per scheme."""
    return _frame([{"scheme": r.scheme, "tokens": r.tokens, "measured bytes": r.measured_bytes,
                    "formula bytes (values)": r.formula_values_bytes, "formula bytes (all parts)": r.formula_bytes,
                    "measured values bytes": r.measured_values_bytes, "scales & zero points bytes": r.metadata_bytes,
                    "full-precision residual bytes": r.residual_bytes, "share of full precision": r.share_of_full}
                   for r in rows])


def kv_quality_frame(rows: Sequence):
    """helpers.serving.kv_quant.SchemeQuality: one row per scheme."""
    return _frame([{"scheme": r.scheme, "positions": r.positions, "KL mean (nats)": r.kl_mean_nats,
                    "KL max (nats)": r.kl_max_nats, "top-1 agreement": r.top1_agreement} for r in rows])


def kv_speed_frame(rows: Sequence):
    """helpers.serving.kv_quant.SchemeSpeed: one row per scheme."""
    return _frame([{"scheme": r.scheme, "context tokens": r.context_tokens, "decode step (ms, median)": r.step_ms,
                    "vs full precision": r.vs_full} for r in rows])


# ----------------------------------------------------------------------------- the readable engine

def log_summary_frame(s):
    """helpers.serving.engine_runs.LogSummary as a one-row table."""
    return _frame([{"requests": s.requests, "steps": s.steps, "tokens/s": s.tokens_per_s,
                    "prefill chunks": s.prefill_chunks, "steps mixing prefill and decode": s.mixed_steps,
                    "preemptions": s.preemptions, "recomputed tokens": s.recomputed_tokens,
                    "peak blocks in use": s.peak_blocks, "tokens held at the peak": s.tokens_at_peak,
                    "copy-on-write copies": s.copy_on_write_copies}])


def chunked_frame(runs: Sequence):
    """helpers.serving.engine_runs.chunked_prefill's runs, one row per token budget."""
    return _frame([{"token budget": r.token_budget, "long prompt tokens": r.long_prompt_tokens,
                    "prefill steps": r.prefill_steps, "largest step during its prefill (tokens)": r.largest_step_tokens,
                    "worst gap during its prefill (ms)": r.worst_gap_ms,
                    "median gap during its prefill (ms)": r.median_gap_ms,
                    "long prompt TTFT (ms)": r.long_prompt_ttft_ms} for r in runs])


def cache_hits_frame(hits: dict):
    """{trace name: helpers.serving.engine_caches.CacheHits}: one row per trace and cache."""
    return _frame([{"trace": trace, "cache": run.cache, "prompt tokens": run.prompt_tokens,
                    "reused tokens": run.reused_tokens, "hit rate": run.hit_rate,
                    "copy-on-write copies": run.copy_on_write_copies, "same tokens both ways": h.same_tokens}
                   for trace, h in hits.items() for run in (h.radix, h.hash)])


def prefix_ttft_frame(r):
    """helpers.serving.engine_caches.PrefixTTFT as a one-row table."""
    return _frame([{"prefix tokens": r.prefix_tokens, "suffix tokens": r.suffix_tokens, "cache": r.cache,
                    "TTFT cold (ms)": r.ttft_cold_ms, "TTFT warm (ms)": r.ttft_warm_ms, "TTFT ratio": r.ttft_ratio,
                    "cached tokens per warm request": r.cached_tokens_per_warm_request,
                    "same first token": r.same_first_token}])


def speculative_frame(runs: Sequence):
    """helpers.serving.speculative.SpecRun rows: one per drafter (and batch)."""
    return _frame([{"drafter": r.drafter, "k": r.k, "batch": r.batch, "tokens per target pass": r.tokens_per_pass,
                    "target passes": r.target_passes, "seconds": r.seconds, "wall-clock speed-up": r.speedup,
                    "acceptance rate (kept ÷ drafted)": r.acceptance_rate, "identical to plain": r.identical_to_plain}
                   for r in runs])


def verify_frame(costs: Sequence):
    """Verify passes against decode steps: helpers.formulas.speculation.VerifyCost (measured) or
    helpers.formulas.speculation.VerifyRatio (computed, with its bounds)."""
    rows = []
    for c in costs:
        row = {"context": c.context, "batch": c.batch, "k": c.k, "decode step (ms)": c.decode_step_ms,
               "verify pass (ms)": c.verify_pass_ms, "verify ÷ decode": c.verify_over_decode}
        if hasattr(c, "decode_bound"):
            row |= {"decode bound by": c.decode_bound, "verify bound by": c.verify_bound}
        rows.append(row)
    return _frame(rows)
