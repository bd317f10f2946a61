"""Prefix caching read from a make engines run: vLLM with prefix caching off against on, level by level;
the agentic trace through a radix tree against hashed blocks (harness.prefix_model); at which level the
cut was largest; whether hit rates could explain the talk's gap between SGLang and vLLM (cited).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..formulas.verdicts import CHANGE_MARGIN, Verdict, change_verdict, factor
from .metrics import at_level, config_record, config_runs, run_mean

@dataclass(frozen=True)
class PrefixLevel:
    concurrency: int
    ttft_off_ms: float
    ttft_on_ms: float
    off_over_on: float        # mean TTFT off ÷ on
    verdict: str
    vllm_hit_rate_on: float | None    # what vLLM itself counted over the workload (its /metrics)
    vllm_hit_rate_off: float | None


def prefix_caching_effect(data: dict, workload: str, off: str = "vLLM, prefix caching off",
                          on: str = "vLLM default") -> list[PrefixLevel]:
    rows, offs, ons = [], config_runs(data, off, workload), config_runs(data, on, workload)
    hits = {n: ((config_record(data, n) or {}).get("prefix_cache") or {}).get(workload) for n in (off, on)}
    for r_on in ons:
        r_off = at_level(offs, r_on["concurrency"])
        a, b = (run_mean(r_off, "ttft") if r_off else None), run_mean(r_on, "ttft")
        if not a or not b:
            continue
        ratio = a / b
        verdict = {"higher": "prefix caching cut TTFT", "lower": "prefix caching raised TTFT",
                   "about equal": "prefix caching left TTFT unchanged"}[change_verdict(ratio)]
        rows.append(PrefixLevel(r_on["concurrency"], round(a * 1e3, 1), round(b * 1e3, 1), round(ratio, 2), verdict,
                                (hits[on] or {}).get("hit rate"),
                                (hits[off] or {}).get("hit rate")))
    return rows


@dataclass(frozen=True)
class RadixAgainstBlocks:
    """The trace replayed through a radix tree, token-granular and in blocks (harness.prefix_model), beside
    what vLLM counted; `most_saved` bounds what a finer cache can cut of the prefill work:
    (1 − block hit rate) ÷ (1 − radix hit rate), the tokens each leaves to compute."""

    prompt_tokens: int | None
    radix: float                      # hit rate, token-granular
    blocks: dict                      # block size -> hit rate
    most_saved: float | None
    verdict: str | None
    vllm_counted: dict | None         # vLLM default's own prefix-cache counters, all levels


def radix_against_blocks(data: dict, workload: str = "agentic") -> RadixAgainstBlocks | None:
    model = (data.get("prefix_model") or {}).get(workload)
    if not model:
        return None
    radix = model["radix (token-granular)"]
    blocks = {int(k.removeprefix("blocks of ")): v for k, v in model.items() if k.startswith("blocks of ")}
    bound = (1 - blocks[16]) / (1 - radix) if radix < 1 else None
    measured = ((config_record(data, "vLLM default") or {}).get("prefix_cache") or {}).get(workload)
    verdict = None if bound is None else {"higher": "a radix tree could cut the prefill work",
                                          "lower": "impossible (a radix tree never caches less)",
                                          "about equal": "radix tree and hashed blocks are about equal"}[
        change_verdict(bound)]
    return RadixAgainstBlocks(model.get("prompt tokens"), radix, blocks, None if bound is None else round(bound, 3),
                              verdict, measured)


def prefix_reading(rows: list[PrefixLevel]) -> Verdict | None:
    """At which level prefix caching cut the mean TTFT most (off ÷ on, the largest ratio), and whether that
    cut stands apart from the next largest by the 10 % rule; None without two levels."""
    if len(rows) < 2:
        return None
    by = sorted(rows, key=lambda r: -r.off_over_on)
    a, b = by[0], by[1]
    ev = {f"off_over_on_at_{r.concurrency}": r.off_over_on for r in rows}
    if change_verdict(a.off_over_on / b.off_over_on) == "about equal":
        return Verdict(f"the cut (off ÷ on) is largest at concurrency {a.concurrency} (÷ {a.off_over_on:g}), within "
                       f"{CHANGE_MARGIN:.0%} of concurrency {b.concurrency}'s (÷ {b.off_over_on:g}): no level stands apart",
                       "prefix_reading", ev)
    return Verdict(f"the cut (off ÷ on) is largest at concurrency {a.concurrency} (÷ {a.off_over_on:g}), "
                   f"{factor(a.off_over_on / b.off_over_on)} the next, concurrency {b.concurrency}'s (÷ {b.off_over_on:g})",
                   "prefix_reading", ev)



TALK_AGENTIC_GAP = (3.0, 4.0)   # the talk §8: SGLang 3–4× vLLM on the agentic branching workload (cited)


def radix_against_talk(rb) -> Verdict | None:
    """Whether the hit rates of the agentic trace (prefix.RadixAgainstBlocks) could explain the talk's
    3–4× between SGLang and vLLM: a radix tree can cut the prefill work by at most `most_saved` (the
    tokens blocks leave to compute ÷ those it leaves), whatever else differs."""
    if rb is None or rb.most_saved is None:
        return None
    low, high = TALK_AGENTIC_GAP
    ev = {"most_saved": rb.most_saved, "talk_low": low}
    if rb.most_saved < low:
        return Verdict(f"× {rb.most_saved:.2f} is short of the talk's {low:g}–{high:g}× between engines: that gap "
                       "cannot come from hit rates alone; the talk's SGLang figure is cited, not reproduced",
                       "radix_against_talk", ev)
    return Verdict(f"× {rb.most_saved:.2f} reaches the talk's {low:g}–{high:g}× between engines: hit rates could "
                   "explain that gap", "radix_against_talk", ev)
