"""Figures and tables of the roofline (helpers.formulas.roofline) and of decode efficiency
(helpers.measure.decode_efficiency), and the words notebook 03 says about a measured step, for notebook 03."""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from ..formulas.roofline import RooflinePoint, StepShares, attainable_flops, ridge_point
from ..formulas.stepcost import forward_cost
from . import plots


def points_frame(points: Iterable[RooflinePoint], peak_flops: float, bandwidth: float):
    """A pandas table of roofline points with their share of the roof and which roof binds."""
    import pandas as pd

    return pd.DataFrame([p.to_dict(peak_flops, bandwidth) for p in points])


def roofline_figure(peak_flops: float, bandwidth: float, points: Sequence[RooflinePoint], source: Any,
                    dtype: str = "", title: str | None = None):
    """The roofline (log–log) with measured points: prefill as circles, decode (batch 1) as triangles,
    batched decode as squares; the first and last point of each kind labelled."""
    import numpy as np

    ridge = ridge_point(peak_flops, bandwidth)
    xs = [p.intensity for p in points] or [ridge]
    lo, hi = min(min(xs), ridge) / 4, max(max(xs), ridge) * 4
    grid = np.logspace(np.log10(lo), np.log10(hi), 200)
    fig, ax = plots.figure(width=8, height=5)
    ax.loglog(grid, [attainable_flops(x, peak_flops, bandwidth) for x in grid], color="black", lw=2,
              label=f"roof: {bandwidth / 1e9:,.0f} GB/s × intensity, capped at {peak_flops / 1e12:,.2f} TFLOP/s {dtype}")
    ax.axvline(ridge, color="grey", ls=":", lw=1)
    ax.annotate(f"ridge {ridge:,.1f} FLOP/B", (ridge, peak_flops), textcoords="offset points", xytext=(4, -14),
                fontsize=8, color="grey")
    styles = {"prefill": ("o", "tab:orange"), "decode": ("^", "tab:blue"), "decode, batched": ("s", "tab:green")}
    for kind, (marker, color) in styles.items():
        pts = [p for p in points if p.kind == kind]
        if pts:
            ax.scatter([p.intensity for p in pts], [p.achieved_flops for p in pts], marker=marker, color=color,
                       s=36, zorder=3, label=f"{kind} (measured)")
            for p in ((pts[0], pts[-1]) if kind == "prefill" else (pts[-1],)):
                ax.annotate(p.label, (p.intensity, p.achieved_flops), textcoords="offset points", xytext=(4, 4),
                            fontsize=7, color=color)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("FLOP/s achieved")
    ax.set_title(title or "Roofline of this device, measured")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=8, loc="lower right")
    return plots.finish(fig, source)


@plots.notes_when_empty('Prefill throughput against prompt length')
def prefill_figure(df, model, dtype: str, peak_flops: float, source: Any):
    """Prefill time (left, log–log) and the FLOP/s it achieves (right, against the measured peak) by
    prompt length; df has columns tokens, ttft_s, oom (helpers.measure.sweeps.ttft_sweep)."""
    ok = df[~df["oom"]]
    achieved = [forward_cost(model, int(n)).flops / t for n, t in zip(ok["tokens"], ok["ttft_s"])]
    fig, (left, right) = plots.figure(ncols=2, width=4.6, height=3.8)
    left.loglog(ok["tokens"], ok["ttft_s"] * 1e3, "o-", color="tab:orange")
    left.set_xlabel("prompt tokens")
    left.set_ylabel("prefill time, ms (median)")
    left.set_title("Prefill time")
    right.semilogx(ok["tokens"], [a / 1e12 for a in achieved], "o-", color="tab:orange", label="prefill achieves")
    right.axhline(peak_flops / 1e12, color="black", lw=1, ls="--", label=f"measured matmul peak ({dtype})")
    right.set_ylim(bottom=0)
    right.set_xlabel("prompt tokens")
    right.set_ylabel("TFLOP/s")
    right.set_title("Compute it keeps busy")
    right.legend(fontsize=8)
    return plots.finish(fig, source)


# Words for shares, chosen by rule (notebook 03, section 5): a step is "at its floor" from 80 %.
AT_FLOOR = 0.8


def share_words(share: float) -> str:
    """'most' (> 60 %), 'about half' (40–60 %), 'a minority' (10–40 %), 'little' (< 10 %)."""
    if share > 0.6:
        return "most"
    if share >= 0.4:
        return "about half"
    return "a minority" if share >= 0.1 else "little"


def step_words(shares: StepShares) -> str:
    """What the memory floor and the overhead probe explain of one measured step
    (helpers.formulas.roofline.step_shares), in words."""
    floor, over, rest = shares.floor_share, shares.overhead_share, shares.rest_share
    if floor >= AT_FLOOR:
        words = f"at its memory floor ({100 * floor:,.0f} % of the step is moving bytes)"
    else:
        words = f"{share_words(1 - floor)} of its step ({100 * (1 - floor):,.0f} %) is not moving bytes"
    if over is not None:
        words += f"; the fixed overhead alone is {share_words(over)} of it ({100 * over:,.0f} %)"
        if rest >= 0.1:
            words += (f", and {100 * rest:,.0f} % is explained by neither: kernels that stream memory below the "
                      "copy's bandwidth (small matrices, attention, norms)")
        elif rest < -0.1:
            words += ": floor and overhead add up to more than the step, so they overlap"
    return words


def explained_frame(explained: dict[str, StepShares]):
    """A pandas table, one row per model: the floor's, the probe's and neither's share of its step."""
    import pandas as pd

    return pd.DataFrame([{"model": m, "floor ÷ step": e.floor_share, "probe ÷ step": e.overhead_share,
                          "neither": e.rest_share} for m, e in explained.items()]).round(3)


@plots.notes_when_empty('Decode efficiency')
def efficiency_figure(df, source: Any):
    """Each model's measured decode step split into its memory floor, the fixed overhead (the probe's
    step) and the rest; log scale, since the sizes differ by orders of magnitude."""
    fig, ax = plots.figure(width=8, height=4)
    names = list(df["model"])
    y = range(len(names))
    floor = df["floor_s"] * 1e3
    over = (df["overhead_s"] if "overhead_s" in df else 0 * df["floor_s"]) * 1e3
    ax.barh(y, df["step_s"] * 1e3, color="#ddd", label="measured step")
    ax.barh(y, floor, color="tab:blue", height=0.5, label="memory floor (bytes ÷ bandwidth)")
    ax.scatter(over, y, marker="|", s=300, color="tab:red", zorder=3, label="fixed overhead (probe's step)")
    for i, (m, f, e) in enumerate(zip(df["step_s"] * 1e3, floor, df["efficiency"])):
        ax.annotate(f"{m:,.2f} ms · floor {f:,.3f} ms · {100 * e:,.1f} %", (m, i), textcoords="offset points",
                    xytext=(4, -3), fontsize=8)
    ax.set_yticks(list(y), names)
    ax.set_xscale("log")
    lo = float(min(floor.min(), (df["step_s"] * 1e3).min()))
    ax.set_xlim(lo / 3, float((df["step_s"] * 1e3).max()) * 60)
    ax.set_xlabel("ms per decode step (batch 1)")
    ax.set_title("Decode step against its memory-bound floor")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3)
    return plots.finish(fig, source)
