"""The pain points of serving an LLM, measured on a loaded model (helpers.measure.models.Loaded): the cache's
bytes, TTFT, ITL, decode at growing batch, concurrent users; sizes per profile and device (sweep_sizes). Running
out of memory ends a sweep as a marked result, not a crash. Figures: helpers.present.sweep_figures."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ..formulas.memory import cache_window_slots, kv_cache_bytes
from .hardware import free_memory, is_device_limit, is_out_of_memory, synchronize
from .local_models import TINY_PROFILES
from .tensor_bytes import measured_cache_bytes
from .timing import Stats, check_positions, measure, prefill, prompt_ids, timed_generate


@dataclass(frozen=True)
class SweepSizes:
    """Sizes of every sweep in notebooks 01 and 03, chosen for a profile and a device."""

    memory_tokens: tuple[int, ...]       # sequence lengths for memory growth (batch 1)
    ttft_tokens: tuple[int, ...]         # prompt lengths for TTFT / prefill
    itl_contexts: tuple[int, ...]        # contexts for inter-token latency / decode step
    prompt_range: tuple[int, int]        # prompt lengths (min, max) of the throughput comparison's requests
    new_tokens_range: tuple[int, int]    # their output lengths (min, max)
    users_context: int                   # context of each sequence in the users (out-of-memory) sweep
    users_batches: tuple[int, ...]       # concurrent sequences tried, in order
    decode_batches: tuple[int, ...]      # batch sizes for decode on the roofline
    efficiency_context: int              # context of the decode-efficiency comparison
    efficiency_sizes: tuple[str, ...] = ("probe", "tiny", "small")   # helpers.decoding.regimes.SIZE_OVERRIDES built
    ttft_repeats: int = 3
    itl_steps: int = 12                  # decode steps timed at each context
    requests: int = 8                    # N requests for the throughput comparison


def _doubling(lo: int, hi: int) -> tuple[int, ...]:
    return tuple(lo * 2**k for k in range((hi // lo).bit_length()))


BIG_GPU_FREE_BYTES = 40 * 10**9  # free memory after loading from which the full GPU sizes are used


def sweep_sizes(profile: str, device: str, free_bytes: int | None = None) -> SweepSizes:
    """Tiny: each notebook in under a minute on two CPU cores; a 7B on CUDA with ≥ 40 GB free after loading: 16k
    tokens, users doubled until the GPU runs out; a smaller GPU: 4k; a 7B on a CPU or MPS: modest."""
    cuda = device.startswith("cuda")
    if profile in TINY_PROFILES:   # tiny-trained too; CUDA kernels cap launch grids near 65k sequences
        return SweepSizes(_doubling(16, 2048), _doubling(16, 2048), (16, 64, 256, 1024, 2048), (24, 160), (8, 40),
                          256, _doubling(64, 2**15) if cuda else (1, 2, 4, 8, 16), (1, 4, 16, 32), 128, ("probe", "small"))
    if cuda and (free_bytes is None or free_bytes >= BIG_GPU_FREE_BYTES):
        return SweepSizes(_doubling(128, 16384), _doubling(128, 16384), (128, 512, 2048, 4096, 8192, 16384),
                          (128, 1024), (16, 96), 1024, _doubling(8, 8192), (1, 4, 16, 64, 256), 512)
    if cuda:
        return SweepSizes(_doubling(128, 4096), _doubling(128, 4096), (128, 512, 2048, 4096), (64, 512), (16, 64),
                          512, _doubling(1, 4096), (1, 4, 16, 64), 512)
    return SweepSizes(_doubling(16, 1024), _doubling(16, 512), (16, 128, 512), (16, 64), (4, 12), 128, (1, 2, 4),
                      (1, 4, 16), 128, ("probe", "tiny"), ttft_repeats=2, itl_steps=4, requests=4)


def sizes_for(loaded) -> SweepSizes:
    """sweep_sizes for a loaded model, given the device memory still free (on CUDA)."""
    import torch

    free = int(torch.cuda.mem_get_info()[0]) if loaded.device.startswith("cuda") else None
    return sweep_sizes(loaded.profile, loaded.device, free)


def guarded_sweep(points: Iterable, run_point: Callable[[Any], dict], device: str, key: str,
                  desc: str | None = None, is_limit: Callable[[BaseException], bool] = is_out_of_memory):
    """A frame of {key: p, **run_point(p)} per point; an error `is_limit` accepts ends it with {key: p, "oom": True},
    the point and message in attrs["oom_at"] and attrs["oom_message"], the memory returned. Others propagate."""
    import pandas as pd
    from tqdm.auto import tqdm

    rows: list[dict] = []
    oom_at = message = None
    for p in tqdm(points, desc=desc, leave=False, disable=desc is None):
        try:
            rows.append({key: p, **run_point(p), "oom": False})
        except Exception as exc:  # noqa: BLE001 - only out-of-memory (is_limit) is a result; the rest re-raise
            if not is_limit(exc):
                raise
            oom_at, message = p, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
        if oom_at is not None:  # outside the except block, so the traceback no longer pins the tensors
            free_memory(device)
            rows.append({key: p, "oom": True})
            break
    df = pd.DataFrame(rows)
    df.attrs.update(oom_at=oom_at, oom_message=message)
    return df


def _with_peak(dev: str, run: Callable[[], dict]) -> dict:
    """run()'s row with, on CUDA, the allocator's peak above what was allocated before it (None elsewhere)."""
    import torch

    cuda = dev.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    row = run()
    synchronize(dev)
    return {**row, "peak_above_weights_bytes": torch.cuda.max_memory_allocated() - base if cuda else None}


def memory_growth(loaded, lengths: Sequence[int]):
    """The cache's bytes after a prefill of n tokens (batch 1) beside the formula; on CUDA the peak above the weights."""
    model, dev, spec = loaded.model, loaded.device, loaded.spec
    check_positions(model, max(lengths))

    def point(n: int) -> dict:
        ids = prompt_ids(n, vocab=model.config.vocab_size, device=dev)
        return _with_peak(dev, lambda: {
            "cache_bytes": measured_cache_bytes(prefill(model, ids)[1]),
            "formula_bytes": kv_cache_bytes(spec, n, 1, loaded.dtype, window_slots=cache_window_slots(spec))})

    return guarded_sweep(lengths, point, dev, "tokens", "memory")


