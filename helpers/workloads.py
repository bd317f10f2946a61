"""The pain points of serving an LLM, measured: sweeps over a loaded model (helpers.models.Loaded).

- memory_growth: the KV cache's measured bytes (and on CUDA the allocator's peak) as the sequence grows,
  beside the formula (helpers.memory.kv_cache_bytes);
- ttft_sweep + fit_growth: time to first token against prompt length, with the growth law fitted;
- serve_sequential / serve_batched: N requests one after another, then the same N in one real batch
  (left-padded, attention-masked, one forward per step for all of them), with a per-request timeline;
- itl_sweep: inter-token latency (one decode step reusing the cache) as the context grows;
- users_sweep: concurrent sequences at a fixed context until the device runs out of memory — the
  out-of-memory point is a result, marked in the table, not a crash.

Sizes come from sweep_sizes(profile, device): small and fast for the tiny model on a CPU, the big
ranges for Mistral 7B on a GPU. Every sweep stops at an out-of-memory error and records where.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Sequence

from .hardware import allocated, free_memory, is_out_of_memory, peak_allocated, reset_peak, synchronize
from .memory import kv_cache_bytes, measured_cache_bytes
from .timing import Stats, measure, timed_generate


# ============================================================================ sizes

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
    efficiency_sizes: tuple[str, ...]    # model sizes built for it (helpers.roofline.SIZE_OVERRIDES)

    def to_dict(self) -> dict:
        return asdict(self)


def _doubling(lo: int, hi: int) -> tuple[int, ...]:
    out, n = [], lo
    while n <= hi:
        out.append(n)
        n *= 2
    return tuple(out)


BIG_GPU_FREE_BYTES = 40 * 10**9  # free memory after loading from which the full GPU sizes are used


def sweep_sizes(profile: str, device: str, free_bytes: int | None = None) -> SweepSizes:
    """Sweep sizes for a profile on a device.

    tiny (any device): 16 … 2,048 tokens, 8 short requests — each notebook in well under a minute
    on two CPU cores. A 7B model on CUDA with ≥ 40 GB free after loading (A100/H100/H200): 128 … 16k
    tokens, and a users sweep that doubles the batch until the GPU runs out of memory, all three
    notebooks in a few minutes. On a smaller GPU (a 16–24 GB card holds little beside 14.5 GB of
    weights): up to 4k tokens; whatever still does not fit ends its sweep as a marked out-of-memory
    point. A 7B model elsewhere (CPU/MPS): modest sizes, no out-of-memory hunt.
    """
    cuda = device.startswith("cuda")
    if profile == "tiny":
        return SweepSizes(
            memory_tokens=_doubling(16, 2048), ttft_tokens=_doubling(16, 2048), ttft_repeats=3,
            itl_contexts=(16, 64, 256, 1024, 2048), itl_steps=12,
            requests=8, prompt_range=(24, 160), new_tokens_range=(8, 40),
            users_context=256, users_batches=(1, 2, 4, 8, 16) if not cuda else _doubling(64, 2**17),
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
    free = None
    if loaded.device.startswith("cuda"):
        import torch

        free = int(torch.cuda.mem_get_info()[0])
    return sweep_sizes(loaded.profile, loaded.device, free)


# ============================================================================ building blocks

def prompt_ids(n: int, batch: int = 1, vocab: int = 32000, seed: int = 0, device: str = "cpu"):
    """A (batch, n) tensor of token ids drawn at random from the ordinary vocabulary (ids ≥ 3, after
    Mistral's <unk>, <s>, </s>), with a fixed seed: the content does not change the timing."""
    import torch

    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"prompt length must be a positive integer, got {n!r}")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    low = 3 if vocab > 3 else 0
    return torch.randint(low, vocab, (batch, n), generator=gen).to(device)


def new_cache(model):
    """A fresh transformers DynamicCache for a model (sliding-window layers honoured)."""
    from transformers import DynamicCache

    return DynamicCache(config=model.config)


