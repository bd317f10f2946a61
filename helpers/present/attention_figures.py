"""Tables and figures of notebook 06 (attention variants), each with the ratio that matters (helpers.formulas.regime)."""
from __future__ import annotations

import math
from typing import Any, Sequence

import pandas as pd

from ..formulas import regime
from ..formulas.attention import MATCH_TOLERANCE, nearest_baseline
from . import plots


def kv_table_frame(rows: Sequence):
    """Each preset's KV cache (attention.kv_table) per token and, in GB (10⁹ B), for one sequence at each context."""
    return pd.DataFrame([{"model": r["model"], "attention": r["attention"], "layers": r["layers"],
                          "what is cached per layer": r["cached_per_layer"], "formula": r["formula"],
                          "KV bytes per token": r["bytes_per_token"],
                          **{f"one sequence of {n // 1024}k tokens (GB)": round(b / 1e9, 3)
                             for n, b in zip(r["contexts"], r["sequence_bytes"])}} for r in rows])


def cache_checks_frame(rows: Sequence):
    """Measured caches (kv_caches.CacheCheck) ÷ the formula and ÷ the cache of the fewest K/V heads."""
    fewest: dict = {}                  # (tokens, batch) -> the first check with the fewest K/V heads there
    for r in rows:
        if r.kv_heads is not None and r.kv_heads < getattr(fewest.get((r.tokens, r.batch)), "kv_heads", math.inf):
            fewest[r.tokens, r.batch] = r

    def versus_fewest(r) -> dict:
        low = fewest[r.tokens, r.batch]
        return {f"÷ {low.kv_heads} K/V head{'s' * (low.kv_heads != 1)}": regime.ratio(r.measured_bytes, low.measured_bytes)}

    return pd.DataFrame([{"variant": r.variant, **({"K/V heads": r.kv_heads} if r.kv_heads is not None else {}),
                          "tokens": r.tokens, "batch": r.batch, "measured (B)": r.measured_bytes,
                          "formula (B)": r.formula_bytes, "measured ÷ formula": regime.ratio(r.measured_bytes, r.formula_bytes),
                          "equal": r.equal, **(versus_fewest(r) if r.kv_heads is not None else {})} for r in rows])


def sliding_frame(steps: Sequence):
    """A sliding-window cache (kv_caches.SlidingStep) against the formulas at window − 1 slots, the window, no window."""
    return pd.DataFrame([{"tokens seen": s.tokens_seen, "measured (B)": s.measured_bytes,
                          f"formula, {s.window - 1} slots (B)": s.slots_bytes,
                          f"formula, window {s.window} (B)": s.window_bytes,
                          "no window (B)": s.no_window_bytes, "equal": s.equal,
                          "measured ÷ no window": regime.ratio(s.measured_bytes, s.no_window_bytes)} for s in steps])


def sliding_figure(steps: Sequence, source: Any):
    """The measured sliding-window cache against tokens seen, on the formulas with and without the window."""
    seen = [s.tokens_seen for s in steps]
    fig, ax = plots.figure(width=6.5)
    div, unit = plots.byte_unit(float(max(s.no_window_bytes for s in steps)))
    ax.plot(seen, [s.no_window_bytes / div for s in steps], "--", color=plots.COMPUTED, lw=1, label="no window (formula)")
    ax.plot(seen, [s.slots_bytes / div for s in steps], color=plots.COMPUTED, lw=3, alpha=0.5,
            label=f"formula, window − 1 = {steps[0].window - 1} slots")
    ax.plot(seen, [s.measured_bytes / div for s in steps], ".", color=plots.MEASURED, label="measured DynamicCache")
    ax.set(xlabel="tokens seen", ylabel=plots.byte_label(unit, "cache"), ylim=(0, None))
    ax.set_title("A sliding window caps the cache", fontsize=10)
    ax.legend(fontsize=8)
    return plots.finish(fig, source)


def mla_checks_frame(rows: Sequence):
    """TinyMLA's latent cache (mla.MLACheck) against the formula and an expanded cache, its output against the reference."""
    return pd.DataFrame([{"tokens": r.tokens, "batch": r.batch, "measured latent cache (B)": r.measured_bytes,
                          "formula (B)": r.formula_bytes, "equal": r.equal,
                          "expanded K/V would be (B)": r.expanded_bytes,
                          "expanded ÷ latent": regime.ratio(r.expanded_bytes, r.measured_bytes),
                          "max |cached − expanded| output": r.max_output_error,
                          "output scale (max |x|)": r.output_scale,
                          "error (fp32 ε at that scale)": r.error_epsilons} for r in rows])


def mla_baselines_frame(rows: Sequence):
    """Every baseline of an MLA saving (attention.MLABaseline), with how it is counted and whether it is fair."""
    return pd.DataFrame([{"baseline": r.baseline, "counted": r.counted, "same model": r.same_model,
                          "same count": r.same_count, "fair": r.fair, "baseline bytes": r.baseline_bytes,
                          "MLA bytes": r.mla_bytes, "baseline ÷ MLA": r.baseline_over_mla, "dtype": r.dtype}
                         for r in rows])


def quoted_frame(quoted: Sequence[float], rows: Sequence, tolerance: float = MATCH_TOLERANCE):
    """Each quoted "MLA saves N×" beside the computed baseline nearest it, quoted ÷ computed, within `tolerance`."""
    out = []
    for q in quoted:
        b = nearest_baseline(q, list(rows)) if rows and q else None
        r = regime.ratio(q, b.baseline_over_mla) if b else float("nan")
        out.append({"quoted": q, "nearest baseline": b.baseline if b else "–", "counted": b.counted if b else "–",
                    "fair": b.fair if b else False, "baseline ÷ MLA": b.baseline_over_mla if b else float("nan"),
                    "quoted ÷ computed": r, f"within {tolerance:.0%}": abs(r - 1) <= tolerance if b else False})
    return pd.DataFrame(out)


def scorecard_frame(rows: Sequence[dict]):
    """The published scorecard with variant − baseline where both are numbers."""
    df = pd.DataFrame(list(rows))
    if df.empty:
        return df
    diff = (pd.to_numeric(df["variant_value"], errors="coerce")
            - pd.to_numeric(df["baseline_value"], errors="coerce")).round(2)
    df.insert(df.columns.get_loc("baseline_value") + 1, "variant − baseline", diff)
    return df
