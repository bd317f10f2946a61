"""Tables and figures of FlashAttention (helpers.formulas.flash, helpers.measure.attention_kernels) for
notebook 10: the HBM bytes of standard against tiled attention, and naive against fused timed."""
from __future__ import annotations

from typing import Any, Sequence

from ..formulas.flash import HBMTraffic
from . import plots


def hbm_figure(rows: Sequence[HBMTraffic], block_r: int, block_c: int, source: Any):
    """Bytes to and from HBM by sequence length (log–log): standard against tiled, with one N×N matrix."""
    from matplotlib.ticker import EngFormatter

    tokens = [r.tokens for r in rows]
    fig, ax = plots.figure(width=7, height=4)
    ax.loglog(tokens, [r.standard_bytes for r in rows], "o-", color="tab:red", label="standard (S and P through HBM)")
    ax.loglog(tokens, [r.tiled_bytes for r in rows], "o-", color="tab:green",
              label=f"tiled, blocks {block_r} × {block_c} (an upper bound: every K/V block from HBM, no L2 reuse)")
    ax.loglog(tokens, [r.nxn_bytes for r in rows], ":", color="grey", label="one N×N matrix, all heads")
    ax.set_xscale("log", base=2)
    ax.yaxis.set_major_formatter(EngFormatter(unit="B"))
    ax.set_xlabel("sequence length N (tokens)")
    ax.set_ylabel("bytes to and from HBM, one layer (decimal: GB = 10⁹ B)")
    ax.set_title("Attention's HBM traffic: standard against tiled")
    ax.legend(fontsize=8)
    return plots.finish(fig, source)


@plots.notes_when_empty('Naive against fused attention')
def timing_figure(df, source: Any):
    """Median time per call by length (log–log): naive, fused SDPA, and the readable tiled version
    (the frame of helpers.measure.attention_kernels.time_attention)."""
    ok = df[~df["oom"]]
    fig, ax = plots.figure(width=7, height=4)
    ax.loglog(ok["tokens"], ok["naive_s"] * 1e3, "o-", color="tab:red", label="naive (S and P materialised)")
    ax.loglog(ok["tokens"], ok["sdpa_s"] * 1e3, "o-", color="tab:green", label="scaled_dot_product_attention (fused)")
    if "tiled_s" in ok:
        t = ok.dropna(subset=["tiled_s"])
        ax.loglog(t["tokens"], t["tiled_s"] * 1e3, "s--", color="tab:grey", label="tiled_attention (Python loops)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length (tokens)")
    ax.set(ylabel="ms per call (median)", title="Attention time: materialised against fused")
    ax.legend(fontsize=8)
    return plots.finish(fig, source)


def timing_frame(df):
    """The timed lengths (helpers.measure.attention_kernels.time_attention's frame, out-of-memory rows left out)
    with naive ÷ fused and its label: above 1, the fused kernel is the faster."""
    from ..formulas import regime

    ok = df[~df["oom"]].drop(columns=["oom", "naive_over_sdpa"], errors="ignore")
    return regime.ratio_columns(ok, "naive_s", "sdpa_s", "naive ÷ fused")
