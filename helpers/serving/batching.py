"""Continuous batching, measured: the same requests one after another, as static batches, and through
transformers' continuous-batching manager (Orca's iteration-level scheduling, Yu et al., OSDI 2022), its
paged cache sized from the model and the requests (`cb_config`), never from the machine's RAM; a decode step
and a chunked prefill on a GPU, computed. Chunked prefill is measured on the engine (engine_runs)."""
from __future__ import annotations

import math
import statistics
import time
from typing import Sequence

import pandas as pd

from ..formulas.regime import label, ratio
from ..formulas.stats import percentile
from .naive import RequestTiming, ServeResult, _ForwardCounter, serve_batched, serve_sequential
from .traces import TraceRequest

PAGE_SIZE = 16   # tokens per block of the paged cache (vLLM's default block size)


def cb_config(model, requests: Sequence[TraceRequest], max_batch_tokens: int = 512, page_size: int = PAGE_SIZE,
              concurrent: int | None = None):
    """A ContinuousBatchingConfig whose paged cache holds `concurrent` (default all) of the longest requests."""
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    longest = max(len(r.prompt) + r.max_new_tokens for r in requests)
    n = len(requests) if concurrent is None else max(1, min(concurrent, len(requests)))
    blocks = n * math.ceil(longest / page_size) + 2
    return ContinuousBatchingConfig(num_blocks=blocks, max_batch_tokens=max_batch_tokens, page_size=page_size,
                                    max_memory_percent=0.2, use_async_batching=False, use_cuda_graph=False,
                                    max_requests_per_batch=n)


def serve_continuous(model, requests: Sequence[TraceRequest], max_batch_tokens: int = 512, page_size: int = PAGE_SIZE,
                     timeout_s: float = 300.0, concurrent: int | None = None) -> ServeResult:
    """Serve the requests, all submitted at the start, through transformers' continuous-batching manager
    (greedy, no end-of-sequence stop, so every request makes exactly its max_new_tokens). Each token's time
    comes from the manager's own timestamps (record_timestamps)."""
    import torch
    from transformers import GenerationConfig

    cfg = cb_config(model, requests, max_batch_tokens, page_size, concurrent)
    gen = GenerationConfig(do_sample=False, eos_token_id=-1, max_new_tokens=max(r.max_new_tokens for r in requests))
    mgr = model.init_continuous_batching(generation_config=gen, continuous_batching_config=cfg)
    counter, outs, reqs = _ForwardCounter(model), {}, {f"r{r.rid}": r for r in requests}
    try:
        with torch.inference_mode():
            mgr.start()
            t0 = time.perf_counter()
            for rid, r in reqs.items():
                mgr.add_request(list(r.prompt), request_id=rid, max_new_tokens=r.max_new_tokens, record_timestamps=True)
            deadline = t0 + timeout_s
            while len(outs) < len(requests):
                o = mgr.get_result(timeout=0.02)
                if o is not None and o.is_finished():
                    if o.error:
                        raise RuntimeError(f"continuous batching failed on {o.request_id}: {o.error}")
                    outs[o.request_id] = o
                err = mgr.background_thread_status.fatal_error
                if err is not None:
                    raise RuntimeError(f"the continuous-batching thread died: {err}")
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"continuous batching did not finish in {timeout_s:.0f} s "
                                       f"({len(outs)} of {len(requests)} requests done)")
    finally:
        mgr.stop(block=True, timeout=30)
        counter.close()
    # a request's slot: when the manager took it from its queue into a batch (lifespan[0])
    timings = sorted((RequestTiming(r.rid, len(r.prompt), len(o.generated_tokens), max(o.lifespan[0] - t0, 0.0),
                                    o.timestamps[0] - t0, o.timestamps[-1] - t0, list(o.generated_tokens))
                      for rid, o in outs.items() for r in [reqs[rid]]), key=lambda t: t.rid)
    return ServeResult("continuous batching", timings, max(t.finish_s for t in timings), counter.calls)


