"""Disaggregated prefill and decode against one shared pool: a small discrete-event simulation,
deterministic (no randomness inside; the requests come from a seeded trace).

Two ways to serve the same requests on G GPUs, each GPU one engine:
- **shared** (colocated, continuous batching, prefill first as vLLM's default scheduler does): a GPU
  starts a step; if a request waits and its batch has room it runs that request's prefill (its
  running sequences wait: the decode stall that lengthens their inter-token latency), else one decode
  step for all its running sequences;
- **split** (disaggregated, DistServe: Zhong et al. 2024, arXiv:2401.09670; Splitwise: Patel et al.
  2024, arXiv:2311.18677): P GPUs only prefill, one request at a time, first come first served;
  each request's KV cache then crosses the link to a decode GPU (helpers.parallel.collectives.send_s
  of its bytes, helpers.formulas.memory.kv_cache_bytes; links taken as uncontended), where it joins that
  GPU's batch at the next step; the G−P decode GPUs never prefill.

The prefill makes the first output token. Per request: TTFT = first token − arrival; ITL = (last −
first token) ÷ (output tokens − 1). A request **meets the SLO** when TTFT ≤ ttft_slo and ITL ≤ itl_slo;
**goodput** = requests meeting it ÷ the time from the first arrival to the last completion (DistServe's
measure of what a deployment is worth: throughput that meets the SLO).

Step costs: ``PlannerCosts`` asks helpers.capacity.planner.plan (the one owner of the decode step
and prefill floors, at its efficiency) — decode step at the batch and its mean context (rounded up to
`bucket` tokens, so that the plans can be cached) — and ``FixedCosts`` gives constant costs for
cases worked by hand.
"""
from __future__ import annotations

import functools
import heapq
import math
import statistics
from collections import deque
from dataclasses import dataclass, field, replace

from ..capacity.planner import DEFAULT_EFFICIENCY, plan
from .. import checks
from ..formulas.memory import kv_cache_bytes
from ..formulas.specs import get_spec
from ..formulas.stats import percentile
from ..formulas.verdicts import CHANGE_MARGIN, Verdict, change_verdict, change_words, share, speed
from .collectives import send_s
from .links import Link


@dataclass(frozen=True)
class Request:
    rid: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class FixedCosts:
    """Constant costs for hand-worked cases: prefill = per-token × prompt; decode step = step_s +
    per_sequence_s × batch; KV = bytes per token × tokens."""

    prefill_per_token_s: float
    decode_step_s: float
    kv_bytes_per_token: float = 0.0
    per_sequence_s: float = 0.0

    def prefill_s(self, prompt: int) -> float:
        return self.prefill_per_token_s * prompt

    def decode_s(self, batch: int, context: float) -> float:
        return self.decode_step_s + self.per_sequence_s * batch

    def kv_bytes(self, tokens: int) -> float:
        return self.kv_bytes_per_token * tokens


class PlannerCosts:
    """Step costs of `model` on one `gpu` from the capacity planner (see the module docstring)."""

    def __init__(self, model, gpu, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                 efficiency: float = DEFAULT_EFFICIENCY, bucket: int = 256):
        self.spec = get_spec(model)
        self.gpu, self.weight_dtype, self.kv_dtype = gpu, weight_dtype, kv_dtype
        self.efficiency, self.bucket = efficiency, bucket
        self._plan = functools.lru_cache(maxsize=4096)(self._plan_uncached)

    def _plan_uncached(self, context: int, batch: int, prompt: int | None):
        p = plan(self.spec, self.gpu, 1, self.weight_dtype, self.kv_dtype, context, batch, prompt_tokens=prompt,
                 efficiency=self.efficiency)
        if not p.fits:
            raise ValueError(f"the simulation's batch does not fit: {p.reason}; lower max_batch")
        return p

    def prefill_s(self, prompt: int) -> float:
        return self._plan(prompt, 1, prompt).prefill_s

    def decode_s(self, batch: int, context: float) -> float:
        c = max(self.bucket, int(math.ceil(context / self.bucket)) * self.bucket)
        return self._plan(c, batch, None).step_s

    def kv_bytes(self, tokens: int) -> float:
        return kv_cache_bytes(self.spec, tokens, 1, self.kv_dtype)


@dataclass
class _Seq:
    req: Request
    times: list = field(default_factory=list)   # each output token's time
    done_s: float | None = None

    @property
    def context(self) -> int:
        return self.req.prompt_tokens + len(self.times)


