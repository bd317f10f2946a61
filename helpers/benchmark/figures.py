"""Figures of the engine benchmark, each from a table of helpers.benchmark.records: one streamed request's
chunks; throughput against latency as concurrency grows (the median of each level's runs, its spread as a
bar); SLO attainment against the achieved request rate; prefix caching's TTFT; three load generators on
one server. Given no rows, each is a note that says so."""
from __future__ import annotations

import math
from typing import Any

from ..present import plots

CHUNKS_TITLE = "One streamed request: where TTFT and ITL come from"
CURVE_TITLE = "Throughput against latency as concurrency grows"
OPEN_LOOP_TITLE = "Open loop: SLO attainment and TTFT against the achieved request rate"
PREFIX_TITLE = "Prefix caching on the agentic workload: mean TTFT"
TOOLS_TITLE = "One server, three load generators, the same requests"


def _bar(median: float, spread: float) -> float:
    """Half the range of a level's runs, the error bar around its median (0 where one run or no spread)."""
    v = median * spread / 2
    return v if math.isfinite(v) else 0.0


@plots.notes_when_empty(CHUNKS_TITLE)
def chunks_figure(example: dict, source: Any):
    """The arrival time of every streamed chunk with text of one request (a record's `example`): the first
    arrival is the TTFT, the gaps after it the inter-token latencies."""
    times_ms = [t * 1e3 for t in example.get("token_s") or []]
    if not times_ms:
        return plots.note_figure(source, CHUNKS_TITLE, f"the example request streamed no text ({example.get('error')})")
    fig, ax = plots.figure(width=8.0, height=3.0)
    ax.eventplot([times_ms], lineoffsets=0.5, linelengths=0.8, colors=plots.MEASURED)
    ax.axvspan(0, times_ms[0], color=plots.PREFILL, alpha=0.2, label=f"TTFT {times_ms[0]:.1f} ms")
    if example.get("itl_s") is not None:
        tokens = example.get("tokens", example.get("output_tokens"))
        ax.plot([], [], color=plots.MEASURED, label=f"{len(times_ms)} chunks, {tokens} tokens; "
                                                    f"ITL {example['itl_s'] * 1e3:.1f} ms")
    ax.set_yticks([])
    ax.set_xlabel("ms after the request was sent")
    ax.legend(fontsize=8, loc="upper right")
    return plots.finish(fig, source, CHUNKS_TITLE)


@plots.notes_when_empty(CURVE_TITLE)
def curve_figure(levels, source: Any):
    """Median output tokens/s against median TTFT (left) and ITL (right), one line per configuration and
    tool, each point a concurrency level (annotated), bars the spread of its runs."""
    t = levels[levels["rate asked"].isna() & levels["TTFT mean ms"].notna()]
    if t.empty:
        return plots.note_figure(source, CURVE_TITLE, "no closed-loop level had a successful request")
    fig, axes = plots.figure(ncols=2, width=6.0, height=4.0)
    for (name, tool), g in t.groupby(["configuration", "tool"], sort=False):
        g = g.sort_values("concurrency")
        for ax, col, sp in zip(axes, ("TTFT mean ms", "ITL mean ms"), ("TTFT spread", "ITL spread")):
            ax.errorbar(g[col], g["output tok/s"], xerr=[_bar(m, s) for m, s in zip(g[col], g[sp])],
                        yerr=[_bar(m, s) for m, s in zip(g["output tok/s"], g["output spread"])], marker="o",
                        capsize=2, label=name if tool == "client" else f"{name} ({tool})")
            for _, r in g.iterrows():
                ax.annotate(f"c={r['concurrency']:g}", (r[col], r["output tok/s"]), textcoords="offset points",
                            xytext=(4, 4), fontsize=8)
    for ax, what in zip(axes, ("mean TTFT (ms)", "mean ITL (ms)")):
        ax.set(xlabel=what, ylabel="output tokens/s", xscale="log")
    axes[0].legend(fontsize=7)
    return plots.finish(fig, source, CURVE_TITLE)