def prefill(model, ids, cache=None, attention_mask=None, position_ids=None):
    """One prefill forward into a DynamicCache; returns (next token ids (batch, 1), cache).

    Only the last position's logits are computed (logits_to_keep=1), as transformers' generate does.
    """
    import torch

    cache = new_cache(model) if cache is None else cache
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=attention_mask, position_ids=position_ids, cache=cache,
                    use_cache=True, logits_to_keep=1)
    return out.logits[:, -1, :].argmax(dim=-1, keepdim=True), cache


@dataclass
class SweepResult:
    """Rows of a sweep (dicts) and, when the device ran out of memory, the point where it did."""

    rows: list[dict]
    oom_at: Any = None
    oom_message: str | None = None

    def frame(self):
        import pandas as pd

        df = pd.DataFrame(self.rows)
        df.attrs["oom_at"] = self.oom_at
        return df


def guarded_sweep(points: Iterable, run_point: Callable[[Any], dict], device: str, key: str,
                  desc: str | None = None) -> SweepResult:
    """Run run_point(p) for each point in order; an out-of-memory error ends the sweep with that point
    recorded as {key: p, "oom": True} and the device's cached memory returned. Other errors propagate."""
    from tqdm.auto import tqdm

    rows: list[dict] = []
    oom_at, message = None, None
    points = list(points)
    for p in tqdm(points, desc=desc, leave=False, disable=desc is None):
        failed = False
        try:
            rows.append({key: p, **run_point(p), "oom": False})
        except Exception as exc:  # noqa: BLE001 - only out-of-memory is a result; the rest re-raise
            if not is_out_of_memory(exc):
                raise
            failed, message = True, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
        if failed:  # outside the except block, so the traceback no longer pins the tensors
            free_memory(device)
            oom_at = p
            rows.append({key: p, "oom": True})
            break
    return SweepResult(rows, oom_at, message)


# ============================================================================ 1. memory grows with tokens

def _window_slots(spec) -> int | None:
    return spec.sliding_window - 1 if spec.sliding_window else None


def memory_growth(loaded, lengths: Sequence[int]):
    """The cache's measured bytes after a prefill of n tokens (batch 1), for each n, beside the formula
    (helpers.memory.kv_cache_bytes, sliding layers keeping window − 1 tokens as transformers'
    DynamicCache does); on CUDA also the allocator's peak above the weights (cache + activations)."""
    model, dev, spec = loaded.model, loaded.device, loaded.spec

    def point(n: int) -> dict:
        ids = prompt_ids(n, vocab=model.config.vocab_size, device=dev)
        reset_peak(dev)
        base = allocated(dev)
        _, cache = prefill(model, ids)
        synchronize(dev)
        peak = peak_allocated(dev)
        row = {"cache_bytes": measured_cache_bytes(cache),
               "formula_bytes": kv_cache_bytes(spec, n, 1, loaded.dtype, window_slots=_window_slots(spec)),
               "peak_above_weights_bytes": (peak - base) if peak is not None else None}
        del cache
        return row

    return guarded_sweep(lengths, point, dev, "tokens", "memory").frame()


