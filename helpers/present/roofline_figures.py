"""Figures and tables of notebook 03: the roofline, decode's intensity against batch and decode efficiency,
each ratio with its label (helpers.formulas.regime); a ratio that cannot be formed is nan, shown as "–"."""
from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import pandas as pd

from ..formulas import regime
from ..formulas.decode_intensity import IntensityPoint
from ..formulas.roofline import RooflinePoint, attainable_flops, ridge_point
from ..formulas.stepcost import forward_cost
from . import plots, replay


def _finite(*xs) -> bool:
    return all(isinstance(x, (int, float)) and math.isfinite(x) and x > 0 for x in xs)


def roofs_frame(read, copy, matmul, gpu: dict, cache_bytes: int | None = None):
    """Section 1's table: this device's read and copy bandwidth, matmul peak, ridge and crossover batch beside a
    catalogued GPU's (`gpu`: roofline.gpu_roofline), and the read buffer ÷ the last-level cache."""
    from ..formulas.units import dtype_bytes

    bw, peak = read.bandwidth, matmul.flops_per_s
    ridge = ridge_point(peak, bw)
    per = dtype_bytes(matmul.dtype)
    rows = [("read bandwidth (GB/s): the floor's", bw / 1e9, gpu["bandwidth"] / 1e9,
             f"sum of a {read.nbytes / 2**20:,.0f} MiB fp32 buffer, bytes read, best of {len(read.stats.samples)}"),
            ("copy bandwidth (GB/s): read + write, for comparison", copy.bandwidth / 1e9, None,
             f"copy of {copy.nbytes / 2**20:,.0f} MiB, bytes read + written, best of {len(copy.stats.samples)}"),
            (f"peak matmul (TFLOP/s, {matmul.dtype}; GPU: dense bf16)", peak / 1e12, gpu["peak_flops"] / 1e12,
             f"{matmul.n} × {matmul.n} matmul, 2·n³ FLOPs, best of {len(matmul.stats.samples)}"),
            ("ridge (FLOP/B) = peak ÷ read bandwidth", ridge, gpu["ridge"], "computed"),
            ("crossover decode batch, weights only", ridge * per / 2, gpu["crossover_batch"],
             f"ridge × bytes per parameter ({per:g} here, 2 on the GPU) ÷ 2"),
            ("read buffer ÷ last-level cache", regime.ratio(read.nbytes, cache_bytes), None,
             "no cache size reported" if not cache_bytes else
             f"last-level cache {cache_bytes / 2**20:,.0f} MiB, as the system reports it")]
    return pd.DataFrame(rows, columns=["quantity", "this device", gpu["gpu"], "how"])


def prefill_frame(prefill, model, dtype: str, peak: float, bandwidth: float):
    """Each prompt length's prefill: FLOP/s achieved ÷ the measured peak, intensity ÷ the ridge, labelled."""
    ok, ridge = prefill[~prefill["oom"]], ridge_point(peak, bandwidth)
    costs = [forward_cost(model, int(n), 0, 1, dtype) for n in ok["tokens"]]
    achieved = [regime.ratio(c.flops, t) for c, t in zip(costs, ok["ttft_s"])]
    against = [regime.against(c.intensity, ridge) for c in costs]
    return pd.DataFrame({"tokens": [int(n) for n in ok["tokens"]], "ttft_s": list(ok["ttft_s"]),
                         "TFLOP/s achieved": [a / 1e12 for a in achieved], "achieved ÷ peak": [regime.ratio(a, peak) for a in achieved],
                         "intensity (FLOP/B)": [c.intensity for c in costs], "intensity ÷ ridge": [r for r, _ in against],
                         "label": [label for _, label in against]})


def decode_frame(decode, floor_of):
    """Each context's median step beside its floor (`floor_of(context)`, seconds), step ÷ floor labelled."""
    ok = decode[~decode["oom"]]
    out = pd.DataFrame({"context": ok["context"].astype(int), "step_s": ok["itl_s"],
                        "floor_s": [floor_of(int(c)) for c in ok["context"]]})
    return regime.ratio_columns(out, "step_s", "floor_s", "step ÷ floor")