@plots.notes_when_empty(OPEN_LOOP_TITLE)
def open_loop_figure(levels, source: Any):
    """Left: the share of requests within the SLO against the achieved rate (90 %: DistServe's goal);
    right: median TTFT. A rate not held (too few requests, or sent off the rate asked) is a hollow marker."""
    t = levels[levels["rate asked"].notna()]
    if t.empty:
        return plots.note_figure(source, OPEN_LOOP_TITLE, "no open-loop run")
    fig, axes = plots.figure(ncols=2, width=6.0, height=4.0)
    for i, ((name, tool), g) in enumerate(t.groupby(["configuration", "tool"], sort=False)):
        g, colour = g.sort_values("rate asked"), f"C{i}"
        x = [a if a == a else r for a, r in zip(g["achieved rate"], g["rate asked"])]
        for ax, col, scale in ((axes[0], "SLO attained", 100), (axes[1], "TTFT mean ms", 1)):
            ax.plot(x, g[col] * scale, color=colour, label=name if tool == "client" else f"{name} ({tool})")
            for xi, yi, ok in zip(x, g[col] * scale, g["held"]):
                ax.plot([xi], [yi], "o", color=colour, markerfacecolor=colour if ok else "none")
    axes[0].axhline(90, **plots.DATASHEET_STYLE)
    axes[0].set(ylabel="requests within the SLO (%)", ylim=(0, 105))
    axes[1].set(ylabel="mean TTFT (ms)", yscale="log")
    for ax in axes:
        ax.set(xlabel="achieved rate (requests/s, Poisson arrivals)", xscale="log")
    axes[0].legend(fontsize=7)
    return plots.finish(fig, source, OPEN_LOOP_TITLE)


def _bars_by_level(ax, levels, groups, column: str, spread: str, label: str):
    """One bar per group (`label`: the column naming it) at each concurrency of `levels`, bars the spread of its runs."""
    import numpy as np

    conc = sorted(levels["concurrency"].dropna().unique())
    width = 0.8 / max(len(groups), 1)
    for i, name in enumerate(groups):
        g = levels[levels[label] == name].set_index("concurrency")
        vals = [g[column].get(c, np.nan) for c in conc]
        ax.bar(np.arange(len(conc)) + i * width, vals, width, label=name, capsize=3,
               yerr=[_bar(v, g[spread].get(c, np.nan)) for v, c in zip(vals, conc)])
    ax.set_xticks(np.arange(len(conc)) + width * (len(groups) - 1) / 2, [f"c={c:g}" for c in conc])
    ax.set_ylabel(column.replace(" mean ms", " mean (ms)"))


@plots.notes_when_empty(PREFIX_TITLE)
def prefix_figure(levels, source: Any):
    """The agentic trace's median TTFT per configuration at each concurrency, bars the spread of its runs."""
    fig, ax = plots.figure(width=6.0, height=3.6)
    _bars_by_level(ax, levels, list(dict.fromkeys(levels["configuration"])), "TTFT mean ms", "TTFT spread", "configuration")
    ax.legend(fontsize=8)
    return plots.finish(fig, source, PREFIX_TITLE)


@plots.notes_when_empty(TOOLS_TITLE)
def tools_figure(levels, source: Any):
    """Median TTFT and ITL per closed-loop level, one bar per load generator, bars the spread of its runs."""
    t = levels[levels["rate asked"].isna()]
    if t.empty or t["tool"].nunique() < 2:
        return plots.note_figure(source, TOOLS_TITLE, "fewer than two load generators measured this server")
    fig, axes = plots.figure(ncols=2, width=6.0, height=3.8)
    for ax, col, sp in zip(axes, ("TTFT mean ms", "ITL mean ms"), ("TTFT spread", "ITL spread")):
        _bars_by_level(ax, t, list(dict.fromkeys(t["tool"])), col, sp, "tool")
    axes[0].legend(fontsize=8)
    return plots.finish(fig, source, TOOLS_TITLE)
