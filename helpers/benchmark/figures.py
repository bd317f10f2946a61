"""Figures of the engine benchmark: throughput against latency as concurrency grows (one curve per
configuration), and the client's figures beside guidellm's for the same configuration and level."""
from __future__ import annotations

from typing import Any

from ..present import plots
from .agreement import OURS


CURVE_TITLE = "Throughput against latency as concurrency grows"
TOOLS_TITLE = "One server, two load generators: our streaming client and guidellm"
CHUNKS_TITLE = "One streamed request: where TTFT and ITL come from"


def _rows(table, tool: str | None, workload: str | None):
    t = table if tool is None else table[table["source"] == tool]
    t = t if workload is None else t[t["workload"] == workload]
    return t[t["TTFT mean ms"].notna()] if "TTFT mean ms" in t else t


@plots.notes_when_empty(CURVE_TITLE)
def curve_figure(table, source: Any, workload: str | None = None, tool: str = "client"):
    """Output tokens/s against mean TTFT (left) and mean ITL (right); each point a concurrency level
    (annotated), one line per configuration. `table`: helpers.benchmark.records.runs_table(...). Runs in
    which no request succeeded have no latency to draw; with none left, a note says so."""
    t = _rows(table, tool, workload)
    if t.empty:
        return plots.note_figure(source, CURVE_TITLE, f"no run of {tool} on workload {workload or 'any'} had a "
                                                      "successful request")
    fig, axes = plots.figure(ncols=2, width=6.0, height=4.0)
    for name, g in t.groupby("configuration", sort=False):
        g = g.sort_values("concurrency")
        for ax, col in zip(axes, ("TTFT mean ms", "ITL mean ms")):
            ax.plot(g[col], g["output tok/s"], marker="o", label=name)
            for _, r in g.iterrows():
                ax.annotate(f"c={int(r['concurrency'])}", (r[col], r["output tok/s"]), textcoords="offset points",
                            xytext=(4, 4), fontsize=8)
    for ax, what in zip(axes, ("mean TTFT (ms)", "mean ITL (ms)")):
        ax.set_xlabel(what)
        ax.set_ylabel("output tokens/s")
        ax.set_xscale("log")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{CURVE_TITLE} ({tool}, workload {workload or 'all'})")
    return plots.finish(fig, source)


@plots.notes_when_empty(TOOLS_TITLE)
def tools_figure(table, source: Any, workload: str | None = None):
    """Mean TTFT and mean ITL per configuration and level: our client's own run, our definitions on
    guidellm's requests (from its per-request output), and guidellm's figures."""
    import numpy as np

    t = _rows(table, None, workload)
    if t.empty or not (t["source"] == "guidellm").any():
        return plots.note_figure(source, TOOLS_TITLE, f"guidellm has no successful run on workload {workload or 'any'}")
    keys = t[["configuration", "concurrency"]].drop_duplicates().values.tolist()
    fig, axes = plots.figure(ncols=2, width=6.0, height=4.0)
    x = np.arange(len(keys))
    for ax, col in zip(axes, ("TTFT mean ms", "ITL mean ms")):
        for i, tool in enumerate(("client", OURS, "guidellm")):
            vals = []
            for name, c in keys:
                row = t[(t["configuration"] == name) & (t["concurrency"] == c) & (t["source"] == tool)]
                vals.append(float(row[col].iloc[0]) if len(row) and row[col].iloc[0] is not None else np.nan)
            ax.bar(x + (i - 1) * 0.27, vals, 0.27, label={"client": "our client (its own run)",
                                                           OURS: "our definitions, guidellm's requests"}.get(tool, tool))
        ax.set_xticks(x, [f"{'CB' if 'continuous' in n else 'no CB'}\nc={int(c)}" for n, c in keys], fontsize=8)
        ax.set_ylabel(col.replace(" mean ms", " mean (ms)"))
        ax.set_yscale("log")
    axes[0].legend(fontsize=8)
    fig.suptitle(TOOLS_TITLE)
    return plots.finish(fig, source)


