"""Tables and the figure of the memory hierarchy (helpers.measure.hierarchy) for notebook 10: the GPUs'
HBM against their on-chip memory, this CPU's caches, and the measured read-bandwidth staircase."""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from ..formulas.units import KiB, MiB
from ..measure.hierarchy import CacheLevel, FoundLevel, GPUMemoryLevels, Stair
from . import plots


def _size(n: int) -> str:
    return f"{n / KiB:,.0f} KiB" if n < MiB else f"{n / MiB:,.0f} MiB"


def gpu_levels_frame(rows: Sequence[GPUMemoryLevels], sources: bool = False):
    """Each GPU's HBM beside its shared memory, labelled in the units the datasheets use; `sources` adds them."""
    def per(value, unit):
        return value / unit if value else None

    return pd.DataFrame([{
        "GPU": r.gpu, "HBM / device memory (GB)": r.hbm_bytes / 1e9, "HBM bandwidth (TB/s)": r.hbm_bandwidth / 1e12,
        "shared memory per SM (KiB)": per(r.smem_per_sm_bytes, KiB), "SMs": r.sms,
        "shared memory, all SMs (MiB)": per(r.smem_total_bytes, MiB), "L2 (MB)": per(r.l2_bytes, 1e6),
        "on-chip bandwidth (TB/s)": per(r.onchip_bandwidth, 1e12),
        "on-chip ÷ HBM bandwidth": r.onchip_over_hbm_bandwidth, "HBM ÷ on-chip size": r.hbm_over_onchip_size,
        **({"source (sizes)": r.size_source, "source (on-chip bandwidth)": r.bandwidth_source} if sources else {}),
    } for r in rows])


def caches_frame(caches: Sequence[CacheLevel]):
    """This machine's data caches, as the operating system reports them."""
    return pd.DataFrame([{"level": c.name, "kind": c.kind, "size (bytes)": f"{c.size_bytes:,}",
                          "size": _size(c.size_bytes),
                          "shared by CPUs": c.shared_by} for c in caches])


def levels_frame(rows: Sequence[FoundLevel]):
    """The levels found on the measured curve (helpers.measure.hierarchy.levels_found), in GB/s (10⁹ B/s), each
    level's bandwidth ÷ the last level's (the first over the last: what tiling can gain here)."""
    from ..formulas import regime

    last = rows[-1].median_bandwidth if rows else None
    return pd.DataFrame([{"working sets": _size(v.smallest_bytes) if v.smallest_bytes == v.largest_bytes else
                          f"{_size(v.smallest_bytes)} – {_size(v.largest_bytes)}", "sizes measured": v.sizes_measured,
                          "median read bandwidth (GB/s)": v.median_bandwidth / 1e9,
                          "÷ the last level's": regime.ratio(v.median_bandwidth, last),
                          "the system's cache holding the largest": v.reported} for v in rows])


@plots.notes_when_empty("This CPU's cache staircase")
def staircase_figure(stairs: Sequence[Stair], caches: Sequence[CacheLevel], source: Any):
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
    ax.set_ylim(bottom=0)
    ax.set(xlabel="working set re-read (bytes, log scale)", ylabel="read bandwidth (GB/s, 10⁹ B/s)",
           title="This CPU's memory hierarchy: read bandwidth against the working set")
    ax.legend(fontsize=8)
    return plots.finish(fig, source)


