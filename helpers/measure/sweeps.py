"""The pain points of serving an LLM, measured: sweeps over a loaded model (helpers.measure.models.Loaded) —
the KV cache's bytes as the sequence grows (memory_growth), time to first token (ttft_sweep) and inter-token
latency (itl_sweep) against the context, decode at growing batch, and concurrent sequences until the device
runs out of memory (users_sweep). Sizes: sweep_sizes(profile, device). Every sweep stops at an out-of-memory
error and marks it: a result, not a crash. The figures: helpers.present.sweep_figures.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from .hardware import (allocated, free_memory, is_device_limit, is_out_of_memory, peak_allocated, reset_peak, synchronize)
from ..formulas.memory import cache_window_slots, kv_cache_bytes
from .tensor_bytes import measured_cache_bytes
from .timing import Stats, check_positions, measure, prefill, prompt_ids, timed_generate


@dataclass(frozen=True)
class SweepSizes:
    """Sizes of every sweep in notebooks 01 and 03, chosen for a profile and a device."""

    memory_tokens: tuple[int, ...]       # sequence lengths for memory growth (batch 1)
    ttft_tokens: tuple[int, ...]         # prompt lengths for TTFT / prefill
    ttft_repeats: int
    itl_contexts: tuple[int, ...]        # contexts for inter-token latency / decode step
    itl_steps: int                       # decode steps timed at each context
    requests: int                        # N requests for the throughput comparison
    prompt_range: tuple[int, int]        # their prompt lengths (min, max)
    new_tokens_range: tuple[int, int]    # their output lengths (min, max)
    users_context: int                   # context of each sequence in the users (out-of-memory) sweep
    users_batches: tuple[int, ...]       # concurrent sequences tried, in order
    decode_batches: tuple[int, ...]      # batch sizes for decode on the roofline
    efficiency_context: int              # context of the decode-efficiency comparison
    efficiency_sizes: tuple[str, ...]    # model sizes built for it (helpers.measure.decode_efficiency.SIZE_OVERRIDES)


def _doubling(lo: int, hi: int) -> tuple[int, ...]:
    return tuple(lo * 2**k for k in range((hi // lo).bit_length()))


BIG_GPU_FREE_BYTES = 40 * 10**9  # free memory after loading from which the full GPU sizes are used


def sweep_sizes(profile: str, device: str, free_bytes: int | None = None) -> SweepSizes:
    """Sweep sizes for a profile on a device: tiny (any device) runs each notebook in well under a minute on
    two CPU cores; a 7B model on CUDA with ≥ 40 GB free after loading goes to 16k tokens and doubles the users
    until the GPU runs out of memory; a smaller GPU goes to 4k; a 7B model on a CPU or MPS stays modest."""
    cuda = device.startswith("cuda")
    from .local_models import TINY_PROFILES  # tiny and tiny-trained: the same config and sizes

    if profile in TINY_PROFILES:
        return SweepSizes(
            memory_tokens=_doubling(16, 2048), ttft_tokens=_doubling(16, 2048), ttft_repeats=3,
            itl_contexts=(16, 64, 256, 1024, 2048), itl_steps=12,
            requests=8, prompt_range=(24, 160), new_tokens_range=(8, 40),
            users_context=256, users_batches=(1, 2, 4, 8, 16) if not cuda else _doubling(64, 2**15),  # CUDA kernels cap grids near 65k
            decode_batches=(1, 4, 16, 32), efficiency_context=128, efficiency_sizes=("probe", "small"),
        )
    if cuda and (free_bytes is None or free_bytes >= BIG_GPU_FREE_BYTES):
        return SweepSizes(
            memory_tokens=_doubling(128, 16384), ttft_tokens=_doubling(128, 16384), ttft_repeats=3,
            itl_contexts=(128, 512, 2048, 4096, 8192, 16384), itl_steps=12,
            requests=8, prompt_range=(128, 1024), new_tokens_range=(16, 96),
            users_context=1024, users_batches=_doubling(8, 8192),
            decode_batches=(1, 4, 16, 64, 256), efficiency_context=512,
            efficiency_sizes=("probe", "tiny", "small"),
        )
    if cuda:
        return SweepSizes(
            memory_tokens=_doubling(128, 4096), ttft_tokens=_doubling(128, 4096), ttft_repeats=3,
            itl_contexts=(128, 512, 2048, 4096), itl_steps=12,
            requests=8, prompt_range=(64, 512), new_tokens_range=(16, 64),
            users_context=512, users_batches=_doubling(1, 4096),
            decode_batches=(1, 4, 16, 64), efficiency_context=512,
            efficiency_sizes=("probe", "tiny", "small"),
        )
    return SweepSizes(
        memory_tokens=_doubling(16, 1024), ttft_tokens=_doubling(16, 512), ttft_repeats=2,
        itl_contexts=(16, 128, 512), itl_steps=4,
        requests=4, prompt_range=(16, 64), new_tokens_range=(4, 12),
        users_context=128, users_batches=(1, 2, 4),
        decode_batches=(1, 4, 16), efficiency_context=128, efficiency_sizes=("probe", "tiny"),
    )


def sizes_for(loaded) -> SweepSizes:
    """sweep_sizes for a loaded model, given the device memory still free (on CUDA)."""
    import torch

    free = int(torch.cuda.mem_get_info()[0]) if loaded.device.startswith("cuda") else None
    return sweep_sizes(loaded.profile, loaded.device, free)


def guarded_sweep(points: Iterable, run_point: Callable[[Any], dict], device: str, key: str,
                  desc: str | None = None, is_limit: Callable[[BaseException], bool] = is_out_of_memory):
    """A frame of run_point(p) for each point in order; an out-of-memory error (or whatever `is_limit`
    accepts) ends the sweep with that point recorded as {key: p, "oom": True}, the point and the message in
    the frame's attrs["oom_at"] and attrs["oom_message"], the device's cached memory returned. Other errors
    propagate."""
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


def memory_growth(loaded, lengths: Sequence[int]):
    """The cache's measured bytes after a prefill of n tokens (batch 1), for each n, beside the formula
    (helpers.formulas.memory.kv_cache_bytes, sliding layers keeping window − 1 tokens as transformers'
    DynamicCache does); on CUDA also the allocator's peak above the weights (cache + activations)."""
    model, dev, spec = loaded.model, loaded.device, loaded.spec
    check_positions(model, max(lengths))

    def point(n: int) -> dict:
        ids = prompt_ids(n, vocab=model.config.vocab_size, device=dev)
        reset_peak(dev)
        base = allocated(dev)
        _, cache = prefill(model, ids)
        synchronize(dev)
        peak = peak_allocated(dev)
        row = {"cache_bytes": measured_cache_bytes(cache),
               "formula_bytes": kv_cache_bytes(spec, n, 1, loaded.dtype, window_slots=cache_window_slots(spec)),
               "peak_above_weights_bytes": (peak - base) if peak is not None else None}
        del cache
        return row

    return guarded_sweep(lengths, point, dev, "tokens", "memory")