def points_frame(points: Iterable[RooflinePoint], peak_flops: float, bandwidth: float):
    """Roofline points: intensity ÷ the ridge and FLOP/s achieved ÷ the roof there, labelled."""
    ridge = ridge_point(peak_flops, bandwidth)
    rows = [{"point": p.label, "kind": p.kind, "seconds": p.seconds, "tokens_per_s": regime.ratio(p.tokens, p.seconds),
             "intensity (FLOP/B)": p.intensity, "GFLOP/s achieved": p.achieved_flops / 1e9,
             **dict(zip(("intensity ÷ ridge", "side of the ridge"), regime.against(p.intensity, ridge))),
             "achieved ÷ roof": regime.ratio(p.achieved_flops, attainable_flops(p.intensity, peak_flops, bandwidth))}
            for p in points]
    return pd.DataFrame(rows, columns=["point", "kind", "seconds", "tokens_per_s", "intensity (FLOP/B)",
                                       "intensity ÷ ridge", "side of the ridge", "GFLOP/s achieved", "achieved ÷ roof"])


def efficiency_frame(table, bandwidth: float):
    """Each model's step (helpers.decoding.regimes.efficiency_table) beside its floor at `bandwidth`, step ÷ floor
    labelled, and the probe's step ÷ this one (the fixed cost's share)."""
    probe = table[table["model"] == "probe"]
    probe_s = float(probe["step_s"].iloc[0]) if len(probe) else math.nan
    out = pd.DataFrame({"model": table["model"], "params": table["params"], "step_bytes": table["step_bytes"],
                        "floor_s": [regime.ratio(b, bandwidth) for b in table["step_bytes"]],
                        "step_s": table["step_s"]})
    out = regime.ratio_columns(out, "step_s", "floor_s", "step ÷ floor")
    out["probe ÷ step"] = [regime.ratio(probe_s, s) for s in out["step_s"]]
    return out.sort_values("step_bytes", ignore_index=True)


def _roof(ax, peak: float, bandwidth: float, xs: Sequence[float], label: str, digits: int = 1) -> None:
    """The roof log–log over xs and the ridge (each side ×4), the ridge marked."""
    import numpy as np

    ridge = ridge_point(peak, bandwidth)
    grid = np.geomspace(min([*xs, ridge]) / 4, max([*xs, ridge]) * 4, 200)
    ax.loglog(grid, [attainable_flops(x, peak, bandwidth) for x in grid], color="black", lw=2, label=label)
    ax.axvline(ridge, color="grey", ls=":", lw=1)
    ax.annotate(f"ridge {ridge:,.{digits}f} FLOP/B", (ridge, peak), textcoords="offset points", xytext=(4, -14),
                fontsize=8, color="grey")
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.grid(True, which="both", alpha=0.2)


def roofline_figure(peak_flops: float, bandwidth: float, points: Sequence[RooflinePoint], source: Any,
                    dtype: str = "", title: str | None = None):
    """The roofline (log–log) with the measured points by kind; points that are not finite and positive left out."""
    title = title or "Roofline of this device, measured"
    if not _finite(peak_flops, bandwidth, ridge_point(peak_flops, bandwidth)):
        return plots.note_figure(source, title, "no finite, positive bandwidth and peak were measured")
    points = [p for p in points if _finite(p.intensity, p.achieved_flops)]
    fig, ax = plots.figure(width=8, height=5)
    _roof(ax, peak_flops, bandwidth, [p.intensity for p in points],
          f"roof: {bandwidth / 1e9:,.1f} GB/s (read) × intensity, capped at {peak_flops / 1e12:,.2f} TFLOP/s {dtype}")
    styles = {"prefill": ("o", "tab:orange"), "decode": ("^", "tab:blue"), "decode, batched": ("s", "tab:green")}
    for kind, (marker, color) in styles.items():
        pts = [p for p in points if p.kind == kind]
        if pts:
            ax.scatter([p.intensity for p in pts], [p.achieved_flops for p in pts], marker=marker, color=color,
                       s=36, zorder=3, label=f"{kind} (measured)")
            for p in ((pts[0], pts[-1]) if kind == "prefill" else (pts[-1],)):
                ax.annotate(p.label, (p.intensity, p.achieved_flops), textcoords="offset points", xytext=(4, 4),
                            fontsize=7, color=color)
    ax.set(ylabel="FLOP/s achieved", title=title)
    ax.legend(fontsize=8, loc="lower right")
    return plots.finish(fig, source)


