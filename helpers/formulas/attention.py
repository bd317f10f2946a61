"""Attention variants and their KV caches, computed for every preset: what each caches per token, MLA's saving
against named baselines, the published quality of each variant. MHA, GQA and MQA differ only in their K/V heads;
a sliding window caps a layer's cache (arXiv:2310.06825, §2); MLA caches one latent per token per layer,
kv_lora_rank + qk_rope_head_dim wide, its up-projections absorbed at inference (DeepSeek-V2, arXiv:2405.04434,
§2.1.2–2.1.3, Table 1). Every byte count is helpers.formulas.memory's; this module compares.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from .memory import kv_bytes_per_token, kv_cache_bytes, kv_terms
from .specs import PRESETS, ModelSpec, get_spec
from .units import DTYPE_BYTES, normalize_dtype

SCORECARD = Path(__file__).parents[1] / "data" / "attention_scorecard.csv"
CONTEXTS = (4096, 32768, 131072)


def kv_table(models=PRESETS, dtype: str = "bf16", contexts=CONTEXTS) -> list[dict]:
    """Each preset's KV cache: what it caches per layer ("K and V: 8 of 32 heads × 128"), the per-token formula in
    words, bytes_per_token (short context) and sequence_bytes of one sequence at each of `contexts`, windows honoured."""
    return [{"model": spec.name, "attention": spec.attention, "layers": spec.num_layers,
             "cached_per_layer": _cached_per_layer(spec), "formula": t.formula, "bytes_per_token": t.bytes_per_token,
             "contexts": tuple(contexts), "sequence_bytes": tuple(kv_cache_bytes(spec, n, 1, dtype) for n in contexts)}
            for spec in map(get_spec, models) for t in [kv_terms(spec, dtype)]]


def _cached_per_layer(spec: ModelSpec) -> str:
    if spec.is_mla:
        return f"latent {spec.kv_lora_rank} + rope key {spec.qk_rope_head_dim}"
    kv = f"K and V: {spec.num_kv_heads} of {spec.num_heads} heads × {spec.head_dim}"
    if spec.sliding_window:
        kv += f"; {spec.sliding_layers} of {spec.num_layers} layers keep ≤ {spec.sliding_window:,} tokens"
    return kv


def kv_vs_context(models=PRESETS, dtype: str = "bf16", max_tokens: int = 131072) -> list[dict[str, Any]]:
    """Long-form rows (model, tokens, bytes) of one sequence's KV cache at 64, 128, … and max_tokens tokens."""
    points = [*(2**k for k in range(6, 40) if 2**k < max_tokens), max_tokens]
    return [{"model": spec.name, "attention": spec.attention, "tokens": n, "bytes": kv_cache_bytes(spec, n, 1, dtype)}
            for spec in map(get_spec, models) for n in points]


def mha_kv_bytes_per_token(layers: int, heads: int, k_dim: int, v_dim: int, dtype: str = "bf16") -> int:
    """layers × heads × (K width + V width) × bytes; with K and V the same width, memory's 2 × layers × heads ×
    head_dim × bytes (DeepSeek-V2, Table 1: 2 n_h d_h l)."""
    return math.ceil(layers * heads * (k_dim + v_dim) * DTYPE_BYTES[normalize_dtype(dtype)])


@dataclass(frozen=True)
class MLARatio:
    cache: str                  # what the baseline is, in words ("MHA of the same model: 128 heads × 128 dims, …")
    bytes_per_token: int
    baseline_over_mla: float    # this cache ÷ MLA's (1.0 for MLA itself), rounded to 2 decimals
    dtype: str


def _mla(model) -> tuple[ModelSpec, int, int]:
    """(spec, d_h the head size MHA would have, K width with DeepSeek's rope part) of an MLA model."""
    spec = get_spec(model)
    if not spec.is_mla:
        raise ValueError(f"{spec.name} does not use MLA (attention: {spec.attention}); try deepseek-v3 or deepseek-v2-lite")
    return spec, spec.v_head_dim or spec.qk_nope_head_dim, (spec.qk_nope_head_dim or 0) + (spec.qk_rope_head_dim or 0)


