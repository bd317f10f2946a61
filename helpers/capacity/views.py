"""Tables and figures of the capacity planner for notebook 04 and the command line: the ranking and the triangle
as DataFrames with readable headers (the only place their labels are made), the stamp of what a figure was
computed from, latency and throughput over batch per GPU.
"""
from __future__ import annotations

from typing import Iterable

from .planner import DEFAULT_EFFICIENCY, max_batch, plan
from ..formulas.gpus import catalog_label
from ..formulas.specs import get_spec

RANK_COLUMNS = {"rank": "rank", "gpu": "GPU", "gpus": "GPUs", "provider": "price from", "status": "status",
                "batch": "batch", "step_floor_ms": "ms per token (datasheet floor)",
                "step_ms": "ms per token (at efficiency)", "tokens_per_s": "tokens/s", "usd_per_hour": "$ per hour",
                "usd_per_million_tokens": "$ per M output tokens", "max_batch": "max batch",
                "prefill_ms": "prefill ms (1 prompt)", "bound": "bound", "note": "why"}
TRIANGLE_COLUMNS = {"corner": "corner", "weight_dtype": "weights", "kv_dtype": "KV", "batch": "batch",
                    "meets_slo": "meets SLO", "step_ms": "ms per token", "tokens_per_s": "tokens/s",
                    "usd_per_million_tokens": "$ per M output tokens", "max_batch": "max batch", "what": "what"}
REQUEST_COLUMNS = {"rank": "rank", "gpu": "GPU", "provider": "price from", "status": "status", "batch": "batch",
                   "step_ms": "ms per token (at efficiency)", "usd_per_million_input_tokens": "$ per M input tokens",
                   "usd_per_million_output_tokens": "$ per M output tokens (request)",
                   "usd_per_million_tokens": "$ per M output tokens (decode only)", "usd_per_request": "$ per request",
                   "prefill_bound": "prefill bound"}


def _frame(rows: Iterable, columns: dict[str, str], digits: dict[str, int]):
    """Rows (dicts) as a DataFrame: `columns` (field → header) in that order, floats rounded,
    indexed by the first column."""
    import pandas as pd

    df = pd.DataFrame(list(rows), columns=list(columns))
    for field, nd in digits.items():
        df[field] = df[field].astype(float).round(nd)
    for field in ("rank", "batch"):
        if field in df:
            df[field] = df[field].astype("Int64")
    return df.rename(columns=columns).set_index(columns[next(iter(columns))])


def rank_frame(rows: Iterable[dict]):
    """A ranking (ranking.rank) with readable headers, indexed by rank."""
    return _frame(rows, RANK_COLUMNS, {"step_floor_ms": 2, "step_ms": 2, "tokens_per_s": 0, "usd_per_hour": 2,
                                       "usd_per_million_tokens": 3, "prefill_ms": 1})


def triangle_frame(corners: Iterable[dict]):
    """The triangle's corners (triangle.triangle), indexed by corner."""
    return _frame(corners, TRIANGLE_COLUMNS, {"step_ms": 2, "tokens_per_s": 0, "usd_per_million_tokens": 3})


def request_frame(rows: Iterable[dict]):
    """A ranking of requests (ranking.rank_requests): $ per million input and output tokens, prefill counted,
    beside the decode-only figure, the ratio of an output token's price to an input token's, and which term
    bounds the prefill; indexed by rank."""
    from ..formulas import regime

    rows = list(rows)
    df = _frame(rows, REQUEST_COLUMNS, {field: 6 if field == "usd_per_request" else 3
                                        for field in list(REQUEST_COLUMNS)[5:-1]})
    df.insert(len(df.columns) - 1, "output ÷ input price",
              [round(regime.ratio(r["usd_per_million_output_tokens"], r["usd_per_million_input_tokens"]), 1) for r in rows])
    return df


def source_text(model, weight_dtype: str, kv_dtype: str, gpus: int = 1, context: int | None = None) -> str:
    """The stamp of a planner figure or table: what it was computed from."""
    bits = [f"computed from {get_spec(model).name} config.json", f"weights {weight_dtype}", f"KV {kv_dtype}",
            *([f"{context:,} tokens"] if context else []),
            f"{gpus} GPUs each (tensor parallel)" if gpus > 1 else "1 GPU each", catalog_label()]
    return " · ".join(bits)


def batch_points(max_b: int) -> list[int]:
    """1, 2, 4, … up to max_b, and max_b itself; none for a max batch of 0 (nothing fits)."""
    return [*(2**k for k in range(max_b.bit_length()) if 2**k < max_b), max_b] if max_b else []


def curve(model, gpu_names: Iterable[str], weight_dtype: str = "bf16", kv_dtype: str = "bf16",
          context: int = 4096, gpus: int = 1, efficiency: float = DEFAULT_EFFICIENCY):
    """Latency (ms per token) and throughput (tokens/s) over batch, per GPU up to its max batch, the step at
    `efficiency` of the datasheet (as the ranking)."""
    import pandas as pd

    spec = get_spec(model)
    columns = ["gpu", "batch", "step_ms", "tokens_per_s", "usd_per_million_tokens", "bound"]
    rows = [plan(spec, name, gpus, weight_dtype, kv_dtype, context, b, efficiency=efficiency)
            for name in gpu_names for b in batch_points(max_batch(spec, name, gpus, weight_dtype, kv_dtype, context))]
    return pd.DataFrame([{c: getattr(p, c) for c in columns} for p in rows], columns=columns)


def plot_curve(df, title: str, stamp_text: str, slo_ms: float | None = None):
    """Two panels, one line per GPU: ms per token against batch (the SLO as a line), tokens/s against batch."""
    from ..present import plots

    fig, (ax1, ax2) = plots.figure(ncols=2, width=6.0, height=4.0)
    for gpu_name, d in df.groupby("gpu", sort=False):
        ax1.plot(d["batch"], d["step_ms"], marker="o", ms=3, label=gpu_name)
        ax2.plot(d["batch"], d["tokens_per_s"], marker="o", ms=3, label=gpu_name)
    if slo_ms:
        ax1.axhline(slo_ms, color="#b00", ls="--", lw=1)
        ax1.annotate(f"SLO {slo_ms:g} ms", (0.02, slo_ms), xycoords=("axes fraction", "data"), color="#b00",
                     fontsize=8, va="bottom")
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch (sequences decoded together)")
    ax1.set(ylabel="decode step = ms per output token", title="latency")
    ax2.set(ylabel="output tokens/s (all sequences)", yscale="log", title="throughput")
    ax2.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    return plots.finish(fig, stamp_text)
