"""The one label a result gets in words: **below**, **at** or **above** a reference by the one 10 % margin;
everything else is numbers, and the prose beside a result is static. `ratio` never raises (`inf` over a zero
reference, `nan` where there is nothing to compare), nor does `label` ("–" for `nan`); `epsilons` is a difference
between two computations in units of the dtype's rounding at their scale: a number to show, not a sentence.
"""
from __future__ import annotations

import math

MARGIN = 0.10                      # a ratio within 10 % either way of 1 is "at"
BELOW, AT, ABOVE, NONE = "below", "at", "above", "–"
LABELS = (BELOW, AT, ABOVE)
# The machine epsilon (2^-mantissa bits) of each float dtype the workshop computes in.
EPSILON = {"fp64": 2.0**-52, "fp32": 2.0**-23, "fp16": 2.0**-10, "bf16": 2.0**-7}


def _number(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def ratio(value, reference) -> float:
    """value ÷ reference; `inf` (or `-inf`) over a zero reference, `nan` when either is missing or not
    finite, or both are zero."""
    v, ref = _number(value), _number(reference)
    if not (math.isfinite(v) and math.isfinite(ref)):
        return math.nan
    if ref == 0:
        return math.nan if v == 0 else math.copysign(math.inf, v)
    return v / ref


def label(r, margin: float = MARGIN) -> str:
    """"below", "at" or "above" for a ratio r (value ÷ reference) by the margin; "–" when r is not a number."""
    r = _number(r)
    return NONE if math.isnan(r) else ABOVE if r > 1 + margin else BELOW if r < 1 / (1 + margin) else AT


def against(value, reference, margin: float = MARGIN) -> tuple[float, str]:
    """(value ÷ reference, its label)."""
    r = ratio(value, reference)
    return r, label(r, margin)


def ratio_columns(frame, value: str, reference: str, name: str = "ratio"):
    """A copy of the pandas `frame` with two columns added: `name` (column `value` ÷ column `reference`,
    row by row) and `name + " label"` (below / at / above)."""
    out = frame.copy()
    out[name] = [ratio(v, ref) for v, ref in zip(out[value], out[reference])]
    out[f"{name} label"] = [label(r) for r in out[name]]
    return out


def epsilons(error, scale, dtype: str = "fp32") -> float:
    """|error| in units of the dtype's machine epsilon at the values' scale (ε × |scale|); nan when the
    scale is zero or either is not a number."""
    if dtype not in EPSILON:
        raise ValueError(f"dtype must be one of {', '.join(EPSILON)}, got {dtype!r}")
    unit = EPSILON[dtype] * abs(_number(scale))
    return abs(ratio(_number(error), unit)) if unit > 0 else math.nan
