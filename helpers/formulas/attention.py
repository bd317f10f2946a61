"""Attention variants and their KV caches, computed for every preset: what each caches per token, MLA's
saving against named baselines, and the published quality of each variant.

- MHA / GQA / MQA differ only in the number of K/V heads.
- Sliding-window attention caps a layer's cache (Mistral 7B paper, arXiv:2310.06825, §2).
- MLA caches one compressed latent per token per layer — kv_lora_rank + qk_rope_head_dim elements —
  and rebuilds per-head K and V from it at attention time (DeepSeek-V2, arXiv:2405.04434, §2.1 and
  Table 1).

Every byte count comes from helpers.formulas.memory; this module compares. The same caches measured on tiny
models are helpers.measure.kv_caches and helpers.measure.mla; their tables are helpers.present.attention_figures.
The rules that word these comparisons (cache_against, mla_saving, scorecard_verdicts) return
helpers.formulas.verdicts.Verdict.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from . import verdicts
from .memory import kv_bytes_per_token, kv_cache_bytes, kv_terms
from .specs import PRESETS, ModelSpec, get_spec
from .units import DTYPE_BYTES, normalize_dtype

DATA_DIR = Path(__file__).parents[1] / "data"
SCORECARD = DATA_DIR / "attention_scorecard.csv"
CONTEXTS = (4096, 32768, 131072)


# ----------------------------------------------------------------------------- presets, computed

@dataclass(frozen=True)
class PresetKV:
    """One preset's KV cache: what it caches per layer, per token, and for one sequence at each context."""

    model: str
    attention: str
    layers: int
    cached_per_layer: str          # e.g. "K and V: 8 of 32 heads × 128"
    formula: str                   # the per-token formula, in words
    bytes_per_token: int           # at short context (no window binding)
    contexts: tuple[int, ...]      # tokens of one sequence
    sequence_bytes: tuple[int, ...]  # KV bytes of one sequence at each of `contexts`, windows honoured


def kv_table(models=PRESETS, dtype: str = "bf16", contexts=CONTEXTS) -> list[PresetKV]:
    """KV bytes per token (short context) and per sequence at each context, for each preset, honouring
    sliding windows (helpers.formulas.memory.kv_cache_bytes)."""
    rows = []
    for name in models:
        spec = get_spec(name)
        t = kv_terms(spec, dtype)
        rows.append(PresetKV(spec.name, spec.attention, spec.num_layers, _cached_per_layer(spec), t.formula,
                             t.bytes_per_token, tuple(contexts),
                             tuple(kv_cache_bytes(spec, n, 1, dtype) for n in contexts)))
    return rows


def _cached_per_layer(spec: ModelSpec) -> str:
    if spec.is_mla:
        return f"latent {spec.kv_lora_rank} + rope key {spec.qk_rope_head_dim}"
    kv = f"K and V: {spec.num_kv_heads} of {spec.num_heads} heads × {spec.head_dim}"
    if spec.sliding_window:
        kv += f"; {spec.sliding_layers} of {spec.num_layers} layers keep ≤ {spec.sliding_window:,} tokens"
    return kv


def context_points(max_tokens: int = 131072) -> list[int]:
    """Powers of two from 64 up to max_tokens, plus max_tokens itself."""
    pts = [2**k for k in range(6, 40) if 2**k < max_tokens]
    return pts + [max_tokens]


def kv_vs_context(models=PRESETS, dtype: str = "bf16", max_tokens: int = 131072) -> list[dict[str, Any]]:
    """Long-form rows (model, tokens, bytes) of one sequence's KV cache against context length."""
    rows = []
    for name in models:
        spec = get_spec(name)
        for n in context_points(max_tokens):
            rows.append({"model": spec.name, "attention": spec.attention, "tokens": n,
                         "bytes": kv_cache_bytes(spec, n, 1, dtype)})
    return rows


# ----------------------------------------------------------------------------- MLA's saving, stated honestly

def mha_kv_bytes_per_token(layers: int, heads: int, k_dim: int, v_dim: int, dtype: str = "bf16") -> int:
    """An MHA cache per token: layers × heads × (K width + V width) × bytes. With K and V the same
    width this is helpers.formulas.memory's 2 × layers × heads × head_dim × bytes (DeepSeek-V2, Table 1: 2 n_h d_h l)."""
    return math.ceil(layers * heads * (k_dim + v_dim) * DTYPE_BYTES[normalize_dtype(dtype)])


@dataclass(frozen=True)
class MLARatio:
    """MLA's cache per token against one named baseline."""

    cache: str                  # what the baseline is, in words ("MHA of the same model: 128 heads × 128 dims, …")
    bytes_per_token: int
    baseline_over_mla: float    # this cache ÷ MLA's (1.0 for MLA itself), rounded to 2 decimals
    dtype: str


