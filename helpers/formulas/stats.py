"""Order statistics of repeated measurements: the percentile that every median-and-tail figure uses
(timings in helpers.measure.timing, served requests in helpers.benchmark.metrics and helpers.serving)."""
from __future__ import annotations

from typing import Sequence

import numpy as np


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (q in [0, 100]) of the samples, interpolated linearly between the two
    nearest ranks (numpy's default method, "linear": rank (n − 1)·q/100)."""
    if len(samples) == 0:
        raise ValueError("percentile of no samples")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be between 0 and 100, got {q!r}")
    return float(np.percentile(np.asarray(samples, dtype=float), q, method="linear"))
