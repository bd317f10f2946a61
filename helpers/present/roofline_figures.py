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


def step_words(shares: StepShares) -> str:
    """What the memory floor and the overhead probe explain of one measured step
    (helpers.formulas.roofline.step_shares), in words: each share by helpers.formulas.verdicts.share_band."""
    from ..formulas.verdicts import share_band

    floor, over, rest = shares.floor_share, shares.overhead_share, shares.rest_share
    if floor >= AT_FLOOR:
        words = f"at its memory floor ({100 * floor:,.0f} % of the step is moving bytes)"
    else:
        words = f"{share_band(1 - floor)} of its step ({100 * (1 - floor):,.0f} %) is not moving bytes"
    if over is not None:
        words += f"; the fixed overhead alone is {share_band(over)} of it ({100 * over:,.0f} %)"
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


# ============================================================================ notebook 03's words, by rule
# Every sentence below about a measured size or direction is chosen by a rule from the numbers it reads
# (helpers.formulas.verdicts: the 10 % margin, the share bands, factors) and returned as a Verdict with them.

def last_cache_of(run=None) -> int | None:
    """The last-level cache of the machine that measured `run` (a helpers.present.replay.Measured): this
    machine's (helpers.measure.microbench) when measured here; when replayed, the record's own, from the
    caches its 10/staircase recording holds (None when the record has none)."""
    from ..measure.microbench import last_level_cache_bytes

    if run is None or not getattr(run, "replayed", False):
        return last_level_cache_bytes()
    from . import replay

    folder = replay.RESULTS / str(run.recorded.get("record", ""))
    got = replay.load("10/staircase", [folder])
    if isinstance(got, str):
        return None
    value, _ = got
    return last_level_cache_bytes(value.get("caches") or []) if isinstance(value, dict) else None


def copy_buffer_verdict(copy_bytes: int, cache_bytes: int | None):
    """The bandwidth benchmark's buffer against the last-level cache: past it (the copy reads memory), or
    held by it (the copy's rate is partly the cache's: a floor that weights held in the cache can beat)."""
    from ..formulas.verdicts import Verdict, factor

    mib = copy_bytes / 2**20
    if not cache_bytes:
        return Verdict(f"the copy's buffer is {mib:,.0f} MiB; this machine reports no cache size to hold it against",
                       "copy_buffer", {"copy_bytes": copy_bytes})
    r = copy_bytes / cache_bytes
    words = (f"the copy's {mib:,.0f} MiB buffer is {factor(r)} the {cache_bytes / 2**20:,.0f} MiB last-level cache: "
             + ("it streams from memory" if r > 1 else
                "the cache holds it, so the bandwidth measured is partly the cache's, and a step whose bytes stay "
                "in that cache can beat the floor"))
    return Verdict(words, "copy_buffer", {"copy_bytes": copy_bytes, "cache_bytes": cache_bytes, "ratio": r})


def roofs_verdicts(bandwidth: float, read_bandwidth: float, peak: float, copy_bytes: int, cache_bytes: int | None,
                   gpu: dict) -> list:
    """Section 1's here-part: the two roofs and the ridge measured, the ridge against a catalogued GPU's
    (`gpu`: helpers.formulas.roofline.gpu_roofline), reading alone against the copy, the copy's buffer against the cache."""
    from ..formulas import verdicts

    ridge = ridge_point(peak, bandwidth)
    vs = verdicts.times_as(ridge, gpu["ridge"], f"the {gpu['gpu']}'s datasheet ridge ({gpu['ridge']:,.0f} FLOP/B)")
    read = verdicts.times_as(read_bandwidth, bandwidth, "the copy's")
    return [verdicts.Verdict(f"this run measured {bandwidth / 1e9:,.1f} GB/s and {peak / 1e12:,.3f} TFLOP/s: a ridge of "
                             f"{ridge:,.1f} FLOP/B, {vs.words}", "ridge", {"ridge": ridge, **vs.evidence}),
            verdicts.Verdict(f"reading alone streams {read_bandwidth / 1e9:,.1f} GB/s, {read.words}", "read", read.evidence),
            copy_buffer_verdict(copy_bytes, cache_bytes)]


def proportion_words(ratio: float) -> str:
    """A time ratio over a size ratio, by the 10 % margin: 'less than in proportion', 'in proportion', 'more than …'."""
    from ..formulas.verdicts import change_verdict

    return {"lower": "less than in proportion", "about equal": "in proportion",
            "higher": "more than in proportion"}[change_verdict(ratio)]


