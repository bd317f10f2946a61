"""Serving metrics from the timestamps of streamed requests, one definition each (`DEFINITIONS`, below):
TTFT, ITL (vLLM bench's TPOT, guidellm's ITL), E2E, throughput, SLO attainment, vLLM bench's goodput
(requests/s within the SLO), the normalized latency (Kwon et al., SOSP 2023, §6.1), DistServe's goodput
(Zhong et al., OSDI 2024, §2), and vLLM bench's own reading of the same chunks (`vllm_bench_view`).
A failed request keeps its error; a run in which no request succeeded is a failed run.
"""
from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Sequence

from ..formulas.stats import percentile


@dataclass
class RequestRecord:
    """What a client saw of one request: `token_times` of the chunks with text, `chunk_times` of every
    chunk with a choice (what vLLM bench times), `output_tokens` from `usage` (else one per text chunk)."""

    rid: int
    sent_s: float
    end_s: float | None = None
    token_times: list[float] = field(default_factory=list)
    output_tokens: int = 0
    prompt_tokens: int | None = None
    status: int | None = None       # the HTTP status code, None when no answer came
    error: str | None = None        # None, or a kind: "http 422", "timeout", "connection", ...
    detail: str = ""
    chunk_times: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and self.output_tokens >= 1 and bool(self.token_times)

    @property
    def ttft_s(self) -> float | None:
        return self.token_times[0] - self.sent_s if self.ok else None

    @property
    def e2e_s(self) -> float | None:
        return (self.end_s - self.sent_s) if self.ok and self.end_s is not None else None

    @property
    def itl_s(self) -> float | None:
        if not self.ok or self.output_tokens < 2:
            return None
        return (self.token_times[-1] - self.token_times[0]) / (self.output_tokens - 1)

    @property
    def gaps_s(self) -> list[float]:
        t = self.token_times
        return [b - a for a, b in zip(t, t[1:])] if self.ok else []

    @property
    def normalized_latency_s(self) -> float | None:
        return self.e2e_s / self.output_tokens if self.e2e_s is not None else None

    def meets(self, slo: "SLO") -> bool:
        return meets_compact(self.compact(), slo)

    def compact(self) -> list | None:
        """[TTFT s, mean ITL s, E2E s, output tokens] of a good request (None: failed), for an SLO chosen later."""
        return [self.ttft_s, self.itl_s, self.e2e_s, self.output_tokens] if self.ok else None

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(ok=self.ok, ttft_s=self.ttft_s, itl_s=self.itl_s, e2e_s=self.e2e_s)
        return d


@dataclass(frozen=True)
class SLO:
    """A service-level objective: each request's TTFT and TPOT (its mean ITL) under these limits."""

    ttft_s: float
    tpot_s: float

    def describe(self) -> str:
        return f"TTFT ≤ {self.ttft_s * 1e3:g} ms and TPOT ≤ {self.tpot_s * 1e3:g} ms"


def meets_compact(row: list | None, slo: SLO) -> bool:
    if row is None:
        return False
    ttft, itl = row[0], row[1]
    return ttft <= slo.ttft_s and (itl is None or itl <= slo.tpot_s)


def attainment(detail: Sequence[list | None], slo: SLO) -> float | None:
    return sum(meets_compact(r, slo) for r in detail) / len(detail) if detail else None


def _stats(xs: Sequence[float], prefix: str) -> dict:
    if not xs:
        return {f"{prefix}_{k}": None for k in ("mean", "median", "p90", "p99")}
    return {f"{prefix}_mean": statistics.fmean(xs), f"{prefix}_median": statistics.median(xs),
            f"{prefix}_p90": percentile(list(xs), 90), f"{prefix}_p99": percentile(list(xs), 99)}


# the columns of RunSummary.row(), in order: a table of runs has them even when no run produced a row
ROW_COLUMNS = ("configuration", "source", "concurrency", "rate req/s", "requests", "failed", "output tok/s",
               "req/s", "TTFT mean ms", "TTFT p90 ms", "ITL mean ms", "ITL p90 ms", "E2E mean ms",
               "norm. latency ms/token", "SLO attained", "req/s in SLO")


