"""Figures of notebook 07, one per mechanism; each is stamped with what produced it (helpers.present.plots)."""
from __future__ import annotations

from itertools import accumulate
from typing import Any, Sequence

from ..present import plots

MEASURED, COMPUTED, BASELINE = "tab:blue", "tab:orange", "tab:grey"


@plots.notes_when_empty('KV cache on and off')
def cache_on_off_figure(result, source: Any):
    """helpers.serving.kv_cache.CacheOnOff: time per token (left) and the cumulative work (right)."""
    fig, (a, b) = plots.figure(ncols=2, width=5.2)
    rows = result.steps
    pos = [r.position for r in rows]
    a.plot(pos[1:], [1e3 * r.seconds_without_cache for r in rows[1:]], color=BASELINE, label="no cache (recompute all)")
    a.plot(pos[1:], [1e3 * r.seconds_with_cache for r in rows[1:]], color=MEASURED, label="KV cache")
    a.set(xlabel="position of the token generated", ylabel="time of the step (ms)")
    a.set_title("time per token", fontsize=9)
    a.legend(fontsize=8)
    n = range(1, len(rows) + 1)
    b.plot(n, list(accumulate(r.tokens_without_cache for r in rows)), color=BASELINE, label="no cache: n·p + n(n−1)/2")
    b.plot(n, list(accumulate(r.tokens_with_cache for r in rows)), color=MEASURED, label="KV cache: p + n − 1")
    b.set(xlabel="tokens generated n", ylabel="tokens run through the model (cumulative)")
    b.set_title(f"work, prompt p = {result.prompt_tokens}", fontsize=9)
    b.legend(fontsize=8)
    return plots.finish(fig, source)


@plots.notes_when_empty('Paged against contiguous KV memory')
def paged_figure(sims: Sequence, source: Any):
    """Per decode step, for each scheme: slots holding tokens, reserved, and sequences running."""
    fig, (a, b) = plots.figure(ncols=2, width=5.2)
    colours = {"contiguous": BASELINE, "paged": MEASURED}
    for s in sims:
        steps = [r["step"] for r in s.rows]
        c = colours.get(s.scheme, COMPUTED)
        a.plot(steps, [r["reserved"] for r in s.rows], color=c, ls="--", label=f"{s.scheme}: reserved")
        a.plot(steps, [r["used"] for r in s.rows], color=c, label=f"{s.scheme}: holding tokens")
        b.plot(steps, [r["running"] for r in s.rows], color=c, label=s.scheme)
    a.axhline(sims[0].capacity_slots, color="k", lw=0.8)
    a.set(xlabel="decode step", ylabel="KV slots (tokens)")
    a.set_title("memory reserved vs holding tokens", fontsize=9)
    a.legend(fontsize=7)
    b.set(xlabel="decode step", ylabel="sequences running")
    b.set_title("sequences running at once (same memory)", fontsize=9)
    b.legend(fontsize=8)
    return plots.finish(fig, source)