def mla_ratios(model: str = "deepseek-v3", gqa_baseline: str = "mistral-7b-v0.1",
               dtype: str = "bf16") -> list[MLARatio]:
    """MLA's cache per token against named baselines, each ratio saying what it is against.

    0. MLA itself (ratio 1);
    1. MHA of the same model with its 128 heads × 128 dims, K and V (DeepSeek-V2 Table 1's 2 n_h d_h l);
    2. MHA with the head sizes DeepSeek's attention actually computes: K 192 (128 + 64 rope), V 128;
    3. another model's real GQA cache (Mistral 7B: 8 K/V heads × 128 over 32 layers).
    """
    spec = get_spec(model)
    if not spec.is_mla:
        raise ValueError(f"{spec.name} does not use MLA (attention: {spec.attention}); try deepseek-v3 or deepseek-v2-lite")
    mla = kv_bytes_per_token(spec, dtype)
    d_h = spec.v_head_dim or spec.qk_nope_head_dim
    mha_same = kv_bytes_per_token(dataclasses.replace(spec, kv_lora_rank=None, num_kv_heads=spec.num_heads,
                                                      head_dim=d_h), dtype)
    k_real = (spec.qk_nope_head_dim or 0) + (spec.qk_rope_head_dim or 0)
    mha_real = mha_kv_bytes_per_token(spec.num_layers, spec.num_heads, k_real, spec.v_head_dim, dtype)
    g = get_spec(gqa_baseline)
    gqa = kv_bytes_per_token(g, dtype)
    caches = (
        (f"{spec.name} MLA: latent {spec.kv_lora_rank} + rope key {spec.qk_rope_head_dim} per layer, "
         f"{spec.num_layers} layers", mla),
        (f"MHA of the same model: {spec.num_heads} heads × {d_h} dims, K and V, {spec.num_layers} layers", mha_same),
        (f"MHA with DeepSeek's head sizes: K {k_real} ({spec.qk_nope_head_dim} + {spec.qk_rope_head_dim} rope), "
         f"V {spec.v_head_dim}, {spec.num_heads} heads, {spec.num_layers} layers", mha_real),
        (f"{g.name} GQA: {g.num_kv_heads} K/V heads × {g.head_dim}, K and V, {g.num_layers} layers", gqa),
    )
    return [MLARatio(what, b, round(b / mla, 2), dtype) for what, b in caches]


def mla_equivalent_gqa_groups(model: str = "deepseek-v3") -> float:
    """DeepSeek-V2 §2.1.4: MLA's cache equals GQA with (d_c + d_h^R) / (2 d_h) groups — 2.25 for V2 and V3."""
    spec = get_spec(model)
    if not spec.is_mla:
        raise ValueError(f"{spec.name} does not use MLA (attention: {spec.attention})")
    d_h = spec.v_head_dim or spec.qk_nope_head_dim
    return (spec.kv_lora_rank + spec.qk_rope_head_dim) / (2 * d_h)


TALK_MLA_RATIOS = (474, 56, 14)   # the savings the original talk quoted for MLA, without baselines
MATCH_TOLERANCE = 0.03            # a quoted ratio "is" a computed one when within 3 % (56 for 56.9)


@dataclass(frozen=True)
class MLABaseline:
    """One baseline a "MLA saves N×" claim can hide, and whether comparing against it is fair."""

    baseline: str               # what is compared, in words
    counted: str                # "per layer", "whole model" or "mixed" (a whole model against one layer)
    same_model: bool
    same_count: bool            # counted the same way on both sides
    fair: bool                  # same model, same count, heads the model would have
    baseline_bytes: int
    mla_bytes: int
    baseline_over_mla: float
    dtype: str