@dataclass
class RunSummary:
    label: str
    concurrency: int
    requests: int
    ok: int
    failed: int
    errors: dict
    duration_s: float
    output_tokens: int
    output_tok_per_s: float
    requests_per_s: float
    goodput_rps: float | None
    slo: str | None
    ttft_s: dict
    itl_s: dict
    e2e_s: dict
    source: str = "client"
    rate: float | None = None                # open loop: the Poisson request rate; None: closed loop
    slo_attainment: float | None = None      # the share of requests that met the SLO
    normalized_latency_s: float | None = None
    itl_pooled_s: float | None = None        # every inter-token gap of every request, pooled
    requests_detail: list | None = None      # RequestRecord.compact() of each request

    @property
    def run_failed(self) -> bool:
        return self.ok == 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["run_failed"] = self.run_failed
        return d

    def row(self) -> dict:
        ms = lambda v: None if v is None else round(v * 1e3, 2)  # noqa: E731
        row = {"configuration": self.label, "source": self.source, "concurrency": self.concurrency,
               "rate req/s": self.rate, "requests": self.requests, "failed": self.failed,
               "output tok/s": round(self.output_tok_per_s, 1), "req/s": round(self.requests_per_s, 2),
               "TTFT mean ms": ms(self.ttft_s["ttft_mean"]), "TTFT p90 ms": ms(self.ttft_s["ttft_p90"]),
               "ITL mean ms": ms(self.itl_s["itl_mean"]), "ITL p90 ms": ms(self.itl_s["itl_p90"]),
               "E2E mean ms": ms(self.e2e_s["e2e_mean"]), "norm. latency ms/token": ms(self.normalized_latency_s),
               "SLO attained": None if self.slo_attainment is None else round(self.slo_attainment, 3),
               "req/s in SLO": None if self.goodput_rps is None else round(self.goodput_rps, 2)}
        assert tuple(row) == ROW_COLUMNS, "RunSummary.row and ROW_COLUMNS disagree"
        return row


def summarize(records: Sequence[RequestRecord], label: str = "", concurrency: int = 1,
              slo: SLO | None = None, duration_s: float | None = None, rate: float | None = None,
              detail: bool = False) -> RunSummary:
    """A run's figures. `duration_s` defaults to first request sent → last answer (failed ones included)."""
    if not records:
        raise ValueError("summarize needs at least one request record")
    good = [r for r in records if r.ok]
    if duration_s is None:
        ends = [r.end_s for r in records if r.end_s is not None] or [r.sent_s for r in records]
        duration_s = max(ends) - min(r.sent_s for r in records)
    duration_s = max(duration_s, 1e-9)
    tokens = sum(r.output_tokens for r in good)
    errors = dict(Counter(r.error for r in records if not r.ok and r.error)
                  + Counter("no tokens" for r in records if not r.ok and not r.error))
    met = sum(r.meets(slo) for r in records) if slo else None
    gaps = sum((r.token_times[-1] - r.token_times[0] for r in good if r.output_tokens > 1), 0.0)
    steps = sum(r.output_tokens - 1 for r in good if r.output_tokens > 1)
    norm = [r.normalized_latency_s for r in good if r.normalized_latency_s is not None]
    return RunSummary(label, concurrency, len(records), len(good), len(records) - len(good), errors, duration_s,
                      tokens, tokens / duration_s, len(good) / duration_s, None if met is None else met / duration_s,
                      slo.describe() if slo else None,
                      _stats([r.ttft_s for r in good], "ttft"),
                      _stats([r.itl_s for r in good if r.itl_s is not None], "itl"),
                      _stats([r.e2e_s for r in good], "e2e"), rate=rate,
                      slo_attainment=None if met is None else met / len(records),
                      normalized_latency_s=statistics.fmean(norm) if norm else None,
                      itl_pooled_s=gaps / steps if steps else None,
                      requests_detail=[r.compact() for r in records] if detail else None)


