"""Figures of decode's intensity against batch (helpers.formulas.decode_intensity), for notebook 03: the
intensity against batch at several contexts and one step on a GPU's roofline."""
from __future__ import annotations

import pandas as pd

from ..formulas.decode_intensity import IntensityPoint, IntensitySummary
from ..formulas.roofline import attainable_flops
from . import plots


def intensity_figure(df, model_name: str, dtype: str):
    """Intensity against batch (log–log): one colour per context, solid with the cache, the weights-only
    line dashed, hollow markers past the largest batch that fits; the ridge as a horizontal line."""
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
    ax.set(ylabel="FLOP per byte moved", title=f"Decode's arithmetic intensity against batch: {model_name}, {dtype}")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=8, loc="upper left")
    return plots.finish(fig, f"computed from {model_name} config.json, {dtype} weights and KV cache · {gpu} "
                             "figures from the GPU catalog (helpers/data/gpus.csv) · hollow: does not fit")


def point_figure(p: IntensityPoint, dtype: str = "bf16"):
    """The GPU's roofline (datasheet roofs) with one decode step on it (point()): with the cache (filled
    when the batch fits, hollow when it does not), with the weights alone, and the cache's limit as a
    dotted line — the intensity no batch passes."""
    import numpy as np

    xs = [p.intensity_with_kv, p.intensity_weights_only, p.limit_with_kv, p.ridge]
    grid = np.logspace(np.log10(min(xs) / 4), np.log10(max(xs) * 4), 200)
    fig, ax = plots.figure(width=8, height=4.6)
    roof = [attainable_flops(x, p.peak_flops, p.bandwidth) for x in grid]
    ax.loglog(grid, roof, color="black", lw=2, label=f"{p.gpu} roof (datasheet, dense {dtype})")
    ax.axvline(p.ridge, color="grey", ls=":", lw=1)
    ax.annotate(f"ridge {p.ridge:,.0f} FLOP/B", (p.ridge, p.peak_flops), textcoords="offset points",
                xytext=(4, -14), fontsize=8, color="grey")
    ax.axvline(p.limit_with_kv, color=plots.COMPUTED, ls=":", lw=1.5,
               label=f"the cache's limit at {p.context:,} tokens: {p.limit_with_kv:,.1f} FLOP/B (any batch)")
    for x, style, what in ((p.intensity_weights_only, dict(marker="s", color="grey"), "weights only"),
                           (p.intensity_with_kv, dict(marker="o", color=plots.COMPUTED), "with the KV cache")):
        y = attainable_flops(x, p.peak_flops, p.bandwidth)
        face = style["color"] if (p.fits or what == "weights only") else "none"
        ax.scatter([x], [y], s=60, zorder=3, marker=style["marker"], facecolors=face, edgecolors=style["color"],
                   label=f"batch {p.batch:,}, {what}: {x:,.1f} FLOP/B")
    ax.set(xlabel="arithmetic intensity (FLOP per byte moved)", ylabel="attainable FLOP/s")
    ax.set_title(f"{p.model} decode, batch {p.batch:,} × {p.context:,} tokens (at most {p.max_batch:,} fit): "
                 f"intensity ÷ ridge {p.intensity_with_kv / p.ridge:,.2f}", fontsize=10)
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=8, loc="lower right")
    return plots.finish(fig, f"computed from {p.model} config.json, {dtype} · {p.gpu}: helpers/data/gpus.csv · "
                             "hollow: the batch does not fit")


def summary_frame(summaries: list[IntensitySummary]):
    """A pandas table, one row per context: its largest fitting batch, the intensity there, the cache's
    limit (any batch), the ridge, and the limit ÷ the ridge with its label (below: no batch reaches the ridge)."""
    from ..formulas import regime

    frame = pd.DataFrame([{"context": s.context, "largest batch that fits": s.max_batch,
                           "FLOP/B at that batch": s.intensity_at_max_batch, "the cache's limit (FLOP/B)": s.limit_with_kv,
                           "ridge (FLOP/B)": s.ridge} for s in summaries])
    return regime.ratio_columns(frame, "the cache's limit (FLOP/B)", "ridge (FLOP/B)", "limit ÷ ridge")


def point_frame(p: IntensityPoint):
    """One computed decode step (helpers.formulas.decode_intensity.point) as a one-row table: its intensity
    with the cache and with the weights alone, each ÷ the ridge with its label, the cache's limit ÷ the ridge,
    and the largest batch that fits."""
    from ..formulas import regime

    r, label = regime.against(p.intensity_with_kv, p.ridge)
    return pd.DataFrame([{"model": p.model, "GPU": p.gpu, "batch": p.batch, "context": p.context,
                          "FLOP/B with the cache": p.intensity_with_kv, "FLOP/B, weights only": p.intensity_weights_only,
                          "ridge (FLOP/B)": p.ridge, "with the cache ÷ ridge": r, "label": label,
                          "the cache's limit ÷ ridge": regime.ratio(p.limit_with_kv, p.ridge),
                          "largest batch that fits": p.max_batch}])
