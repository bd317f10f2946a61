"""KV offload and eviction: what moving the KV cache to host memory costs, and what keeping only
attention sinks plus a recent window saves and loses.

Offload: transformers' offloaded cache (``DynamicCache(config=..., offloading=True)``) keeps each
layer's keys and values in host memory and brings them back over PCIe before the layer runs
(prefetching the next layer on a side stream). A decode step then moves the whole cache across the
link once: its bytes (helpers.formulas.memory.kv_cache_bytes) ÷ the PCIe link's one-way bandwidth
(helpers.parallel.links), against the same bytes read from HBM (helpers.formulas.gpus bandwidth).
``measure_offloaded`` runs the real thing on this machine's device; on a CPU "host memory" is the
same memory, so it shows the mechanism's overhead, never the PCIe cost. The computed side, bytes over
bandwidths, is helpers.parallel.offload.

Eviction (StreamingLLM, Xiao et al. 2023, "Efficient Streaming Language Models with Attention
Sinks", arXiv:2309.17453, §3): keep the first `sinks` tokens (which attention piles onto) and the
last `window` tokens, drop the middle. Here the kept keys keep their original rotary positions (no
re-rotation, unlike the paper's cache-relative positions); the quality cost is the KL divergence and
top-1 agreement of the next-token distributions against the full cache (helpers.measure.quality).
"""
from __future__ import annotations

import statistics
import time

from .. import checks
from ..formulas.memory import kv_cache_bytes
from ..formulas.verdicts import Verdict, change_verdict, factor, speed
from ..measure.tensor_bytes import measured_cache_bytes


def evict(cache, sinks: int, window: int) -> None:
    """Keep the first `sinks` and the last `window` cached tokens of every layer (in place)."""
    import torch

    for layer in cache.layers:
        k = getattr(layer, "keys", None)
        if k is None or k.dim() < 3 or k.shape[-2] <= sinks + window:
            continue
        keep = lambda t: torch.cat([t[..., :sinks, :], t[..., t.shape[-2] - window:, :]], dim=-2)  # noqa: E731
        layer.keys, layer.values = keep(layer.keys), keep(layer.values)


def _step_logprobs(model, cache, token: int, position: int):
    import torch

    dev = next(model.parameters()).device
    out = model(input_ids=torch.tensor([[token]], device=dev), cache=cache, use_cache=True,
                position_ids=torch.tensor([[position]], device=dev))
    return torch.log_softmax(out.logits[0, -1].float(), dim=-1).cpu()


def eviction_quality(loaded, prompt_tokens: int = 256, new_tokens: int = 64, sinks: int = 4, window: int = 60) -> dict:
    """Teacher-forced over the evaluation text: the first prompt_tokens in one forward, then
    new_tokens one at a time with the cache cut to sinks + window after every step, against the full
    cache. Returns the KV bytes kept and full (measured on the real cache), and helpers.measure.quality's figures."""
    import torch
    from transformers import DynamicCache

    from ..measure.quality import eval_ids, next_token_logprobs, quality

    prompt_tokens, new_tokens = checks.count(prompt_tokens, "prompt_tokens"), checks.count(new_tokens, "new_tokens")
    window, sinks = checks.count(window, "window"), checks.count(sinks, "sinks", minimum=0)
    model, spec = loaded.model, loaded.spec
    ids = eval_ids(loaded.tokenizer, prompt_tokens + new_tokens, profile=loaded.profile)
    if len(ids) < prompt_tokens + new_tokens:
        raise ValueError(f"the evaluation text has {len(ids)} tokens; ask for at most that many")
    ref = next_token_logprobs(model, ids)[prompt_tokens:prompt_tokens + new_tokens - 1]
    dev = next(model.parameters()).device
    cache = DynamicCache(config=model.config)
    rows = []
    with torch.inference_mode():
        model(input_ids=torch.tensor([ids[:prompt_tokens]], device=dev), cache=cache, use_cache=True)
        evict(cache, sinks, window)
        for pos in range(prompt_tokens, prompt_tokens + new_tokens - 1):
            rows.append(_step_logprobs(model, cache, ids[pos], pos))
            evict(cache, sinks, window)
    got = torch.stack(rows)
    q = quality(ref, got, ids[prompt_tokens:prompt_tokens + new_tokens - 1])   # row i: position prompt + i
    full = kv_cache_bytes(spec, prompt_tokens + new_tokens - 1, 1, loaded.dtype)
    kept = measured_cache_bytes(cache)
    return {"sinks": sinks, "window": window, "tokens": prompt_tokens + new_tokens - 1, "kv_bytes_full": full,
            "kv_bytes_kept": kept, "saved": 1 - kept / full, "model": loaded.label, **q}


USES_CONTEXT_BELOW = 0.5   # second copy ÷ first copy perplexity under this: the model reads its context


def context_use(loaded, tokens: int = 160, skip: int = 100) -> dict:
    """Does the model use what is in its cache? The first `tokens` of the evaluation text, then the same
    passage again, in one forward: a model that reads its context predicts the second copy far better than
    the first (it can copy it: induction). Perplexity of each copy over its positions past `skip` (both with
    as much text before them as the other's opening), and their ratio, second ÷ first."""
    from ..measure.quality import eval_ids, next_token_logprobs, perplexity

    tokens = checks.count(tokens, "tokens", minimum=2)
    skip = checks.count(skip, "skip", minimum=0, maximum=tokens - 2)
    passage = eval_ids(loaded.tokenizer, tokens, profile=loaded.profile)[:tokens]
    if len(passage) < tokens:
        raise ValueError(f"the evaluation text has {len(passage)} tokens; ask for at most that many")
    ids = passage + passage
    lp = next_token_logprobs(loaded.model, ids)        # row t predicts ids[t + 1]
    first = perplexity(lp[skip:tokens], ids[skip:tokens])
    second = perplexity(lp[tokens + skip:2 * tokens], ids[tokens + skip:2 * tokens])
    return {"tokens": tokens, "first_copy_perplexity": first, "second_copy_perplexity": second,
            "second_over_first": second / first, "uses_context": second / first < USES_CONTEXT_BELOW,
            "model": loaded.label}