def ttft_sweep(loaded, lengths: Sequence[int], repeats: int = 3):
    """Time to first token (a prefill into a fresh DynamicCache plus the first token's argmax) for each
    prompt length: one untimed warm-up, then the median and p90 of `repeats` runs."""
    model, dev = loaded.model, loaded.device
    check_positions(model, max(lengths))

    def point(n: int) -> dict:
        ids = prompt_ids(n, vocab=model.config.vocab_size, device=dev)
        stats = measure(lambda: prefill(model, ids), dev, warmup=1, repeats=repeats)
        return {"ttft_s": stats.median, "ttft_p90_s": stats.p90, "ttft_min_s": stats.min,
                "tokens_per_s": n / stats.median}

    return guarded_sweep(lengths, point, dev, "tokens", "TTFT")


def itl_sweep(loaded, contexts: Sequence[int], steps: int = 12):
    """Inter-token latency at each context: a prefill of `context` tokens, then `steps` greedy decode
    steps of one token each that reuse the real DynamicCache (helpers.measure.timing.timed_generate);
    median and p90 of the steps. A short warm-up generation runs first."""
    model, dev = loaded.model, loaded.device
    check_positions(model, max(contexts), steps + 1)
    timed_generate(model, prompt_ids(8, vocab=model.config.vocab_size, device=dev), 3, dev)  # warm-up

    def point(c: int) -> dict:
        g = timed_generate(model, prompt_ids(c, vocab=model.config.vocab_size, device=dev), steps + 1, dev)
        s = Stats(tuple(g.step_s))
        return {"itl_s": s.median, "itl_p90_s": s.p90, "ttft_s": g.ttft_s}

    return guarded_sweep(contexts, point, dev, "context", "ITL")


def decode_batch_sweep(loaded, context: int, batches: Sequence[int], steps: int = 8):
    """Decode step time for `batch` sequences of `context` tokens each, one token per sequence per step."""
    model, dev = loaded.model, loaded.device
    check_positions(model, context, steps + 1)

    def point(b: int) -> dict:
        g = timed_generate(model, prompt_ids(context, batch=b, vocab=model.config.vocab_size, device=dev),
                           steps + 1, dev)
        s = Stats(tuple(g.step_s))
        return {"step_s": s.median, "step_p90_s": s.p90, "tokens_per_s": b / s.median}

    return guarded_sweep(batches, point, dev, "batch", "decode batch")


def users_sweep(loaded, context: int, batches: Sequence[int]):
    """Concurrent sequences of `context` tokens: for each batch, a prefill of all of them into one
    DynamicCache and one decode step; the cache's bytes, the formula, and on CUDA the allocator's
    peak above the weights. On a GPU the batches grow until the device runs out of memory: that
    point ends the sweep, marked (oom = True), and the memory is given back. So does any other refusal of a
    size (hardware.is_device_limit: a CUDA library that cannot allocate its workspace, a launch grid too
    large at thousands of sequences); its message is the frame's attrs["oom_message"]."""
    model, dev, spec = loaded.model, loaded.device, loaded.spec
    check_positions(model, context, 2)

    def point(b: int) -> dict:
        free_memory(dev)
        reset_peak(dev)
        base = allocated(dev)
        ids = prompt_ids(context, batch=b, vocab=model.config.vocab_size, device=dev)
        t0 = time.perf_counter()
        g = timed_generate(model, ids, 2, dev, track_cache=True)
        secs = time.perf_counter() - t0
        peak = peak_allocated(dev)
        return {"tokens": b * context, "cache_bytes": g.cache_bytes[-1],
                "formula_bytes": kv_cache_bytes(spec, context + 1, b, loaded.dtype, window_slots=cache_window_slots(spec)),
                "peak_above_weights_bytes": (peak - base) if peak is not None else None, "seconds": secs}

    return guarded_sweep(batches, point, dev, "batch", "users", is_limit=is_device_limit)