def mla_baselines(model: str = "deepseek-v3", gqa_baseline: str = "mistral-7b-v0.1",
                  dtype: str = "bf16") -> list[MLABaseline]:
    """Every baseline a "MLA saves N×" claim can hide, each ratio computed from the configs and marked
    fair or not by one rule: **fair = the same model on both sides, counted the same way** (per layer
    on both sides, or every layer on both sides) **with the heads that model would have** — only the
    attention differs. MHA with DeepSeek's 192-dim keys fails the last part: the extra 64 dims are MLA's
    own decoupled RoPE key; an MHA model rotates its 128-dim keys instead.

    Same model (DeepSeek V3's 61 layers): MHA 128 heads × 128 (the paper's Table 1 baseline), MHA with
    DeepSeek's real head sizes (K 192, V 128), and GQA with 8 KV heads × 128 (what most models use).
    Another model: MHA of 32 heads × 128 per layer (a 7B-class MHA model, e.g. Llama 2 7B, or Mistral 7B's
    32 query heads each with its own K/V); Mistral 7B's whole GQA cache against DeepSeek V3's whole cache.
    Mixed counts: a whole model's MHA cache against one layer's latent — how a ratio reaches the hundreds
    or thousands.
    """
    spec = get_spec(model)
    named = {r.cache.split(":")[0]: r for r in mla_ratios(model, gqa_baseline, dtype)}
    mla = kv_bytes_per_token(spec, dtype)
    per_layer = mla / spec.num_layers
    d_h = spec.v_head_dim or spec.qk_nope_head_dim
    mha = kv_bytes_per_token(dataclasses.replace(spec, kv_lora_rank=None, num_kv_heads=spec.num_heads, head_dim=d_h), dtype)
    gqa8 = kv_bytes_per_token(dataclasses.replace(spec, kv_lora_rank=None, num_kv_heads=8, head_dim=d_h), dtype)
    mha32 = mha_kv_bytes_per_token(1, 32, d_h, d_h, dtype)
    g = get_spec(gqa_baseline)
    mha32_model = mha_kv_bytes_per_token(g.num_layers, 32, g.head_dim, g.head_dim, dtype)
    mha_real = next(r for k, r in named.items() if k.startswith("MHA with")).bytes_per_token

    def row(baseline: str, counted: str, same_model: bool, same_count: bool, base: float, mine: float,
            real_heads: bool = True) -> MLABaseline:
        return MLABaseline(baseline, counted, same_model, same_count, same_model and same_count and real_heads,
                           int(base), int(mine), base / mine, dtype)

    return [
        row(f"MHA of the same model: {spec.num_heads} heads × {d_h}, K and V", "per layer", True, True,
            mha / spec.num_layers, per_layer),
        row(f"MHA with DeepSeek's head sizes: K {(spec.qk_nope_head_dim or 0) + (spec.qk_rope_head_dim or 0)}, "
            f"V {spec.v_head_dim}, {spec.num_heads} heads", "per layer", True, True, mha_real / spec.num_layers, per_layer,
            real_heads=False),
        row(f"GQA of the same model: 8 KV heads × {d_h}", "per layer", True, True, gqa8 / spec.num_layers, per_layer),
        row(f"MHA of a 7B-class model: 32 heads × {d_h}, K and V", "per layer", False, True, mha32, per_layer),
        row(f"{g.name} GQA, whole model ({g.num_layers} layers) against {spec.name}'s ({spec.num_layers})",
            "whole model", False, True, kv_bytes_per_token(g, dtype), mla),
        row(f"MHA of the same model, all {spec.num_layers} layers, against one layer's latent", "mixed", True, False,
            mha, per_layer),
        row(f"MHA of a 7B-class model, all {g.num_layers} layers (32 heads × {g.head_dim}), against one layer's latent",
            "mixed", False, False, mha32_model, per_layer),
    ]


def match_quoted(quoted: float, rows: list[MLABaseline], tolerance: float = MATCH_TOLERANCE) -> MLABaseline | None:
    """The baseline whose ratio a quoted figure is (within `tolerance`, relative), or None."""
    best = nearest_baseline(quoted, rows)
    return best if abs(best.baseline_over_mla - quoted) / quoted <= tolerance else None


def nearest_baseline(quoted: float, rows: list[MLABaseline]) -> MLABaseline:
    """The baseline whose ratio is nearest a quoted figure (relative distance)."""
    return min(rows, key=lambda r: abs(r.baseline_over_mla - quoted) / quoted)


# ----------------------------------------------------------------------------- published quality

def scorecard() -> list[dict[str, str]]:
    """Published quality of the attention variants, each row with its source (helpers/data/attention_scorecard.csv)."""
    return pd.read_csv(SCORECARD, dtype=str, keep_default_na=False).to_dict("records")


@dataclass(frozen=True)
class ScorecardSummary:
    """What the published scorecard says, counted from its rows."""

    mla_comparisons: int                              # MLA-against-MHA rows
    mla_won: int                                      # of them, where MLA scored higher
    mla_lost: tuple[tuple[str, str], ...]             # (metric, setting) where it did not
    mla_cache_share: tuple[float, float] | None       # MLA's cache as a share of MHA's: lowest, highest
    window_cache_smaller: float | None                # how many times smaller the sliding window's cache is
    window_at_tokens: int | None                      # at what sequence length