@plots.notes_when_empty('Prefill throughput against prompt length')
def prefill_figure(df, model, dtype: str, peak_flops: float, source: Any):
    """Prefill time (left) and the FLOP/s it achieves against the measured peak (right) by prompt length."""
    ok = df[[not oom and _finite(float(t)) for oom, t in zip(df["oom"], df["ttft_s"])]]
    if not len(ok):
        return plots.note_figure(source, "Prefill throughput against prompt length", "no positive prefill time")
    achieved = [forward_cost(model, int(n)).flops / t for n, t in zip(ok["tokens"], ok["ttft_s"])]
    fig, (left, right) = plots.figure(ncols=2, width=4.6, height=3.8)
    left.loglog(ok["tokens"], ok["ttft_s"] * 1e3, "o-", color="tab:orange")
    left.set(xlabel="prompt tokens", ylabel="prefill time, ms (median)", title="Prefill time")
    right.semilogx(ok["tokens"], [a / 1e12 for a in achieved], "o-", color="tab:orange", label="prefill achieves")
    if _finite(peak_flops):
        right.axhline(peak_flops / 1e12, color="black", lw=1, ls="--", label=f"measured matmul peak ({dtype})")
    right.set(ylim=(0, None), xlabel="prompt tokens", ylabel="TFLOP/s", title="Compute it keeps busy")
    right.legend(fontsize=8)
    return plots.finish(fig, source)


@plots.notes_when_empty('Decode efficiency')
def efficiency_figure(df, source: Any):
    """Each model's decode step beside its memory floor and the probe's step (log scale), annotated."""
    ok = df[[_finite(float(s), float(f)) for s, f in zip(df["step_s"], df["floor_s"])]]
    if not len(ok):
        return plots.note_figure(source, "Decode step against its memory-bound floor", "no positive step and floor")
    probe = ok[ok["model"] == "probe"]
    fig, ax = plots.figure(width=8, height=4)
    y, step, floor = range(len(ok)), ok["step_s"] * 1e3, ok["floor_s"] * 1e3
    ax.barh(y, step, color="#ddd", label="measured step")
    ax.barh(y, floor, color="tab:blue", height=0.5, label="memory floor (bytes ÷ read bandwidth)")
    if len(probe):
        ax.axvline(float(probe["step_s"].iloc[0]) * 1e3, color="tab:red", ls="--", lw=1,
                   label="fixed cost (the probe's step)")
    for i, (m, f, r) in enumerate(zip(step, floor, ok["step ÷ floor"])):
        ax.annotate(f"{m:,.2f} ms · floor {f:,.3f} ms · step ÷ floor {r:,.2f}", (m, i), textcoords="offset points",
                    xytext=(4, -3), fontsize=8)
    ax.set_yticks(list(y), list(ok["model"]))
    ax.set(xscale="log", xlim=(float(min(floor.min(), step.min())) / 3, float(step.max()) * 60),
           xlabel="ms per decode step (batch 1)", title="Decode step against its memory-bound floor")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3)
    return plots.finish(fig, source)


# ============================================================================ decode's intensity against batch

