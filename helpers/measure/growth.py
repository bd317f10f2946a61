"""How a sweep's time grows, as numbers: t(n) = a + b·n + c·n² fitted with its local exponent, the last doubling,
the exponent between two points, the users a cache budget holds; None where a sweep gave too little."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..formulas import regime


@dataclass(frozen=True)
class GrowthFit:
    """t(n) = a + b·n + c·n², fitted with non-negative coefficients, and its local growth exponent."""

    a: float
    b: float
    c: float
    exponent: float        # local exponent at the largest length: d ln t / d ln n of the fitted law
    r2: float              # of log t against log t̂ (nan with two points)
    n_max: int
    n_min: int = 1         # the shortest length fitted

    def predict(self, n: float) -> float:
        return self.a + self.b * n + self.c * n * n

    @property
    def quadratic_share(self) -> float:
        """Share of the fitted time at the largest length that the n² term explains."""
        return regime.ratio(self.c * self.n_max**2, self.predict(self.n_max))

    @property
    def fixed_share(self) -> float:
        """Share of the fitted time at the shortest length that the constant term explains."""
        return regime.ratio(self.a, self.predict(self.n_min))


def fit_growth(ns: Sequence[float], ts: Sequence[float]) -> GrowthFit | None:
    """t = a + b·n + c·n² by least squares on relative error (weights 1/t), a, b, c ≥ 0 (the best non-negative fit
    of every subset of the terms), and its local exponent at the largest n, p = (b·n + 2c·n²) / t̂: t grows like
    n^p there. Points not positive and finite are left out; None with fewer than two distinct lengths."""
    import itertools

    import numpy as np

    n, t = np.asarray(ns, dtype=float), np.asarray(ts, dtype=float)
    ok = np.isfinite(n) & np.isfinite(t) & (n > 0) & (t > 0)
    n, t = n[ok], t[ok]
    if len(set(n)) < 2:
        return None
    basis, w = np.stack([np.ones_like(n), n, n * n], axis=1), 1 / t
    best, best_sse = np.zeros(3), math.inf
    for cols in (c for k in (1, 2, 3) for c in itertools.combinations(range(3), k)):
        full = np.zeros(3)
        full[list(cols)] = np.linalg.lstsq(basis[:, cols] * w[:, None], t * w, rcond=None)[0]
        sse = float(((((basis @ full) - t) * w) ** 2).sum())
        if (full >= 0).all() and np.isfinite(full).all() and sse < best_sse - 1e-15:
            best, best_sse = full, sse
    # R² on log scale (the fit minimises relative error, whose targets are all 1)
    pred = basis @ best
    log_t, log_p = np.log(t), np.log(np.maximum(pred, 1e-30))
    ss_tot = float(((log_t - log_t.mean()) ** 2).sum())
    r2 = 1 - float(((log_t - log_p) ** 2).sum()) / ss_tot if ss_tot > 0 and len(t) > 2 else float("nan")
    a, b, c = (float(x) for x in best)
    top = float(n.max())
    total = a + b * top + c * top * top
    exponent = (b * top + 2 * c * top * top) / total if total > 0 else float("nan")
    return GrowthFit(a, b, c, exponent, r2, int(top), int(n.min()))


def _ran(df):
    return df[~df["oom"]] if "oom" in df else df


def fit_or_none(df, x: str = "tokens", y: str = "ttft_s") -> GrowthFit | None:
    """fit_growth over a sweep's points that ran."""
    ok = _ran(df)
    return None if ok.empty or y not in ok else fit_growth(list(ok[x]), list(ok[y]))


def local_exponent(n0: float, t0: float, n1: float, t1: float) -> float:
    """p with t1/t0 = (n1/n0)^p: ln(t1/t0) ÷ ln(n1/n0); nan where a time is not positive or n0 = n1."""
    r, rn = regime.ratio(t1, t0), regime.ratio(n1, n0)
    if not (math.isfinite(r) and math.isfinite(rn)) or r <= 0 or rn <= 0 or rn == 1:
        return math.nan
    return math.log(r) / math.log(rn)


@dataclass(frozen=True)
class Doubling:
    """A sweep's longest doubling that ran: the measured time at n0 and at n1 = 2·n0."""

    n0: int
    n1: int
    t0: float
    t1: float

    @property
    def ratio(self) -> float:
        """t(2n) ÷ t(n): 2 for work ∝ n, 4 for work ∝ n², 1 for a fixed cost."""
        return regime.ratio(self.t1, self.t0)

    @property
    def exponent(self) -> float:
        return local_exponent(self.n0, self.t0, self.n1, self.t1)


def last_doubling(df, x: str = "tokens", y: str = "ttft_s") -> Doubling | None:
    """The longest x of a sweep that ran whose half ran too in a positive time (01's prediction); None if none did."""
    ok = _ran(df)
    if ok.empty or y not in ok:       # out of memory at the first point: the frame has no time column
        return None
    at = {int(a): float(b) for a, b in zip(ok[x], ok[y])}
    for n1 in sorted(at, reverse=True):
        if n1 % 2 == 0 and n1 // 2 in at and at[n1 // 2] > 0:     # a ratio needs a positive time to divide by
            return Doubling(n1 // 2, n1, at[n1 // 2], at[n1])
    return None


@dataclass(frozen=True)
class BudgetFit:
    """How many sequences of one context fit in a memory budget, read off the users sweep's measured cache."""

    budget_bytes: float
    context: int                  # tokens per sequence the sweep prefilled
    per_sequence_bytes: float     # measured: the cache of the largest batch that ran ÷ that batch
    users: int                    # ⌊budget ÷ per_sequence_bytes⌋ (0 when a sequence measured no bytes)
    largest_batch: int            # the largest batch the sweep ran

    def cache_bytes(self, users: int | None = None) -> float:
        return self.per_sequence_bytes * (self.users if users is None else users)


def users_in_budget(df, budget_bytes: float, context: int) -> BudgetFit | None:
    """Bytes per sequence at the users sweep's largest batch that ran, and how many fit a cache budget."""
    ok = _ran(df)
    if ok.empty or "cache_bytes" not in ok:
        return None
    top = ok.loc[ok["batch"].idxmax()]
    per = float(top["cache_bytes"]) / max(int(top["batch"]), 1)
    users = int(budget_bytes // per) if per > 0 and math.isfinite(per) else 0
    return BudgetFit(float(budget_bytes), int(context), per, users, int(top["batch"]))
