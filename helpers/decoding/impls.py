"""Greedy decode four ways, each timed step by step on the same model and prompt; the same tokens, only the
time differs (tests/test_decoding.py pins it).

- ``eager``: one forward per token over a ``DynamicCache`` (helpers.measure.timing.timed_generate);
- ``generate``: Hugging Face's ``model.generate``: the same forward plus a general-purpose loop's
  bookkeeping each step, timed by a streamer called once per token;
- ``static``: a ``StaticCache``, K/V preallocated to prompt + new tokens: the shapes never change;
- ``static+compile``: the static cache with the step compiled by ``torch.compile``, with CUDA graphs on a GPU
  (gpt-fast's recipe); the compile time reported apart.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..measure.hardware import synchronize

IMPLEMENTATIONS: dict[str, str] = {
    "eager": "eager loop over a DynamicCache",
    "generate": "Hugging Face generate() (greedy, DynamicCache)",
    "static": "static cache (preallocated K/V, shapes fixed)",
    "static+compile": "static cache + torch.compile (CUDA graphs on a GPU)",
}
COMPILE_MODES = {"cuda": "reduce-overhead", "cpu": "default"}  # CUDA graphs need a CUDA device


@dataclass
class DecodeRun:
    """One greedy generation: `new_tokens` tokens after a prompt, the first from the prefill."""

    impl: str
    prompt_tokens: int
    tokens: list[list[int]]                     # (batch, new_tokens) generated ids
    step_s: tuple[float, ...]                   # each decode step after the first token
    prefill_s: float | None                     # prompt forward + first token (None: not separable)
    kv_slots: int                               # K/V positions each step's attention reads (mean)
    compile_s: float | None = None              # torch.compile's first calls (compile + warm-up)
    notes: list[str] = field(default_factory=list)

    @property
    def mean_context(self) -> int:
        """Mean tokens in the cache over the decode steps: step j (1-based) attends prompt + j tokens."""
        return self.prompt_tokens + (len(self.step_s) + 1) // 2


def compile_mode(device: str) -> str:
    """torch.compile's mode for the decode step: CUDA graphs on a CUDA GPU, the default elsewhere."""
    return COMPILE_MODES["cuda" if str(device).startswith("cuda") else "cpu"]