def goodput(records: Sequence[RequestRecord], slo: SLO, duration_s: float) -> float:
    """Requests per second that met the SLO (vLLM bench's goodput)."""
    return sum(r.meets(slo) for r in records) / duration_s


ATTAINMENT_GOAL = 0.90      # DistServe's example goal: 90 % of requests within the SLO


def distserve_goodput(points: Sequence[tuple[float, float]], goal: float = ATTAINMENT_GOAL) -> float | None:
    """The highest rate of (rate, attainment) points at which it and every lower rate reach `goal` (None: none)."""
    best = None
    for rate, att in sorted(points):
        if att is None or att < goal:
            break
        best = rate
    return best


def vllm_bench_view(records: Sequence[RequestRecord]) -> dict:
    """Our records by vLLM bench's definitions (vllm/benchmarks/lib/endpoint_request_func.py, serve.py's
    calculate_metrics): DEFINITIONS["vLLM bench's view"]. Means in seconds."""
    done = [r for r in records if r.chunk_times and (r.error is None or r.error == "no tokens")]
    ttft = [r.chunk_times[0] - r.sent_s for r in done]
    e2el = [r.chunk_times[-1] - r.sent_s for r in done]
    tpot = [(e - t) / (r.output_tokens - 1) for r, t, e in zip(done, ttft, e2el) if r.output_tokens > 1]
    itl = [b - a for r in done for a, b in zip(r.chunk_times, r.chunk_times[1:])]
    mean = lambda xs: statistics.fmean(xs) if xs else None  # noqa: E731
    return {"completed": len(done), "ttft_mean": mean(ttft), "tpot_mean": mean(tpot), "itl_mean": mean(itl),
            "e2el_mean": mean(e2el)}


def relative_gap(a: float, b: float) -> float:
    if not b:
        raise ValueError("relative_gap against zero")
    return abs(a - b) / abs(b)


# ----------------------------------------------------------------------------- reading a run's record

def config_runs(data: dict, name: str, workload: str, source: str = "client", open_loop: bool = False) -> list[dict]:
    for c in data.get("configs", []):
        if c["config"]["name"] == name:
            return [r for r in c["runs"] if r.get("workload") == workload and r.get("source") == source
                    and (r.get("rate") is not None) == open_loop and not r.get("run_failed")]
    return []


def at_level(runs: list[dict], concurrency: int) -> dict | None:
    return next((r for r in runs if r["concurrency"] == concurrency), None)


def run_mean(run: dict, key: str):
    return (run.get(f"{key}_s") or {}).get(f"{key}_mean")


def config_record(data: dict, name: str) -> dict | None:
    return next((c for c in data.get("configs", []) if c["config"]["name"] == name), None)


DEFINITIONS = {
    "TTFT": "first chunk with text − request sent (queueing + prefill)",
    "ITL (per request)": "(last text chunk − first) ÷ (output tokens − 1); vLLM bench calls it TPOT, guidellm ITL",
    "ITL pooled": "every inter-token gap of every request, pooled: Σ(last − first) ÷ Σ(tokens − 1)",
    "E2E": "stream closed − request sent",
    "normalized latency": "mean of E2E ÷ output tokens per request (Kwon et al., SOSP 2023, §6.1)",
    "SLO attainment": "share of the run's requests (failed ones included) with TTFT and per-request ITL within the SLO",
    "req/s in SLO": "requests meeting the SLO ÷ the run's wall time (vLLM bench's --goodput)",
    "DistServe goodput": "the highest open-loop request rate whose SLO attainment is ≥ 90 % (Zhong et al., OSDI 2024, §2)",
    "a failed request": "an HTTP error, a timeout, a lost connection, a malformed reply, a stream cut before it said "
                        "it was complete, a token count the stream contradicts, or no text",
    "vLLM bench's view": "its TTFT counts a first chunk with empty text, its E2EL ends at the last chunk with choices "
                         "(not the stream's close), its ITL pools every gap between such chunks, and a 200 stream "
                         "with choices but no text is a success (metrics.vllm_bench_view)",
}