def _decode_step(running: list, t: float, costs, finished: list) -> float:
    dt = costs.decode_s(len(running), statistics.fmean(s.context for s in running))
    for s in running:
        s.times.append(t + dt)
    for s in [s for s in running if len(s.times) >= s.req.output_tokens]:
        s.done_s = t + dt
        running.remove(s)
        finished.append(s)
    return dt


def _prefill(s: _Seq, t: float, costs) -> float:
    dt = costs.prefill_s(s.req.prompt_tokens)
    s.times.append(t + dt)
    if s.req.output_tokens == 1:
        s.done_s = t + dt
    return dt


def _check(requests, gpus, max_batch):
    if not requests:
        raise ValueError("the simulation needs at least one request")
    checks.count(gpus, "gpus")
    checks.count(max_batch, "max_batch")
    for r in requests:
        if r.prompt_tokens < 1 or r.output_tokens < 1 or r.arrival_s < 0:
            raise ValueError(f"request {r.rid}: prompt and output tokens must be ≥ 1 and arrival ≥ 0, got {r}")
    return sorted(requests, key=lambda r: (r.arrival_s, r.rid))


def simulate_shared(requests, costs, gpus: int = 2, max_batch: int = 64) -> list[_Seq]:
    """Every GPU prefills and decodes (prefill first when a request waits and the batch has room)."""
    reqs = _check(requests, gpus, max_batch)
    arrivals, waiting, finished, order = deque(reqs), deque(), [], 0
    running = {g: [] for g in range(gpus)}
    heap = [(0.0, g, g) for g in range(gpus)]
    order = gpus
    while heap:
        t, _, g = heapq.heappop(heap)
        while arrivals and arrivals[0].arrival_s <= t:
            waiting.append(_Seq(arrivals.popleft()))
        if waiting and len(running[g]) < max_batch:
            s = waiting.popleft()
            dt = _prefill(s, t, costs)
            (finished if s.done_s is not None else running[g]).append(s)
        elif running[g]:
            dt = _decode_step(running[g], t, costs, finished)
        elif arrivals:
            dt = arrivals[0].arrival_s - t
        else:
            continue                          # nothing left for this GPU
        heapq.heappush(heap, (t + dt, order, g))
        order += 1
    return finished


def simulate_split(requests, costs, prefill_gpus: int = 1, decode_gpus: int = 1, link: Link | None = None,
                   max_batch: int = 64) -> list[_Seq]:
    """P GPUs prefill, D decode; each request's KV crosses `link` (None: free and instant)."""
    prefill_gpus = checks.count(prefill_gpus, "prefill GPUs")
    decode_gpus = checks.count(decode_gpus, "decode GPUs")
    reqs = _check(requests, prefill_gpus + decode_gpus, max_batch)
    arrivals, waiting, finished = deque(reqs), deque(), []
    ready: list = []                                  # (ready time, rid, seq)
    running = {g: [] for g in range(prefill_gpus, prefill_gpus + decode_gpus)}
    alive = {g: 0.0 for g in range(prefill_gpus)}     # prefill GPUs still working → their next time
    heap = [(0.0, g, g) for g in range(prefill_gpus + decode_gpus)]
    order = len(heap)
    while heap:
        t, _, g = heapq.heappop(heap)
        while arrivals and arrivals[0].arrival_s <= t:
            waiting.append(_Seq(arrivals.popleft()))
        if g < prefill_gpus:
            if waiting:
                s = waiting.popleft()
                dt = _prefill(s, t, costs)
                if s.done_s is not None:
                    finished.append(s)
                else:
                    move = send_s(costs.kv_bytes(s.req.prompt_tokens), link) if link is not None else 0.0
                    heapq.heappush(ready, (t + dt + move, s.req.rid, s))
            elif arrivals:
                dt = arrivals[0].arrival_s - t
            else:
                del alive[g]
                continue
            alive[g] = t + dt
        else:
            while ready and ready[0][0] <= t and len(running[g]) < max_batch:
                running[g].append(heapq.heappop(ready)[2])
            if running[g]:
                dt = _decode_step(running[g], t, costs, finished)
            else:
                later = [x for x in [ready[0][0] if ready else None, *alive.values()] if x is not None]
                if not later:
                    continue                  # no prefill GPU left and nothing in flight
                dt = max(0.0, min(later) - t)
        heapq.heappush(heap, (t + dt, order, g))
        order += 1
    return finished


