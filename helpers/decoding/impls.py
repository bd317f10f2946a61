"""Greedy decode four ways, timed step by step: the same tokens, only the time differs. ``eager``: the one greedy loop
over a DynamicCache (timed_generate); ``generate``: ``model.generate`` timed by a streamer; ``static``: a StaticCache
of prompt + new tokens, shapes fixed; ``static+compile``: that step under torch.compile, with CUDA graphs on a GPU
(gpt-fast's recipe), the compile time apart."""
from __future__ import annotations

import time
from dataclasses import dataclass

from ..measure.hardware import synchronize
from ..measure.timing import timed_generate

IMPLEMENTATIONS = ("eager", "generate", "static", "static+compile")


@dataclass
class DecodeRun:
    impl: str
    prompt_tokens: int
    tokens: list[list[int]]                     # (batch, new_tokens) generated ids
    step_s: tuple[float, ...]                   # each decode step after the first token
    kv_slots: int                               # K/V positions each step's attention reads (mean)
    compile_s: float | None = None              # torch.compile's first calls (compile + warm-up)

    @property
    def mean_context(self) -> int:      # step j (1-based) attends prompt + j tokens
        return self.prompt_tokens + (len(self.step_s) + 1) // 2


def _generate(model, ids, new_tokens: int, device: str) -> DecodeRun:
    from types import SimpleNamespace

    import torch
    from transformers import GenerationConfig

    cfg = GenerationConfig(do_sample=False, max_new_tokens=new_tokens, min_new_tokens=0, eos_token_id=None,
                           pad_token_id=model.config.pad_token_id or 0, num_beams=1, cache_implementation=None)
    arrivals = []   # a streamer: called with the prompt, then once per token
    clock = SimpleNamespace(put=lambda _: (synchronize(device), arrivals.append(time.perf_counter())), end=lambda: None)
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=cfg, streamer=clock)
    p = ids.shape[1]
    gaps = [b - a for a, b in zip(arrivals[1:], arrivals[2:])]   # from the first token on: the decode steps
    return DecodeRun("generate", p, out[:, p:].tolist(), tuple(gaps), p + new_tokens // 2)


def static_cache(config, slots: int):
    """A StaticCache of `slots` full-attention positions in every layer, also for a sliding-window model (a
    StaticSlidingWindowLayer counts tokens in a Python int torch.compile guards on: one graph per step); the
    model's own mask keeps attention inside its window."""
    import copy

    from transformers import StaticCache

    full = copy.deepcopy(config)
    full.sliding_window = None
    if getattr(full, "layer_types", None) is not None:
        full.layer_types = ["full_attention"] * len(full.layer_types)
    return StaticCache(config=full, max_cache_len=slots)


def _static(model, ids, new_tokens: int, device: str, compiled: bool) -> DecodeRun:
    import torch

    batch, p = ids.shape
    slots = p + new_tokens                      # the K/V positions every step's attention reads
    # one static cache per model and shape, reset between runs: the compiled step (its CUDA graph) is reused
    key, held = (batch, slots, str(device)), model.__dict__.get("_workshop_static_cache")
    cache = held[1] if held is not None and held[0] == key else static_cache(model.config, slots)
    model.__dict__["_workshop_static_cache"] = (key, cache)
    with torch.inference_mode():   # its buffers were made in inference mode
        cache.reset()
    if compiled and "_workshop_compiled_decode" not in model.__dict__:   # CUDA graphs on a GPU
        mode = "reduce-overhead" if str(device).startswith("cuda") else "default"
        model.__dict__["_workshop_compiled_decode"] = torch.compile(model, mode=mode, dynamic=False)
    step = model.__dict__["_workshop_compiled_decode"] if compiled else model
    g = timed_generate(model, ids, new_tokens, device, cache=cache, step=step)
    steps, compile_s = g.step_s, None
    if compiled:   # the first calls compile (and on a GPU record the CUDA graph): reported apart
        warm = min(3, len(steps) - 1)
        compile_s, steps = sum(steps[:warm]), steps[warm:]
    return DecodeRun("static+compile" if compiled else "static", p, g.token_ids, tuple(steps), slots, compile_s)


def decode(model, impl: str, ids, new_tokens: int, device: str) -> DecodeRun:
    """Greedy decode of `new_tokens` (≥ 2; ≥ 6 for static+compile: its first three steps compile) with `impl`."""
    if impl == "eager":
        g = timed_generate(model, ids, new_tokens, device)
        return DecodeRun("eager", ids.shape[1], g.token_ids, tuple(g.step_s), ids.shape[1] + new_tokens // 2)
    if impl == "generate":
        return _generate(model, ids, new_tokens, device)
    if impl in ("static", "static+compile"):
        return _static(model, ids, new_tokens, device, compiled=impl == "static+compile")
    raise ValueError(f"unknown decode implementation {impl!r}; allowed: {', '.join(IMPLEMENTATIONS)}")