def memory_figure(df, loaded, spec=None, dtype: str | None = None):
    """Measured cache bytes (points) and the formula (line) against tokens; CUDA peak when measured."""
    from . import plots

    spec = spec or loaded.spec
    dtype = dtype or loaded.dtype
    ok = df[~df["oom"]]
    fig, ax = plots.figure(width=7, height=4)
    if ok.empty:
        return _nothing_ran(fig, ax, df, "tokens", loaded)
    xs = list(range(int(ok["tokens"].min()), int(ok["tokens"].max()) + 1, max(1, int(ok["tokens"].max()) // 200)))
    line = [kv_cache_bytes(spec, x, 1, dtype, window_slots=_window_slots(spec)) / 2**20 for x in xs]
    ax.plot(xs, line, color="black", lw=1, label="formula: tokens × 2 × layers × kv_heads × head_dim × bytes")
    ax.scatter(ok["tokens"], ok["cache_bytes"] / 2**20, color="tab:blue", zorder=3, label="measured cache tensors")
    if ok["peak_above_weights_bytes"].notna().any():
        ax.scatter(ok["tokens"], ok["peak_above_weights_bytes"] / 2**20, color="tab:red", marker="x",
                   label="CUDA allocator peak above the weights")
    _mark_oom(ax, df, "tokens")
    ax.set_xlabel("tokens in the sequence")
    ax.set_ylabel("MiB")
    ax.set_title("Memory grows with every token")
    ax.legend(fontsize=8)
    return plots.finish(fig, loaded)


def _nothing_ran(fig, ax, df, key: str, source):
    """The figure of a sweep whose very first point ran out of memory."""
    from . import plots

    first = df[key].iloc[0] if len(df) else "?"
    ax.text(0.5, 0.5, f"out of memory at the first point ({key} = {first:,})", ha="center", va="center",
            transform=ax.transAxes, color="tab:red")
    ax.set_axis_off()
    return plots.finish(fig, source)


def _mark_oom(ax, df, key: str) -> None:
    bad = df[df["oom"]]
    for x in bad[key]:
        ax.axvline(x, color="tab:red", ls="--", lw=1)
        ax.annotate(f"out of memory at {x:,}", (x, 0.95), xycoords=("data", "axes fraction"), color="tab:red",
                    fontsize=8, ha="right", rotation=90, va="top")


# ============================================================================ 2. TTFT grows with context

def ttft_sweep(loaded, lengths: Sequence[int], repeats: int = 3):
    """Time to first token (a prefill into a fresh DynamicCache plus the first token's argmax) for each
    prompt length: one untimed warm-up, then the median and p90 of `repeats` runs."""
    model, dev = loaded.model, loaded.device

    def point(n: int) -> dict:
        ids = prompt_ids(n, vocab=model.config.vocab_size, device=dev)
        stats = measure(lambda: prefill(model, ids), dev, warmup=1, repeats=repeats)
        return {"ttft_s": stats.median, "ttft_p90_s": stats.p90, "ttft_min_s": stats.min,
                "tokens_per_s": n / stats.median}

    return guarded_sweep(lengths, point, dev, "tokens", "TTFT").frame()


@dataclass(frozen=True)
class GrowthFit:
    """t(n) = a + b·n + c·n², fitted with non-negative coefficients, and its local growth exponent."""

    a: float
    b: float
    c: float
    exponent: float        # local exponent at the largest length: d ln t / d ln n of the fitted law
    r2: float              # of log t against log t̂
    n_max: int

    def predict(self, n: float) -> float:
        return self.a + self.b * n + self.c * n * n

    @property
    def quadratic_share(self) -> float:
        """Share of the fitted time at the largest length that the n² term explains."""
        t = self.predict(self.n_max)
        return self.c * self.n_max**2 / t if t > 0 else 0.0

    def describe(self, what: str = "TTFT", unit: float = 1e-3, unit_name: str = "ms") -> str:
        n = self.n_max
        doubling = self.predict(n) / self.predict(n / 2) if self.predict(n / 2) > 0 else float("nan")
        return (f"{what}(n) ≈ {self.a / unit:,.3g} {unit_name} + {self.b / unit:,.3g} {unit_name} × n"
                f" + {self.c / unit:,.3g} {unit_name} × n²  (n = prompt tokens). Going from {n // 2:,} to {n:,} "
                f"tokens multiplies it by {doubling:,.2f}; at {n:,} tokens it grows like n^{self.exponent:,.2f} "
                f"(1 = linear, 2 = quadratic) and the n² term (attention) is "
                f"{100 * self.quadratic_share:,.0f} % of it.")


def fit_growth(ns: Sequence[float], ts: Sequence[float]) -> GrowthFit:
    """Fit t = a + b·n + c·n² by least squares on relative error (rows weighted by 1/t, so short and
    long prompts count alike), with a, b, c ≥ 0: every subset of the three terms is solved and the
    best fit whose coefficients are all non-negative kept. Also the fitted law's local exponent at
    the largest length n, p = (b·n + 2c·n²) / (a + b·n + c·n²): t grows like n^p there (0 = flat,
    1 = linear, 2 = quadratic)."""
    import itertools

    import numpy as np

    n = np.asarray(ns, dtype=float)
    t = np.asarray(ts, dtype=float)
    if n.shape != t.shape or len(n) < 3:
        raise ValueError(f"need at least 3 (length, time) pairs of equal count, got {len(n)} and {len(t)}")
    if (n <= 0).any() or (t <= 0).any():
        raise ValueError("lengths and times must be positive")
    basis = np.stack([np.ones_like(n), n, n * n], axis=1)
    w = 1 / t
    best, best_sse = np.zeros(3), math.inf
    for k in (1, 2, 3):
        for cols in itertools.combinations(range(3), k):
            a = basis[:, cols] * w[:, None]
            coef, *_ = np.linalg.lstsq(a, t * w, rcond=None)
            if (coef < 0).any():
                continue
            full = np.zeros(3)
            full[list(cols)] = coef
            sse = float(((((basis @ full) - t) * w) ** 2).sum())
            if sse < best_sse - 1e-15:
                best, best_sse = full, sse
    # R² on log scale (the fit minimises relative error, whose targets are all 1)
    pred = basis @ best
    log_t, log_p = np.log(t), np.log(np.maximum(pred, 1e-30))
    ss_tot = float(((log_t - log_t.mean()) ** 2).sum())
    r2 = 1 - float(((log_t - log_p) ** 2).sum()) / ss_tot if ss_tot > 0 else float("nan")
    a, b, c = (float(x) for x in best)
    top = float(n.max())
    total = a + b * top + c * top * top
    exponent = (b * top + 2 * c * top * top) / total if total > 0 else float("nan")
    return GrowthFit(a, b, c, exponent, r2, int(top))


def fit_or_none(df, x: str = "tokens", y: str = "ttft_s") -> GrowthFit | None:
    """fit_growth over a sweep's points that ran, or None when fewer than three did."""
    ok = df[~df["oom"]]
    return fit_growth(ok[x], ok[y]) if len(ok) >= 3 else None


def ttft_figure(df, fit: GrowthFit | None, loaded, what: str = "time to first token"):
    """TTFT medians (with p90 bars) against prompt length, the fitted law through them; log–log."""
    import numpy as np

    from . import plots

    ok = df[~df["oom"]]
    fig, ax = plots.figure(width=7, height=4)
    if ok.empty:
        return _nothing_ran(fig, ax, df, "tokens", loaded)
    ax.errorbar(ok["tokens"], ok["ttft_s"] * 1e3, yerr=[0 * ok["ttft_s"], (ok["ttft_p90_s"] - ok["ttft_s"]) * 1e3],
                fmt="o", color="tab:orange", label="measured (median, bar to p90)")
    if fit is not None:
        xs = np.geomspace(ok["tokens"].min(), ok["tokens"].max(), 100)
        ax.plot(xs, [fit.predict(x) * 1e3 for x in xs], color="black", lw=1,
                label=f"fit: a + b·n + c·n²  (grows like n^{fit.exponent:.2f} at {fit.n_max:,})")
    _mark_oom(ax, df, "tokens")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("prompt tokens")
    ax.set_ylabel("ms")
    ax.set_title(f"{what[0].upper() + what[1:]} grows with the prompt")
    ax.legend(fontsize=8)
    return plots.finish(fig, loaded)


# ============================================================================ 3. throughput: one after another vs together

@dataclass(frozen=True)
class Request:
    rid: int
    prompt: tuple[int, ...]
    max_new_tokens: int


def make_requests(n: int, prompt_range: tuple[int, int], new_tokens_range: tuple[int, int], vocab: int = 32000,
                  seed: int = 0) -> list[Request]:
    """n requests with prompt and output lengths spread evenly over the ranges (shuffled, fixed seed),
    all arriving at time 0."""
    import random

    if n < 1:
        raise ValueError(f"need at least one request, got {n}")
    rng = random.Random(seed)

    def spread(lo: int, hi: int) -> list[int]:
        vals = [round(lo + (hi - lo) * i / max(1, n - 1)) for i in range(n)]
        rng.shuffle(vals)
        return vals

    prompts, outs = spread(*prompt_range), spread(*new_tokens_range)
    return [Request(i, tuple(rng.randrange(3, vocab) for _ in range(p)), o) for i, (p, o) in enumerate(zip(prompts, outs))]


@dataclass
class RequestTiming:
    """When one request started being served, got its first token and finished (seconds after all
    requests arrived at 0), and its output."""

    rid: int
    prompt_tokens: int
    new_tokens: int
    start_s: float
    first_token_s: float
    finish_s: float
    tokens: list[int] = field(default_factory=list, repr=False)


@dataclass
class ServeResult:
    mode: str                       # "one after another" or "together (one batch)"
    timings: list[RequestTiming]
    wall_s: float
    forward_calls: int

    @property
    def new_tokens(self) -> int:
        return sum(t.new_tokens for t in self.timings)

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.wall_s

    def frame(self):
        import pandas as pd

        rows = [{"mode": self.mode, "request": t.rid, "prompt tokens": t.prompt_tokens, "new tokens": t.new_tokens,
                 "start s": t.start_s, "first token s (TTFT)": t.first_token_s, "finish s": t.finish_s}
                for t in self.timings]
        return pd.DataFrame(rows)

    def summary(self) -> dict:
        import statistics

        return {"mode": self.mode, "requests": len(self.timings), "new tokens": self.new_tokens,
                "wall s": self.wall_s, "tokens/s": self.tokens_per_s, "forward calls": self.forward_calls,
                "median TTFT s": statistics.median(t.first_token_s for t in self.timings),
                "last finish s": max(t.finish_s for t in self.timings)}


class _ForwardCounter:
    """Counts the model's forward calls (a forward pre-hook), to show what 'batched' means."""

    def __init__(self, model):
        self.calls = 0
        self._h = model.register_forward_pre_hook(self._hook)

    def _hook(self, *_):
        self.calls += 1

    def close(self) -> None:
        self._h.remove()


def serve_sequential(model, requests: Sequence[Request], device: str | None = None) -> ServeResult:
    """Serve the requests one after another, as a naive local server does: each request's prefill,
    then its decode steps (one token per step, reusing a DynamicCache), then the next request."""
    import torch

    device = device or str(next(model.parameters()).device)
    counter = _ForwardCounter(model)
    timings = []
    try:
        synchronize(device)
        t0 = time.perf_counter()
        with torch.inference_mode():
            for r in requests:
                start = time.perf_counter() - t0
                ids = torch.tensor([r.prompt], device=device)
                nxt, cache = prefill(model, ids)
                synchronize(device)
                first = time.perf_counter() - t0
                out = [int(nxt)]
                for _ in range(r.max_new_tokens - 1):
                    logits = model(input_ids=nxt, cache=cache, use_cache=True).logits
                    nxt = logits[:, -1, :].argmax(dim=-1, keepdim=True)
                    out.append(int(nxt))
                synchronize(device)
                timings.append(RequestTiming(r.rid, len(r.prompt), r.max_new_tokens, start, first,
                                             time.perf_counter() - t0, out))
                del cache
        wall = time.perf_counter() - t0
    finally:
        counter.close()
    return ServeResult("one after another", timings, wall, counter.calls)


def serve_batched(model, requests: Sequence[Request], device: str | None = None, pad_id: int = 0) -> ServeResult:
    """Serve the requests together in one static batch: prompts left-padded to the longest, an attention
    mask hiding the padding, position ids counted from each prompt's first real token; one prefill
    forward for all, then one forward per decode step for all, reusing one DynamicCache. A request
    that has its tokens stops counting, but its row rides along until the longest is done (a static
    batch; continuous batching would admit a new request into the free slot)."""
    import torch

    device = device or str(next(model.parameters()).device)
    n = len(requests)
    width = max(len(r.prompt) for r in requests)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    for i, r in enumerate(requests):
        ids[i, width - len(r.prompt):] = torch.tensor(r.prompt)
        mask[i, width - len(r.prompt):] = 1
    ids, mask = ids.to(device), mask.to(device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    want = [r.max_new_tokens for r in requests]
    out: list[list[int]] = [[] for _ in requests]
    first = [0.0] * n
    finish = [0.0] * n
    counter = _ForwardCounter(model)
    try:
        synchronize(device)
        t0 = time.perf_counter()
        with torch.inference_mode():
            nxt, cache = prefill(model, ids, attention_mask=mask, position_ids=pos)
            synchronize(device)
            now = time.perf_counter() - t0
            for i, tok in enumerate(nxt[:, 0].tolist()):
                out[i].append(tok)
                first[i] = now
                if want[i] == 1:
                    finish[i] = now
            pos = pos[:, -1:]
            for _ in range(max(want) - 1):
                mask = torch.cat([mask, mask.new_ones((n, 1))], dim=1)
                pos = pos + 1
                logits = model(input_ids=nxt, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True).logits
                nxt = logits[:, -1, :].argmax(dim=-1, keepdim=True)
                toks = nxt[:, 0].tolist()  # .tolist() waits for the device
                now = time.perf_counter() - t0
                for i, tok in enumerate(toks):
                    if len(out[i]) < want[i]:
                        out[i].append(tok)
                        if len(out[i]) == want[i]:
                            finish[i] = now
        wall = time.perf_counter() - t0
        del cache
    finally:
        counter.close()
    timings = [RequestTiming(r.rid, len(r.prompt), want[i], 0.0, first[i], finish[i], out[i])
               for i, r in enumerate(requests)]
    return ServeResult("together (one batch)", timings, wall, counter.calls)


@dataclass
class ServingComparison:
    """Both serving modes on the same requests; a mode that ran out of memory is None, with the message."""

    sequential: ServeResult | None
    batched: ServeResult | None
    oom_message: str | None = None

    @property
    def results(self) -> list[ServeResult]:
        return [r for r in (self.sequential, self.batched) if r is not None]


def compare_serving(model, requests: Sequence[Request], device: str) -> ServingComparison:
    """A short untimed warm-up, then the requests one after another and together; running out of memory
    in either mode is recorded (the other mode's result is kept), not raised."""
    out: dict[str, ServeResult | None] = {"sequential": None, "batched": None}
    message = None
    for mode, fn in (("warm-up", serve_batched), ("sequential", serve_sequential), ("batched", serve_batched)):
        failed = False
        try:
            res = fn(model, requests[:2] if mode == "warm-up" else requests, device)
            if mode != "warm-up":
                out[mode] = res
        except Exception as exc:  # noqa: BLE001 - out of memory is a result, anything else re-raises
            if not is_out_of_memory(exc):
                raise
            failed = True
            message = f"{mode}: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
        if failed:
            free_memory(device)
    return ServingComparison(out["sequential"], out["batched"], message)


def timeline_figure(results: Sequence[ServeResult], source: Any):
    """A Gantt chart per serving mode: for each request, waiting (grey), prefill up to its first token
    (orange), decoding up to its last token (blue), and in a static batch the time its row is held
    without producing anything until the batch ends (hatched), on one time axis."""
    from . import plots

    if not results:
        fig, ax = plots.figure(width=8, height=2)
        ax.text(0.5, 0.5, "neither serving mode ran (out of memory)", ha="center", va="center", color="tab:red")
        ax.set_axis_off()
        return plots.finish(fig, source)
    fig, axes = plots.figure(nrows=len(results), width=8, height=2.4, sharex=True, squeeze=False)
    for ax, res in zip(axes[:, 0], results):
        batch_end = max(t.finish_s for t in res.timings)
        together = len({t.start_s for t in res.timings}) == 1 and len(res.timings) > 1
        for k, t in enumerate(sorted(res.timings, key=lambda t: t.rid)):
            ax.barh(k, t.start_s, color="#e5e5e5", height=0.6)
            ax.barh(k, t.first_token_s - t.start_s, left=t.start_s, color="tab:orange", height=0.6)
            ax.barh(k, t.finish_s - t.first_token_s, left=t.first_token_s, color="tab:blue", height=0.6)
            if together and batch_end > t.finish_s:
                ax.barh(k, batch_end - t.finish_s, left=t.finish_s, color="white", hatch="////",
                        edgecolor="#9ab", height=0.6, lw=0)
        ax.set_yticks(range(len(res.timings)), [f"req {t.rid}" for t in sorted(res.timings, key=lambda t: t.rid)],
                      fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"{res.mode}: {res.new_tokens} tokens in {res.wall_s:,.2f} s = {res.tokens_per_s:,.0f} tokens/s, "
                     f"{res.forward_calls} forward calls", fontsize=9)
    from matplotlib.patches import Patch

    fastest = min(range(len(results)), key=lambda i: results[i].wall_s)  # its panel has room on the right
    axes[fastest, 0].legend(handles=[Patch(color="#e5e5e5", label="waiting"),
                                     Patch(color="tab:orange", label="prefill → first token"),
                                     Patch(color="tab:blue", label="decode → last token"),
                                     Patch(facecolor="white", hatch="////", edgecolor="#9ab",
                                           label="row held, idle (static batch)")],
                            fontsize=7, loc="center right")
    axes[-1, 0].set_xlabel("seconds after all requests arrived")
    return plots.finish(fig, source)


# ============================================================================ 4. inter-token latency

def itl_sweep(loaded, contexts: Sequence[int], steps: int = 12):
    """Inter-token latency at each context: a prefill of `context` tokens, then `steps` greedy decode
    steps of one token each that reuse the real DynamicCache (helpers.timing.timed_generate);
    median and p90 of the steps. A short warm-up generation runs first."""
    model, dev = loaded.model, loaded.device
    timed_generate(model, prompt_ids(8, vocab=model.config.vocab_size, device=dev), 3, dev)  # warm-up

    def point(c: int) -> dict:
        g = timed_generate(model, prompt_ids(c, vocab=model.config.vocab_size, device=dev), steps + 1, dev)
        s = Stats(tuple(g.step_s))
        return {"itl_s": s.median, "itl_p90_s": s.p90, "ttft_s": g.ttft_s}

    return guarded_sweep(contexts, point, dev, "context", "ITL").frame()


def itl_figure(df, loaded, floor_fn: Callable[[int], float] | None = None):
    """Decode step time (median, p90 bar) against context; optionally the memory-bound floor as a line."""
    from . import plots

    ok = df[~df["oom"]]
    fig, ax = plots.figure(width=7, height=4)
    if ok.empty:
        return _nothing_ran(fig, ax, df, "context", loaded)
    ax.errorbar(ok["context"], ok["itl_s"] * 1e3, yerr=[0 * ok["itl_s"], (ok["itl_p90_s"] - ok["itl_s"]) * 1e3],
                fmt="o-", color="tab:blue", label="measured step (median, bar to p90)")
    if floor_fn is not None:
        ax.plot(ok["context"], [floor_fn(int(c)) * 1e3 for c in ok["context"]], color="black", ls="--", lw=1,
                label="memory-bound floor: (weights + KV) ÷ bandwidth")
    _mark_oom(ax, df, "context")
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("tokens already in the cache (context)")
    ax.set_ylabel("ms per token")
    ax.set_title("Inter-token latency as the context grows")
    ax.legend(fontsize=8, loc="lower right")
    return plots.finish(fig, loaded)


# ============================================================================ decode at growing batch

def decode_batch_sweep(loaded, context: int, batches: Sequence[int], steps: int = 8):
    """Decode step time for `batch` sequences of `context` tokens each, one token per sequence per step."""
    model, dev = loaded.model, loaded.device

    def point(b: int) -> dict:
        g = timed_generate(model, prompt_ids(context, batch=b, vocab=model.config.vocab_size, device=dev),
                           steps + 1, dev)
        s = Stats(tuple(g.step_s))
        return {"step_s": s.median, "step_p90_s": s.p90, "tokens_per_s": b / s.median}

    return guarded_sweep(batches, point, dev, "batch", "decode batch").frame()


# ============================================================================ 5. out of memory is a result

def users_sweep(loaded, context: int, batches: Sequence[int]):
    """Concurrent sequences of `context` tokens: for each batch, a prefill of all of them into one
    DynamicCache and one decode step; the cache's bytes, the formula, and on CUDA the allocator's
    peak above the weights. On a GPU the batches grow until the device runs out of memory: that
    point ends the sweep, marked (oom = True), and the memory is given back."""
    model, dev, spec = loaded.model, loaded.device, loaded.spec

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
                "formula_bytes": kv_cache_bytes(spec, context + 1, b, loaded.dtype, window_slots=_window_slots(spec)),
                "peak_above_weights_bytes": (peak - base) if peak is not None else None, "seconds": secs}

    return guarded_sweep(batches, point, dev, "batch", "users").frame()


def users_figure(df, loaded, total_memory: int | None = None, weight_bytes: int | None = None):
    """Cache bytes (measured and formula) and, on CUDA, the allocator's peak against concurrent sequences,
    log–log; the device's memory less the weights as a line; the out-of-memory point marked."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    from . import plots

    ok = df[~df["oom"]]
    if ok.empty:
        fig, ax = plots.figure(width=7, height=4)
        return _nothing_ran(fig, ax, df, "batch", loaded)
    top = max([float(ok["cache_bytes"].max())] + ([float(total_memory)] if total_memory else []))
    unit, name = (1e9, "GB") if top >= 1e9 else (1e6, "MB")
    fig, ax = plots.figure(width=7, height=4)
    ax.plot(ok["batch"], ok["formula_bytes"] / unit, color="black", lw=1, label="formula: batch × context × KV per token")
    ax.scatter(ok["batch"], ok["cache_bytes"] / unit, color="tab:blue", zorder=3, label="KV cache (measured)")
    if ok["peak_above_weights_bytes"].notna().any():
        ax.scatter(ok["batch"], ok["peak_above_weights_bytes"].astype(float) / unit, marker="x", color="tab:red",
                   label="allocator peak above the weights (cache + activations)")
    if total_memory and weight_bytes:
        ax.axhline((total_memory - weight_bytes) / unit, color="black", lw=1, ls=":", label="device memory − weights")
    _mark_oom(ax, df, "batch")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(list(df["batch"]), [f"{int(b):,}" for b in df["batch"]], fontsize=8)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("concurrent sequences (batch)")
    ax.set_ylabel(name)
    ax.set_title("How many users fit?")
    ax.legend(fontsize=8)
    return plots.finish(fig, loaded)
