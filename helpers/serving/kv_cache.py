"""The KV cache on and off: greedy decoding that reruns the whole sequence every step against
helpers.measure.timing.timed_generate's one token a step over the cache. With no cache n tokens after a
prompt of p run Σ (p + t) = n·p + n(n−1)/2 tokens, quadratic; with it p + n − 1."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import pandas as pd

from ..measure.hardware import synchronize
from ..measure.timing import timed_generate


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


def generate_without_cache(model, input_ids, max_new_tokens: int) -> tuple[list[int], list[float], list[int]]:
    """Greedy decoding with use_cache=False: (tokens, seconds per step, tokens run per step); step 0 the prefill."""
    import torch

    device = str(next(model.parameters()).device)
    ids = torch.as_tensor(input_ids).to(device)
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
    """Both ways on the same prompt, `repeats` times alternating, each step its fastest time (another process
    on the cores only ever slows a step, so one run could show either way ahead by accident)."""
    timed_generate(model, input_ids[:, :8], 2)                   # an untimed warm-up of both ways
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
                      sum(off_work), p + max_new_tokens - 1)


def work_without_cache(prompt_tokens: int, new_tokens: int) -> int:
    """Tokens run with no cache: step t runs prompt + t tokens, so Σ_{t<n} (p + t) = n·p + n(n−1)/2."""
    return new_tokens * prompt_tokens + new_tokens * (new_tokens - 1) // 2


def step_fit(r: CacheOnOff) -> tuple[float, float]:
    """(fixed part of a step, part per token) in seconds: the least-squares line through (tokens run, seconds) of
    every no-cache step (nan, nan from fewer than two lengths)."""
    import numpy as np

    pts = [(s.tokens_without_cache, s.seconds_without_cache) for s in r.steps
           if math.isfinite(s.seconds_without_cache)]
    if len({x for x, _ in pts}) < 2:
        return math.nan, math.nan
    slope, intercept = np.polyfit([x for x, _ in pts], [y for _, y in pts], 1)
    return float(intercept), float(slope)


def gpu_floor(model, gpu: str, new: int, past: int = 0, dtype: str = "bf16", batch: int = 1):
    """A step of `batch` sequences of `new` tokens over `past` cached ones on a catalogued GPU at its roofline floor
    (helpers.formulas.roofline.step_floor of helpers.formulas.stepcost.forward_cost)."""
    from ..formulas.gpus import get_gpu
    from ..formulas.roofline import step_floor
    from ..formulas.stepcost import forward_cost

    g = get_gpu(gpu)
    return step_floor(forward_cost(model, new, past, batch, dtype), g.peak_flops(dtype)[0], g.bandwidth)


def on_gpu(model, gpu: str, prompt_tokens: int, new_tokens: int, dtype: str = "bf16") -> pd.DataFrame:
    """Both ways on a GPU, the run's first and last step at the roofline floor. A no-cache step over n tokens is a
    prefill of n: memory-bound (one read of the weights, as a cached step) below the prefill's ridge
    (helpers.formulas.roofline.prefill_ridge_tokens), where it turns compute-bound."""
    from ..formulas.gpus import get_gpu
    from ..formulas.roofline import prefill_ridge_tokens
    from ..formulas.specs import get_spec

    last = prompt_tokens + new_tokens - 1
    ridge = prefill_ridge_tokens(model, gpu, dtype)
    return pd.DataFrame([{"model": get_spec(model).name, "GPU": get_gpu(gpu).name, "tokens of the step": n,
                          "no cache (ms)": 1e3 * gpu_floor(model, gpu, n, 0, dtype).seconds,
                          "KV cache (ms)": 1e3 * gpu_floor(model, gpu, 1, last, dtype).seconds if n == last else None,
                          "no cache compute-bound from (tokens)": ridge} for n in (prompt_tokens, last)])
