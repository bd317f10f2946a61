"""What a sweep's result shows, said by rule: the growth law fitted to a TTFT sweep, the last doubling,
how many sequences fit a budget, and the verdicts notebooks 01 and 02 write under each sweep
(helpers.measure.sweeps measures; every word here is chosen from the numbers it is given, with
helpers.formulas.verdicts' thresholds).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..formulas.verdicts import CHANGE_MARGIN, Verdict, change_verdict, factor, share


@dataclass(frozen=True)
class GrowthFit:
    """t(n) = a + b·n + c·n², fitted with non-negative coefficients, and its local growth exponent."""

    a: float
    b: float
    c: float
    exponent: float        # local exponent at the largest length: d ln t / d ln n of the fitted law
    r2: float              # of log t against log t̂
    n_max: int
    n_min: int = 1         # the shortest length fitted

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
    return GrowthFit(a, b, c, exponent, r2, int(top), int(n.min()))


def fit_or_none(df, x: str = "tokens", y: str = "ttft_s") -> GrowthFit | None:
    """fit_growth over a sweep's points that ran, or None when fewer than three did."""
    ok = df[~df["oom"]]
    return fit_growth(ok[x], ok[y]) if len(ok) >= 3 else None


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
        return self.t1 / self.t0

    def reading(self, what: str = "the TTFT") -> Verdict:
        """The doubling said by rule (local_growth_verdict): its factor and the growth law its exponent names."""
        return local_growth_verdict(self.n0, self.t0, self.n1, self.t1, what)