@dataclass(frozen=True)
class Outcome:
    """One request of a finished simulation: its TTFT, mean ITL (None with one output token), when it
    finished, and whether it met both SLOs."""

    rid: int
    ttft_s: float
    itl_s: float | None
    done_s: float
    meets_slo: bool


@dataclass(frozen=True)
class Summary:
    """A finished simulation: TTFT and ITL percentiles (s), the share of requests meeting the SLO,
    goodput (requests meeting it per second) and the time from the first arrival to the last
    completion. From compare(), also which deployment ran ("shared × 4", "split 1 prefill + 3 decode")
    and its prefill GPUs (0 for the shared pool)."""

    requests: int
    ttft_p50_s: float | None
    ttft_p90_s: float | None
    itl_p50_s: float | None
    itl_p90_s: float | None
    slo_attainment: float
    goodput_rps: float
    makespan_s: float
    deployment: str = ""
    prefill_gpus: int = 0


def summarize(finished: list[_Seq], ttft_slo_s: float, itl_slo_s: float) -> Summary:
    """TTFT and ITL percentiles, SLO attainment and goodput of a finished simulation."""
    rows = per_request(finished, ttft_slo_s, itl_slo_s)
    ttft = sorted(r.ttft_s for r in rows)
    itl = sorted(r.itl_s for r in rows if r.itl_s is not None)
    start = min(s.req.arrival_s for s in finished)
    span = max(s.done_s for s in finished) - start
    met = sum(r.meets_slo for r in rows)

    def pct(xs, q):
        return percentile(xs, q) if xs else None

    return Summary(len(rows), pct(ttft, 50), pct(ttft, 90), pct(itl, 50), pct(itl, 90), met / len(rows),
                   met / span if span > 0 else float("inf"), span)


def per_request(finished: list[_Seq], ttft_slo_s: float, itl_slo_s: float) -> list[Outcome]:
    """Each finished request's Outcome, by request id."""
    out = []
    for s in sorted(finished, key=lambda s: s.req.rid):
        ttft = s.times[0] - s.req.arrival_s
        itl = (s.times[-1] - s.times[0]) / (len(s.times) - 1) if len(s.times) > 1 else None
        ok = ttft <= ttft_slo_s and (itl is None or itl <= itl_slo_s)
        out.append(Outcome(s.req.rid, ttft, itl, s.done_s, ok))
    return out


def compare(requests, costs, gpus: int, link: Link | None, ttft_slo_s: float, itl_slo_s: float,
            max_batch: int = 64) -> list[Summary]:
    """The shared pool of `gpus` against every split P prefill + (gpus − P) decode GPUs, one Summary each."""
    shared = summarize(simulate_shared(requests, costs, gpus, max_batch), ttft_slo_s, itl_slo_s)
    rows = [replace(shared, deployment=f"shared × {gpus}", prefill_gpus=0)]
    for p in range(1, gpus):
        split = summarize(simulate_split(requests, costs, p, gpus - p, link, max_batch), ttft_slo_s, itl_slo_s)
        rows.append(replace(split, deployment=f"split {p} prefill + {gpus - p} decode", prefill_gpus=p))
    return rows


# What split_verdict answers, in the order notebook 09's self-check offers them.
SPLIT_VERDICTS = ("pays", "about equal", "does not pay")


def split_verdict(rows: list[Summary], margin: float = CHANGE_MARGIN) -> str:
    """The rule: "pays" when the best split's goodput beats the shared pool's by more than `margin`
    (10 %, helpers.formulas.verdicts: the margin every comparison reads its ratio with), "does not pay"
    when it falls short by as much, else "about equal". rows: compare()'s, the shared pool first."""
    if len(rows) < 2:
        raise ValueError("split_verdict needs compare()'s rows: the shared pool and at least one split")
    best, shared = max(r.goodput_rps for r in rows[1:]), rows[0].goodput_rps
    if shared == 0:
        ratio = math.inf if best > 0 else 1.0
    else:
        ratio = best / shared
    pays, even, loses = SPLIT_VERDICTS
    return change_words(ratio, higher=pays, lower=loses, within=even, margin=margin)


def _best(rows: list[Summary]) -> Summary:
    return max(rows[1:], key=lambda r: r.goodput_rps)