@plots.notes_when_empty('Batch slots over time')
def slots_figure(panels: Sequence[tuple[str, list[dict], float]], slots: int, source: Any):
    """Slot occupancy: for each mode, each slot's busy spans (a request decoding) and, in static batches,
    the idle spans (hatched) where a finished request's slot waits for its batch's slowest."""
    fig, axes = plots.figure(nrows=len(panels), width=9, height=1.2 + 0.3 * slots, sharex=True, squeeze=False)
    for ax, (title, segs, wall) in zip(axes[:, 0], panels):
        for s in segs:
            ax.barh(s["slot"], s["finish_s"] - s["start_s"], left=s["start_s"], color=MEASURED, height=0.7,
                    edgecolor="white", lw=0.5)
            if s["idle_until_s"] > s["finish_s"]:
                ax.barh(s["slot"], s["idle_until_s"] - s["finish_s"], left=s["finish_s"], color="white",
                        hatch="////", edgecolor="#c44e52", height=0.7, lw=0)
        ax.set_yticks(range(slots), [f"slot {i}" for i in range(slots)], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(left=0)
        ax.set_title(title, fontsize=9)
    axes[-1, 0].set_xlabel("seconds since all requests arrived")
    return plots.finish(fig, source)


def bars_figure(labels: Sequence[str], values: Sequence[float], ylabel: str, title: str, source: Any,
                colours: Sequence[str]):
    fig, ax = plots.figure(width=6.5)
    plots.bars(ax, labels, values, list(colours))
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.tick_params(axis="x", labelsize=8)
    return plots.finish(fig, source)


@plots.notes_when_empty('Prefix-cache hit rates')
def hit_rate_figure(results: dict, source: Any):
    """Per request of each trace ({name: engine_caches.CacheRun}): prompt tokens and the cached part."""
    fig, axes = plots.figure(ncols=len(results), width=4.8, squeeze=False)
    for ax, (name, r) in zip(axes[0], results.items()):
        ax.bar(range(len(r.lengths)), r.lengths, color="#dddddd", label="prompt tokens")
        ax.bar(range(len(r.lengths)), r.hits, color=MEASURED, label="cached (reused)")
        ax.set(xlabel="request, in arrival order", ylabel="tokens")
        ax.set_title(f"{name}: hit rate {r.hit_rate:.0%}", fontsize=9)
        ax.legend(fontsize=7)
    return plots.finish(fig, source)


STATE_COLOURS = {"prefill": "tab:orange", "decode": MEASURED, "waiting": "#dddddd", "preempted": "#c44e52"}


@plots.notes_when_empty('The engine, step by step')
def timeline_figure(log: Sequence[dict], source: Any, title: str = ""):
    """The engine's step log (Engine.log): a lane per request coloured by its state in each step (waiting: queued,
    not preempted that step), and below the tokens computed and KV blocks in use. Steps on the x axis: a loaded
    machine changes the timing."""
    from matplotlib.patches import Patch

    fig, (a, b) = plots.figure(nrows=2, width=9, height=1.0, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    lanes = set()
    for s in log:
        for state, rids in (("prefill", s["prefill"]), ("decode", s["decode"]), ("preempted", s["preempted"]),
                            ("waiting", [r for r in s["waiting"] if r not in s["preempted"]])):
            for r in rids:
                a.barh(r, 1, left=s["step"], height=0.75, lw=0, color=STATE_COLOURS[state])
                lanes.add(r)
    fig.set_figheight(2.6 + 0.22 * len(lanes))
    a.invert_yaxis()
    a.set_ylabel("request")
    a.legend(handles=[Patch(color=c, label=s) for s, c in STATE_COLOURS.items()], fontsize=7,
             loc="upper left", bbox_to_anchor=(1.01, 1))
    a.set_title(title or "who is prefilling, decoding, waiting, preempted", fontsize=9)
    steps = [s["step"] + 0.5 for s in log]
    b.step(steps, [s["tokens"] for s in log], where="mid", color=COMPUTED, label="tokens computed")
    b.set_ylabel("tokens / step", fontsize=8)
    c = b.twinx()
    c.plot(steps, [s["blocks used"] for s in log], color="k", lw=1, label="KV blocks in use")
    c.set_ylabel("blocks in use", fontsize=8)
    b.set_xlabel("engine step")
    b.set_title("per step: tokens computed, KV blocks in use", fontsize=9)
    c.set_title(" ")
    b.legend(fontsize=7, loc="upper left")
    c.legend(fontsize=7, loc="upper right")
    return plots.finish(fig, source)


@plots.notes_when_empty('Tokens per target pass against draft length')
def expected_tokens_figure(rows: Sequence, alpha: float, k_max: int, source: Any):
    """Leviathan et al.'s expected tokens per target pass, (1 − α^(k+1)) ÷ (1 − α), against the draft length
    k at the chosen per-token acceptance α, with k + 1 (every draft kept) as the ceiling, and each measured
    drafter (a row of helpers.serving.speculative.speculative_runs) as a point at its k."""
    from ..formulas.speculation import expected_tokens_per_pass

    fig, ax = plots.figure(width=6.5, height=3.6)
    ks = list(range(0, k_max + 1))
    ax.plot(ks, [k + 1 for k in ks], color=BASELINE, ls="--", lw=1, label="ceiling: every draft kept (k + 1)")
    ax.plot(ks, [expected_tokens_per_pass(alpha, k) for k in ks], color=COMPUTED, marker="o", ms=3,
            label=f"expected at α = {alpha:.2f}: (1 − α^(k+1)) ÷ (1 − α)")
    for r, m in zip(rows.to_dict("records"), "sDv^<>ph"):
        ax.plot([r["k"]], [r["tokens per target pass"]], m, color=MEASURED, ms=7,
                label=f"measured: {r['drafter']}, {r['prompt']}")
    ax.set(xlabel="draft length k", ylabel="tokens per target pass")
    ax.set_title("tokens per target pass: Leviathan et al.'s eq. 1 and the measured drafters", fontsize=9)
    ax.legend(fontsize=7)
    return plots.finish(fig, source)
