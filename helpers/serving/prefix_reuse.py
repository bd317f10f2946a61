"""Reusing a real prefilled KV cache: the time to first token a cache hit saves.

A prompt = a long shared prefix (a system prompt) + a short suffix (this request). Cold: prefill all of
it. Warm: the prefix's cache is already there (a copy of a cache prefilled earlier — a server shares
the blocks instead of copying, so the copy is timed separately), and only the suffix is prefilled on
top of it. Same last-position logits either way (the suffix attends to the same keys and values).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

from ..formulas.verdicts import Verdict, factor, times_as
from ..measure.timing import measure
from ..measure.timing import new_cache

COPY_NOISE_SHARE = 0.1   # the copy is taken out of the warm time only when what is left is ≥ 10 % of it


@dataclass(frozen=True)
class PrefixReuse:
    """Time to first token cold (prefix + suffix prefilled) and warm (the suffix over the prefix's cache)."""

    prefix_tokens: int
    suffix_tokens: int
    ttft_cold_ms: float
    ttft_warm_ms: float              # the suffix only (the copy taken out when copy_taken_out)
    cache_copy_ms: float
    copy_taken_out: bool
    ttft_ratio: float                # cold ÷ warm
    same_next_token: bool
    max_logit_difference: float


def _prefill_logits(model, ids, cache):
    import torch

    with torch.inference_mode():
        return model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :].float()


def prefix_reuse(model, prefix_ids, suffix_ids, repeats: int = 3) -> PrefixReuse:
    """Median TTFT cold (prefill prefix + suffix) and warm (suffix over a copy of the prefix's cache),
    their ratio, the time of the copy itself, and whether the logits agree."""
    import torch

    device = next(model.parameters()).device
    prefix_ids, suffix_ids = (torch.as_tensor(x).reshape(1, -1).to(device) for x in (prefix_ids, suffix_ids))
    full = torch.cat([prefix_ids, suffix_ids], dim=1)
    dev = device.type
    stored = new_cache(model)
    _prefill_logits(model, prefix_ids, stored)           # the prefix, prefilled once (as by an earlier request)

    cold = measure(lambda: _prefill_logits(model, full, new_cache(model)), dev, warmup=1, repeats=repeats)
    copy_t = measure(lambda: copy.deepcopy(stored), dev, warmup=1, repeats=repeats)
    warm = measure(lambda: _prefill_logits(model, suffix_ids, copy.deepcopy(stored)), dev, warmup=1, repeats=repeats)
    a = _prefill_logits(model, full, new_cache(model))
    b = _prefill_logits(model, suffix_ids, copy.deepcopy(stored))
    # the copy is taken out unless it is most of the warm run's time: then the difference is noise, and the
    # warm time with the copy in it (a ratio too low, never too high) is reported instead
    subtract = warm.median - copy_t.median >= COPY_NOISE_SHARE * warm.median
    warm_s = warm.median - copy_t.median if subtract else warm.median
    return PrefixReuse(prefix_ids.shape[1], suffix_ids.shape[1], 1e3 * cold.median, 1e3 * warm_s,
                       1e3 * copy_t.median, bool(subtract), cold.median / warm_s,
                       bool((a.argmax(-1) == b.argmax(-1)).all()), float((a - b).abs().max()))


def hit_on_gpu(model, gpu: str, prefix_tokens: int, suffix_tokens: int, dtype: str = "bf16") -> Verdict:
    """A prefix hit on a GPU, computed at the roofline floor (helpers.formulas.roofline.step_floor of
    helpers.formulas.stepcost.forward_cost): the cold prefill of prefix + suffix against the warm one of the
    suffix over the cached prefix, their ratio against the token ratio, and what bounds each."""
    from ..formulas.gpus import get_gpu
    from ..formulas.roofline import step_floor
    from ..formulas.stepcost import forward_cost

    g = get_gpu(gpu)
    peak, _ = g.peak_flops(dtype)
    cold = step_floor(forward_cost(model, prefix_tokens + suffix_tokens, 0, 1, dtype), peak, g.bandwidth)
    warm = step_floor(forward_cost(model, suffix_tokens, prefix_tokens, 1, dtype), peak, g.bandwidth)
    tokens = (prefix_tokens + suffix_tokens) / suffix_tokens
    ratio = cold.seconds / warm.seconds
    return Verdict(f"on an {g.name} the cold prefill of {prefix_tokens + suffix_tokens:,} tokens takes "
                   f"{1e3 * cold.seconds:,.2f} ms at its floor ({cold.bound}-bound), the warm {suffix_tokens}-token "
                   f"suffix {1e3 * warm.seconds:,.2f} ms ({warm.bound}-bound): {factor(ratio)}, "
                   f"{times_as(ratio, tokens, 'the token ratio').words} ({factor(tokens)})", "prefix_reuse.on_gpu",
                   {"cold_s": cold.seconds, "warm_s": warm.seconds, "ratio": ratio, "token_ratio": tokens})