def last_doubling(df, x: str = "tokens", y: str = "ttft_s") -> Doubling | None:
    """The longest x of a sweep that ran whose half ran too, with both measured times (the ratio notebook 01
    asks the learner to predict); None when no such pair ran."""
    ok = df[~df["oom"]]
    if ok.empty:                   # out of memory at the first point: the frame has no time column
        return None
    at = {int(a): float(b) for a, b in zip(ok[x], ok[y])}
    for n1 in sorted(at, reverse=True):
        if n1 % 2 == 0 and n1 // 2 in at and at[n1 // 2] > 0:
            return Doubling(n1 // 2, n1, at[n1 // 2], at[n1])
    return None


@dataclass(frozen=True)
class BudgetFit:
    """How many sequences of one context fit in a memory budget, read off the users sweep's measured cache."""

    budget_bytes: float
    context: int                  # tokens per sequence the sweep prefilled
    per_sequence_bytes: float     # measured: the cache of the largest batch that ran ÷ that batch
    users: int                    # ⌊budget ÷ per_sequence_bytes⌋
    largest_batch: int            # the largest batch the sweep ran

    def cache_bytes(self, users: int | None = None) -> float:
        """The measured cache per sequence × users (default: those that fit)."""
        return self.per_sequence_bytes * (self.users if users is None else users)

    def reading(self) -> Verdict:
        """The count said with what it was read from: within the measured batches, or past the largest one."""
        from ..formulas.units import fmt_bytes

        b, per = self.budget_bytes, self.per_sequence_bytes
        evidence = {"users": self.users, "per_sequence_bytes": per, "budget_bytes": b,
                    "largest_batch": self.largest_batch}
        if self.users == 0:
            return Verdict(f"not one sequence of {self.context:,} tokens fits in {fmt_bytes(b)}: one holds "
                           f"{fmt_bytes(per)} of cache (measured)", "users_in_budget", evidence)
        where = (f"within the {self.largest_batch:,} sequences the sweep measured" if self.users <= self.largest_batch
                 else f"the measured line carried {factor(self.users / self.largest_batch)} past the "
                      f"{self.largest_batch:,} sequences the sweep ran")
        return Verdict(f"{self.users:,} sequences of {self.context:,} tokens fit in {fmt_bytes(b)}: each holds "
                       f"{fmt_bytes(per)} of cache (measured), ⌊{b:,.0f} ÷ {per:,.0f}⌋ = {self.users:,}, {where}",
                       "users_in_budget", evidence)


def users_in_budget(df, budget_bytes: float, context: int) -> BudgetFit | None:
    """The users sweep against a budget for the cache: the measured bytes per sequence (the largest batch that
    ran, its cache ÷ its batch) and how many sequences of `context` tokens fit in `budget_bytes`. None when
    no batch ran."""
    ok = df[~df["oom"]]
    if ok.empty:
        return None
    top = ok.loc[ok["batch"].idxmax()]
    per = float(top["cache_bytes"]) / int(top["batch"])
    return BudgetFit(float(budget_bytes), int(context), per, int(budget_bytes // per), int(top["batch"]))


# ============================================================================ the words: rules that read these sweeps
# Each returns Verdicts (helpers.formulas.verdicts): the words a notebook says about a sweep, with the numbers
# they were chosen from. Their thresholds are verdicts' (CHANGE_MARGIN and the share bands).

def growth_law(exponent: float) -> str:
    """The name of a local growth exponent p (t grows like n^p): 'linear' within the change margin of 1,
    'quadratic' within it of 2, else 'slower than linear', 'between linear and quadratic'."""
    if change_verdict(exponent) == "lower":
        return "slower than linear"
    if change_verdict(exponent) == "about equal":
        return "linear"
    if change_verdict(exponent / 2) == "lower":
        return "between linear and quadratic"
    return "quadratic"


def growth_verdicts(fit: GrowthFit, what: str = "TTFT") -> list[Verdict]:
    """What a fitted law a + b·n + c·n² says: how it grows at the longest length (growth_law of its
    exponent), what share of that time the n² term (attention) explains, and what share of the shortest
    length's time the constant term (a fixed cost per forward) is."""
    top, low = fit.predict(fit.n_max), fit.predict(fit.n_min)
    out = [Verdict(f"at {fit.n_max:,} tokens {what} grows like n^{fit.exponent:,.2f}: "
                   f"{growth_law(fit.exponent)}", "growth_law", {"exponent": fit.exponent, "n": fit.n_max})]
    if fit.c > 0:
        q = share(fit.c * fit.n_max**2, top, f"the fitted time at {fit.n_max:,} tokens")
        out.append(Verdict(f"the n² term (attention) is {q.words}", "quadratic_share", q.evidence))
    else:
        out.append(Verdict(f"the fit has no n² term: attention's work does not show in these times up to "
                           f"{fit.n_max:,} tokens", "quadratic_share", {"c": 0.0}))
    if fit.a > 0:
        k = share(fit.a, low, f"the fitted time at {fit.n_min:,} tokens")
        out.append(Verdict(f"the constant term (a fixed cost per forward) is {k.words}", "fixed_share", k.evidence))
    else:
        out.append(Verdict("the fit has no constant term: no fixed cost per forward shows", "fixed_share", {"a": 0.0}))
    return out


def local_growth_verdict(n0: int, t0: float, n1: int, t1: float, what: str = "the time") -> Verdict:
    """How a quantity grows between two lengths, read without a fit (for exact, computed values such as the
    planner's floors): its factor and the exponent p = ln(t1/t0) / ln(n1/n0), named by growth_law."""
    p = math.log(t1 / t0) / math.log(n1 / n0)
    return Verdict(f"from {n0:,} to {n1:,} tokens {what} grows {factor(t1 / t0)}, like n^{p:,.2f}: "
                   f"{growth_law(max(p, 0.0))}", "growth_law", {"exponent": p, "n0": n0, "n1": n1})


def order_verdict(df, x: str, y: str, what: str, unit: str = "tokens") -> Verdict:
    """Whether a longer x always took at least as long (y), within the change margin: the steps of a sweep
    where the time fell by more than the margin as x grew are named — on such a run something besides x
    moved the times (another load, a warm-up)."""
    ok = df[~df["oom"]]
    xs, ys = [int(v) for v in ok[x]], [float(v) for v in ok[y]]
    falls = [(xs[i], xs[i + 1], ys[i], ys[i + 1]) for i in range(len(xs) - 1)
             if change_verdict(ys[i + 1] / ys[i]) == "lower"]
    evidence = {"steps": len(xs) - 1, "falls": len(falls)}
    if not falls:
        return Verdict(f"each longer {what} took at least as long as the one before (within "
                       f"{CHANGE_MARGIN:.0%})", "order", evidence)
    a, b, ta, tb = falls[0]
    return Verdict(f"at {len(falls)} of {len(xs) - 1} steps a longer {what} took less time ({a:,} → {b:,} {unit}: "
                   f"{ta * 1e3:,.1f} → {tb * 1e3:,.1f} ms): on this run something besides the {what} moved the "
                   "times", "order", evidence)


def memory_verdicts(df, spec, dtype: str) -> list[Verdict]:
    """The memory sweep read: the counted cache against the formula (helpers.measure.tensor_bytes.bytes_match),
    its bytes per token along the sweep (the same at every point: a straight line through zero; else where
    it stops growing with the tokens), and on CUDA the allocator's peak above the weights against the cache."""
    from ..formulas.units import fmt_bytes
    from ..formulas.verdicts import times_as
    from .tensor_bytes import bytes_match

    ok = df[~df["oom"]]
    if ok.empty:
        return [Verdict("no length ran: the device was out of memory at the first", "memory", {"points": 0})]
    tokens, cache = [int(t) for t in ok["tokens"]], [int(c) for c in ok["cache_bytes"]]
    out = [bytes_match(cache, ok["formula_bytes"])]
    per = [c / t for c, t in zip(cache, tokens)]
    if all(p == per[0] for p in per):
        out.append(Verdict(f"{fmt_bytes(int(per[0]))} per token at every point from {tokens[0]:,} to {tokens[-1]:,} "
                           "tokens: a straight line through zero", "per_token", {"bytes_per_token": per[0]}))
    else:
        k = next(i for i, p in enumerate(per) if p != per[0]) - 1
        grow = cache[-1] / cache[k]
        out.append(Verdict(f"{fmt_bytes(int(per[0]))} per token up to {tokens[k]:,} tokens; from there to "
                           f"{tokens[-1]:,} the cache grows {factor(grow)} for {factor(tokens[-1] / tokens[k])} the "
                           "tokens" + (f" (the {spec.sliding_window:,}-token window)" if spec.sliding_window else ""),
                           "per_token", {"bytes_per_token": per[0], "from_tokens": tokens[k], "growth": grow}))
    peak = ok["peak_above_weights_bytes"] if "peak_above_weights_bytes" in ok else None
    if peak is not None and peak.notna().any():
        p = float(peak.iloc[-1])
        out.append(Verdict(f"at {tokens[-1]:,} tokens the allocator's peak above the weights is "
                           f"{times_as(p, cache[-1], 'the cache').words}: the prefill's activations on top of it",
                           "peak", {"peak_bytes": p, "cache_bytes": cache[-1]}))
    return out


def bytes_growth_verdicts(spec, dtype: str, lo: int, hi: int, batch: int = 1) -> list[Verdict]:
    """What a decode step reads at two contexts (helpers.formulas.stepcost.decode_cost): how much the bytes grow
    from `lo` to `hi` tokens, with the change rule's words, and the cache's share of the bytes at `hi`."""
    from ..formulas.stepcost import decode_cost

    a, b = decode_cost(spec, lo, batch, dtype), decode_cost(spec, hi, batch, dtype)
    g = b.bytes / a.bytes
    way = change_verdict(g)
    said = (f"within {CHANGE_MARGIN:.0%}: flat by the change margin" if way == "about equal"
            else f"a change past the {CHANGE_MARGIN:.0%} margin")
    grow = Verdict(f"the bytes a step reads grow {factor(g)} from {lo:,} to {hi:,} tokens of context ({said})",
                   "bytes_growth", {"bytes_lo": a.bytes, "bytes_hi": b.bytes, "growth": g})
    kv = b.kv_read_bytes
    cs = share(kv, b.bytes, f"the bytes at {hi:,} tokens")
    return [grow, Verdict(f"the cache read is {cs.words}", "cache_share", cs.evidence)]


def itl_verdicts(df, spec, dtype: str) -> list[Verdict]:
    """The ITL sweep read: the median step's growth from the shortest to the longest context against the growth
    of the bytes it reads (bytes_growth_verdicts) — a step that grows more than its bytes, by the change
    margin, is set by something besides reading them — and whether each longer context took as long."""
    ok = df[~df["oom"]]
    if len(ok) < 2:
        return [Verdict("fewer than two contexts ran: nothing to compare", "itl", {"points": len(ok)})]
    lo, hi = ok.iloc[0], ok.iloc[-1]
    c0, c1 = int(lo["context"]), int(hi["context"])
    g_step = float(hi["itl_s"]) / float(lo["itl_s"])
    grow, cache = bytes_growth_verdicts(spec, dtype, c0, c1)
    g_bytes = grow.evidence["growth"]
    r = g_step / g_bytes
    way = change_verdict(r)
    said = {"higher": f"the step grew more than its bytes ({factor(r)} as much): bytes alone do not set its "
                      "growth here",
            "about equal": f"the step grew with its bytes (within {CHANGE_MARGIN:.0%}: {factor(r)})",
            "lower": f"the step grew less than its bytes ({factor(r)} as much)" if change_verdict(g_step) != "lower"
                     else "the step got shorter while its bytes grew: something besides reading them set these times"}[way]
    step = Verdict(f"from {c0:,} to {c1:,} tokens of context the median step went {float(lo['itl_s']) * 1e3:,.2f} → "
                   f"{float(hi['itl_s']) * 1e3:,.2f} ms ({factor(g_step)}), the bytes it reads {factor(g_bytes)}: {said}",
                   "itl_growth", {"step_growth": g_step, "bytes_growth": g_bytes, "ratio": r})
    return [step, cache, order_verdict(df, "context", "itl_s", "context")]


def users_verdicts(df) -> list[Verdict]:
    """The users sweep read: how many batches ran and where the device ran out (if it did), and the counted cache
    of those that ran against the formula (helpers.measure.tensor_bytes.bytes_match)."""
    from .tensor_bytes import bytes_match

    ok, oom = df[~df["oom"]], df.attrs.get("oom_at")
    ran = Verdict(f"{len(ok)} of {len(df)} batches ran" + (f"; the device ran out of memory at {oom:,} sequences"
                                                          if oom is not None else ", none out of memory"),
                  "users_ran", {"ran": len(ok), "batches": len(df), "oom_at": float(oom) if oom is not None else -1.0})
    if ok.empty:
        return [ran]
    return [ran, Verdict(f"the counted cache is {bytes_match(ok['cache_bytes'], ok['formula_bytes']).words}",
                         "bytes_match", bytes_match(ok["cache_bytes"], ok["formula_bytes"]).evidence)]
