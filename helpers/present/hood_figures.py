"""Tables and figures of notebook 10: where the compute goes (helpers.formulas.compute_share), the memory
hierarchy (helpers.measure.hierarchy) and FlashAttention's bytes and timings (helpers.formulas.flash,
helpers.measure.attention_kernels)."""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from ..formulas import regime
from ..formulas.compute_share import TALK_LAYER_SHARE
from ..formulas.units import KiB, MiB
from . import plots

# ----------------------------------------------------------------------------- where the compute goes

# FlopTerms's fields, as a table names them
FLOP_PARTS = {"embedding": "embedding (a lookup)", "attention_projections": "layers: attention projections (q, k, v, o)",
              "attention_context": "layers: attention over the context (QKᵀ, softmax·V)", "mlp": "layers: MLP",
              "head": "head (logits)"}


def shares_frame(rows: Sequence):
    """One row per phase and length (compute_share.PhaseTerms): each part's share of the forward pass's FLOPs."""
    return pd.DataFrame([{"phase": r.phase, "tokens": r.tokens,
                          **{label: getattr(r.terms, f) / r.terms.total for f, label in FLOP_PARTS.items()}}
                         for r in rows])


@plots.notes_when_empty('Share of compute in each part of a forward pass')
def share_figure(sweep: Sequence, source: Any, threshold: float = TALK_LAYER_SHARE):
    """Share of FLOPs in all layers and in attention over the context, by length, prefill and decode."""
    fig, axes = plots.figure(ncols=2, width=5.2, height=4)
    for ax, phase in zip(axes, ("prefill", "decode")):
        rows = [r for r in sweep if r.phase == phase]
        for name, style in zip(dict.fromkeys(r.model for r in rows), ("-", "--", ":", "-.")):
            g = [r for r in rows if r.model == name]
            tokens = [r.tokens for r in g]
            ax.plot(tokens, [100 * r.terms.layer_share for r in g], style, color="tab:orange", lw=2,
                    label=f"{name}: all layers")
            ax.plot(tokens, [100 * r.terms.context_share for r in g], style, color="tab:purple",
                    label=f"{name}: attention over the context")
        ax.axhline(100 * threshold, color="grey", lw=1, ls="-.", label=f"the talk's {threshold:.0%}")
        ax.set_xscale("log", base=2)
        ax.set(xlabel="prompt tokens" if phase == "prefill" else "context (tokens in the cache)",
               ylabel="share of the forward pass's FLOPs (%)", ylim=(0, 101))
        ax.set_title(f"{phase}: one {'prompt' if phase == 'prefill' else 'decode step'}", fontsize=10)
    axes[0].legend(fontsize=6.5, loc="center left")   # the empty middle-left of the prefill panel
    fig.suptitle("Where the FLOPs go, by context length")
    return plots.finish(fig, source)


# ----------------------------------------------------------------------------- the memory hierarchy

def _size(n: int) -> str:
    return f"{n / KiB:,.0f} KiB" if n < MiB else f"{n / MiB:,.0f} MiB"


def gpu_levels_frame(rows: Sequence, sources: bool = False):
    """Each GPU's HBM beside its shared memory (hierarchy.GPUMemoryLevels), in the datasheets' units."""
    return pd.DataFrame([{
        "GPU": r.gpu, "HBM / device memory (GB)": r.hbm_bytes / 1e9, "HBM bandwidth (TB/s)": r.hbm_bandwidth / 1e12,
        "shared memory per SM (KiB)": r.smem_per_sm_bytes / KiB if r.smem_per_sm_bytes else None, "SMs": r.sms,
        "shared memory, all SMs (MiB)": r.smem_total_bytes / MiB if r.smem_total_bytes else None,
        "L2 (MB)": r.l2_bytes / 1e6 if r.l2_bytes else None,
        "on-chip bandwidth (TB/s)": r.onchip_bandwidth / 1e12 if r.onchip_bandwidth else None,
        "on-chip ÷ HBM bandwidth": r.onchip_over_hbm_bandwidth, "HBM ÷ on-chip size": r.hbm_over_onchip_size,
        **({"source (sizes)": r.size_source, "source (on-chip bandwidth)": r.bandwidth_source} if sources else {}),
    } for r in rows])


def caches_frame(caches: Sequence):
    """This machine's data caches (hierarchy.CacheLevel), as the operating system reports them."""
    return pd.DataFrame([{"level": c.name, "kind": c.kind, "size (bytes)": f"{c.size_bytes:,}",
                          "size": _size(c.size_bytes), "shared by CPUs": c.shared_by} for c in caches])