def ttft_sweep(loaded, lengths: Sequence[int], repeats: int = 3):
    """Time to first token (a prefill and the first argmax) at each prompt length, after a warm-up."""
    model, dev = loaded.model, loaded.device
    check_positions(model, max(lengths))

    def point(n: int) -> dict:
        ids = prompt_ids(n, vocab=model.config.vocab_size, device=dev)
        stats = measure(lambda: prefill(model, ids), dev, warmup=1, repeats=repeats)
        return {"ttft_s": stats.median, "ttft_p90_s": stats.p90, "ttft_min_s": stats.min,
                "tokens_per_s": n / stats.median}

    return guarded_sweep(lengths, point, dev, "tokens", "TTFT")


def decode_steps(model, device: str, context: int, batch: int = 1, steps: int = 16) -> tuple[Stats, float]:
    """(the `steps` decode steps' times, TTFT) of one greedy generation (timed_generate) after `context` tokens."""
    ids = prompt_ids(context, batch=batch, vocab=model.config.vocab_size, device=device)
    g = timed_generate(model, ids, steps + 1, device)
    return Stats(tuple(g.step_s)), g.ttft_s


def itl_sweep(loaded, contexts: Sequence[int], steps: int = 12):
    """Inter-token latency at each context, batch 1: median and p90 of `steps` decode steps, after a warm-up."""
    decode_steps(loaded.model, loaded.device, 8, steps=2)   # warm-up

    def point(c: int) -> dict:
        s, ttft = decode_steps(loaded.model, loaded.device, c, steps=steps)
        return {"itl_s": s.median, "itl_p90_s": s.p90, "ttft_s": ttft}

    return guarded_sweep(contexts, point, loaded.device, "context", "ITL")


def decode_batch_sweep(loaded, context: int, batches: Sequence[int], steps: int = 8):
    """Decode step time for `batch` sequences of `context` tokens each, one token per sequence per step."""
    def point(b: int) -> dict:
        s, _ = decode_steps(loaded.model, loaded.device, context, b, steps)
        return {"step_s": s.median, "step_p90_s": s.p90, "tokens_per_s": b / s.median}

    return guarded_sweep(batches, point, loaded.device, "batch", "decode batch")


def users_sweep(loaded, context: int, batches: Sequence[int]):
    """Concurrent sequences of `context` tokens, a prefill and a decode step per batch: the cache's bytes and the
    formula, until the device refuses a size (hardware.is_device_limit: also a CUDA workspace or launch grid)."""
    model, dev, spec = loaded.model, loaded.device, loaded.spec

    def run(b: int) -> dict:
        t0 = time.perf_counter()
        g = timed_generate(model, prompt_ids(context, batch=b, vocab=model.config.vocab_size, device=dev), 2, dev,
                           track_cache=True)
        return {"tokens": b * context, "cache_bytes": g.cache_bytes[-1], "seconds": time.perf_counter() - t0,
                "formula_bytes": kv_cache_bytes(spec, context + 1, b, loaded.dtype, window_slots=cache_window_slots(spec))}

    def point(b: int) -> dict:
        free_memory(dev)
        return _with_peak(dev, lambda: run(b))

    return guarded_sweep(batches, point, dev, "batch", "users", is_limit=is_device_limit)
