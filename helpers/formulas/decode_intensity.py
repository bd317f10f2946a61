"""Decode's arithmetic intensity against batch on a catalogued GPU, with and without the KV cache. A step of batch
B reads the weights once but every sequence's cache, intensity(B, c) = B × FLOPs per sequence ÷ (weight bytes +
B × KV bytes at context c): without a cache it grows about linearly with B, with one it levels off at FLOPs ÷ KV
bytes per sequence (a few FLOP/B for GQA models), and B cannot pass what the planner's budget holds.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

from .gpus import get_gpu
from .roofline import ridge_point
from .stepcost import decode_cost


def limit_intensity(model, context: int, dtype: str = "bf16") -> float:
    """The intensity with the cache as the batch grows without bound: FLOPs per sequence ÷ the bytes each
    sequence adds (cache read and written, embedding row); the weights, read once per batch, drop out."""
    one, two = decode_cost(model, context, 1, dtype), decode_cost(model, context, 2, dtype)
    return one.flops / (two.bytes - one.bytes)


@dataclass(frozen=True)
class IntensityPoint:
    """One decode step of `batch` sequences at `context` tokens on a catalogued GPU."""

    model: str
    gpu: str
    context: int
    batch: int
    intensity_with_kv: float
    intensity_weights_only: float
    fits: bool                # whether the batch fits (the planner's budget)
    max_batch: int            # the largest that does
    ridge: float
    limit_with_kv: float      # limit_intensity: the intensity no batch passes at this context
    bound: str                # "compute" or "memory": the roof that binds at intensity_with_kv
    peak_flops: float         # the GPU's datasheet roofs
    bandwidth: float


def point(model, gpu: str = "H100 SXM", context: int = 4096, batch: int = 1, dtype: str = "bf16",
          max_batch: int | None = None) -> IntensityPoint:
    """One decode step of `batch` sequences at `context` tokens: its intensity with the cache and with the
    weights alone, whether it fits (the planner's budget; `max_batch` when known), the ridge, the cache's limit."""
    from ..capacity import max_batch as fitting

    g = get_gpu(gpu)
    peak, _ = g.peak_flops(dtype)
    ridge = ridge_point(peak, g.bandwidth)
    with_kv = decode_cost(model, context, batch, dtype).intensity
    top = fitting(model, g, 1, dtype, dtype, context) if max_batch is None else max_batch
    return IntensityPoint(getattr(model, "name", model), g.name, context, batch, with_kv,
                          decode_cost(model, 0, batch, dtype).intensity, batch <= top, top, ridge,
                          limit_intensity(model, context, dtype), "compute" if with_kv >= ridge else "memory",
                          peak, g.bandwidth)


def intensity_table(model, gpu: str = "H100 SXM", contexts: Sequence[int] = (512, 4096, 32768), dtype: str = "bf16",
                    batches: Sequence[int] | None = None):
    """point() as a DataFrame, one row per context and batch (default 1, 2, 4, … 4096, and each context's
    largest batch that fits)."""
    import pandas as pd

    from ..capacity import max_batch

    rows = []
    for c in contexts:
        top = max_batch(model, gpu, 1, dtype, dtype, c)
        for b in sorted(set(batches or [2**k for k in range(13)]) | ({top} if top >= 1 else set())):
            rows.append(asdict(point(model, gpu, c, b, dtype, top)))
    return pd.DataFrame(rows)


def summary(df) -> list[dict]:
    """Per context of an intensity_table, smallest first: where its largest fitting batch sits against the ridge
    (max_batch 0: not one sequence fits; intensity_at_max_batch None then) and limit_intensity, which no batch,
    fitting or not, gets past."""
    out = []
    for context, d in df.groupby("context", sort=True):
        first = d.iloc[0]
        at = d[d["batch"] == first["max_batch"]]["intensity_with_kv"]
        out.append({"context": int(context), "max_batch": int(first["max_batch"]),
                    "intensity_at_max_batch": float(at.iloc[0]) if len(at) else None,
                    "limit_with_kv": float(first["limit_with_kv"]), "ridge": float(first["ridge"])})
    return out
