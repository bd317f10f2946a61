"""The KV cache on and off: greedy decoding that recomputes the whole sequence at every step (no cache)
against one that feeds only the newest token and reuses the cached keys and values
(helpers.measure.timing.timed_generate). Without the cache, step t processes t tokens, so generating n tokens
after a prompt of p processes Σ (p + t) = n·p + n(n−1)/2 tokens — quadratic work; with it, p + n − 1 (the
prompt once, then one token a step).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from ..formulas.verdicts import Verdict, change_verdict, factor, share, speed, times_as
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
    predicted_tokens_without_cache: int   # work_without_cache: n·p + n(n−1)/2


def generate_without_cache(model, input_ids, max_new_tokens: int) -> tuple[list[int], list[float], list[int]]:
    """Greedy decoding with use_cache=False: each step runs the full sequence so far. Returns (tokens,
    seconds per step, tokens processed per step); step 0 is the prefill."""
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
    """Both ways on the same prompt: each step (position, seconds, tokens processed) and the totals.
    Each way runs `repeats` times, alternating, and each step keeps its fastest time: another process on
    the cores only ever slows a step, so a single run could show either way ahead by accident."""
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
    return new_tokens * prompt_tokens + new_tokens * (new_tokens - 1) // 2


# ----------------------------------------------------------------------------- what the run says, by rule

EDGE_STEPS = 5    # the first and last decode steps averaged to read where each line starts and ends
LINE = {"higher": "climbed", "about equal": "stayed level", "lower": "fell"}


@dataclass(frozen=True)
class StepFit:
    """The no-cache steps' time against the tokens each ran, fitted as a straight line (least squares):
    a fixed part every step pays whatever its tokens, and a part per token."""

    fixed_s: float
    per_token_s: float


def step_fit(r: CacheOnOff) -> StepFit:
    """Least-squares line through (tokens run, seconds) of every no-cache step."""
    import numpy as np

    x = [s.tokens_without_cache for s in r.steps]
    y = [s.seconds_without_cache for s in r.steps]
    if len(set(x)) < 2:
        return StepFit(sum(y) / len(y), 0.0)
    slope, intercept = np.polyfit(x, y, 1)
    return StepFit(float(intercept), float(slope))


def _edges(values: list[float]) -> tuple[float, float]:
    n = max(1, min(EDGE_STEPS, len(values) // 2))
    return sum(values[:n]) / n, sum(values[-n:]) / n


def line_verdict(values: list[float], name: str) -> Verdict:
    """Where a line of step times starts and ends (the mean of its first and last EDGE_STEPS steps), and
    whether it climbed, stayed level or fell, read with the change margin."""
    first, last = _edges(values)
    way = change_verdict(last / first)
    return Verdict(f"the {name} step {LINE[way]}: {1e3 * first:,.2f} → {1e3 * last:,.2f} ms ({factor(last / first)})",
                   "kv_cache.line", {"first_s": first, "last_s": last, "ratio": last / first})


def reading(r: CacheOnOff) -> list[Verdict]:
    """What the run shows, by rule: the work each way, the time each way (helpers.formulas.verdicts.speed),
    how each line of step times moved over the run, and why the time ratio and the work ratio differ (the
    fixed part of a step, from step_fit, as a share of a cached step)."""
    work = r.tokens_without_cache / r.tokens_with_cache
    t = speed(r.total_s_with_cache, r.total_s_without_cache)
    time_ratio = t.evidence["ratio"]
    out = [Verdict(f"the cache ran {factor(work)} fewer tokens through the model ({r.tokens_with_cache:,} against "
                   f"{r.tokens_without_cache:,})" if work > 1 else "both ways ran the same tokens through the model",
                   "kv_cache.work", {"without": r.tokens_without_cache, "with": r.tokens_with_cache, "ratio": work}),
           Verdict(f"with the cache the run was {t.words} ({r.total_s_with_cache:,.3f} against "
                   f"{r.total_s_without_cache:,.3f} s)", "speed", t.evidence)]
    decode = r.steps[1:] or r.steps
    out.append(line_verdict([s.seconds_without_cache for s in decode], "no-cache"))
    out.append(line_verdict([s.seconds_with_cache for s in decode], "cached"))
    gap = times_as(time_ratio, work, "the work ratio")
    fit = step_fit(r)
    head = (f"the time ratio ({factor(time_ratio)}) is {gap.words} ({change_verdict(gap.evidence['ratio'])}): a line "
            f"through the no-cache steps' times gives {1e3 * fit.fixed_s:,.2f} ms a step whatever its tokens plus "
            f"{1e6 * fit.per_token_s:,.1f} µs a token")
    evidence = {**gap.evidence, "fixed_s": fit.fixed_s, "per_token_s": fit.per_token_s}
    if fit.per_token_s <= 0:
        why = head + ": the no-cache steps' times do not rise with their tokens, so this run cannot separate a fixed part"
    elif fit.fixed_s > 0:
        paid = min(fit.fixed_s * len(r.steps), r.total_s_without_cache)
        fixed = share(paid, r.total_s_without_cache, "the no-cache run's time")
        why = head + f"; that fixed part, which every step pays with the cache too, is {fixed.words}"
        evidence["fixed_share"] = fixed.evidence["fraction"]
    else:
        why = head + ": no fixed part, the no-cache time follows the tokens"
    out.append(Verdict(why, "kv_cache.fixed_part", evidence))
    return out


def no_cache_on_gpu(model, gpu: str, prompt_tokens: int, new_tokens: int, dtype: str = "bf16") -> Verdict:
    """Both ways on a GPU, computed at its roofline floor (helpers.formulas.roofline.step_floor of
    helpers.formulas.stepcost): a no-cache step over n tokens is a prefill of n, memory-bound (one read of the
    weights, as a cached step) up to the length where its FLOPs take longer than its bytes; the lengths of this
    run against that length."""
    from ..formulas.gpus import get_gpu
    from ..formulas.roofline import step_floor
    from ..formulas.specs import get_spec
    from ..formulas.stepcost import decode_cost, forward_cost

    spec, g = get_spec(model), get_gpu(gpu)
    peak, _ = g.peak_flops(dtype)

    def off(n):
        return step_floor(forward_cost(spec, n, 0, 1, dtype), peak, g.bandwidth)

    lo, hi = 1, 1 << 20
    while lo < hi:                      # the first length whose no-cache step is compute-bound
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if off(mid).bound == "compute" else (mid + 1, hi)
    first, last = prompt_tokens, prompt_tokens + new_tokens - 1
    on = step_floor(decode_cost(spec, last, 1, dtype), peak, g.bandwidth)
    end = off(last)
    where = ("so at this run's lengths both lines sit on the same memory floor" if last < lo else
             f"so this run's no-cache line climbs from {first:,} tokens on" if first >= lo else
             f"so this run's no-cache line is level up to {lo:,} tokens and climbs after")
    return Verdict(f"{spec.name} on an {g.name}: a no-cache step over n tokens reads the weights once, as a cached step "
                   f"does, and is memory-bound below n = {lo:,} tokens; from there its FLOPs take longer than its reads "
                   f"(the ridge); this run's no-cache steps run {first:,}–{last:,} tokens, {where} "
                   f"(last step: no cache {1e3 * end.seconds:,.2f} ms, {end.bound}-bound; cached "
                   f"{1e3 * on.seconds:,.2f} ms)", "kv_cache.on_gpu",
                   {"compute_bound_from": lo, "first": first, "last": last, "no_cache_s": end.seconds,
                    "cached_s": on.seconds})
