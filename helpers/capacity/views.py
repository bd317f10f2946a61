"""Tables and figures of the capacity planner (helpers.capacity), for notebook 04 and the command line:
the ranking as a DataFrame with readable headers, the stamp saying what a figure was computed from,
latency and throughput over batch per GPU, and the quality–latency–throughput triangle on one GPU.
Every number comes from helpers.capacity.plan; the formulas are in that module's docstring.
"""
from __future__ import annotations

from typing import Iterable

from .. import checks
from .planner import DEFAULT_EFFICIENCY, Plan, max_batch, plan, plan_for_slo
from .ranking import rank
from ..cost.gpus import catalog_label
from ..cost.specs import get_spec


RANK_COLUMNS = {"rank": "rank", "gpu": "GPU", "gpus": "GPUs", "provider": "price from", "status": "status",
                "batch": "batch", "step_floor_ms": "ms per token (datasheet floor)",
                "step_ms": "ms per token (at efficiency)", "tokens_per_s": "tokens/s", "usd_per_hour": "$ per hour",
                "usd_per_million_tokens": "$ per M output tokens", "max_batch": "max batch",
                "prefill_ms": "prefill ms (1 prompt)", "bound": "bound", "note": "why"}


def rank_table(model, weight_dtype: str = "bf16", kv_dtype: str = "bf16", context: int = 4096,
               slo_ms: float | None = None, min_batch: int | None = None, gpus: int = 1,
               efficiency: float = DEFAULT_EFFICIENCY, provider: str | None = None):
    """rank() as a pandas DataFrame with readable headers (units in the names), rounded for reading."""
    import pandas as pd

    df = pd.DataFrame(rank(model, weight_dtype, kv_dtype, context, slo_ms, min_batch, gpus,
                           efficiency=efficiency, provider=provider))
    df = df[list(RANK_COLUMNS)].rename(columns=RANK_COLUMNS)
    for col, nd in (("ms per token (datasheet floor)", 2), ("ms per token (at efficiency)", 2), ("tokens/s", 0),
                    ("$ per hour", 2), ("$ per M output tokens", 3), ("prefill ms (1 prompt)", 1)):
        df[col] = df[col].astype(float).round(nd)
    df["rank"] = df["rank"].astype("Int64")
    df["batch"] = df["batch"].astype("Int64")
    return df.set_index("rank")


def source_text(model, weight_dtype: str, kv_dtype: str, gpus: int = 1, context: int | None = None) -> str:
    """The stamp of a planner figure or table: what it was computed from."""
    spec = get_spec(model)
    bits = [f"computed from {spec.name} config.json", f"weights {weight_dtype}", f"KV {kv_dtype}"]
    if context:
        bits.append(f"{context:,} tokens")
    bits.append(f"{gpus} GPU{'s' if gpus > 1 else ''} each (tensor parallel)" if gpus > 1 else "1 GPU each")
    bits.append(catalog_label())
    return " · ".join(bits)


# ----------------------------------------------------------------------------- curves and the triangle

def batch_points(max_b: int) -> list[int]:
    """1, 2, 4, … up to max_b, and max_b itself; none for a max batch of 0 (nothing fits)."""
    if max_b == 0 and not isinstance(max_b, bool):
        return []
    max_b = checks.count(max_b, "max batch")
    pts, b = [], 1
    while b < max_b:
        pts.append(b)
        b *= 2
    pts.append(max_b)
    return pts


def curve(model, gpu_names: Iterable[str], weight_dtype: str = "bf16", kv_dtype: str = "bf16",
          context: int = 4096, gpus: int = 1, efficiency: float = DEFAULT_EFFICIENCY):
    """Latency (ms per token) and throughput (tokens/s) over batch size, per GPU, up to its max batch,
    with the step at `efficiency` of the datasheet (as the ranking)."""
    import pandas as pd

    spec = get_spec(model)
    rows = []
    for name in gpu_names:
        top = max_batch(spec, name, gpus, weight_dtype, kv_dtype, context)
        for b in batch_points(top):
            p = plan(spec, name, gpus, weight_dtype, kv_dtype, context, b, efficiency=efficiency)
            rows.append({"gpu": p.gpu, "batch": b, "step_ms": p.step_ms, "tokens_per_s": p.tokens_per_s,
                         "usd_per_million_tokens": p.usd_per_million_tokens, "bound": p.bound})
    return pd.DataFrame(rows, columns=["gpu", "batch", "step_ms", "tokens_per_s", "usd_per_million_tokens", "bound"])