def _eager(model, input_ids, new_tokens: int, device: str) -> DecodeRun:
    from ..measure.timing import timed_generate

    p = input_ids.shape[1]
    g = timed_generate(model, input_ids, new_tokens, device)
    return DecodeRun("eager", p, g.token_ids, tuple(g.step_s), g.ttft_s, p + new_tokens // 2)


class _StepClock:
    """A generate() streamer that notes the time each token arrives (the prompt arrives first)."""

    def __init__(self, device: str):
        self.device, self.times = device, []

    def put(self, value) -> None:
        synchronize(self.device)
        self.times.append(time.perf_counter())

    def end(self) -> None:
        pass


def _generate(model, input_ids, new_tokens: int, device: str) -> DecodeRun:
    import torch
    from transformers import GenerationConfig

    cfg = GenerationConfig(do_sample=False, max_new_tokens=new_tokens, min_new_tokens=0, eos_token_id=None,
                           pad_token_id=model.config.pad_token_id or 0, num_beams=1, cache_implementation=None)
    clock = _StepClock(device)
    ids = input_ids.to(device)
    with torch.inference_mode():
        synchronize(device)
        t0 = time.perf_counter()
        out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=cfg, streamer=clock)
    arrivals = [t0] + clock.times[1:]          # the streamer's first call is the prompt itself
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    p = ids.shape[1]
    return DecodeRun("generate", p, out[:, p:].tolist(), tuple(gaps[1:]), gaps[0], p + new_tokens // 2)


def static_cache(config, slots: int):
    """A ``StaticCache`` of `slots` positions whose layers are all full-attention ones, also for a model with a
    sliding window. A ``StaticSlidingWindowLayer`` counts its tokens in a Python int that
    ``torch.compile(dynamic=False)`` guards on: every step would compile a new graph until the recompile limit,
    then run eager (tests/test_decoding.py counts the graphs). The model's own sliding-window mask still keeps
    attention inside the window: the same tokens, at the cost of `slots` rather than `window` K/V positions."""
    import copy

    from transformers import StaticCache

    full = copy.deepcopy(config)
    full.sliding_window = None
    if getattr(full, "layer_types", None) is not None:
        full.layer_types = ["full_attention"] * len(full.layer_types)
    cache = StaticCache(config=full, max_cache_len=slots)
    assert not any(cache.is_sliding), "a sliding layer left in the static cache would recompile every step"
    return cache


def _static(model, input_ids, new_tokens: int, device: str, compiled: bool) -> DecodeRun:
    """The static cache, its step compiled or not."""
    import torch

    ids = input_ids.to(device)
    batch, p = ids.shape
    slots = p + new_tokens                      # the buffer every step's attention reads
    # One static cache per model and shape, reset between runs (as transformers' generate does): its
    # buffers keep their addresses, so a compiled step (and its CUDA graph) is reused, not rebuilt.
    # Kept in the module's __dict__, not as a registered attribute: neither is a submodule or a buffer.
    key = (batch, slots, str(device))
    held = model.__dict__.get("_workshop_static_cache")
    if held is not None and held[0] == key:
        cache = held[1]
        with torch.inference_mode():   # its buffers were made in inference mode
            cache.reset()
    else:
        cache = static_cache(model.config, slots)
        model.__dict__["_workshop_static_cache"] = (key, cache)
    forward = model
    compile_s = None
    notes: list[str] = []
    window = getattr(model.config, "sliding_window", None)
    if window is not None and slots > window:
        notes.append(f"{slots} K/V positions per layer past the {window}-token window, masked to it (static_cache)")
    if compiled:
        # one compiled callable per model: a second run reuses the compiled graph
        held = "_workshop_compiled_decode"
        forward = model.__dict__.get(held)
        if forward is None:
            forward = torch.compile(model, mode=compile_mode(device), fullgraph=False, dynamic=False)
            model.__dict__[held] = forward
        notes.append(f"torch.compile mode={compile_mode(device)!r}")
    tokens = []
    with torch.inference_mode():
        synchronize(device)
        t0 = time.perf_counter()
        out = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)   # prefill: eager
        nxt = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
        synchronize(device)
        prefill_s = time.perf_counter() - t0
        tokens.append(nxt)
        steps = []
        for j in range(new_tokens - 1):
            pos = torch.full((batch, 1), p + j, dtype=torch.long, device=device)
            t0 = time.perf_counter()
            out = forward(input_ids=nxt, position_ids=pos, cache=cache, use_cache=True)
            nxt = out.logits[:, -1, :].argmax(dim=-1, keepdim=True).clone()
            synchronize(device)
            steps.append(time.perf_counter() - t0)
            tokens.append(nxt)
    ids_out = torch.cat(tokens, dim=1).tolist()
    if compiled:
        # the first calls compile (and on a GPU record the CUDA graph): report them apart, time the rest
        warm = min(3, len(steps) - 1)
        compile_s, steps = sum(steps[:warm]), steps[warm:]
    return DecodeRun("static+compile" if compiled else "static", p, ids_out, tuple(steps), prefill_s, slots,
                     compile_s, notes)


def decode(model, impl: str, input_ids, new_tokens: int, device: str | None = None) -> DecodeRun:
    """Greedy decode of `new_tokens` (≥ 2; ≥ 6 for static+compile) tokens after `input_ids` with one
    implementation (IMPLEMENTATIONS), every step timed; static+compile's first three steps, which compile,
    are reported as ``compile_s`` and left out of ``step_s``."""
    from ..measure.timing import check_ids

    input_ids = check_ids(model, input_ids, new_tokens)
    device = device or str(next(model.parameters()).device)
    if impl == "eager":
        return _eager(model, input_ids, new_tokens, device)
    if impl == "generate":
        return _generate(model, input_ids, new_tokens, device)
    if impl in ("static", "static+compile"):
        return _static(model, input_ids, new_tokens, device, compiled=impl == "static+compile")
    raise ValueError(f"unknown decode implementation {impl!r}; allowed: {', '.join(IMPLEMENTATIONS)}")