def scorecard_summary(rows: list[dict[str, str]] | None = None) -> ScorecardSummary:
    """What the scorecard's rows say, counted from them (helpers/data/attention_scorecard.csv):
    MLA against MHA — comparisons won (higher score), the ones lost, and MLA's cache as a share of MHA's
    (from each setting's 'KV cache per token …K elements (MLA) vs …K (MHA)' note, lowest and highest);
    the sliding window — how many times smaller its cache is (the variant's value, '1/8' → 8) and at
    what sequence length (the setting's 'a 32k-token sequence')."""
    rows = scorecard() if rows is None else rows
    mla = [r for r in rows if r["variant"] == "MLA" and r["baseline"] == "MHA"]
    if not mla:
        raise ValueError("the scorecard has no MLA-against-MHA rows")
    won = [r for r in mla if float(r["variant_value"]) > float(r["baseline_value"])]
    lost = [r for r in mla if float(r["variant_value"]) <= float(r["baseline_value"])]
    shares = []
    for r in mla:
        m = re.search(r"([\d.]+)K elements \(MLA\) vs ([\d.]+)K", r["kv_cache_note"])
        if m:
            shares.append(float(m.group(1)) / float(m.group(2)))
    window = next((r for r in rows if r["variant"].startswith("sliding window")), None)
    smaller = at = None
    if window is not None:
        num, _, den = window["variant_value"].partition("/")
        smaller = float(den) / float(num) if den else 1 / float(num)
        m = re.search(r"(\d+)k-token", window["setting"])
        at = int(m.group(1)) * 1024 if m else None
    return ScorecardSummary(len(mla), len(won), tuple((r["metric"].split()[0], r["setting"].split(" (")[0]) for r in lost),
                            (min(shares), max(shares)) if shares else None, smaller, at)


# ----------------------------------------------------------------------------- the rules that word these figures

def cache_against(bytes_a: float, bytes_b: float, name_b: str) -> verdicts.Verdict:
    """One cache against another: 'N× less than <b>', 'N× more than <b>', or 'as much as <b>' within the
    change margin."""
    v = verdicts.speed(bytes_a, bytes_b, faster="less", slower="more", same=f"as much as {name_b}")
    return verdicts.Verdict(v.words if v.words.startswith("as much") else f"{v} than {name_b}", "cache_against",
                            v.evidence)


def mla_saving(row: MLABaseline) -> verdicts.Verdict:
    """MLA's cache against one baseline row, in words: 'caches 57× less than MHA of the same model …'."""
    v = cache_against(row.mla_bytes, row.baseline_bytes, row.baseline)
    return verdicts.Verdict(f"MLA caches {v}", "mla_saving", v.evidence)


_TIME = re.compile(r"inference time per sample ([\d.]+) s vs (\S+)'s ([\d.]+) s")


def scorecard_verdicts(rows: list[dict[str, str]] | None = None) -> list[verdicts.Verdict]:
    """What the published rows say, in words from their own numbers: an uptrained GQA-8's score as a share of
    MHA's, and its time per sample against MQA's and MHA's (GQA paper, T5-XXL); how many benchmarks MHA scored
    above GQA and MQA on when each is trained from scratch at 7B (DeepSeek-V2, Appendix D.1), by how many points."""
    rows = scorecard() if rows is None else rows
    out = []
    by = {r["variant"]: r for r in rows}
    gqa, mqa = by.get("GQA-8-XXL"), by.get("MQA-XXL")
    if gqa and mqa and _TIME.search(gqa["kv_cache_note"]) and _TIME.search(mqa["kv_cache_note"]):
        tg, base, tmha = _TIME.search(gqa["kv_cache_note"]).groups()
        tq = _TIME.search(mqa["kv_cache_note"]).group(1)
        tg, tq, tmha = float(tg), float(tq), float(tmha)
        f = float(gqa["variant_value"]) / float(gqa["baseline_value"])
        out.append(verdicts.Verdict(
            f"uptrained GQA-8 (T5-XXL) scores {gqa['variant_value']} against {base}'s {gqa['baseline_value']}: "
            f"{100 * f:.1f} % of it ({verdicts.share_band(f)}), in {tg:g} s per sample — {verdicts.speed(tg, tq)} than "
            f"MQA's {tq:g} s, {verdicts.speed(tg, tmha)} than {base}'s {tmha:g} s", "scorecard",
            {"share": f, "gqa_s": tg, "mqa_s": tq, "mha_s": tmha}))
    dense = [r for r in rows if r["baseline"] == "MHA" and r["setting"].startswith("7B dense")]
    for variant in dict.fromkeys(r["variant"] for r in dense):
        gaps = [float(r["baseline_value"]) - float(r["variant_value"]) for r in dense if r["variant"] == variant]
        above = sum(g > 0 for g in gaps)
        out.append(verdicts.Verdict(
            f"trained from scratch at 7B, MHA scored above {variant} on {above} of {len(gaps)} benchmarks "
            f"(by {min(gaps):+.1f} to {max(gaps):+.1f} points)", "scorecard",
            {"above": above, "benchmarks": len(gaps), "least": min(gaps), "most": max(gaps)}))
    return out
