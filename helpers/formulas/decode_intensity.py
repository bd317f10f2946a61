"""Decode's arithmetic intensity against batch on a catalogued GPU, with and without the KV cache: whether
batching ever lifts decode to the ridge once the cache is counted. A step of batch B reads the weights once but
every sequence's cache, intensity(B, c) = B × FLOPs per sequence ÷ (weight bytes + B × KV bytes at context c):
without a cache it grows about linearly with B, with one it levels off at FLOPs ÷ KV bytes per sequence (a few
FLOP/B for GQA models), and B cannot pass what the planner's memory budget holds (helpers.capacity.max_batch).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .gpus import get_gpu
from .roofline import ridge_point
from .stepcost import decode_cost

DEFAULT_CONTEXTS = (512, 4096, 32768)


def intensity_table(model, gpu: str = "H100 SXM", contexts: Sequence[int] = DEFAULT_CONTEXTS, dtype: str = "bf16",
                    batches: Sequence[int] | None = None):
    """One row per (context, batch; `batches` default 1, 2, 4, … 4096): the decode step's FLOP per byte with the cache read (at that
    context) and without any cache (context 0), whether that batch fits the GPU (the planner's
    budget), and the GPU's ridge. Rows for each context's largest batch that fits are included."""
    import pandas as pd

    from ..capacity import max_batch

    g = get_gpu(gpu)
    peak, _ = g.peak_flops(dtype)
    ridge = ridge_point(peak, g.bandwidth)
    rows = []
    for context in contexts:
        top = max_batch(model, g, 1, dtype, dtype, context)
        for b in sorted(set(batches or [2**k for k in range(13)]) | ({top} if top >= 1 else set())):
            with_kv = decode_cost(model, context, b, dtype)
            no_kv = decode_cost(model, 0, b, dtype)
            rows.append({"context": context, "batch": b, "intensity_with_kv": with_kv.intensity,
                         "intensity_weights_only": no_kv.intensity, "fits": b <= top, "max_batch": top,
                         "ridge": ridge, "gpu": g.name, "model": model, "dtype": dtype})
    return pd.DataFrame(rows)


def limit_intensity(model, context: int, dtype: str = "bf16") -> float:
    """The intensity with the cache as the batch grows without bound: FLOPs per sequence ÷ the bytes each
    sequence adds (its cache read and written, its embedding row) — the weights, read once for the whole
    batch, drop out. No batch, fitting or not, gets past it."""
    one, two = decode_cost(model, context, 1, dtype), decode_cost(model, context, 2, dtype)
    return one.flops / (two.bytes - one.bytes)


@dataclass(frozen=True)
class IntensitySummary:
    """One context of an intensity_table: where its largest fitting batch sits against the ridge."""

    context: int
    max_batch: int                         # the largest batch that fits (0: not one sequence)
    intensity_at_max_batch: float | None   # FLOP/B with the cache at that batch
    ridge: float
    limit_with_kv: float                   # limit_intensity: what no batch, fitting or not, gets past


def summary(df) -> list[IntensitySummary]:
    """Per context of an intensity_table, smallest first: the largest batch that fits, the intensity there with
    the cache, the ridge and the cache's limit."""
    out = []
    for context, d in df.groupby("context", sort=True):
        top, first = int(d["max_batch"].iloc[0]), d.iloc[0]
        at = d[d["batch"] == top]["intensity_with_kv"]
        out.append(IntensitySummary(int(context), top, float(at.iloc[0]) if len(at) else None, float(first["ridge"]),
                                    limit_intensity(first["model"], int(context), first["dtype"])))
    return out


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


def point(model, gpu: str = "H100 SXM", context: int = 4096, batch: int = 1, dtype: str = "bf16") -> IntensityPoint:
    """One decode step of `batch` sequences at `context` tokens on a catalogued GPU: its intensity with the
    cache and with the weights alone, whether the batch fits (the planner's budget) and the largest that
    does, the ridge, the cache's limit (limit_intensity) and the roof that binds at that intensity."""
    from ..capacity import max_batch

    g = get_gpu(gpu)
    peak, _ = g.peak_flops(dtype)
    ridge = ridge_point(peak, g.bandwidth)
    with_kv = decode_cost(model, context, batch, dtype)
    top = max_batch(model, g, 1, dtype, dtype, context)
    return IntensityPoint(getattr(model, "name", model), g.name, context, batch, with_kv.intensity,
                          decode_cost(model, 0, batch, dtype).intensity, batch <= top, top, ridge,
                          limit_intensity(model, context, dtype),
                          "compute" if with_kv.intensity >= ridge else "memory", peak, g.bandwidth)
