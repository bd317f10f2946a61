"""Serving metrics from the timestamps of streamed requests: one definition each, shared by the
notebook, the benchmark and the comparison with guidellm.

For one request (all times in seconds, from one monotonic clock):
- TTFT  = first token's arrival − request sent (the queue wait plus the prefill);
- ITL   = the gaps between successive token arrivals; a request's mean ITL is
          (last token − first token) / (output tokens − 1) — vLLM's benchmark calls that mean TPOT,
          guidellm calls it inter-token latency (guidellm/benchmark/schemas: `inter_token_latency`);
- TPOT  = the same per-token decode time, used for the SLO (DistServe's definition);
- E2E   = last byte − request sent.
For a run: output tokens per second and requests per second over its wall time (first request sent
to last answer received), and **goodput**: requests per second that met every SLO (a TTFT limit and a
TPOT limit), as DistServe defines it (Zhong et al., "DistServe", OSDI 2024, §2).

Errors are counted, never dropped: a request that failed (HTTP 4xx/5xx, a timeout, a connection
lost because the server died) keeps its error, and a run in which no request succeeded is a failed run.
"""
from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Sequence

from ..timing import percentile


@dataclass
class RequestRecord:
    """What a client saw of one request. `token_times` are the arrival times of the chunks that carried
    text, `output_tokens` the count the server reported in `usage` (else one per text chunk)."""

    rid: int
    sent_s: float
    end_s: float | None = None
    token_times: list[float] = field(default_factory=list)
    output_tokens: int = 0
    prompt_tokens: int | None = None
    status: int | None = None       # the HTTP status code, None when no answer came
    error: str | None = None        # None, or a kind: "http 422", "timeout", "connection", ...
    detail: str = ""

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
        """Mean time per token after the first: (last − first) / (output tokens − 1)."""
        if not self.ok or self.output_tokens < 2:
            return None
        return (self.token_times[-1] - self.token_times[0]) / (self.output_tokens - 1)

    @property
    def gaps_s(self) -> list[float]:
        """The inter-token gaps as they arrived (one token per chunk on the servers used here)."""
        t = self.token_times
        return [b - a for a, b in zip(t, t[1:])] if self.ok else []

    def meets(self, slo: "SLO") -> bool:
        if not self.ok:
            return False
        return self.ttft_s <= slo.ttft_s and (self.itl_s is None or self.itl_s <= slo.tpot_s)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(ok=self.ok, ttft_s=self.ttft_s, itl_s=self.itl_s, e2e_s=self.e2e_s)
        return d


@dataclass(frozen=True)
class SLO:
    """A service-level objective: each request's TTFT and TPOT (its mean ITL) under these limits."""

    ttft_s: float
    tpot_s: float

    def __post_init__(self):
        if not (self.ttft_s > 0 and self.tpot_s > 0):
            raise ValueError(f"SLO limits must be positive seconds, got ttft_s={self.ttft_s}, tpot_s={self.tpot_s}")

    def describe(self) -> str:
        return f"TTFT ≤ {self.ttft_s * 1e3:g} ms and TPOT ≤ {self.tpot_s * 1e3:g} ms"


def _stats(xs: Sequence[float], prefix: str) -> dict:
    if not xs:
        return {f"{prefix}_{k}": None for k in ("mean", "median", "p90", "p99")}
    return {f"{prefix}_mean": statistics.fmean(xs), f"{prefix}_median": statistics.median(xs),
            f"{prefix}_p90": percentile(list(xs), 90), f"{prefix}_p99": percentile(list(xs), 99)}


# the columns of RunSummary.row(), in order: a table of runs has them even when no run produced a row
ROW_COLUMNS = ("configuration", "source", "concurrency", "requests", "failed", "output tok/s", "req/s",
               "TTFT mean ms", "TTFT p90 ms", "ITL mean ms", "ITL p90 ms", "E2E mean ms", "goodput req/s")


@dataclass
class RunSummary:
    """The figures of one run (one configuration, one concurrency, one workload)."""

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

    @property
    def run_failed(self) -> bool:
        """A run in which no request succeeded is a failed run, whatever the tool's exit code said."""
        return self.ok == 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["run_failed"] = self.run_failed
        return d

    def row(self) -> dict:
        """A flat row for a table: ms and tokens/s."""
        ms = lambda v: None if v is None else round(v * 1e3, 2)  # noqa: E731
        row = {"configuration": self.label, "source": self.source, "concurrency": self.concurrency,
                "requests": self.requests, "failed": self.failed,
                "output tok/s": round(self.output_tok_per_s, 1), "req/s": round(self.requests_per_s, 2),
                "TTFT mean ms": ms(self.ttft_s["ttft_mean"]), "TTFT p90 ms": ms(self.ttft_s["ttft_p90"]),
                "ITL mean ms": ms(self.itl_s["itl_mean"]), "ITL p90 ms": ms(self.itl_s["itl_p90"]),
                "E2E mean ms": ms(self.e2e_s["e2e_mean"]),
                "goodput req/s": None if self.goodput_rps is None else round(self.goodput_rps, 2)}
        assert tuple(row) == ROW_COLUMNS, "RunSummary.row and ROW_COLUMNS disagree"
        return row


def summarize(records: Sequence[RequestRecord], label: str = "", concurrency: int = 1,
              slo: SLO | None = None, duration_s: float | None = None) -> RunSummary:
    """A run's figures from its request records. `duration_s` defaults to the first request sent to the
    last answer received (failed requests count in the wall time, as they did in the run)."""
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
    goodput = sum(r.meets(slo) for r in records) / duration_s if slo else None
    return RunSummary(label, concurrency, len(records), len(good), len(records) - len(good), errors, duration_s,
                      tokens, tokens / duration_s, len(good) / duration_s, goodput,
                      slo.describe() if slo else None,
                      _stats([r.ttft_s for r in good], "ttft"),
                      _stats([r.itl_s for r in good if r.itl_s is not None], "itl"),
                      _stats([r.e2e_s for r in good], "e2e"))


def goodput(records: Sequence[RequestRecord], slo: SLO, duration_s: float) -> float:
    """Requests per second that met the SLO (DistServe's goodput)."""
    if duration_s <= 0:
        raise ValueError(f"duration_s must be positive, got {duration_s}")
    return sum(r.meets(slo) for r in records) / duration_s


def relative_gap(a: float, b: float) -> float:
    """|a − b| / b: how far one tool's figure is from the other's, as a fraction."""
    if not b:
        raise ValueError("relative_gap against zero")
    return abs(a - b) / abs(b)


# A change between two figures counts when it exceeds this fraction either way (the rule of
# helpers.engines.guide.batching_effect and helpers.parallel.sim.split_verdict).
CHANGE_MARGIN = 0.10


def change_verdict(ratio: float, margin: float = CHANGE_MARGIN) -> str:
    """"higher", "lower" or "about equal": a ratio new ÷ old read with the margin (higher when
    ratio > 1 + margin, lower when ratio < 1 ÷ (1 + margin))."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not ratio >= 0 or ratio != ratio:
        raise ValueError(f"a ratio of two figures must be a number ≥ 0, got {ratio!r}")
    if not margin >= 0:
        raise ValueError(f"the margin must be ≥ 0, got {margin!r}")
    if ratio > 1 + margin:
        return "higher"
    if ratio < 1 / (1 + margin):
        return "lower"
    return "about equal"
