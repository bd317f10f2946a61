"""Tables and the figure of attention beyond the KV cache (helpers.formulas.state_space and
helpers.measure.state_space_toys) for notebook 10: the labelled columns are made here."""
from __future__ import annotations

from typing import Any, Sequence

from ..measure.state_space_toys import SparsePattern, ToyStateCheck
from . import plots


def sparse_frame(rows: Sequence[SparsePattern]):
    """Sparse attention against dense, one row per (query, pattern)."""
    import pandas as pd

    return pd.DataFrame([{"query": r.query, "pattern": r.pattern, "keys attended": r.keys_attended,
                          "share of keys": r.share_of_keys, "dense softmax mass kept": r.mass_kept,
                          "output error (÷ ‖v‖)": r.output_error, "needle kept": r.needle_kept} for r in rows])


def toy_states_frame(rows: Sequence[ToyStateCheck]):
    """Toy Mamba and Jamba caches, measured, against the formula."""
    import pandas as pd

    return pd.DataFrame([{"model": r.model, "tokens": r.tokens, "measured KV (B)": r.kv_bytes,
                          "measured states (B)": r.state_bytes, "measured total (B)": r.total_bytes,
                          "formula (B)": r.formula_bytes, "equal": r.equal} for r in rows])


def state_figure(rows, linear_state_bytes: int | None, source: Any):
    """Bytes one sequence carries against context (log–log), one line per model, plus a flat linear-attention state."""
    colours = {"mistral-7b-v0.3": ("tab:red", "-"), "mistral-7b-v0.1": ("tab:red", "--"),
               "jamba-1.5-mini": ("tab:purple", "-"), "falcon-mamba-7b": ("tab:green", "-")}
    fig, ax = plots.figure(width=7.5, height=4.3)
    for name in dict.fromkeys(r["model"] for r in rows):
        pts = [r for r in rows if r["model"] == name]
        colour, style = colours.get(name, ("black", "-"))
        ax.loglog([r["tokens"] for r in pts], [r["bytes"] / 2**30 for r in pts], style, color=colour, marker=".", label=name)
    if linear_state_bytes:
        ax.axhline(linear_state_bytes / 2**30, color="tab:blue", ls=":",
                   label="linear attention, Mistral-shaped (32 layers × 8 heads × 128²)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length (tokens, one sequence)")
    ax.set_ylabel("bytes carried per sequence (GiB, 2³⁰ B)")
    ax.set_title("KV cache against fixed-size state")
    ax.legend(fontsize=7)
    return plots.finish(fig, source)