def mla_ratios(model: str = "deepseek-v3", gqa_baseline: str = "mistral-7b-v0.1",
               dtype: str = "bf16") -> list[MLARatio]:
    """MLA's cache per token against named baselines: MLA itself (1), MHA of the same model (DeepSeek-V2 Table 1's
    2 n_h d_h l), MHA with the head sizes DeepSeek computes (K 128 + 64 rope, V 128), another model's GQA cache."""
    spec, d_h, k_real = _mla(model)
    L, H, g = spec.num_layers, spec.num_heads, get_spec(gqa_baseline)
    mla = kv_bytes_per_token(spec, dtype)
    caches = (
        (f"{spec.name} MLA: latent {spec.kv_lora_rank} + rope key {spec.qk_rope_head_dim} per layer, {L} layers", mla),
        (f"MHA of the same model: {H} heads × {d_h} dims, K and V, {L} layers", mha_kv_bytes_per_token(L, H, d_h, d_h, dtype)),
        (f"MHA with DeepSeek's head sizes: K {k_real} ({spec.qk_nope_head_dim} + {spec.qk_rope_head_dim} rope), "
         f"V {spec.v_head_dim}, {H} heads, {L} layers", mha_kv_bytes_per_token(L, H, k_real, spec.v_head_dim, dtype)),
        (f"{g.name} GQA: {g.num_kv_heads} K/V heads × {g.head_dim}, K and V, {g.num_layers} layers",
         kv_bytes_per_token(g, dtype)),
    )
    return [MLARatio(what, b, round(b / mla, 2), dtype) for what, b in caches]


def mla_equivalent_gqa_groups(model: str = "deepseek-v3") -> float:
    """DeepSeek-V2 §2.1.4: MLA's cache equals GQA with (d_c + d_h^R) / (2 d_h) groups — 2.25 for V2 and V3."""
    spec, d_h, _ = _mla(model)
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
    """Every baseline a "MLA saves N×" claim can hide, each marked by one rule: **fair = the same model on both
    sides, counted the same way, with the heads that model would have** (MHA with DeepSeek's 192-dim keys fails
    the last: the extra 64 are MLA's own RoPE key). Mixed counts, a whole model's cache against one layer's
    latent, are how a quoted ratio reaches the hundreds."""
    mla, mha, mha_real, gqa = (r.bytes_per_token for r in mla_ratios(model, gqa_baseline, dtype))
    (spec, d_h, k_real), g = _mla(model), get_spec(gqa_baseline)
    L, per_layer = spec.num_layers, mla / spec.num_layers

    def row(baseline: str, counted: str, same_model: bool, same_count: bool, base: float, mine: float,
            real_heads: bool = True) -> MLABaseline:
        return MLABaseline(baseline, counted, same_model, same_count, same_model and same_count and real_heads,
                           int(base), int(mine), base / mine, dtype)

    return [
        row(f"MHA of the same model: {spec.num_heads} heads × {d_h}, K and V", "per layer", True, True, mha / L, per_layer),
        row(f"MHA with DeepSeek's head sizes: K {k_real}, V {spec.v_head_dim}, {spec.num_heads} heads", "per layer",
            True, True, mha_real / L, per_layer, real_heads=False),
        row(f"GQA of the same model: 8 KV heads × {d_h}", "per layer", True, True,
            mha_kv_bytes_per_token(1, 8, d_h, d_h, dtype), per_layer),
        row(f"MHA of a 7B-class model: 32 heads × {d_h}, K and V", "per layer", False, True,
            mha_kv_bytes_per_token(1, 32, d_h, d_h, dtype), per_layer),
        row(f"{g.name} GQA, whole model ({g.num_layers} layers) against {spec.name}'s ({L})", "whole model", False, True,
            gqa, mla),
        row(f"MHA of the same model, all {L} layers, against one layer's latent", "mixed", True, False, mha, per_layer),
        row(f"MHA of a 7B-class model, all {g.num_layers} layers (32 heads × {g.head_dim}), against one layer's latent",
            "mixed", False, False, mha_kv_bytes_per_token(g.num_layers, 32, g.head_dim, g.head_dim, dtype), per_layer),
    ]


def nearest_baseline(quoted: float, rows: list[MLABaseline]) -> MLABaseline:
    """The baseline whose ratio is nearest a quoted figure (relative distance)."""
    return min(rows, key=lambda r: abs(r.baseline_over_mla - quoted) / quoted)


def scorecard() -> list[dict[str, str]]:
    """Published quality of the attention variants, each row with its source (helpers/data/attention_scorecard.csv)."""
    return pd.read_csv(SCORECARD, dtype=str, keep_default_na=False).to_dict("records")