@plots.notes_when_empty(CHUNKS_TITLE)
def chunks_figure(example: dict, source: Any, title: str = CHUNKS_TITLE):
    """The arrival time of every streamed chunk with text of one request (bench.run_config's `example`): the first
    arrival is the TTFT, the gaps after it the inter-token latencies."""
    if not example.get("token_s"):
        return plots.note_figure(source, title, f"the example request streamed no text ({example.get('error')})")
    fig, ax = plots.figure(width=8.0, height=3.2)
    times_ms = [t * 1e3 for t in example["token_s"]]
    ax.eventplot([times_ms], lineoffsets=0.5, linelengths=0.8, colors="C0")
    ax.axvspan(0, times_ms[0], color="C1", alpha=0.2, label=f"TTFT {times_ms[0]:.1f} ms")
    if example.get("itl_s") is not None:
        tokens = example.get("output_tokens")
        counted = f"{len(times_ms)} chunks" + (f", {tokens} tokens" if tokens is not None else "")
        ax.plot([], [], color="C0", label=f"{counted}; mean ITL {example['itl_s'] * 1e3:.1f} ms")
    ax.set_yticks([])
    ax.set_xlabel("ms after the request was sent")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(title)
    return plots.finish(fig, source)


OPEN_LOOP_TITLE = "Open loop: latency and SLO attainment against the request rate"
PREFIX_TITLE = "Prefix caching on the agentic workload"


@plots.notes_when_empty(OPEN_LOOP_TITLE)
def open_loop_figure(table, source: Any, workload: str = "chat", attainment: dict | None = None):
    """Left: normalized latency (each request's end-to-end latency ÷ its output tokens, averaged: the vLLM
    paper's Fig. 12 axis) against the Poisson request rate. Right: the share of requests within the SLO
    (`attainment`: {configuration: [(rate, share)]}, recomputed for the SLO chosen; else the table's)."""
    t = table[(table["source"] == "client") & table["rate req/s"].notna() & (table["workload"] == workload)]
    if t.empty:
        return plots.note_figure(source, OPEN_LOOP_TITLE, f"no open-loop run of workload {workload}")
    fig, axes = plots.figure(ncols=2, width=6.0, height=4.0)
    for name, g in t.groupby("configuration", sort=False):
        g = g.sort_values("rate req/s")
        axes[0].plot(g["rate req/s"], g["norm. latency ms/token"], marker="o", label=name)
        pts = (attainment or {}).get(name) or list(zip(g["rate req/s"], g["SLO attained"]))
        axes[1].plot([p[0] for p in pts], [None if p[1] is None else 100 * p[1] for p in pts], marker="o", label=name)
    axes[0].set_ylabel("normalized latency (ms per output token)")
    axes[1].set_ylabel("requests within the SLO (%)")
    axes[1].axhline(90, **plots.DATASHEET_STYLE)
    axes[1].text(axes[1].get_xlim()[0], 91, "90 %: DistServe's attainment goal", fontsize=8, color="#555")
    axes[1].set_ylim(0, 105)
    for ax in axes:
        ax.set_xlabel("request rate (requests/s, Poisson arrivals)")
        ax.set_xscale("log")
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{OPEN_LOOP_TITLE} (workload {workload})")
    return plots.finish(fig, source)


@plots.notes_when_empty(PREFIX_TITLE)
def prefix_figure(rows: list, source: Any, hit_rates: dict | None = None):  # rows: list[prefix.PrefixLevel]
    """Mean TTFT with vLLM's prefix caching off and on at each concurrency (prefix.prefix_caching_effect's
    rows), and beside it the share of prompt tokens a cache could serve on the same trace: a radix tree,
    16-token and 128-token blocks (bench.prefix_model) and what vLLM counted."""
    import numpy as np

    fig, axes = plots.figure(ncols=2, width=6.0, height=4.0)
    x = np.arange(len(rows))
    axes[0].bar(x - 0.2, [r.ttft_off_ms for r in rows], 0.4, label="prefix caching off", color=plots.DATASHEET)
    axes[0].bar(x + 0.2, [r.ttft_on_ms for r in rows], 0.4, label="prefix caching on (default)", color=plots.MEASURED)
    axes[0].set_xticks(x, [f"c={r.concurrency}\n÷ {r.off_over_on:.1f}" for r in rows])
    axes[0].set_ylabel("mean TTFT (ms)")
    axes[0].legend(fontsize=8)
    axes[0].set_title("vLLM, measured", fontsize=10)
    rates = {k: v for k, v in (hit_rates or {}).items() if isinstance(v, (int, float)) and k != "prompt tokens"}
    if rates:
        labels = list(rates)
        plots.bars(axes[1], labels, [100 * v for v in rates.values()],
                   [plots.MEASURED if "vLLM" in k else plots.COMPUTED for k in labels], fmt=lambda v: f"{v:.1f} %")
        axes[1].set_ylabel("prompt tokens served from the cache (%)")
        axes[1].tick_params(axis="x", labelsize=7)
    else:
        axes[1].axis("off")
    axes[1].set_title("the same trace: replayed (orange), counted by vLLM (blue)", fontsize=10)
    fig.suptitle(PREFIX_TITLE)
    return plots.finish(fig, source)
