"""Serving metrics from an engine record (servebench writes it): each request is [TTFT s, ITL s, E2E s, output
tokens] (None: failed), each run with its duration, level, repeat, trace and load. Any value a measurement
can produce gives a number or nan.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from ..formulas import regime
from ..formulas.stats import percentile

IDLE_OTHERS = 0.25         # a run is idle when other processes used at most this share of the cores meanwhile
ATTAINMENT_GOAL = 0.90     # DistServe's example goal: 90 % of requests within the SLO
MIN_OPEN_REQUESTS = 32     # an open-loop rate counts (is "held") when its runs sent at least this many requests,
                           # at a rate within regime.MARGIN of the one asked
NAN = math.nan


@dataclass(frozen=True)
class SLO:
    """A service-level objective: each request's TTFT and TPOT (its mean ITL) under these limits."""

    ttft_s: float
    tpot_s: float

    def describe(self) -> str:
        return f"TTFT ≤ {self.ttft_s * 1e3:g} ms and TPOT ≤ {self.tpot_s * 1e3:g} ms"


def meets(row: Sequence | None, slo: SLO) -> bool:
    if not row or row[0] is None:
        return False
    return row[0] <= slo.ttft_s and (row[1] is None or row[1] <= slo.tpot_s)


def _finite(xs) -> list[float]:
    return [x for x in xs if x is not None and math.isfinite(x)]


def _mean(xs) -> float:
    return statistics.fmean(xs) if (xs := _finite(xs)) else NAN


def _p90(xs) -> float:
    return percentile(xs, 90) if (xs := _finite(xs)) else NAN


def tool(run: dict) -> str:
    """Which load generator made a run (an older record names it `source`)."""
    return run.get("tool") or {"ours on guidellm": "guidellm"}.get(run.get("source"), run.get("source") or "client")


def run_figures(run: dict, slo: SLO | None = None) -> dict:
    """One run's figures from its requests: counts, output tok/s and req/s over its duration, mean and p90
    TTFT and ITL (ms), mean E2E (ms), normalized latency (ms per output token), the share within `slo`."""
    rows = [list(r[:4]) + [None] * (4 - len(r[:4])) if isinstance(r, list) and r else None   # a short row (one-sample regime): padded
            for r in run.get("requests_detail") or []]
    good = [r for r in rows if r and r[0] is not None]
    duration = run.get("duration_s") or 0.0
    tokens = sum(r[3] or 0 for r in good)
    ms = lambda v: v * 1e3  # noqa: E731
    return {"requests": len(rows), "failed": len(rows) - len(good), "seconds": duration,
            "output tok/s": tokens / duration if duration > 0 else NAN,
            "req/s": len(good) / duration if duration > 0 else NAN,
            "TTFT mean ms": ms(_mean(r[0] for r in good)), "TTFT p90 ms": ms(_p90([r[0] for r in good])),
            "ITL mean ms": ms(_mean(r[1] for r in good)), "ITL p90 ms": ms(_p90([r[1] for r in good])),
            "E2E mean ms": ms(_mean(r[2] for r in good)),
            "norm. latency ms/token": ms(_mean(r[2] / r[3] for r in good if r[2] is not None and r[3])),
            "SLO attained": (sum(meets(r, slo) for r in rows) / len(rows) if rows else NAN) if slo else NAN}


def spread(values: Sequence[float]) -> float:
    """(largest − smallest) ÷ median of repeated runs' figures; nan for fewer than two runs (no spread to read)."""
    xs = _finite(values)
    if len(xs) < 2:
        return NAN
    mid = statistics.median(xs)
    return (max(xs) - min(xs)) / mid if mid else (0.0 if max(xs) == min(xs) else NAN)


def median(values: Sequence[float]) -> float:
    return statistics.median(xs) if (xs := _finite(values)) else NAN


def held(asked: float | None, achieved: float | None, requests: int) -> bool:
    """Whether an open-loop rate was held: enough requests sent, at a rate within the margin of the one asked."""
    return bool(asked and requests >= MIN_OPEN_REQUESTS and regime.label(regime.ratio(achieved, asked)) == regime.AT)


def distserve_goodput(points: Sequence[tuple[float, float, bool]], goal: float = ATTAINMENT_GOAL) -> float:
    """DistServe's goodput from (achieved rate, SLO attainment, held) points: the highest held rate at which it
    and every lower held rate reach `goal`; nan when no held rate does."""
    best = NAN
    for rate, share, ok in sorted((p for p in points if p[2] and p[0] is not None), key=lambda p: p[0]):
        if share is None or not share >= goal:
            break
        best = rate
    return best
