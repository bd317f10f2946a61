"""Order statistics of repeated measurements: the one percentile every median-and-tail figure uses."""
from __future__ import annotations

from typing import Sequence

import numpy as np


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (q in [0, 100]) of the samples, interpolated linearly between the two nearest ranks
    (numpy's "linear" method: rank (n − 1)·q/100); numpy refuses no samples and a q outside [0, 100]."""
    return float(np.percentile(np.asarray(samples, dtype=float), q, method="linear"))
