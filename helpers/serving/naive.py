"""Serving N requests two ways on a loaded model (notebook 01's third pain point): one after another, as a
naive local server does, then together in one real static batch, with when each request started, got its
first token and finished."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Sequence

from ..formulas.regime import ratio
from ..measure.hardware import free_memory, is_out_of_memory, synchronize
from ..measure.timing import prefill, timed_generate
from .traces import TraceRequest


def make_requests(n: int, prompt_range: tuple[int, int], new_tokens_range: tuple[int, int], vocab: int = 32000,
                  seed: int = 0) -> list[TraceRequest]:
    """n requests with prompt and output lengths spread evenly over the ranges (shuffled, fixed seed),
    all arriving at time 0."""
    import random

    rng, lengths = random.Random(seed), []
    for lo, hi in (prompt_range, new_tokens_range):
        lengths.append([round(lo + (hi - lo) * i / max(1, n - 1)) for i in range(n)])
        rng.shuffle(lengths[-1])
    return [TraceRequest(i, tuple(rng.randrange(3, vocab) for _ in range(p)), o) for i, (p, o) in enumerate(zip(*lengths))]


@dataclass
class RequestTiming:
    """When one request got a batch slot, its first token and its last, and its output; seconds after the run
    began, when every request had arrived unless `arrival_s` says later."""

    rid: int
    prompt_tokens: int
    new_tokens: int
    start_s: float
    first_token_s: float
    finish_s: float
    tokens: list[int] = field(default_factory=list, repr=False)
    arrival_s: float = 0.0


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
        """New tokens ÷ wall time (inf over a wall time of 0, as a timer that saw nothing gives: regime.ratio)."""
        return ratio(self.new_tokens, self.wall_s)


class _ForwardCounter:
    """Counts the model's forward calls (a forward pre-hook), to show what 'batched' means."""

    def __init__(self, model):
        self.calls = 0
        self.close = model.register_forward_pre_hook(self._hook).remove

    def _hook(self, *_):
        self.calls += 1


def serve_sequential(model, requests: Sequence[TraceRequest], device: str | None = None) -> ServeResult:
    """Serve the requests one after another, as a naive local server does."""
    import torch

    device = device or str(next(model.parameters()).device)
    counter = _ForwardCounter(model)
    timings = []
    try:
        synchronize(device)
        t0 = time.perf_counter()
        for r in requests:               # each request through the one greedy loop (timed_generate)
            start = time.perf_counter() - t0
            g = timed_generate(model, torch.tensor([r.prompt], device=device), r.max_new_tokens, device)
            timings.append(RequestTiming(r.rid, len(r.prompt), r.max_new_tokens, start, start + g.ttft_s,
                                         time.perf_counter() - t0, g.token_ids[0]))
        wall = time.perf_counter() - t0
    finally:
        counter.close()
    return ServeResult("one after another", timings, wall, counter.calls)


def serve_batched(model, requests: Sequence[TraceRequest], device: str | None = None, pad_id: int = 0) -> ServeResult:
    """Serve the requests together in one static batch: left-padded, an attention mask hiding the padding,
    positions counted from each prompt's first real token, one forward per step for all; a finished row
    rides along until the longest is done."""
    import torch

    device = device or str(next(model.parameters()).device)
    n, width = len(requests), max(len(r.prompt) for r in requests)
    ids = torch.tensor([[pad_id] * (width - len(r.prompt)) + list(r.prompt) for r in requests], device=device)
    mask = torch.tensor([[0] * (width - len(r.prompt)) + [1] * len(r.prompt) for r in requests], device=device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    want = [r.max_new_tokens for r in requests]
    out: list[list[int]] = [[] for _ in requests]
    first, finish = [0.0] * n, [0.0] * n
    counter = _ForwardCounter(model)
    try:
        synchronize(device)
        t0 = time.perf_counter()
        with torch.inference_mode():
            nxt, cache = prefill(model, ids, attention_mask=mask, position_ids=pos)
            pos = pos[:, -1:]
            for step in range(max(want)):
                if step:
                    mask, pos = torch.cat([mask, mask.new_ones((n, 1))], dim=1), pos + 1
                    logits = model(input_ids=nxt, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True).logits
                    nxt = logits[:, -1, :].argmax(dim=-1, keepdim=True)
                toks = nxt[:, 0].tolist()  # .tolist() waits for the device
                now = time.perf_counter() - t0
                for i, tok in enumerate(toks):
                    if len(out[i]) < want[i]:
                        out[i].append(tok)
                        first[i] = first[i] or now
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


@dataclass(frozen=True)
class LatencyCost:
    """What one serving mode costs each request, and its throughput."""

    mode: str
    median_ttft_ms: float            # arrival to first token, waiting included
    median_prefill_ms: float         # the prefill that produced the first token
    median_decode_step_ms: float     # NaN when no request made two tokens
    tokens_per_s: float


def latency_cost(comparison: ServingComparison) -> list[LatencyCost]:
    """Per mode that ran: median TTFT (arrival to first token), the prefill that made it, the decode step
    (finish − first token) ÷ (new tokens − 1) over requests with ≥ 2 tokens, and tokens/s."""
    rows = []
    for res in comparison.results:
        steps = [(t.finish_s - t.first_token_s) / (t.new_tokens - 1) for t in res.timings if t.new_tokens > 1]
        rows.append(LatencyCost(res.mode, statistics.median(t.first_token_s for t in res.timings) * 1e3,
                                statistics.median(t.first_token_s - t.start_s for t in res.timings) * 1e3,
                                statistics.median(steps) * 1e3 if steps else float("nan"), res.tokens_per_s))
    return rows


def compare_serving(model, requests: Sequence[TraceRequest], device: str) -> ServingComparison:
    """A short untimed warm-up, then the requests one after another and together; running out of memory
    is recorded (the other mode's result kept), not raised."""
    out: dict[str, ServeResult | None] = {"sequential": None, "batched": None}
    message = None
    for mode, fn in (("warm-up", serve_batched), ("sequential", serve_sequential), ("batched", serve_batched)):
        try:
            out[mode] = fn(model, requests[:2] if mode == "warm-up" else requests, device)
            continue
        except Exception as exc:  # noqa: BLE001 - out of memory is a result, anything else re-raises
            if not is_out_of_memory(exc):
                raise
            message = f"{mode}: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
        free_memory(device)                  # outside the except: its traceback no longer holds the tensors
    return ServingComparison(out["sequential"], out["batched"], message)
