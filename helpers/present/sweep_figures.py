"""Figures and tables of notebook 01's sweeps (helpers.measure.sweeps) and serving comparison (helpers.serving):
measured points beside the formula or fitted law; each result beside its reference with their ratio and label."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import pandas as pd

from ..formulas import regime
from ..formulas.memory import cache_window_slots, kv_cache_bytes
from . import plots


@plots.notes_when_empty('Memory grows with every token')
def memory_figure(df, loaded, spec=None, dtype: str | None = None):
    """Measured cache bytes (points) and the formula (line) against tokens; CUDA peak when measured."""
    spec, dtype = spec or loaded.spec, dtype or loaded.dtype
    ok, fig, ax = _sweep_axes(df, "tokens", loaded)
    if ax is None:
        return fig
    xs = list(range(int(ok["tokens"].min()), int(ok["tokens"].max()) + 1, max(1, int(ok["tokens"].max()) // 200)))
    peak = ok["peak_above_weights_bytes"].astype(float)
    div, unit = plots.byte_unit(max(float(ok["cache_bytes"].max()), peak.max() if peak.notna().any() else 0.0))
    line = [kv_cache_bytes(spec, x, 1, dtype, window_slots=cache_window_slots(spec)) / div for x in xs]
    ax.plot(xs, line, color=plots.COMPUTED, lw=1.5, label="formula: tokens × 2 × layers × kv_heads × head_dim × bytes")
    ax.scatter(ok["tokens"], ok["cache_bytes"] / div, color=plots.MEASURED, zorder=3, label="measured cache tensors")
    if peak.notna().any():
        ax.scatter(ok["tokens"], peak / div, color=plots.MEASURED, marker="x", label="CUDA allocator peak above the weights (measured)")
    _mark_oom(ax, df, "tokens")
    ax.set(ylim=(0, None), xlabel="tokens in the sequence", ylabel=plots.byte_label(unit, "KV cache"), title="Memory grows with every token")
    ax.legend(fontsize=8)
    return plots.finish(fig, loaded)


def _sweep_axes(df, key: str, source, median: str = "", p90: str = "", **style):
    """(the points that ran, a figure, its axes), with `median` drawn in ms against `key` and a bar up to its
    `p90` when given; when none ran, a figure that says so and None."""
    ok = df[~df["oom"]]
    if ok.empty:
        return ok, plots.note_figure(source, "Nothing ran", f"out of memory at the first point ({key} = {df[key].iloc[0]:,})"), None
    fig, ax = plots.figure(width=7, height=4)
    if median:
        ax.errorbar(ok[key], ok[median] * 1e3, yerr=[0 * ok[median], (ok[p90] - ok[median]) * 1e3], **style)
    return ok, fig, ax


def _mark_oom(ax, df, key: str) -> None:
    bad = df[df["oom"]]
    for x in bad[key]:
        ax.axvline(x, color=plots.OOM, ls="--", lw=1)
        ax.annotate(f"out of memory at {x:,}", (x, 0.95), xycoords=("data", "axes fraction"), color=plots.OOM,
                    fontsize=8, ha="right", rotation=90, va="top")


@plots.notes_when_empty('Time to first token against prompt length')
def ttft_figure(df, fit, loaded):
    """TTFT medians (p90 bars) against prompt length, log–log, with the fitted law (growth.GrowthFit or None) and slopes 1 and 2."""
    import numpy as np

    ok, fig, ax = _sweep_axes(df, "tokens", loaded, "ttft_s", "ttft_p90_s", fmt="o", color=plots.MEASURED,
                              label="measured (median, bar to p90)")
    if ax is None:
        return fig
    if fit is not None:
        xs = np.geomspace(ok["tokens"].min(), ok["tokens"].max(), 100)
        ax.plot(xs, [fit.predict(x) * 1e3 for x in xs], color=plots.FIT, lw=1,
                label=f"fit: a + b·n + c·n²  (exponent {fit.exponent:.2f} at {fit.n_max:,})")
    # slopes 1 and 2 through the longest prompt (x1, y1), from x1 ÷ 8 (or the shortest prompt)
    x1, y1 = float(ok["tokens"].iloc[-1]), float(ok["ttft_s"].iloc[-1]) * 1e3
    lo = max(float(ok["tokens"].min()), x1 / 8)
    for k, ls, name in ((1, ":", "∝ n, linear"), (2, "-.", "∝ n², quadratic")) if len(ok) >= 2 else ():
        ax.plot((lo, x1), (y1 * (lo / x1) ** k, y1), color=plots.GUIDE, ls=ls, lw=1.2, label=f"slope {k} through the longest prompt: {name}")
        ax.annotate(f"slope {k}", (lo, y1 * (lo / x1) ** k), textcoords="offset points", xytext=(-4, 0), ha="right",
                    va="center", fontsize=8, color=plots.GUIDE)
    _mark_oom(ax, df, "tokens")
    plots.log_axis(ax, "x", ticks=df["tokens"])
    if (ok["ttft_s"] > 0).any():            # a log axis needs a positive time (a timer that saw nothing has none)
        plots.log_axis(ax, "y")
    ax.set(xlabel="prompt tokens", ylabel="ms", title="Time to first token against the prompt")
    ax.legend(fontsize=8)
    return plots.finish(fig, loaded)


@plots.notes_when_empty('Requests over time')
def timeline_figure(results: Sequence, source: Any):
    """A Gantt chart per serving mode (naive.ServeResult): each request waiting, in prefill, decoding, held idle."""
    from matplotlib.patches import Patch

    phases = {"waiting": dict(color=plots.WAITING), "prefill → first token": dict(color=plots.PREFILL),
              "decode → last token": dict(color=plots.DECODE),
              "row held, idle (static batch)": dict(facecolor="white", hatch="////", edgecolor=plots.IDLE)}
    fig, axes = plots.figure(nrows=len(results), width=8, height=2.4, sharex=True, squeeze=False)
    for ax, res in zip(axes[:, 0], results):
        timings = sorted(res.timings, key=lambda t: t.rid)
        batch_end = max(t.finish_s for t in timings)
        together = len({t.start_s for t in timings}) == 1 and len(timings) > 1
        for k, t in enumerate(timings):
            ends = (0, t.start_s, t.first_token_s, t.finish_s, batch_end if together else t.finish_s)
            for a, b, style in zip(ends, ends[1:], phases.values()):
                ax.barh(k, b - a, left=a, height=0.6, lw=0, **style)
        ax.set_yticks(range(len(timings)), [f"req {t.rid}" for t in timings], fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"{res.mode}: {res.new_tokens} tokens in {res.wall_s:,.2f} s = {res.tokens_per_s:,.0f} tokens/s, "
                     f"{res.forward_calls} forward calls", fontsize=9)
    fastest = min(range(len(results)), key=lambda i: results[i].wall_s)  # its panel has room on the right
    axes[fastest, 0].legend(handles=[Patch(label=n, **st) for n, st in phases.items()], fontsize=7, loc="center right")
    axes[-1, 0].set_xlabel("seconds after all requests arrived")
    return plots.finish(fig, source, title="The same requests served one after another, then together")


@plots.notes_when_empty('Inter-token latency against context')
def itl_figure(df, loaded, floor_fn: Callable[[int], float] | None = None):
    """Decode step time (median, p90 bar) against context; optionally the memory-bound floor as a line."""
    ok, fig, ax = _sweep_axes(df, "context", loaded, "itl_s", "itl_p90_s", fmt="o-", color=plots.MEASURED,
                              label="measured step (median, bar to p90)")
    if ax is None:
        return fig
    if floor_fn is not None:
        ax.plot(ok["context"], [floor_fn(int(c)) * 1e3 for c in ok["context"]], color=plots.COMPUTED, ls="--", lw=1,
                label="memory-bound floor: (weights + KV) ÷ bandwidth")
    _mark_oom(ax, df, "context")
    plots.log_axis(ax, "x", ticks=df["context"])
    ax.set(ylim=(0, None), xlabel="tokens already in the cache (context)", ylabel="ms per token", title="Inter-token latency as the context grows")
    ax.legend(fontsize=8, loc="lower right")
    return plots.finish(fig, loaded)


@plots.notes_when_empty('Memory and speed against concurrent users')
def users_figure(df, loaded, total_memory: int | None = None, weight_bytes: int | None = None, budget=None):
    """Cache bytes (measured, formula, CUDA peak) against concurrent sequences, log–log, the out-of-memory
    point marked; with `budget` (growth.BudgetFit) the budget and the users that fit in it."""
    from ..formulas.units import fmt_iec
    ok, fig, ax = _sweep_axes(df, "batch", loaded)
    if ax is None:
        return fig
    top = max([float(ok["cache_bytes"].max())] + ([float(total_memory)] if total_memory else [])
              + ([float(budget.budget_bytes), budget.cache_bytes()] if budget else []))
    unit, name = plots.byte_unit(top)
    ax.plot(ok["batch"], ok["formula_bytes"] / unit, color=plots.COMPUTED, lw=1.5, label="formula: batch × context × KV per token")
    if budget is not None:
        ax.axhline(budget.budget_bytes / unit, color=plots.GUIDE, ls="--", lw=1.2,
                   label=f"your budget for the cache: {fmt_iec(budget.budget_bytes)}")
        if budget.users > budget.largest_batch:
            ax.plot([budget.largest_batch, budget.users], [budget.cache_bytes(budget.largest_batch) / unit,
                    budget.cache_bytes() / unit], color=plots.MEASURED, ls=":", lw=1,
                    label="measured bytes per sequence × users, past the sweep")
        if budget.users > 0:
            ax.scatter([budget.users], [budget.cache_bytes() / unit], marker="D", s=40, color=plots.FITS, zorder=4,
                       label=f"{budget.users:,} fit: the most whose measured cache ≤ the budget")
            ax.annotate(f"{budget.users:,}", (budget.users, budget.cache_bytes() / unit), textcoords="offset points",
                        xytext=(-6, 6), ha="right", fontsize=9, color=plots.FITS)
    ax.scatter(ok["batch"], ok["cache_bytes"] / unit, color=plots.MEASURED, zorder=3, label="KV cache (measured)")
    if ok["peak_above_weights_bytes"].notna().any():
        ax.scatter(ok["batch"], ok["peak_above_weights_bytes"].astype(float) / unit, marker="x", color=plots.MEASURED,
                   label="allocator peak above the weights (cache + activations, measured)")
    if total_memory and weight_bytes:
        ax.axhline((total_memory - weight_bytes) / unit, color=plots.MEASURED, lw=1, ls=":", label="device memory − weights (measured)")
    _mark_oom(ax, df, "batch")
    past = budget is not None and budget.users > budget.largest_batch     # its own tick; inside, the label above
    plots.log_axis(ax, "x", ticks=[*df["batch"], *([budget.users] if past else [])])
    plots.log_axis(ax, "y")
    ax.set(xlabel="concurrent sequences (batch)", ylabel=plots.byte_label(name), title="How many users fit?" + (
        f" {budget.users:,} of {budget.context:,} tokens in {fmt_iec(budget.budget_bytes)}" if budget is not None else ""))
    ax.legend(fontsize=8)
    return plots.finish(fig, loaded)


# ----------------------------------------------------------------------------- notebook 01's tables

def _ms(seconds) -> float:
    """Seconds as milliseconds; nan for None."""
    return math.nan if seconds is None else float(seconds) * 1e3


def growth_table(fit, doubling, spec, gpu_floors: dict | None = None, gpu_model=None, gpu_name: str = ""):
    """How the TTFT grows: the fitted law, the last doubling measured and, with `gpu_floors`, the GPU's;
    each with attention's share of the prefill's FLOPs (helpers.formulas.compute_share)."""
    from ..formulas.compute_share import flop_terms
    from ..measure.growth import local_exponent

    def row(what, n0, n1, ratio, exponent, model, **more):
        t = flop_terms(model, int(n1))
        return {"what": what, "from (tokens)": n0, "to (tokens)": n1, "time ratio": ratio, "exponent": exponent,
                **more, "attention's FLOPs at 'to' (%)": 100 * t.attention_context / t.total}

    law, last_doubling = "this run: the fitted law a + b·n + c·n²", "this run: the last doubling, measured"
    rows = [row(law, fit.n_max // 2, fit.n_max, regime.ratio(fit.predict(fit.n_max), fit.predict(fit.n_max // 2)),
                fit.exponent, spec, **{"n² term at 'to' (%)": 100 * fit.quadratic_share,
                                       f"constant at {fit.n_min:,} tokens (%)": 100 * fit.fixed_share})
            if fit is not None else {"what": f"{law} (fewer than two positive times: no fit)"},
            row(last_doubling, doubling.n0, doubling.n1, doubling.ratio, doubling.exponent, spec) if doubling is not None
            else {"what": f"{last_doubling} (no prompt ran beside its half in a positive time)"}]
    if gpu_floors and len(gpu_floors) >= 2:
        (n0, t0), (n1, t1) = sorted(gpu_floors.items())[-2:]
        rows.append(row(f"{gpu_model} on an {gpu_name}: the planner's floor, computed", n0, n1, regime.ratio(t1, t0),
                        local_exponent(n0, t0, n1, t1), gpu_model))
    first = ["what", "from (tokens)", "to (tokens)", "time ratio", "exponent", "n² term at 'to' (%)"]
    last = "attention's FLOPs at 'to' (%)"
    frame = pd.DataFrame(rows)
    frame = frame.reindex(columns=[*first, *[c for c in frame.columns if c not in (*first, last)], last])
    return frame.astype({"from (tokens)": "Int64", "to (tokens)": "Int64"})


def itl_table(itl, spec, dtype: str, gpu_floor=None, gpu_column: str = ""):
    """The median step per context beside the bytes it reads (stepcost.decode_cost), each ÷ the first, their
    ratio labelled; `gpu_floor(context)` (seconds) adds the GPU's floor as `gpu_column`."""
    from ..formulas.stepcost import decode_cost

    ok = itl[~itl["oom"]] if "oom" in itl else itl
    if ok.empty or "itl_s" not in ok:
        return pd.DataFrame({"context": [], "step (ms)": []})
    contexts = [int(c) for c in ok["context"]]
    steps = [_ms(s) for s in ok["itl_s"]]
    read = [decode_cost(spec, c, 1, dtype).bytes for c in contexts]
    frame = pd.DataFrame({"context": contexts, "step (ms)": steps, "bytes read": read,
                          "step ÷ first": [regime.ratio(s, steps[0]) for s in steps],
                          "bytes ÷ first": [regime.ratio(b, read[0]) for b in read]})
    frame = regime.ratio_columns(frame, "step ÷ first", "bytes ÷ first", "step growth ÷ bytes growth")
    if gpu_floor is not None:
        frame[gpu_column] = [_ms(gpu_floor(c)) for c in contexts]
    return frame


