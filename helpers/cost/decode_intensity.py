"""Decode's arithmetic intensity against batch, at several contexts, with and without the KV cache,
on a catalogued GPU — whether batching ever lifts decode to the ridge once the cache is counted.

A decode step of batch B reads the weights once for the whole batch but every sequence's cache:
  intensity(B, c) = B × FLOPs per sequence ÷ (weight bytes + B × KV bytes at context c)
so without a cache it grows about linearly with B (2 FLOPs per parameter per sequence over the
weights' bytes: it crosses the ridge near B = ridge × bytes per parameter ÷ 2), but with one it
levels off at FLOPs per sequence ÷ KV bytes per sequence — for GQA models a few FLOP per byte,
far under an H100's ridge. The batch also cannot grow past what the memory holds: the largest
batch comes from the planner's memory budget (helpers.capacity.max_batch).

FLOPs and bytes from helpers.cost.stepcost (the one owner), the GPU's figures from the catalog
(helpers.cost.gpus), the ridge from helpers.cost.roofline.ridge_point.
"""
from __future__ import annotations

from typing import Any, Sequence

from .gpus import get_gpu
from .roofline import ridge_point
from .stepcost import decode_cost

DEFAULT_CONTEXTS = (512, 4096, 32768)


def batch_grid(top: int = 4096) -> list[int]:
    """1, 2, 4, … up to `top`."""
    out, b = [], 1
    while b <= top:
        out.append(b)
        b *= 2
    return out