def rate_reading(rate: float, rows: list[Summary]) -> Verdict:
    """One arrival rate's deployments read by split_verdict: the shared pool and the best split (by goodput),
    each's goodput, attainment and makespan."""
    best, shared = _best(rows), rows[0]
    return Verdict(f"at {rate:g} requests/s: shared goodput {shared.goodput_rps:.2f}/s (SLO met by "
                   f"{shared.slo_attainment:.0%}, makespan {shared.makespan_s:.2f} s), best split ({best.deployment}) "
                   f"{best.goodput_rps:.2f}/s ({best.slo_attainment:.0%}, {best.makespan_s:.2f} s) — splitting "
                   f"**{split_verdict(rows)}** on goodput", "sim.split",
                   {"rate": rate, "shared": shared.goodput_rps, "best": best.goodput_rps})


def disagreement(by_rate: dict[float, list[Summary]]) -> Verdict | None:
    """The highest rate where goodput and attainment read differently: split_verdict within the margin on
    goodput while the best split's attainment is higher than the shared pool's (change_verdict), and why —
    its longer makespan. None when they agree at every rate."""
    apart = [(r, rows) for r, rows in by_rate.items() if split_verdict(rows) != "pays"
             and change_verdict(_best(rows).slo_attainment / max(rows[0].slo_attainment, 1e-12)) == "higher"]
    if not apart:
        return None
    rate, rows = apart[-1]
    best, shared = _best(rows), rows[0]
    later = speed(best.makespan_s, shared.makespan_s, "sooner", "later", "as soon", "the shared pool")
    return Verdict(f"at {rate:g} requests/s the two figures disagree: the split meets the SLO for "
                   f"{best.slo_attainment:.0%} of requests against {shared.slo_attainment:.0%}, yet on goodput "
                   f"splitting reads **{split_verdict(rows)}** — it finishes {later.words} ({best.makespan_s:.2f} s "
                   f"against {shared.makespan_s:.2f} s), so its {round(best.slo_attainment * best.requests)} good "
                   f"requests are spread over more seconds than the shared pool's "
                   f"{round(shared.slo_attainment * shared.requests)}", "sim.disagreement",
                   {"rate": rate, "best_attainment": best.slo_attainment, "shared_attainment": shared.slo_attainment,
                    "makespan_ratio": later.evidence["ratio"]})


def latency_reading(rows: list[Summary]) -> list[Verdict]:
    """The best split against the shared pool at one rate: ITL p90 (helpers.formulas.verdicts.speed), and the
    TTFT p90 of the split with a single prefill GPU."""
    best, shared = _best(rows), rows[0]
    itl = speed(best.itl_p90_s, shared.itl_p90_s, "shorter", "longer", "as long", "the shared pool's")
    one = next(r for r in rows if r.prefill_gpus == 1)
    ttft = speed(one.ttft_p90_s, shared.ttft_p90_s, "shorter", "longer", "as long", "the shared pool's")
    return [Verdict(f"the best split's ITL p90 is {itl.words} ({1e3 * best.itl_p90_s:.1f} against "
                    f"{1e3 * shared.itl_p90_s:.1f} ms)", "speed", itl.evidence),
            Verdict(f"with one prefill GPU ({one.deployment}) the TTFT p90 is {ttft.words} ({one.ttft_p90_s:.2f} "
                    f"against {shared.ttft_p90_s:.2f} s)", "speed", ttft.evidence)]


def drain_share(requests: list[Request], summary: Summary) -> Verdict:
    """How much of a run's makespan came after the last arrival (the drain), with its band."""
    first, last = min(r.arrival_s for r in requests), max(r.arrival_s for r in requests)
    drain = summary.makespan_s - (last - first)
    return Verdict(f"the drain after the last arrival is {share(max(0.0, drain), summary.makespan_s, 'the makespan').words}"
                   f" ({drain:.2f} of {summary.makespan_s:.2f} s, {summary.deployment})", "share",
                   {"drain_s": drain, "makespan_s": summary.makespan_s})


def from_trace(trace, tokenizer, prompt_scale: int = 1) -> list[Request]:
    """Requests from a helpers.serving.traces trace: prompt tokens from the tokenizer (× prompt_scale,
    to stand for long prompts), its output lengths and Poisson arrivals."""
    from ..serving.traces import token_ids

    ids = token_ids(tokenizer, trace)
    return [Request(r.rid, r.arrival_s, len(i) * prompt_scale, r.max_new_tokens) for r, i in zip(trace, ids)]