def prefill_verdicts(prefill, model, peak: float) -> list:
    """Section 2's here-part: how prefill time grew against the prompt (in proportion or not, by the margin), and
    the best share of the measured matmul peak it kept busy (verdicts.against_roof)."""
    from ..formulas import verdicts

    ok = prefill[~prefill["oom"]]
    if len(ok) < 2:
        return [verdicts.Verdict("too few prompt lengths ran to compare", "prefill", {})]
    a, z = ok.iloc[0], ok.iloc[-1]
    nt, tt = z["tokens"] / a["tokens"], z["ttft_s"] / a["ttft_s"]
    way = proportion_words(tt / nt)
    why = {"less than in proportion": ": longer prompts keep the arithmetic units busier",
           "more than in proportion": ": attention's cost grows with the square of the prompt",
           "in proportion": ": each token costs the same"}[way]
    best = max(forward_cost(model, int(r.tokens)).flops / r.ttft_s for r in ok.itertuples())
    roof = verdicts.against_roof(best, peak, "the measured matmul peak")
    return [verdicts.Verdict(f"prefill took {1e3 * a['ttft_s']:,.2f} ms for {int(a['tokens']):,} tokens and "
                             f"{1e3 * z['ttft_s']:,.2f} ms for {int(z['tokens']):,}: {nt:,.0f}× the tokens, {tt:,.1f}× "
                             f"the time, {way}{why}", "prefill_growth", {"tokens_ratio": nt, "time_ratio": tt}),
            verdicts.Verdict(f"the best prefill reaches {roof.words}", "prefill_peak", roof.evidence)]


def decode_verdicts(decode, floor_of) -> list:
    """Section 3's here-part: the decode step from the shortest context to the longest (grew, by the margin, or
    stayed level), and each step against its memory floor (`floor_of(context)`: seconds)."""
    from ..formulas import verdicts

    ok = decode[~decode["oom"]]
    if not len(ok):
        return [verdicts.Verdict("no context ran", "decode", {})]
    a, z = ok.iloc[0], ok.iloc[-1]
    g = z["itl_s"] / a["itl_s"]
    moved = {"higher": f"grew {verdicts.factor(g)}", "lower": f"fell to {verdicts.factor(g)}",
             "about equal": f"stayed level (within {verdicts.CHANGE_MARGIN:.0%}: {verdicts.factor(g)})"}[verdicts.change_verdict(g)]
    ratios = [r.itl_s / floor_of(int(r.context)) for r in ok.itertuples()]
    lo, hi = min(ratios), max(ratios)
    against = ("at its floor or below it" if hi < 1 / (1 + verdicts.CHANGE_MARGIN) else
               f"{verdicts.factor(lo)}–{verdicts.factor(hi)} its floor")
    return [verdicts.Verdict(f"the step took {1e3 * a['itl_s']:,.2f} ms at {int(a['context']):,} tokens and "
                             f"{1e3 * z['itl_s']:,.2f} ms at {int(z['context']):,}: it {moved}", "decode_growth",
                             {"ratio": g}),
            verdicts.Verdict(f"each step {against}", "decode_floor", {"lo": lo, "hi": hi})]


def points_verdicts(points: Sequence[RooflinePoint], ridge: float, dtype: str) -> list:
    """Section 4's here-part: prefill's intensity range, decode's at batch 1 against 2 FLOPs per parameter ÷ its
    bytes (the dtype's), the ridge's distance, and the largest batch's intensity against the ridge."""
    from ..formulas import verdicts
    from ..formulas.units import dtype_bytes

    pre = [p for p in points if p.kind == "prefill"]
    dec = [p for p in points if p.kind == "decode"]
    bat = [p for p in points if p.kind == "decode, batched"]
    out = []
    if pre:
        out.append(verdicts.Verdict(f"prefill's intensity runs from {pre[0].intensity:,.1f} to {pre[-1].intensity:,.0f} "
                                    "FLOP/B as the prompt grows", "prefill_intensity",
                                    {"lo": pre[0].intensity, "hi": pre[-1].intensity}))
    if dec:
        per = 2 / dtype_bytes(dtype)
        lo, hi = min(p.intensity for p in dec), max(p.intensity for p in dec)
        v = verdicts.times_as(hi, per, f"2 FLOPs per parameter ÷ {dtype_bytes(dtype):g} B ({per:g} FLOP/B)")
        left = verdicts.factor(ridge / hi)
        out.append(verdicts.Verdict(f"decode at batch 1 does {lo:,.2f}–{hi:,.2f} FLOP/B: at most {v.words}, {left} left of "
                                    f"the ridge ({ridge:,.1f} FLOP/B)", "decode_intensity",
                                    {"lo": lo, "hi": hi, "per_param": per, "ridge": ridge}))
    if bat:
        b = max(bat, key=lambda p: p.tokens)
        way = verdicts.change_verdict(b.intensity / ridge)
        where = {"lower": f"{verdicts.factor(b.intensity / ridge)} the ridge: still left of it",
                 "about equal": f"at the ridge (within {verdicts.CHANGE_MARGIN:.0%})",
                 "higher": f"{verdicts.factor(b.intensity / ridge)} the ridge: past it"}[way]
        out.append(verdicts.Verdict(f"at batch {b.tokens:,} decode does {b.intensity:,.1f} FLOP/B, {where}", "batched",
                                    {"intensity": b.intensity, "ridge": ridge, "batch": b.tokens}))
    return out


def read_share_verdict(cost) -> "Any":
    """What share of a decode step's bytes it reads (the rest: the new token's K/V written), by the share rule."""
    from ..formulas import verdicts

    read = cost.bytes - cost.kv_write_bytes
    v = verdicts.share(read, cost.bytes, "its bytes")
    return verdicts.Verdict(f"a decode step reads {v.words}", "read_share", v.evidence)


