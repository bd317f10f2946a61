"""Conclusions as code: every word the workshop says about the size, direction or regime of a measured or
computed quantity — "faster", "about equal", "most of the step", "above the floor" — is chosen here, by a
named rule, from the numbers it describes. A rule returns a `Verdict`: the words and the evidence (the
numbers it read), so that a test can check the words against the numbers, and a notebook says them beside
the numbers on whatever machine it runs.

The thresholds are named once, below. The rules that read one result (a decode regime, an engine run)
live beside the function that produces it and are built from these.

- `change_verdict(ratio)`: "higher", "lower" or "about equal" — a ratio new ÷ old is a change only when it
  exceeds 1 + CHANGE_MARGIN or falls below 1 ÷ (1 + CHANGE_MARGIN) (a 10 % change either way, not less).
- `change_words(ratio, higher=, lower=, within=)`: the caller's words for the change a ratio shows, chosen
  by `change_verdict` (`within` when inside the margin).
- `speed(new_s, old_s)`: "2.3× faster", "1.16× slower", or "as fast (within 10 %)" for two durations.
- `times_as(a, b)`: "1.45× the planner's", "0.62× ..." — a ratio said as a factor, never as a size word.
- `share(part, whole)`: a part of a whole as a percentage and its band ("nearly all", "most", "about
  half", "less than half", "a small part").
- `against_roof(rate, roof)`: a measured rate against the roof it is bounded by: "at the roof",
  "N % of the roof", or "above the roof" (the roof was not the bound: the caller says why, by its rule).
- `byte_for_byte(flags, what)`: measured against a formula row by row: "equal to the formula to the byte in
  every row (9 of 9)" only when every row is; otherwise how many, and which rows are not.
- `rounding(error, scale, dtype)`: a difference between two computations of the same thing, in units of the
  dtype's rounding at the values' scale: "float rounding" within ROUNDING_EPS of them, not otherwise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .. import checks

# A change between two figures counts when it exceeds this fraction either way.
CHANGE_MARGIN = 0.10
# A share is "nearly all" of its whole from this fraction up, and "a small part" below SMALL.
NEARLY_ALL = 0.90
SMALL = 0.10
# "about half": within this distance of one half.
HALF_BAND = 0.05
# Two computations of the same values agree "to float rounding" when they differ by at most this many
# machine epsilons of the values' scale (a sum of hundreds of rounded products drifts by that much).
ROUNDING_EPS = 64
# The machine epsilon (2^-mantissa bits) of each float dtype the workshop computes in.
EPSILON = {"fp64": 2.0**-52, "fp32": 2.0**-23, "fp16": 2.0**-10, "bf16": 2.0**-7}


@dataclass(frozen=True)
class Verdict:
    """The words a rule chose and the numbers it chose them from."""

    words: str
    rule: str
    evidence: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.words


def change_verdict(ratio: float, margin: float = CHANGE_MARGIN) -> str:
    """"higher", "lower" or "about equal": a ratio new ÷ old read with the margin (higher when
    ratio > 1 + margin, lower when ratio < 1 ÷ (1 + margin)). An infinite ratio (from zero) is higher."""
    if ratio != math.inf:                     # a rise from zero is higher; anything else is checked
        ratio = checks.number(ratio, "a ratio of two figures")
    margin = checks.number(margin, "the margin")
    if ratio > 1 + margin:
        return "higher"
    if ratio < 1 / (1 + margin):
        return "lower"
    return "about equal"


def change_words(ratio: float, higher: str, lower: str, within: str, margin: float = CHANGE_MARGIN) -> str:
    """The words for the change a ratio new ÷ old shows, by `change_verdict`: `higher` above the margin,
    `lower` below it, `within` inside it."""
    return {"higher": higher, "lower": lower, "about equal": within}[change_verdict(ratio, margin)]


def factor(x: float) -> str:
    """A factor as the sentences write it: 1.04×, 1.16×, 2.3×, 12×, 1,300×."""
    return f"{x:.2f}×" if x < 2 else f"{x:.1f}×" if x < 10 else f"{x:,.0f}×"


def speed(new_s: float, old_s: float, faster: str = "faster", slower: str = "slower",
          same: str = "as fast", than: str = "") -> Verdict:
    """How a duration `new_s` compares with `old_s`: '2.3× faster' (new shorter), '1.16× slower' (new
    longer), or 'as fast (within 10 %)' when the ratio is within the change margin. With `than` (what
    `old_s` is), the comparison names it: '2.3× faster than X', 'as fast as X (within 10 %: 1.04×)'."""
    assert new_s > 0 and old_s > 0, (new_s, old_s)
    ratio = old_s / new_s                      # > 1: the new one is faster
    way = change_verdict(ratio)
    other = f" than {than}" if than else ""
    words = {"higher": f"{factor(ratio)} {faster}{other}", "lower": f"{factor(1 / ratio)} {slower}{other}",
             "about equal": f"{same}{' as ' + than if than else ''} (within {CHANGE_MARGIN:.0%}: "
                            f"{factor(max(ratio, 1 / ratio))})"}[way]
    return Verdict(words, "speed", {"new_s": new_s, "old_s": old_s, "ratio": ratio})


def times_as(a: float, b: float, of: str) -> Verdict:
    """a ÷ b said as a factor of `of`: '1.45× the planner's step'; no size word."""
    assert b > 0 and math.isfinite(a), (a, b)
    return Verdict(f"{factor(a / b) if a / b >= 0.1 else f'{a / b:.3f}×'} {of}", "times_as", {"a": a, "b": b, "ratio": a / b})