def serve_static(model, requests: Sequence[TraceRequest], batch_size: int, device: str | None = None) -> ServeResult:
    """Static batching: requests in arrival order, `batch_size` at a time, each batch through
    helpers.serving.naive.serve_batched (left-padded); the next batch starts only when the slowest of the
    previous one is done."""
    timings, calls, offset = [], 0, 0.0
    for k in range(0, len(requests), batch_size):
        res = serve_batched(model, requests[k:k + batch_size], device)
        for t in res.timings:
            timings.append(RequestTiming(t.rid, t.prompt_tokens, t.new_tokens, offset, offset + t.first_token_s,
                                         offset + t.finish_s, t.tokens))
        calls += res.forward_calls
        offset += res.wall_s
    return ServeResult(f"static batches of {batch_size}", timings, offset, calls)


def slot_segments(result: ServeResult, slots: int, static_batch: int | None = None) -> list[dict]:
    """Each request's slot, busy span and, in a static batch, its slot idle until the batch's slowest is done."""
    rows, free_at = [], [0.0] * slots
    ts = sorted(result.timings, key=lambda t: (t.start_s, t.rid))
    for k, t in enumerate(ts):
        if static_batch:
            j, end = k % static_batch, max(g.finish_s for g in ts[k - k % static_batch:][:static_batch])
        else:       # the free slot freed longest ago; with more in flight than slots, the first to free up
            j = min(range(slots), key=lambda s: (free_at[s] > t.start_s + 1e-9, free_at[s]))
            free_at[j] = end = t.finish_s
        rows.append({"slot": j, "request": t.rid, "start_s": t.start_s, "finish_s": t.finish_s, "idle_until_s": end})
    return rows


def idle_share(segments: list[dict], wall_s: float, slots: int) -> float:
    """Share of the slot-time (slots × wall) that no request used."""
    busy = sum(s["finish_s"] - s["start_s"] for s in segments)
    return max(0.0, 1 - busy / (slots * wall_s)) if wall_s > 0 else math.nan


def padding_tokens(requests: Sequence[TraceRequest], batch_size: int) -> pd.DataFrame:
    """What static batching computes for nothing, in token rows: prompt padding and finished rows' decode steps,
    against the useful rows (prompt + max_new_tokens − 1: the first token comes from the prefill)."""
    pad = ride = useful = 0
    for k in range(0, len(requests), batch_size):
        g = requests[k:k + batch_size]
        width, steps = max(len(r.prompt) for r in g), max(r.max_new_tokens for r in g)
        pad += sum(width - len(r.prompt) for r in g)
        ride += sum(steps - r.max_new_tokens for r in g)
        useful += sum(len(r.prompt) + r.max_new_tokens - 1 for r in g)
    return pd.DataFrame([{"prompt padding tokens": pad, "finished rows' decode steps": ride, "useful tokens": useful,
                          "wasted share": (pad + ride) / (pad + ride + useful)}])


def batching_frame(results: Sequence[ServeResult], baseline: ServeResult) -> pd.DataFrame:
    """One row per way of serving: totals, TTFT, tokens/s ÷ the baseline's (labelled) and the share of requests
    with the baseline's tokens."""
    rows = []
    for r in results:
        ttft = [t.first_token_s for t in r.timings]
        speedup = ratio(r.tokens_per_s, baseline.tokens_per_s)
        rows.append({"mode": r.mode, "requests": len(r.timings), "new tokens": r.new_tokens, "wall s": r.wall_s,
                     "tokens/s": r.tokens_per_s, "forward calls": r.forward_calls,
                     "median TTFT s": statistics.median(ttft) if ttft else math.nan,
                     "p90 TTFT s": percentile(ttft, 90) if ttft else math.nan,
                     "tokens/s ÷ one after another": speedup, "label": label(speedup),
                     "same tokens as one after another": same_tokens(r, baseline)})
    return pd.DataFrame(rows)


def same_tokens(a: ServeResult, b: ServeResult) -> float:
    """Share of requests whose generated tokens are identical in both results."""
    ta, tb = {t.rid: t.tokens for t in a.timings}, {t.rid: t.tokens for t in b.timings}
    return sum(ta[k] == tb.get(k) for k in ta) / len(ta) if ta else math.nan


