"""Validation at the edges, written once: a public function checks its arguments here, one line each
(``tokens = checks.count(tokens, "tokens")``), and the mechanism under it trusts them. A bad value is a
``ValueError`` naming the argument, what is allowed and what came. Imports nothing from the rest of helpers.
"""
from __future__ import annotations

import math
import numbers
from typing import Any


def shown(value: Any) -> str:
    """What came, as the error line shows it: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def count(value: Any, what: str, minimum: int = 1, maximum: int | None = None) -> int:
    """A whole number (an int or a numpy integer, not a bool or 2.0) from `minimum` (to `maximum`)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum \
            or (maximum is not None and value > maximum):
        span = f"≥ {minimum:,}" if maximum is None else f"from {minimum:,} to {maximum:,}"
        raise ValueError(f"{what} must be a whole number {span}, got {shown(value)}")
    return int(value)


def number(value: Any, what: str, minimum: float | None = 0.0, maximum: float | None = None,
           positive: bool = False, unit: str = "") -> float:
    """A finite real number (not a bool) ≥ `minimum` (> it when `positive`; None: any sign) and ≤ `maximum`."""
    ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
    if ok and minimum is not None:
        ok = value > minimum if positive else value >= minimum
    if ok and maximum is not None:
        ok = value <= maximum
    if not ok:
        bounds = " and ".join(([f"{'>' if positive else '≥'} {minimum:g}"] if minimum is not None else [])
                              + ([f"≤ {maximum:g}"] if maximum is not None else []))
        bounds = " " + bounds if bounds else ""
        raise ValueError(f"{what} must be a finite number{bounds}{' ' + unit if unit else ''}, got {shown(value)}")
    return float(value)


def fraction(value: Any, what: str, open_low: bool = False) -> float:
    """A share from 0 to 1 (above 0 when `open_low`)."""
    return number(value, what, 0.0, 1.0, positive=open_low)


def choice(value: Any, what: str, allowed) -> Any:
    """One of `allowed`, compared as given."""
    allowed = tuple(allowed)
    if not isinstance(value, (str, int)) or isinstance(value, bool) or value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(map(str, allowed))}, got {shown(value)}")
    return value
