"""KV caches measured: tiny models that differ only in their K/V heads (MHA, GQA, MQA) or a sliding window, run
with transformers' DynamicCache, its bytes held against helpers.formulas.memory.kv_cache_bytes byte for byte."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..formulas.memory import kv_cache_bytes
from ..formulas.specs import spec_from_config
from .local_models import TINY_CONFIG, tiny_model
from .tensor_bytes import measured_cache_bytes
from .timing import prefill, prompt_ids


@dataclass(frozen=True)
class CacheCheck:
    """One real cache against the formula: `tokens` tokens of `batch` sequences through `variant`."""

    variant: str
    tokens: int
    batch: int
    measured_bytes: int
    formula_bytes: int
    kv_heads: int | None = None

    @property
    def equal(self) -> bool:
        return self.measured_bytes == self.formula_bytes


@dataclass(frozen=True)
class SlidingStep:
    """A sliding-window cache after `tokens_seen` tokens beside three formulas."""

    window: int
    tokens_seen: int
    measured_bytes: int
    slots_bytes: int         # the formula at window − 1 slots (what transformers keeps between steps)
    window_bytes: int        # the formula at the window itself (Mistral's rolling buffer of W slots)
    no_window_bytes: int     # the formula with every layer full

    @property
    def equal(self) -> bool:
        return self.measured_bytes == self.slots_bytes


def kv_heads_configs(base: dict | None = None) -> dict[str, dict]:
    """The tiny config as MHA, GQA (groups of 4 query heads) and MQA: only num_key_value_heads differs."""
    base = base or TINY_CONFIG
    heads, gqa = base["num_attention_heads"], base["num_key_value_heads"]
    return {f"MHA ({heads} K/V heads)": {**base, "num_key_value_heads": heads},
            f"GQA ({gqa} K/V heads)": dict(base),
            "MQA (1 K/V head)": {**base, "num_key_value_heads": 1}}


def measured_cache(model, tokens: int, batch: int = 1):
    return prefill(model, prompt_ids(tokens, batch, model.config.vocab_size))[1]


def measure_kv_heads(cases=((16, 1), (100, 1), (64, 4)), base: dict | None = None) -> list[CacheCheck]:
    """CacheCheck of the MHA, GQA and MQA tiny models at each (tokens, batch) of `cases`."""
    rows = []
    for name, cfg in kv_heads_configs(base).items():
        model = tiny_model(cfg)
        spec = spec_from_config(model.config.to_dict(), name)
        rows += [CacheCheck(name, tokens, batch, measured_cache_bytes(measured_cache(model, tokens, batch)),
                            kv_cache_bytes(spec, tokens, batch, "fp32"), spec.num_kv_heads) for tokens, batch in cases]
    return rows


def measure_sliding(window: int = 16, prompt: int = 4, total: int = 48, base: dict | None = None) -> list[SlidingStep]:
    """A tiny sliding-window model fed token by token: its cache after each step beside the formulas (SlidingStep)."""
    import torch

    cfg = {**(base or TINY_CONFIG), "sliding_window": window}
    model = tiny_model(cfg)
    spec = spec_from_config(model.config.to_dict(), f"tiny, sliding window {window}")
    full = dataclasses.replace(spec, layer_types=("full_attention",) * spec.num_layers, sliding_window=None)
    ids = prompt_ids(total, vocab=cfg["vocab_size"])
    _, cache = prefill(model, ids[:, :prompt])
    steps = []
    with torch.inference_mode():
        for seen in range(prompt, total + 1):
            if seen > prompt:
                model(input_ids=ids[:, seen - 1:seen], cache=cache, use_cache=True)
            steps.append(SlidingStep(window, seen, measured_cache_bytes(cache),
                                     kv_cache_bytes(spec, seen, 1, "fp32", window_slots=window - 1),
                                     kv_cache_bytes(spec, seen, 1, "fp32"), kv_cache_bytes(full, seen, 1, "fp32")))
    return steps
