"""Attention variants and their KV caches: computed for every preset, measured on tiny models.

- MHA / GQA / MQA differ only in the number of K/V heads: tiny Mistral models built with all,
  a group, or one K/V head, their real transformers caches measured.
- Sliding-window attention caps a layer's cache (Mistral 7B paper, arXiv:2310.06825, §2).
- MLA caches one compressed latent per token per layer — kv_lora_rank + qk_rope_head_dim elements —
  and rebuilds per-head K and V from it at attention time (DeepSeek-V2, arXiv:2405.04434, §2.1 and
  Table 1). helpers.measure.mla holds a small, readable MLA whose cache holds only that latent.

Every byte count comes from helpers.cost.memory; this module measures and compares.
"""
from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path
from typing import Any

from .memory import kv_bytes_per_token, kv_cache_bytes, kv_terms, measured_cache_bytes
from .specs import PRESETS, ModelSpec, get_spec
from .units import DTYPE_BYTES, normalize_dtype

DATA_DIR = Path(__file__).parents[1] / "data"
SCORECARD = DATA_DIR / "attention_scorecard.csv"
CONTEXTS = (4096, 32768, 131072)


# ----------------------------------------------------------------------------- presets, computed

def kv_table(models=PRESETS, dtype: str = "bf16", contexts=CONTEXTS) -> list[dict[str, Any]]:
    """KV bytes per token (short context) and GB (10^9 bytes) per sequence at each context, for each
    preset, honouring sliding windows (helpers.cost.memory.kv_cache_bytes)."""
    rows = []
    for name in models:
        spec = get_spec(name)
        t = kv_terms(spec, dtype)
        row = {"model": spec.name, "attention": spec.attention, "layers": spec.num_layers,
               "what is cached per layer": _cached_per_layer(spec), "formula": t["formula"],
               "KV bytes per token": t["bytes_per_token"]}
        for n in contexts:
            row[f"one sequence of {n // 1024}k tokens (GB)"] = round(kv_cache_bytes(spec, n, 1, dtype) / 1e9, 3)
        rows.append(row)
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
    width this is helpers.cost.memory's 2 × layers × heads × head_dim × bytes (DeepSeek-V2, Table 1: 2 n_h d_h l)."""
    return math.ceil(layers * heads * (k_dim + v_dim) * DTYPE_BYTES[normalize_dtype(dtype)])


def mla_ratios(model: str = "deepseek-v3", gqa_baseline: str = "mistral-7b-v0.1",
               dtype: str = "bf16") -> list[dict[str, Any]]:
    """MLA's cache per token against named baselines, each ratio saying what it is against.

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
    rows = [
        {"cache": f"{spec.name} MLA: latent {spec.kv_lora_rank} + rope key {spec.qk_rope_head_dim} per layer, "
                  f"{spec.num_layers} layers", "bytes per token": mla, "baseline ÷ MLA": 1.0},
        {"cache": f"MHA of the same model: {spec.num_heads} heads × {d_h} dims, K and V, {spec.num_layers} layers",
         "bytes per token": mha_same, "baseline ÷ MLA": round(mha_same / mla, 2)},
        {"cache": f"MHA with DeepSeek's head sizes: K {k_real} ({spec.qk_nope_head_dim} + {spec.qk_rope_head_dim} rope), "
                  f"V {spec.v_head_dim}, {spec.num_heads} heads, {spec.num_layers} layers",
         "bytes per token": mha_real, "baseline ÷ MLA": round(mha_real / mla, 2)},
        {"cache": f"{g.name} GQA: {g.num_kv_heads} K/V heads × {g.head_dim}, K and V, {g.num_layers} layers",
         "bytes per token": gqa, "baseline ÷ MLA": round(gqa / mla, 2)},
    ]
    for r in rows:
        r["dtype"] = dtype
    return rows


def mla_equivalent_gqa_groups(model: str = "deepseek-v3") -> float:
    """DeepSeek-V2 §2.1.4: MLA's cache equals GQA with (d_c + d_h^R) / (2 d_h) groups — 2.25 for V2 and V3."""
    spec = get_spec(model)
    if not spec.is_mla:
        raise ValueError(f"{spec.name} does not use MLA (attention: {spec.attention})")
    d_h = spec.v_head_dim or spec.qk_nope_head_dim
    return (spec.kv_lora_rank + spec.qk_rope_head_dim) / (2 * d_h)