def closer_verdict(small_name: str, small_eff: float, big_name: str, big_eff: float):
    """The larger model against the smaller, nearer its floor or not by the 10 % margin: 'closer to its floor than
    tiny (83.5 % against 71.9 %)', 'as close …', 'further from …'."""
    from ..formulas import verdicts

    r = big_eff / small_eff
    way = verdicts.change_verdict(r)
    words = {"higher": f"{big_name} is closer to its floor than {small_name}",
             "about equal": f"{big_name} is as close to its floor as {small_name} (within {verdicts.CHANGE_MARGIN:.0%})",
             "lower": f"{big_name} is further from its floor than {small_name}"}[way]
    why = {"higher": ": the bytes take over as the matrices grow", "about equal": "", "lower": ""}[way]
    return verdicts.Verdict(f"{words} ({100 * big_eff:,.1f} % against {100 * small_eff:,.1f} %){why}", "closer",
                            {"small": small_eff, "big": big_eff, "ratio": r})


def efficiency_verdicts(efficiency, cache_bytes: int | None = None) -> list:
    """Section 5's here-part: each model's floor against its measured step (verdicts.share, or — a step shorter
    than its floor — the rate above the floor with its reason: helpers.formulas.verdicts.above_floor_reason)."""
    from ..formulas import verdicts
    from ..formulas.verdicts import above_floor_reason

    out = []
    for r in efficiency[efficiency["model"] != "probe"].itertuples():
        if verdicts.change_verdict(r.floor_s / r.step_s) == "higher":
            words = (f"{r.model}'s step ({1e3 * r.step_s:,.2f} ms) is shorter than its floor ({1e3 * r.floor_s:,.2f} ms): "
                     f"read at {verdicts.factor(r.floor_s / r.step_s)} the copy's bandwidth"
                     + above_floor_reason(r.weight_bytes_read, cache_bytes))
        else:
            words = f"{r.model}: the floor is {verdicts.share(r.floor_s, r.step_s, 'the step').words}"
        out.append(verdicts.Verdict(words, "efficiency", {"floor_s": r.floor_s, "step_s": r.step_s,
                                                          "fraction": r.floor_s / r.step_s}))
    return out


def fixed_cost_verdict(name: str, shares: StepShares):
    """What section 5 measured of one model's step: its floor's share and the fixed-cost probe's, each by the
    share rule — which of the two is the larger part of the step."""
    from ..formulas import verdicts

    floor = verdicts.share_band(max(shares.floor_share, 0))
    words = f"{name}'s floor is {100 * shares.floor_share:,.0f} % of its step ({floor})"
    evidence = {"floor_share": shares.floor_share}
    if shares.overhead_share is not None and verdicts.change_verdict(shares.overhead_share) == "higher":
        words += (f" and the fixed-cost probe's step {verdicts.factor(shares.overhead_share)} the step itself: the two "
                  "were timed at different moments of a machine whose speed changed between them, so this split says "
                  "nothing")
        evidence["overhead_share"] = shares.overhead_share
    elif shares.overhead_share is not None:
        words += (f" and the fixed-cost probe {100 * shares.overhead_share:,.0f} % "
                  f"({verdicts.share_band(shares.overhead_share)}): "
                  + ("the bytes are the larger part" if shares.floor_share > shares.overhead_share * (1 + verdicts.CHANGE_MARGIN)
                     else "the fixed cost is the larger part" if shares.overhead_share > shares.floor_share * (1 + verdicts.CHANGE_MARGIN)
                     else f"the two about equal (within {verdicts.CHANGE_MARGIN:.0%})"))
        evidence["overhead_share"] = shares.overhead_share
    return verdicts.Verdict(words, "fixed_cost", evidence)


def live_batch_verdict(point: RooflinePoint, peak_flops: float, bandwidth: float):
    """A decode step measured at one batch, on the roofline: its intensity against the ridge (by the margin),
    and the FLOP/s it reached against the roof at that intensity (verdicts.against_roof)."""
    from ..formulas import verdicts

    ridge = ridge_point(peak_flops, bandwidth)
    roof = attainable_flops(point.intensity, peak_flops, bandwidth)
    side = {"lower": "left of the ridge: memory-bound", "about equal": f"at the ridge (within {verdicts.CHANGE_MARGIN:.0%})",
            "higher": "right of the ridge: compute-bound"}[verdicts.change_verdict(point.intensity / ridge)]
    reach = verdicts.against_roof(point.achieved_flops, roof, "the roof there")
    return verdicts.Verdict(
        f"batch {point.tokens:,}: a step of {1e3 * point.seconds:,.2f} ms, {point.tokens / point.seconds:,.0f} tokens/s, "
        f"{point.intensity:,.1f} FLOP/B ({verdicts.factor(point.intensity / ridge)} the ridge of {ridge:,.1f}) — {side}; "
        f"it reaches {point.achieved_flops / 1e9:,.1f} GFLOP/s, {reach.words}", "live_batch",
        {"intensity": point.intensity, "ridge": ridge, "achieved": point.achieved_flops, "roof": roof})
