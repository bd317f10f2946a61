"""Timing done right: warm-up, device synchronisation, repeats, median and p90; for generation, time to first token
(TTFT) and each decode step over the real transformers KV cache (inter-token latency, ITL)."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

from ..formulas.stats import percentile
from .hardware import synchronize


@dataclass(frozen=True)
class Stats:
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p90(self) -> float:
        return percentile(list(self.samples), 90)

    @property
    def min(self) -> float:
        return min(self.samples)

    def to_dict(self) -> dict:
        return {"median_s": self.median, "p90_s": self.p90, "mean_s": statistics.fmean(self.samples),
                "min_s": self.min, "repeats": len(self.samples)}


def measure(fn: Callable[[], object], device: str = "cpu", warmup: int = 1, repeats: int = 5) -> Stats:
    """fn run `warmup` times untimed, then `repeats` times timed, the device synchronised around each."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        samples.append(time.perf_counter() - t0)
    return Stats(tuple(samples))


@dataclass
class GenerationTiming:
    batch: int
    prompt_tokens: int
    ttft_s: float
    step_s: list[float] = field(default_factory=list)
    token_ids: list[list[int]] = field(default_factory=list, repr=False)
    cache_bytes: list[int] = field(default_factory=list, repr=False)  # cache size after each step

    @property
    def itl_median_s(self) -> float | None:
        return statistics.median(self.step_s) if self.step_s else None


def check_positions(model, prompt_tokens: int, new_tokens: int = 0) -> None:
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit and prompt_tokens + new_tokens > limit:
        raise ValueError(f"{prompt_tokens:,} prompt tokens + {new_tokens:,} new exceed the model's {limit:,} positions "
                         "(max_position_embeddings in its config); shorten the prompt or the output")


def timed_generate(model, input_ids, max_new_tokens: int, device: str | None = None, track_cache: bool = False,
                   cache=None, step=None) -> GenerationTiming:
    """The one greedy decode loop: a prefill into `cache` (default a fresh DynamicCache), then one token per sequence
    per step, each timed; `step` runs a decode step (default the model; helpers.decoding.impls passes a compiled one)."""
    import torch

    from .tensor_bytes import measured_cache_bytes

    device = device or str(next(model.parameters()).device)
    input_ids = input_ids.to(device)
    batch, p = input_ids.shape
    check_positions(model, p, max_new_tokens)
    step = model if step is None else step
    with torch.inference_mode():
        synchronize(device)
        t0 = time.perf_counter()
        nxt, cache = prefill(model, input_ids, cache)
        synchronize(device)
        ttft = time.perf_counter() - t0
        tokens, steps = [nxt], []
        sizes = [measured_cache_bytes(cache)] if track_cache else []
        for j in range(max_new_tokens - 1):
            pos = torch.full((batch, 1), p + j, dtype=torch.long, device=device)
            t0 = time.perf_counter()
            # clone: a compiled step (CUDA graphs) overwrites its output buffer on the next call
            nxt = step(input_ids=nxt, position_ids=pos, cache=cache, use_cache=True).logits[:, -1, :].argmax(
                dim=-1, keepdim=True).clone()
            synchronize(device)
            steps.append(time.perf_counter() - t0)
            tokens.append(nxt)
            if track_cache:
                sizes.append(measured_cache_bytes(cache))
    return GenerationTiming(batch, p, ttft, steps, torch.cat(tokens, dim=1).tolist(), sizes)


def prompt_ids(n: int, batch: int = 1, vocab: int = 32000, seed: int = 0, device: str = "cpu"):
    """(batch, n) random token ids ≥ 3 (past Mistral's <unk>, <s>, </s>), fixed seed: content does not change timing."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(3 if vocab > 3 else 0, vocab, (batch, n), generator=gen).to(device)


def prefill(model, ids, cache=None, attention_mask=None, position_ids=None):
    """(next token ids (batch, 1), cache) of one prefill into `cache` (default a fresh DynamicCache); logits for the
    last position only, as generate() does: the others (prompt × vocab) would inflate TTFT."""
    import torch
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config) if cache is None else cache
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=attention_mask, position_ids=position_ids, cache=cache,
                    use_cache=True, logits_to_keep=1)
    return out.logits[:, -1, :].argmax(dim=-1, keepdim=True), cache
