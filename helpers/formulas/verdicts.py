"""When a change between two figures counts: the one rule every comparison in the workshop reads its
ratio with — the engine benchmark's guide (helpers.benchmark.guide), disaggregated prefill against a
shared pool (helpers.parallel.sim.split_verdict), notebook 09's micro-batches.

A ratio new ÷ old is "higher" when it exceeds 1 + CHANGE_MARGIN, "lower" when it falls below
1 ÷ (1 + CHANGE_MARGIN), else "about equal": a 10 % change either way, not less, is a change.
"""
from __future__ import annotations

import math

from .. import checks

# A change between two figures counts when it exceeds this fraction either way.
CHANGE_MARGIN = 0.10


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
