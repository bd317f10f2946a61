"""The KV cache on and off: greedy decoding that recomputes the whole sequence at every step (no cache)
against one that feeds only the newest token and reuses the cached keys and values
(helpers.measure.timing.timed_generate). Without the cache, step t processes t tokens, so generating n tokens
after a prompt of p processes Σ (p + t) = n·p + n(n−1)/2 tokens — quadratic work; with it, p + n − 1 (the
prompt once, then one token a step).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from .. import checks
from ..measure.hardware import synchronize
from ..measure.timing import check_ids, timed_generate


@dataclass(frozen=True)
class CacheStep:
    """One generated token, both ways."""

    step: int                        # 0: the prefill
    position: int                    # the position of the token generated
    seconds_without_cache: float
    seconds_with_cache: float
    tokens_without_cache: int        # tokens run through the model in this step
    tokens_with_cache: int


@dataclass(frozen=True)
class CacheOnOff:
    """Greedy decoding without the KV cache against with it, on the same prompt."""

    steps: list[CacheStep]
    prompt_tokens: int
    new_tokens: int
    identical_tokens: bool
    total_s_without_cache: float
    total_s_with_cache: float
    tokens_without_cache: int        # tokens run through the model, all steps
    tokens_with_cache: int
    predicted_tokens_without_cache: int   # work_without_cache: n·p + n(n−1)/2


def generate_without_cache(model, input_ids, max_new_tokens: int) -> tuple[list[int], list[float], list[int]]:
    """Greedy decoding with use_cache=False: each step runs the full sequence so far. Returns (tokens,
    seconds per step, tokens processed per step); step 0 is the prefill."""
    import torch

    checks.count(max_new_tokens, "max_new_tokens", 1)
    device = str(next(model.parameters()).device)
    ids = check_ids(model, input_ids, max_new_tokens).to(device)
    out, secs, work = [], [], []
    with torch.inference_mode():
        for _ in range(max_new_tokens):
            synchronize(device)
            t0 = time.perf_counter()
            logits = model(input_ids=ids, use_cache=False, logits_to_keep=1).logits
            nxt = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            synchronize(device)
            secs.append(time.perf_counter() - t0)
            work.append(ids.shape[1])
            out.append(int(nxt[0, 0]))
            ids = torch.cat([ids, nxt], dim=1)
    return out, secs, work


def cache_on_off(model, input_ids, max_new_tokens: int, repeats: int = 3) -> CacheOnOff:
    """Both ways on the same prompt: each step (position, seconds, tokens processed) and the totals.
    Each way runs `repeats` times, alternating, and each step keeps its fastest time: another process on
    the cores only ever slows a step, so a single run could show either way ahead by accident."""
    checks.count(max_new_tokens, "max_new_tokens", 1)
    input_ids = check_ids(model, input_ids, max_new_tokens)
    if input_ids.shape[0] != 1:
        raise ValueError(f"one sequence at a time, got a batch of {input_ids.shape[0]}")
    checks.count(repeats, "repeats", 1)
    # untimed warm-up of both paths
    timed_generate(model, input_ids[:, :8], 2)
    generate_without_cache(model, input_ids[:, :8], 2)
    off_s = on_s = None
    for _ in range(repeats):
        off_tokens, off_run, off_work = generate_without_cache(model, input_ids, max_new_tokens)
        on = timed_generate(model, input_ids, max_new_tokens)
        on_run = [on.ttft_s] + on.step_s
        off_s = off_run if off_s is None else [min(a, b) for a, b in zip(off_s, off_run)]
        on_s = on_run if on_s is None else [min(a, b) for a, b in zip(on_s, on_run)]
    p = input_ids.shape[1]
    steps = [CacheStep(i, p + i, off_s[i], on_s[i], off_work[i], p if i == 0 else 1) for i in range(max_new_tokens)]
    return CacheOnOff(steps, p, max_new_tokens, off_tokens == on.token_ids[0], sum(off_s), sum(on_s),
                      sum(off_work), p + max_new_tokens - 1, work_without_cache(p, max_new_tokens))


def work_without_cache(prompt_tokens: int, new_tokens: int) -> int:
    """Tokens run through the model to generate new_tokens greedily with no cache: step t (0-based)
    processes prompt + t tokens, so Σ_{t<n} (p + t) = n·p + n(n−1)/2."""
    checks.count(prompt_tokens, "prompt_tokens", 1)
    checks.count(new_tokens, "new_tokens", 1)
    return new_tokens * prompt_tokens + new_tokens * (new_tokens - 1) // 2
