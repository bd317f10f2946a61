"""Notebook 03's tables and figures of the decode regimes: step ÷ floor with its label (helpers.formulas.regime)."""
from __future__ import annotations

import math
from typing import Sequence

from .regimes import COMPILE_SKIPPED, Regime, compile_allowed
from ..formulas import regime
from ..present import plots


def source(regimes: Sequence[Regime]) -> str:
    if not regimes:
        return "measured: no model"
    models = ", ".join(f"{r.name} ({r.dtype})" for r in regimes)
    kinds = " / ".join(sorted({r.bandwidth_kind for r in regimes}))
    return f"measured: {models} · {regimes[0].device} · floor = bytes ÷ the {kinds} bandwidth measured alongside the steps"


def implementations_frame(regimes: Sequence[Regime]):
    """One row per model × implementation: step, floor, step ÷ floor with its label; a skipped one with its reason."""
    import pandas as pd

    rows = []
    for reg in regimes:
        for r in reg.results:
            ratio, label = regime.against(r.step_s, r.floor_s)
            rows.append({"model": reg.name, "implementation": r.impl, "step_ms": r.step_s * 1e3,
                         "floor_ms": r.floor_s * 1e3, "step ÷ floor": ratio, "label": label,
                         "tokens_per_s": regime.ratio(1, r.step_s), "same_tokens_as_eager": r.same_tokens,
                         "kv_slots_read": r.kv_slots, "compile_s": r.compile_s, "steps_timed": r.steps, "note": ""})
        rows += [{"model": reg.name, "implementation": impl, "label": regime.NONE, "steps_timed": 0,
                  "note": "skipped: " + (COMPILE_SKIPPED if impl == "static+compile" and not compile_allowed(reg.device)
                                         else "not asked for")} for impl in reg.skipped]
    return pd.DataFrame(rows)


@plots.notes_when_empty('Decode on the roofline')
def roofline_figure(regimes: Sequence[Regime], peak_flops: float, dtype: str = ""):
    """Every implementation of every model on this device's roofline (zoomed on decode); no finite rate, no point."""
    import numpy as np

    from ..formulas.roofline import attainable_flops

    ok = lambda *xs: all(x and math.isfinite(x) and x > 0 for x in xs)  # noqa: E731
    pts = [(reg, r.impl, r.point) for reg in regimes for r in reg.results if ok(r.point.intensity, r.point.achieved_flops)]
    bandwidth = max((r.bandwidth for r in regimes if ok(r.bandwidth)), default=None)
    if not pts or not bandwidth or not ok(peak_flops):
        return plots.note_figure(source(regimes), "Decode on the roofline", "no step with a finite, positive rate")
    fig, ax = plots.figure(width=8, height=5)
    xs, ys = [p.intensity for *_, p in pts], [p.achieved_flops for *_, p in pts]
    grid = np.logspace(np.log10(min(xs) / 3), np.log10(max(xs) * 3), 100)
    roof = [attainable_flops(x, peak_flops, bandwidth) for x in grid]
    ax.loglog(grid, roof, color="black", lw=2, label=f"memory roof: {bandwidth / 1e9:,.1f} GB/s × intensity")
    colours = dict(zip([reg.name for reg in regimes], ["tab:blue", "tab:green", "tab:purple", "tab:brown"]))
    markers = {"eager": "^", "generate": "v", "static": "s", "static+compile": "*"}
    for reg, impl, p in pts:
        ax.scatter(p.intensity, p.achieved_flops, marker=markers.get(impl, "o"), s=60, color=colours[reg.name],
                   zorder=3, label=f"{reg.name} · {impl}")
    ax.set(ylim=(min(min(ys), min(roof)) / 3, max(max(ys), max(roof)) * 3), ylabel="FLOP/s achieved",
           xlabel="arithmetic intensity (FLOP per byte)",
           title=f"Decode implementations on the roofline (batch 1, {dtype})".replace(", )", ")"))
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    return plots.finish(fig, source(regimes))