def plot_curve(df, title: str, stamp_text: str, slo_ms: float | None = None):
    """Two panels: ms per token against batch (with the SLO as a line), tokens/s against batch,
    one line per GPU."""
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
    ax1.set_ylabel("decode step = ms per output token")
    ax2.set_ylabel("output tokens/s (all sequences)")
    ax2.set_yscale("log")
    ax1.set_title("latency")
    ax2.set_title("throughput")
    ax2.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    return plots.finish(fig, stamp_text)


def triangle(model, gpu: str = "H100 SXM", weight_dtype: str = "bf16", kv_dtype: str = "bf16",
             context: int = 4096, slo_ms: float = 10.0, gpus: int = 1, efficiency: float = DEFAULT_EFFICIENCY):
    """The quality–latency–throughput triangle on one GPU, in numbers: the same model served for
    latency (batch 1), within an SLO, for throughput (largest batch), and with less precise weights
    and cache (fp8: more batch, less cost, a quality cost to check on a benchmark). Every step at
    `efficiency` of the datasheet. The SLO row's 'meets SLO' says whether plan_for_slo met it."""
    import pandas as pd

    spec = get_spec(model)
    checks.number(slo_ms, "SLO", positive=True, unit="ms per output token")
    rows = []

    def add(corner: str, p: Plan, what: str):
        rows.append({"corner": corner, "weights": p.weight_dtype, "KV": p.kv_dtype, "batch": p.batch,
                     "meets SLO": p.step_s <= slo_ms / 1e3,
                     "ms per token": p.step_ms, "tokens/s": p.tokens_per_s,
                     "$ per M output tokens": p.usd_per_million_tokens, "max batch": p.max_batch, "what": what})

    top = max_batch(spec, gpu, gpus, weight_dtype, kv_dtype, context)
    if top < 1:
        raise ValueError(plan(spec, gpu, gpus, weight_dtype, kv_dtype, context, 1).reason)
    kw = {"efficiency": efficiency}
    add("latency", plan(spec, gpu, gpus, weight_dtype, kv_dtype, context, 1, **kw), "one user, fastest tokens")
    p, ok = plan_for_slo(spec, gpu, slo_ms, gpus, weight_dtype, kv_dtype, context, **kw)
    add(f"latency ≤ {slo_ms:g} ms", p, "largest batch within the SLO" if ok else "misses the SLO even at batch 1")
    add("throughput", plan(spec, gpu, gpus, weight_dtype, kv_dtype, context, top, **kw), "largest batch that fits")
    q = max_batch(spec, gpu, gpus, "fp8", "fp8", context)
    if q >= 1 and (weight_dtype, kv_dtype) != ("fp8", "fp8"):
        add("throughput, less precision", plan(spec, gpu, gpus, "fp8", "fp8", context, q, **kw),
            "fp8 weights and cache: quality to check on a benchmark")
    df = pd.DataFrame(rows)
    for col, nd in (("ms per token", 2), ("tokens/s", 0), ("$ per M output tokens", 3)):
        df[col] = df[col].astype(float).round(nd)
    return df.set_index("corner")


REQUEST_COLUMNS = {"rank": "rank", "gpu": "GPU", "provider": "price from", "status": "status", "batch": "batch",
                   "step_ms": "ms per token (at efficiency)", "usd_per_million_input_tokens": "$ per M input tokens",
                   "usd_per_million_output_tokens": "$ per M output tokens (request)",
                   "usd_per_million_tokens": "$ per M output tokens (decode only)", "usd_per_request": "$ per request"}


def request_table(model, prompt_tokens: int, output_tokens: int, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                  context: int | None = None, slo_ms: float | None = None, min_batch: int | None = None,
                  gpus: int = 1, efficiency: float = DEFAULT_EFFICIENCY, provider: str | None = None):
    """rank() for requests of prompt + output tokens (context: their sum unless given), cheapest
    request first: $ per million input and output tokens the way API providers price them, prefill
    counted, next to the decode-only figure."""
    import pandas as pd

    context = context or checks.count(prompt_tokens, "prompt tokens") + checks.count(output_tokens, "output tokens")
    rows = rank(model, weight_dtype, kv_dtype, context, slo_ms, min_batch, gpus, efficiency=efficiency,
                provider=provider, prompt_tokens=prompt_tokens, output_tokens=output_tokens)
    df = pd.DataFrame(rows)[list(REQUEST_COLUMNS)].rename(columns=REQUEST_COLUMNS)
    for col in list(REQUEST_COLUMNS.values())[5:]:
        df[col] = df[col].astype(float).round(6 if col == "$ per request" else 3)
    df["rank"] = df["rank"].astype("Int64")
    df["batch"] = df["batch"].astype("Int64")
    return df.set_index("rank")