def intensity_figure(df, model_name: str, dtype: str):
    """Intensity against batch (log–log), one colour per context, hollow past the largest batch that fits."""
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
    ax.set(xlabel="batch (sequences decoded together)", ylabel="FLOP per byte moved",
           title=f"Decode's arithmetic intensity against batch: {model_name}, {dtype}")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=8, loc="upper left")
    return plots.finish(fig, f"computed from {model_name} config.json, {dtype} weights and KV cache · {gpu} "
                             "figures from the GPU catalog (helpers/data/gpus.csv) · hollow: does not fit")


def point_figure(p: IntensityPoint, dtype: str = "bf16"):
    """The GPU's roofline with one decode step on it (decode_intensity.point), weights only and with the cache."""
    fig, ax = plots.figure(width=8, height=4.6)
    _roof(ax, p.peak_flops, p.bandwidth, [p.intensity_with_kv, p.intensity_weights_only, p.limit_with_kv],
          f"{p.gpu} roof (datasheet, dense {dtype})", digits=0)
    ax.axvline(p.limit_with_kv, color=plots.COMPUTED, ls=":", lw=1.5,
               label=f"the cache's limit at {p.context:,} tokens: {p.limit_with_kv:,.1f} FLOP/B (any batch)")
    for x, style, what in ((p.intensity_weights_only, dict(marker="s", color="grey"), "weights only"),
                           (p.intensity_with_kv, dict(marker="o", color=plots.COMPUTED), "with the KV cache")):
        y = attainable_flops(x, p.peak_flops, p.bandwidth)
        face = style["color"] if (p.fits or what == "weights only") else "none"
        ax.scatter([x], [y], s=60, zorder=3, marker=style["marker"], facecolors=face, edgecolors=style["color"],
                   label=f"batch {p.batch:,}, {what}: {x:,.1f} FLOP/B")
    ax.set(ylabel="attainable FLOP/s")
    ax.set_title(f"{p.model} decode, batch {p.batch:,} × {p.context:,} tokens (at most {p.max_batch:,} fit): "
                 f"intensity ÷ ridge {p.intensity_with_kv / p.ridge:,.2f}", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    return plots.finish(fig, f"computed from {p.model} config.json, {dtype} · {p.gpu}: helpers/data/gpus.csv · "
                             "hollow: the batch does not fit")


def summary_frame(summaries: list[dict]):
    """Per context (decode_intensity.summary): the largest batch that fits, its intensity, the cache's limit ÷ the ridge."""
    frame = pd.DataFrame(summaries).rename(columns={"max_batch": "largest batch that fits", "ridge": "ridge (FLOP/B)",
                                                    "intensity_at_max_batch": "FLOP/B at that batch",
                                                    "limit_with_kv": "the cache's limit (FLOP/B)"})
    return regime.ratio_columns(frame, "the cache's limit (FLOP/B)", "ridge (FLOP/B)", "limit ÷ ridge")


def point_frame(p: IntensityPoint):
    """One decode step (decode_intensity.point) as a row: its intensities and each ÷ the ridge, labelled."""
    r, label = regime.against(p.intensity_with_kv, p.ridge)
    return pd.DataFrame([{"model": p.model, "GPU": p.gpu, "batch": p.batch, "context": p.context,
                          "FLOP/B with the cache": p.intensity_with_kv, "FLOP/B, weights only": p.intensity_weights_only,
                          "ridge (FLOP/B)": p.ridge, "with the cache ÷ ridge": r, "label": label,
                          "the cache's limit ÷ ridge": regime.ratio(p.limit_with_kv, p.ridge),
                          "largest batch that fits": p.max_batch}])


# ============================================================================ the machine that measured

def last_cache_of(run=None) -> int | None:
    """The last-level cache of the machine that measured `run` (replay.Measured): this one's, or the record's."""
    from ..measure.microbench import last_level_cache_bytes

    if run is None or not run.replayed:
        return last_level_cache_bytes()
    got = replay.load("10/staircase", [replay.RESULTS / str(run.recorded.get("record", ""))])
    return None if isinstance(got, str) or not isinstance(got[0], dict) else last_level_cache_bytes(got[0].get("caches") or [])