def share_band(fraction: float) -> str:
    """The band of a fraction of a whole: 'nearly all', 'most', 'about half', 'less than half', 'a small part'."""
    f = fraction
    assert f >= 0, f
    if f >= NEARLY_ALL:
        return "nearly all"
    if abs(f - 0.5) <= HALF_BAND + 1e-12:       # 0.55 is 'about half', whatever its last bit
        return "about half"
    if f > 0.5:
        return "most"
    if f >= SMALL:
        return "less than half"
    return "a small part"


def share(part: float, whole: float, of: str = "") -> Verdict:
    """`part` of `whole` as a percentage and its band: '60 % of the step (most)'."""
    assert part >= 0 and whole > 0, (part, whole)
    f = part / whole
    return Verdict(f"{100 * f:,.0f} %{' of ' + of if of else ''} ({share_band(f)})", "share",
                   {"part": part, "whole": whole, "fraction": f})


def against_roof(rate: float, roof: float, roof_name: str = "the roof") -> Verdict:
    """A measured rate against the roof that bounds it: 'N % of <roof>' below it, 'at <roof>' within
    the change margin, 'above <roof>' past it (then the roof was not what bound it: the caller's rule
    says why)."""
    assert rate >= 0 and roof > 0, (rate, roof)
    r = rate / roof
    way = change_verdict(r)
    words = {"lower": f"{100 * r:,.0f} % of {roof_name}",
             "about equal": f"at {roof_name} ({100 * r:,.0f} %)",
             "higher": f"above {roof_name} ({factor(r)})"}[way]
    return Verdict(words, "against_roof", {"rate": rate, "roof": roof, "ratio": r})


def byte_for_byte(flags, what: str = "the formula", rows: str = "row") -> Verdict:
    """Measured against `what`, one flag per row (True: equal to the byte): 'equal to the formula to the byte
    in every row (9 of 9)', or 'equal to the formula in 7 of 9 rows; rows 3, 5 differ' — never 'every' unless
    every row is."""
    flags = [bool(f) for f in flags]
    assert flags, "no rows to compare"
    n, ok = len(flags), sum(flags)
    if ok == n:
        words = f"equal to {what} to the byte in every {rows} ({ok} of {n})"
    else:
        bad = ", ".join(str(i + 1) for i, f in enumerate(flags) if not f)
        words = (f"equal to {what} in {ok} of {n} {rows}s; " +
                 (f"{rows} {bad} differs" if n - ok == 1 else f"{rows}s {bad} differ"))
    return Verdict(words, "byte_for_byte", {"equal": ok, "rows": n})


def rounding(error: float, scale: float, dtype: str = "fp32", of: str = "the values") -> Verdict:
    """A difference between two computations of the same values, against the dtype's rounding at their
    scale (machine epsilon × `scale`): 'float rounding: 1.1e-06 = 2.2 ε × 4.16, the scale of the output …'
    within ROUNDING_EPS epsilons, 'more than float rounding: …' past it."""
    assert error >= 0 and scale > 0 and dtype in EPSILON, (error, scale, dtype)
    units = error / (EPSILON[dtype] * scale)
    at = f"{error:.1e} = {units:,.1f} ε × {scale:.3g}, the scale of {of} ({dtype} ε = {EPSILON[dtype]:.1e})"
    words = (f"float rounding: {at}" if units <= ROUNDING_EPS else f"more than float rounding: {at}")
    return Verdict(words, "rounding", {"error": error, "scale": scale, "epsilons": units})


def above_floor_reason(read_bytes: float, cache_bytes: float | None, what: str = "its weights") -> str:
    """Why a rate above a memory floor is possible, by rule: the bytes read (`read_bytes`) fit the last-level
    cache (`cache_bytes`) and were read from there between passes; else that bandwidth did not bound it.
    The one owner of the reason (notebooks 03 and 05 say it through this)."""
    if cache_bytes and read_bytes <= cache_bytes:
        return (f": {what} ({read_bytes / 1e6:,.1f} MB) fit the last-level cache ({cache_bytes / 2**20:,.0f} MiB) "
                "and were read from there")
    return ": that bandwidth was not what bounded it"