def measure_offloaded(loaded, context: int = 256, steps: int = 16) -> dict:
    """Decode steps with transformers' offloaded cache against a plain one on this machine's device
    (median seconds per step). Where offloading does not run (it needs a CUDA stream), says why."""
    import torch
    from transformers import DynamicCache

    model = loaded.model
    dev = next(model.parameters()).device
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, model.config.vocab_size, (1, context + steps), generator=g).to(dev)
    out = {"device": str(dev), "context": context, "steps": steps}
    for name, kw in (("plain", {}), ("offloaded", {"offloading": True})):
        try:
            cache = DynamicCache(config=model.config, **kw)
            times = []
            with torch.inference_mode():
                model(input_ids=ids[:, :context], cache=cache, use_cache=True)
                for i in range(steps):
                    if dev.type == "cuda":
                        torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    model(input_ids=ids[:, context + i:context + i + 1], cache=cache, use_cache=True)
                    if dev.type == "cuda":
                        torch.cuda.synchronize()
                    times.append(time.perf_counter() - t0)
            out[f"{name}_step_s"] = statistics.median(times)
            out[f"{name}_error"] = None
        except Exception as exc:  # reported, not raised: the notebook says what ran
            out[f"{name}_step_s"] = None
            out[f"{name}_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    return out


# ----------------------------------------------------------------------------- what the runs say, by rule

def offload_reading(run: dict) -> Verdict:
    """measure_offloaded's result: the offloaded step against the plain one (helpers.formulas.verdicts.speed)
    where it ran, else why it did not."""
    if run["offloaded_step_s"] is None:
        return Verdict(f"the offloaded cache did not run on this device ({run['offloaded_error']}): it needs CUDA "
                       "streams; on a CPU the 'host' is the same memory, so no CPU run could show the PCIe cost",
                       "kv_offload.offload", {})
    v = speed(run["offloaded_step_s"], run["plain_step_s"], than="the plain cache")
    return Verdict(f"the offloaded cache ran {v.words} ({1e3 * run['offloaded_step_s']:.1f} against "
                   f"{1e3 * run['plain_step_s']:.1f} ms a step)", "speed", v.evidence)


def eviction_reading(measured: dict) -> list[Verdict]:
    """The eviction rows and the context-use probe read by rule: the bytes kept against (sinks + window) tokens'
    worth, the window that keeps everything, whether the model reads its context (USES_CONTEXT_BELOW), how far
    perplexity moved over the windows (change_verdict of the farthest), and whether KL fell as the window grew."""
    rows, use = measured["rows"], measured["context_use"]
    per_token = rows[0]["kv_bytes_full"] / rows[0]["tokens"]
    exact = all(r["kv_bytes_kept"] == min(r["tokens"], r["sinks"] + r["window"]) * per_token for r in rows)
    out = [Verdict(f"the bytes kept are {'exactly' if exact else 'NOT exactly'} (sinks + window) tokens' worth of the "
                   f"real cache", "kv_offload.bytes", {"exact": float(exact)})]
    whole = [r for r in rows if r["sinks"] + r["window"] >= r["tokens"]]
    if whole:
        w = whole[0]
        out.append(Verdict(f"the {w['window']}-token window keeps all {w['tokens']} tokens: KL {w['kl_mean']:.1e} nats, "
                           f"top-1 agreement {w['top1_agreement']:.0%}", "kv_offload.whole",
                           {"kl_mean": w["kl_mean"], "top1": w["top1_agreement"]}))
    ratio = use["second_over_first"]
    reads = use["uses_context"]
    out.append(Verdict(f"the passage repeated is predicted at {ratio:.2f}× the first copy's perplexity "
                       f"({use['second_copy_perplexity']:,.0f} against {use['first_copy_perplexity']:,.0f}): the "
                       + ("model reads its context" if reads else "model does not copy from its context")
                       + f" (the rule: below {USES_CONTEXT_BELOW:g}× it does)", "kv_offload.context_use",
                       {"ratio": ratio, "uses_context": float(reads)}))
    cut = [r for r in rows if r not in whole]
    ref = rows[0]["reference_perplexity"]
    far = max(cut, key=lambda r: abs(r["perplexity"] / ref - 1))
    moved = far["perplexity"] / ref
    words = {"about equal": "within the change margin", "higher": f"{factor(moved)} the full cache's (higher)",
             "lower": f"{factor(moved)} the full cache's (lower)"}[change_verdict(moved)]
    out.append(Verdict(f"perplexity with the full cache {ref:,.2f}; the farthest any window moves it is "
                       f"{far['perplexity']:,.2f} ({far['window']}-token window), {words}", "kv_offload.perplexity",
                       {"reference": ref, "farthest": far["perplexity"], "ratio": moved}))
    kl = [r["kl_mean"] for r in sorted(cut, key=lambda r: r["window"])]
    fell = all(a > b for a, b in zip(kl, kl[1:]))
    out.append(Verdict(f"mean KL {'fell with every larger window' if fell else 'did not fall with every larger window'}: "
                       + ", ".join(f"{r['window']} tokens {r['kl_mean']:.2g}" for r in sorted(cut, key=lambda r: r["window"])),
                       "kv_offload.kl", {"monotone": float(fell)}))
    return out