def intensity_table(model, gpu: str = "H100 SXM", contexts: Sequence[int] = DEFAULT_CONTEXTS, dtype: str = "bf16",
                    batches: Sequence[int] | None = None):
    """One row per (context, batch): the decode step's FLOP per byte with the cache read (at that
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
        for b in sorted(set(batches or batch_grid()) | ({top} if top >= 1 else set())):
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


def summary(df) -> list[dict[str, Any]]:
    """Per context: the largest batch that fits, the intensity there with the cache, its share of the
    ridge, whether it reaches the ridge, and the batch where the weights-only intensity would cross it."""
    out = []
    for context, d in df.groupby("context", sort=True):
        top = int(d["max_batch"].iloc[0])
        ridge = float(d["ridge"].iloc[0])
        model, dtype = d["model"].iloc[0], d["dtype"].iloc[0]
        at = d[d["batch"] == top]
        crossing = d[d["intensity_weights_only"] >= ridge]["batch"]
        reach = at["intensity_with_kv"].iloc[0] if len(at) else None
        out.append({"context": int(context), "max_batch": top, "intensity_at_max_batch": reach,
                    "share_of_ridge": None if reach is None else reach / ridge,
                    "reaches_ridge": bool(reach is not None and reach >= ridge),
                    "weights_only_crosses_at": int(crossing.min()) if len(crossing) else None,
                    "ceiling_with_kv": float(d["intensity_with_kv"].max()), "ridge": ridge,
                    "limit_with_kv": limit_intensity(model, int(context), dtype)})
    return out


def verdict(s: dict[str, Any]) -> str:
    """The sentence for one context, chosen by rule: reaches the ridge, or how far under it stays."""
    if s["max_batch"] < 1:
        return f"at {s['context']:,} tokens not even one sequence fits"
    where = (f"at {s['context']:,} tokens the largest batch that fits ({s['max_batch']:,}) reaches "
             f"{s['intensity_at_max_batch']:,.1f} FLOP/B")
    if s["reaches_ridge"]:
        return where + f", past the ridge ({s['ridge']:,.0f}): compute-bound"
    under = where + f", {100 * s['share_of_ridge']:,.0f} % of the ridge ({s['ridge']:,.0f}): still memory-bound"
    if s["limit_with_kv"] < s["ridge"]:
        return under + (f"; no batch would reach it — the cache caps the intensity at {s['limit_with_kv']:,.1f} FLOP/B "
                        "however many sequences share the weights")
    return under + "; a batch larger than fits would reach it"


def figure(df, model_name: str, dtype: str):
    """Intensity against batch (log–log): one colour per context, solid with the cache, the weights-only
    line dashed, hollow markers past the largest batch that fits; the ridge as a horizontal line."""
    from ..present import plots

    fig, ax = plots.figure(width=8, height=4.6)
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    first = df[df["context"] == df["context"].iloc[0]]
    ax.loglog(first["batch"], first["intensity_weights_only"], ls="--", color="grey", lw=1.5,
              label="weights only (no KV cache)")
    for colour, (context, d) in zip(colours, df.groupby("context", sort=True)):
        fits, over = d[d["fits"]], d[~d["fits"]]
        ax.loglog(d["batch"], d["intensity_with_kv"], color=colour, lw=1.5, label=f"with the KV cache, {context:,} tokens")
        ax.scatter(fits["batch"], fits["intensity_with_kv"], color=colour, s=14, zorder=3)
        ax.scatter(over["batch"], over["intensity_with_kv"], facecolors="none", edgecolors=colour, s=14, zorder=3)
        top = d[d["batch"] == d["max_batch"]]
        if len(top):
            ax.annotate(f"largest batch that fits: {int(top['batch'].iloc[0]):,}",
                        (top["batch"].iloc[0], top["intensity_with_kv"].iloc[0]), textcoords="offset points",
                        xytext=(4, -10), fontsize=7, color=colour)
    ridge, gpu = float(df["ridge"].iloc[0]), df["gpu"].iloc[0]
    ax.axhline(ridge, color="black", lw=1)
    ax.annotate(f"{gpu} ridge {ridge:,.0f} FLOP/B (datasheet)", (1, ridge), textcoords="offset points",
                xytext=(2, 4), fontsize=8)
    ax.set_xlabel("batch (sequences decoded together)")
    ax.set_ylabel("FLOP per byte moved")
    ax.set_title(f"Decode's arithmetic intensity against batch: {model_name}, {dtype}")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=8, loc="upper left")
    return plots.finish(fig, f"computed from {model_name} config.json, {dtype} weights and KV cache · {gpu} "
                             "figures from the GPU catalog (helpers/data/gpus.csv) · hollow: does not fit")


def point(model, gpu: str = "H100 SXM", context: int = 4096, batch: int = 1, dtype: str = "bf16") -> dict[str, Any]:
    """One decode step of `batch` sequences at `context` tokens on a catalogued GPU: its intensity with the
    cache and with the weights alone, whether the batch fits (the planner's budget) and the largest that
    does, the ridge, the cache's limit (limit_intensity) and the roof that binds at that intensity."""
    from ..capacity import max_batch

    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a whole number ≥ 1, got {batch!r}")
    g = get_gpu(gpu)
    peak, _ = g.peak_flops(dtype)
    ridge = ridge_point(peak, g.bandwidth)
    with_kv = decode_cost(model, context, batch, dtype)
    top = max_batch(model, g, 1, dtype, dtype, context)
    return {"model": getattr(model, "name", model), "gpu": g.name, "context": context, "batch": batch,
            "intensity_with_kv": with_kv.intensity, "intensity_weights_only": decode_cost(model, 0, batch, dtype).intensity,
            "fits": batch <= top, "max_batch": top, "ridge": ridge, "limit_with_kv": limit_intensity(model, context, dtype),
            "bound": "compute" if with_kv.intensity >= ridge else "memory", "peak_flops": peak, "bandwidth": g.bandwidth}


def point_figure(p: dict[str, Any], dtype: str = "bf16"):
    """The GPU's roofline (datasheet roofs) with one decode step on it (point()): with the cache (filled
    when the batch fits, hollow when it does not), with the weights alone, and the cache's limit as a
    dotted line — the intensity no batch passes."""
    import numpy as np

    from ..present import plots
    from .roofline import attainable_flops

    xs = [p["intensity_with_kv"], p["intensity_weights_only"], p["limit_with_kv"], p["ridge"]]
    grid = np.logspace(np.log10(min(xs) / 4), np.log10(max(xs) * 4), 200)
    fig, ax = plots.figure(width=8, height=4.6)
    roof = [attainable_flops(x, p["peak_flops"], p["bandwidth"]) for x in grid]
    ax.loglog(grid, roof, color="black", lw=2, label=f"{p['gpu']} roof (datasheet, dense {dtype})")
    ax.axvline(p["ridge"], color="grey", ls=":", lw=1)
    ax.annotate(f"ridge {p['ridge']:,.0f} FLOP/B", (p["ridge"], p["peak_flops"]), textcoords="offset points",
                xytext=(4, -14), fontsize=8, color="grey")
    ax.axvline(p["limit_with_kv"], color=plots.COMPUTED, ls=":", lw=1.5,
               label=f"the cache's limit at {p['context']:,} tokens: {p['limit_with_kv']:,.1f} FLOP/B (any batch)")
    for x, style, what in ((p["intensity_weights_only"], dict(marker="s", color="grey"), "weights only"),
                           (p["intensity_with_kv"], dict(marker="o", color=plots.COMPUTED), "with the KV cache")):
        y = attainable_flops(x, p["peak_flops"], p["bandwidth"])
        face = style["color"] if (p["fits"] or what == "weights only") else "none"
        ax.scatter([x], [y], s=60, zorder=3, marker=style["marker"], facecolors=face, edgecolors=style["color"],
                   label=f"batch {p['batch']:,}, {what}: {x:,.1f} FLOP/B")
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("attainable FLOP/s")
    fits = "fits" if p["fits"] else f"does not fit: at most {p['max_batch']:,}"
    ax.set_title(f"{p['model']} decode, batch {p['batch']:,} ({fits}) × {p['context']:,} tokens: {p['bound']}-bound",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=8, loc="lower right")
    return plots.finish(fig, f"computed from {p['model']} config.json, {dtype} · {p['gpu']}: helpers/data/gpus.csv · "
                             "hollow: the batch does not fit")