def batching_table(latency):
    """What batching changes per figure (naive.LatencyCost of each mode), together ÷ one after another; empty when a mode did not run."""
    if len(latency) < 2:
        return pd.DataFrame({"figure": []})
    one, together = latency[0], latency[1]
    rows = [("throughput (tokens/s)", one.tokens_per_s, together.tokens_per_s),
            ("median decode step (ms)", one.median_decode_step_ms, together.median_decode_step_ms),
            ("median prefill (ms)", one.median_prefill_ms, together.median_prefill_ms),
            ("median time to first token (ms)", one.median_ttft_ms, together.median_ttft_ms)]
    frame = pd.DataFrame(rows, columns=["figure", one.mode, together.mode])
    return regime.ratio_columns(frame, together.mode, one.mode, "together ÷ one after another")


def same_tokens(comparison):
    """Requests that got the same greedy tokens in both serving modes, and their share (empty when a mode did not run)."""
    seq, bat = comparison.sequential, comparison.batched
    if seq is None or bat is None:
        return pd.DataFrame({"requests": []})
    same = sum(a.tokens == b.tokens for a, b in zip(seq.timings, bat.timings))
    return pd.DataFrame([{"requests": len(seq.timings), "same greedy tokens both ways": same,
                          "share": regime.ratio(same, len(seq.timings))}])


def budget_table(fit):
    """The users that fit a budget (growth.BudgetFit) as one row, ÷ the largest batch the sweep ran."""
    if fit is None:
        return pd.DataFrame({"budget (bytes)": []})
    frame = pd.DataFrame([{"budget (bytes)": int(fit.budget_bytes), "tokens per sequence": fit.context,
                           "cache per sequence (bytes, measured)": fit.per_sequence_bytes, "users that fit": fit.users,
                           "largest batch measured": fit.largest_batch}])
    return regime.ratio_columns(frame, "users that fit", "largest batch measured", "users ÷ largest batch")