def in_worker_thread(fn, *args, **kwargs):
    """Run fn(*args, **kwargs) in a fresh thread of its own and return its result.

    Why: transformers' continuous-batching manager computes in a background thread, and OpenMP keeps a team
    of threads per calling thread: once the main thread has run the model, other threads' teams oversubscribe
    the cores and GNU OpenMP sleeps at its barriers (measured: 2.3–2.8 s before, 3.1–3.6 s after). So every
    way compared runs in a fresh thread (a pool's kept thread would keep its team too)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"workshop-{getattr(fn, '__name__', 'run')}") as worker:
        return worker.submit(fn, *args, **kwargs).result()


def compare_batching(model, requests: Sequence[TraceRequest], batch_size: int, max_batch_tokens: int = 512,
                     rounds: int = 1) -> dict:
    """Warm-up, then the three ways on the same requests, `rounds` times interleaved, each its fastest round
    (a shared machine only slows a run down), each off the caller's thread (in_worker_thread)."""
    warm = requests[:2]
    in_worker_thread(serve_sequential, model, warm)
    in_worker_thread(serve_static, model, warm, batch_size)
    serve_continuous(model, warm, max_batch_tokens)
    runs: dict[str, list[ServeResult]] = {"sequential": [], "static": [], "continuous": []}
    for _ in range(rounds):
        runs["sequential"].append(in_worker_thread(serve_sequential, model, requests))
        runs["static"].append(in_worker_thread(serve_static, model, requests, batch_size))
        runs["continuous"].append(serve_continuous(model, requests, max_batch_tokens, concurrent=batch_size))
    return {k: min(v, key=lambda r: r.wall_s) for k, v in runs.items()}


def decode_on_gpu(model, gpu: str, context: int, batches: Sequence[int] = (1,), dtype: str = "bf16") -> pd.DataFrame:
    """A decode step at each batch in `batches` and at the largest batch whose KV cache fits beside the weights
    (helpers.formulas.memory's budget at vLLM's defaults), each at its roofline floor (kv_cache.gpu_floor): the
    weights' share of its bytes, the tokens/s the floor allows and their ratio to batch 1's."""
    from ..formulas.gpus import get_gpu
    from ..formulas.memory import kv_budget_bytes, kv_cache_bytes, runtime_reserve_bytes, weight_bytes
    from ..formulas.specs import get_spec
    from ..formulas.stepcost import decode_cost
    from .kv_cache import gpu_floor

    g, spec = get_gpu(gpu), get_spec(model)
    memory = g.usable_memory_bytes
    top = int(kv_budget_bytes(memory, weight_bytes(spec, dtype).bytes, runtime_reserve_bytes(memory))
              // kv_cache_bytes(spec, context, 1, dtype))
    rows, one = [], 1 / gpu_floor(spec, gpu, 1, context, dtype).seconds      # batch 1's tokens/s
    for b in sorted(b for b in {*batches, top} if 1 <= b <= top):
        c, s = decode_cost(spec, context, b, dtype), gpu_floor(spec, gpu, 1, context, dtype, b).seconds
        rows.append({"model": spec.name, "GPU": g.name, "context": context, "batch": b,
                     "weights' share of the bytes": c.weight_read_bytes / c.bytes, "step at its floor (ms)": 1e3 * s,
                     "tokens/s at the floor": b / s, "÷ batch 1": ratio(b / s, one)})
    return pd.DataFrame(rows)


def chunks_on_gpu(model, gpu: str, prompt: int = 4096, chunk: int = 512, dtype: str = "bf16") -> pd.DataFrame:
    """A `prompt`-token prefill in one step, then in chunks of `chunk` tokens, each at its roofline floor
    (kv_cache.gpu_floor): how long each step holds the other requests' next token."""
    from ..formulas.gpus import get_gpu
    from ..formulas.specs import get_spec
    from .kv_cache import gpu_floor

    steps = [(0, prompt)] + [(s, min(chunk, prompt - s)) for s in range(0, prompt, chunk)]
    return pd.DataFrame([{"model": get_spec(model).name, "GPU": get_gpu(gpu).name,
                          "step": f"chunk {i}" if i else "whole prompt", "tokens": n, "after tokens": start,
                          "floor (ms)": 1e3 * f.seconds, "bound": f.bound}
                         for i, (start, n) in enumerate(steps) for f in [gpu_floor(model, gpu, n, start, dtype)]])