TALK_MLA_RATIOS = (474, 56, 14)   # the savings the original talk quoted for MLA, without baselines
MATCH_TOLERANCE = 0.03            # a quoted ratio "is" a computed one when within 3 % (56 for 56.9)


def mla_baselines(model: str = "deepseek-v3", gqa_baseline: str = "mistral-7b-v0.1",
                  dtype: str = "bf16") -> list[dict[str, Any]]:
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
    named = {r["cache"].split(":")[0]: r for r in mla_ratios(model, gqa_baseline, dtype)}
    mla = kv_bytes_per_token(spec, dtype)
    per_layer = mla / spec.num_layers
    d_h = spec.v_head_dim or spec.qk_nope_head_dim
    mha = kv_bytes_per_token(dataclasses.replace(spec, kv_lora_rank=None, num_kv_heads=spec.num_heads, head_dim=d_h), dtype)
    gqa8 = kv_bytes_per_token(dataclasses.replace(spec, kv_lora_rank=None, num_kv_heads=8, head_dim=d_h), dtype)
    mha32 = mha_kv_bytes_per_token(1, 32, d_h, d_h, dtype)
    g = get_spec(gqa_baseline)
    mha32_model = mha_kv_bytes_per_token(g.num_layers, 32, g.head_dim, g.head_dim, dtype)
    mha_real = next(r for k, r in named.items() if k.startswith("MHA with"))["bytes per token"]

    def row(baseline: str, counted: str, same_model: bool, same_count: bool, base: float, mine: float,
            real_heads: bool = True) -> dict:
        return {"baseline": baseline, "counted": counted, "same model": same_model, "same count": same_count,
                "fair": same_model and same_count and real_heads, "baseline bytes": int(base), "MLA bytes": int(mine),
                "baseline ÷ MLA": base / mine}

    rows = [
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
    for r in rows:
        r["dtype"] = dtype
    return rows


def match_quoted(quoted: float, rows: list[dict[str, Any]], tolerance: float = MATCH_TOLERANCE) -> dict | None:
    """The baseline row whose ratio a quoted figure is (within `tolerance`, relative), or None."""
    best = min(rows, key=lambda r: abs(r["baseline ÷ MLA"] - quoted) / quoted)
    return best if abs(best["baseline ÷ MLA"] - quoted) / quoted <= tolerance else None


# ----------------------------------------------------------------------------- measured: KV heads

def kv_heads_configs(base: dict | None = None) -> dict[str, dict]:
    """The tiny Mistral config three ways, differing only in num_key_value_heads: MHA (all heads),
    GQA (the tiny model's groups of 4 query heads) and MQA (one K/V head)."""
    from ..measure.local_models import TINY_CONFIG

    base = dict(base or TINY_CONFIG)
    heads = base["num_attention_heads"]
    gqa = base.get("num_key_value_heads") or heads
    if gqa in (1, heads):
        gqa = max(2, heads // 4)
    return {f"MHA ({heads} K/V heads)": {**base, "num_key_value_heads": heads},
            f"GQA ({gqa} K/V heads)": {**base, "num_key_value_heads": gqa},
            "MQA (1 K/V head)": {**base, "num_key_value_heads": 1}}


def _variant_folder(name: str, folder: Path | None) -> Path:
    from ..measure.local_models import cache_dir

    slug = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")
    return Path(folder or cache_dir()) / f"tiny-{slug}"


def load_variant(name: str, config: dict, folder: Path | None = None):
    """Build (once, cached on disk) and load a tiny variant through from_pretrained, fp32 on the CPU."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    from ..measure.local_models import build_tiny

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        path = build_tiny(_variant_folder(name, folder), config)
        return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def measured_cache(model, tokens: int, batch: int = 1, seed: int = 0):
    """Run one real forward pass of `batch` random sequences of `tokens` tokens; return the DynamicCache."""
    import torch
    from transformers import DynamicCache

    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, model.config.vocab_size, (batch, tokens), generator=g)
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=ids, cache=cache, use_cache=True)
    return cache


def measure_kv_heads(cases=((16, 1), (100, 1), (64, 4)), folder: Path | None = None,
                     configs: dict[str, dict] | None = None) -> list[dict[str, Any]]:
    """Measured cache bytes of MHA, GQA and MQA tiny models against helpers.cost.memory.kv_cache_bytes."""
    from .specs import spec_from_config

    rows = []
    for name, cfg in (configs or kv_heads_configs()).items():
        model = load_variant(name, cfg, folder)
        spec = spec_from_config(model.config.to_dict(), name)
        for tokens, batch in cases:
            measured = measured_cache_bytes(measured_cache(model, tokens, batch))
            formula = kv_cache_bytes(spec, tokens, batch, "fp32")
            rows.append({"variant": name, "kv_heads": spec.num_kv_heads, "tokens": tokens, "batch": batch,
                         "measured (B)": measured, "formula (B)": formula, "equal": measured == formula})
        del model
    return rows


# ----------------------------------------------------------------------------- measured: sliding window

def sliding_config(window: int = 16, base: dict | None = None) -> dict:
    from ..measure.local_models import TINY_CONFIG

    return {**(base or TINY_CONFIG), "sliding_window": window}


def measure_sliding(window: int = 16, prompt: int = 4, total: int = 48, folder: Path | None = None,
                    seed: int = 0, base: dict | None = None) -> list[dict[str, Any]]:
    """Decode a tiny sliding-window model token by token with a real cache; after each step compare
    the measured bytes with the formula at window − 1 slots (what transformers' DynamicSlidingWindowLayer
    keeps between steps), and show the window and no-window formulas beside it."""
    import torch
    from transformers import DynamicCache

    from .specs import spec_from_config

    model = load_variant(f"swa-{window}", sliding_config(window, base), folder)
    spec = spec_from_config(model.config.to_dict(), f"tiny, sliding window {window}")
    full = dataclasses.replace(spec, layer_types=("full_attention",) * spec.num_layers, sliding_window=None)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, model.config.vocab_size, (1, total), generator=g)
    cache = DynamicCache(config=model.config)
    rows = []
    with torch.inference_mode():
        model(input_ids=ids[:, :prompt], cache=cache, use_cache=True)
        seen = prompt
        while True:
            measured = measured_cache_bytes(cache)
            rows.append({"tokens seen": seen, "measured (B)": measured,
                         f"formula, {window - 1} slots (B)": kv_cache_bytes(spec, seen, 1, "fp32", window_slots=window - 1),
                         f"formula, window {window} (B)": kv_cache_bytes(spec, seen, 1, "fp32"),
                         "no window (B)": kv_cache_bytes(full, seen, 1, "fp32")})
            rows[-1]["equal"] = measured == rows[-1][f"formula, {window - 1} slots (B)"]
            if seen >= total:
                break
            model(input_ids=ids[:, seen:seen + 1], cache=cache, use_cache=True)
            seen += 1
    return rows


# ----------------------------------------------------------------------------- published quality

def scorecard() -> list[dict[str, str]]:
    """Published quality of the attention variants, each row with its source (helpers/data/attention_scorecard.csv)."""
    with SCORECARD.open(newline="", encoding="utf-8") as f:
        return [dict(r) for r in csv.DictReader(f)]


def scorecard_summary(rows: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """What the scorecard's rows say, counted from them (helpers/data/attention_scorecard.csv):
    MLA against MHA — comparisons won (higher score), the ones lost, and MLA's cache as a share of MHA's
    (from each setting's 'KV cache per token …K elements (MLA) vs …K (MHA)' note, lowest and highest);
    the sliding window — how many times smaller its cache is (the variant's value, '1/8' → 8) and at
    what sequence length (the setting's 'a 32k-token sequence')."""
    import re

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
    return {"mla_comparisons": len(mla), "mla_won": len(won),
            "mla_lost": [(r["metric"].split()[0], r["setting"].split(" (")[0]) for r in lost],
            "mla_cache_share": (min(shares), max(shares)) if shares else None,
            "window_cache_smaller": smaller, "window_at_tokens": at}