def levels_frame(rows: Sequence):
    """The levels found on the measured curve (hierarchy.levels_found) in GB/s, each ÷ the last level's."""
    last = rows[-1].median_bandwidth if rows else None
    return pd.DataFrame([{"working sets": _size(v.smallest_bytes) if v.smallest_bytes == v.largest_bytes else
                          f"{_size(v.smallest_bytes)} – {_size(v.largest_bytes)}", "sizes measured": v.sizes_measured,
                          "median read bandwidth (GB/s)": v.median_bandwidth / 1e9,
                          "÷ the last level's": regime.ratio(v.median_bandwidth, last),
                          "the system's cache holding the largest": v.reported} for v in rows])


@plots.notes_when_empty("This CPU's cache staircase")
def staircase_figure(stairs: Sequence, caches: Sequence, source: Any):
    """Read bandwidth against working-set size (log x), with the cache sizes marked."""
    fig, ax = plots.figure(width=8, height=4.2)
    xs = [r.working_set_bytes for r in stairs]
    ax.plot(xs, [r.read_bandwidth / 1e9 for r in stairs], "o-", color="tab:blue", label="measured read bandwidth")
    for c in caches:
        ax.axvline(c.size_bytes, color="grey", ls=":", lw=1)
        ax.annotate(f"{c.name} {_size(c.size_bytes)}",
                    (c.size_bytes, 0), textcoords="offset points", xytext=(3, 4), fontsize=8, color="grey", rotation=90)
    ax.set_xscale("log", base=2)
    ticks = [t for t in (4 * KiB, 32 * KiB, 256 * KiB, 2 * MiB, 16 * MiB, 128 * MiB, 1024 * MiB) if min(xs) <= t <= max(xs)]
    ax.set_xticks(ticks, [_size(t) for t in ticks])
    ax.set(ylim=(0, None), xlabel="working set re-read (bytes, log scale)", ylabel="read bandwidth (GB/s, 10⁹ B/s)",
           title="This CPU's memory hierarchy: read bandwidth against the working set")
    ax.legend(fontsize=8)
    return plots.finish(fig, source)


# ----------------------------------------------------------------------------- FlashAttention

def hbm_figure(rows: Sequence, block_r: int, block_c: int, source: Any):
    """Bytes to and from HBM by sequence length (flash.HBMTraffic, log–log): standard against tiled, one N×N matrix."""
    from matplotlib.ticker import EngFormatter

    tokens = [r.tokens for r in rows]
    fig, ax = plots.figure(width=7, height=4)
    ax.loglog(tokens, [r.standard_bytes for r in rows], "o-", color="tab:red", label="standard (S and P through HBM)")
    ax.loglog(tokens, [r.tiled_bytes for r in rows], "o-", color="tab:green",
              label=f"tiled, blocks {block_r} × {block_c} (an upper bound: every K/V block from HBM, no L2 reuse)")
    ax.loglog(tokens, [r.nxn_bytes for r in rows], ":", color="grey", label="one N×N matrix, all heads")
    ax.set_xscale("log", base=2)
    ax.yaxis.set_major_formatter(EngFormatter(unit="B"))
    ax.set(xlabel="sequence length N (tokens)", ylabel="bytes to and from HBM, one layer (decimal: GB = 10⁹ B)",
           title="Attention's HBM traffic: standard against tiled")
    ax.legend(fontsize=8)
    return plots.finish(fig, source)


@plots.notes_when_empty('Naive against fused attention')
def timing_figure(df, source: Any):
    """Median time per call by length (attention_kernels.time_attention's frame, log–log): naive, fused, tiled."""
    ok = df[~df["oom"]]
    fig, ax = plots.figure(width=7, height=4)
    ax.loglog(ok["tokens"], ok["naive_s"] * 1e3, "o-", color="tab:red", label="naive (S and P materialised)")
    ax.loglog(ok["tokens"], ok["sdpa_s"] * 1e3, "o-", color="tab:green", label="scaled_dot_product_attention (fused)")
    if "tiled_s" in ok:
        t = ok.dropna(subset=["tiled_s"])
        ax.loglog(t["tokens"], t["tiled_s"] * 1e3, "s--", color="tab:grey", label="tiled_attention (Python loops)")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="sequence length (tokens)", ylabel="ms per call (median)",
           title="Attention time: materialised against fused")
    ax.legend(fontsize=8)
    return plots.finish(fig, source)


def timing_frame(df):
    """The timed lengths, out-of-memory rows left out, with naive ÷ fused and its label (above 1: fused is faster)."""
    ok = df[~df["oom"]].drop(columns=["oom", "naive_over_sdpa"], errors="ignore")
    return regime.ratio_columns(ok, "naive_s", "sdpa_s", "naive ÷ fused")
