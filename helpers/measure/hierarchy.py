"""The memory hierarchy: GPUs' HBM against on-chip shared memory (helpers/data/gpu_onchip.csv, each figure sourced);
this CPU's caches, its read bandwidth from a few KiB to past the last-level cache (the staircase that shows why
tiling pays), and the levels found on that curve."""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from ..formulas import regime
from ..formulas.units import KiB, MiB

ONCHIP_FILE = Path(__file__).parents[1] / "data" / "gpu_onchip.csv"


def onchip_rows() -> list[dict[str, Any]]:
    df = pd.read_csv(ONCHIP_FILE)
    return df.astype(object).where(df.notna(), None).to_dict("records")


@dataclass(frozen=True)
class GPUMemoryLevels:
    """One GPU's HBM (from the catalog) and on-chip shared memory (from gpu_onchip.csv)."""

    gpu: str
    hbm_bytes: float
    hbm_bandwidth: float                 # bytes/s
    smem_per_sm_bytes: int | None
    sms: int | None
    l2_bytes: float | None
    onchip_bandwidth: float | None       # bytes/s, the whole chip, where a source publishes it
    size_source: str
    bandwidth_source: str                # "none published" when none is

    @property
    def smem_total_bytes(self) -> int | None:
        return self.sms * self.smem_per_sm_bytes if self.sms and self.smem_per_sm_bytes else None

    @property
    def onchip_over_hbm_bandwidth(self) -> float | None:
        return self.onchip_bandwidth / self.hbm_bandwidth if self.onchip_bandwidth else None

    @property
    def hbm_over_onchip_size(self) -> float | None:
        total = self.smem_total_bytes
        return self.hbm_bytes / total if total else None


def gpu_hierarchy() -> list[GPUMemoryLevels]:
    """GPUMemoryLevels of each catalogued GPU that gpu_onchip.csv lists."""
    from ..formulas.gpus import catalog

    onchip = {r["name"]: r for r in onchip_rows()}
    return [GPUMemoryLevels(gpu.name, gpu.memory_bytes, gpu.bandwidth,
                            int(o["smem_per_sm_kib"] * KiB) if o["smem_per_sm_kib"] else None,
                            int(o["sms"]) if o["sms"] else None, o["l2_mb"] * 1e6 if o["l2_mb"] else None,
                            o["onchip_bandwidth_tbs"] * 1e12 if o["onchip_bandwidth_tbs"] else None,
                            o["size_source"], o["bandwidth_source"] or "none published")
            for gpu in catalog() if (o := onchip.get(gpu.name)) is not None]


@dataclass(frozen=True)
class CacheLevel:
    """One cache level as the system reports it (microbench.cache_rows)."""

    level: int
    kind: str           # Data, Instruction, Unified
    size_bytes: int
    shared_by: str      # CPUs sharing it, as the system lists them ("0-1"), or "" when unknown

    @property
    def name(self) -> str:
        suffix = {"Data": "d", "Instruction": "i"}.get(self.kind, "")
        return f"L{self.level}{suffix}"


def data_caches(levels: Sequence[CacheLevel] | None = None) -> list[CacheLevel]:
    """The caches data goes through (default this machine's, microbench.cache_rows), smallest first."""
    from .microbench import cache_rows

    levels = [CacheLevel(*row) for row in cache_rows()] if levels is None else levels
    return sorted((c for c in levels if c.kind != "Instruction"), key=lambda c: (c.level, c.size_bytes))


@contextlib.contextmanager
def cpu_threads(n: int | None, device: str = "cpu"):
    """torch on `n` CPU threads inside the block (a GPU or n=None changes nothing): one thread keeps timings steady
    on a shared machine, where threads waiting on each other are slowed by every other process."""
    import torch

    if n is None or not device.startswith("cpu"):
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def read_bandwidth(nbytes: int, bytes_per_sample: int = 128 * MiB, repeats: int = 5, threads: int = 1) -> float:
    """Read bandwidth (bytes/s, best of `repeats`) over `nbytes`, re-read to about `bytes_per_sample` per sample."""
    import torch

    from .timing import measure

    n = nbytes // 4
    x = torch.ones(n, dtype=torch.float32)          # touched now: no page faults in the timed reads
    passes = max(1, bytes_per_sample // (n * 4))
    view = x.expand(passes, n)                      # the same buffer `passes` times: one call, many passes
    with cpu_threads(threads):
        stats = measure(lambda: view.sum(), "cpu", warmup=1, repeats=repeats)
    return passes * n * 4 / stats.min


def working_set_sizes(lo: int = 4 * KiB, hi: int = 256 * MiB, per_octave: int = 2) -> list[int]:
    steps = int(round(math.log2(hi / lo) * per_octave))
    return sorted({int(round(lo * 2 ** (i / per_octave) / KiB)) * KiB for i in range(steps + 1)})


@dataclass(frozen=True)
class Stair:

    working_set_bytes: int
    read_bandwidth: float      # bytes/s
    fits_in: str               # "L1d", "L2", … or "DRAM"


def staircase(sizes: Sequence[int] | None = None, threads: int = 1, repeats: int = 5,
              bytes_per_sample: int = 128 * MiB, levels: Sequence[CacheLevel] | None = None) -> list[Stair]:
    from tqdm.auto import tqdm

    caches = data_caches(levels)
    return [Stair(n, read_bandwidth(n, bytes_per_sample, repeats, threads), fits_in(n, caches))
            for n in tqdm(list(sizes or working_set_sizes()), desc="working sets", leave=False)]


def fits_in(nbytes: int, caches: Sequence[CacheLevel]) -> str:
    return next((c.name for c in caches if nbytes <= c.size_bytes), "DRAM")


def staircase_sizes(caches: Sequence[CacheLevel], free_bytes: int | None = None, per_octave: int = 1,
                    lo: int = 4 * KiB, floor: int = 256 * MiB) -> list[int]:
    """Working sets from `lo`, each doubling, to past the last-level cache (microbench.beyond_last_cache)."""
    from .microbench import beyond_last_cache

    hi = beyond_last_cache(caches, free_bytes, floor)
    return working_set_sizes(lo, 2 ** math.ceil(math.log2(hi)), per_octave)


@dataclass(frozen=True)
class FoundLevel:
    """A flat run of the measured curve (no fall past the change margin inside it): its sizes, its median
    bandwidth, and the reported cache that holds its largest working set ('DRAM' past the last)."""

    smallest_bytes: int
    largest_bytes: int
    sizes_measured: int
    median_bandwidth: float      # bytes/s
    reported: str                # fits_in of its largest size


def levels_found(stairs: Sequence[Stair], caches: Sequence[CacheLevel]) -> list[FoundLevel]:
    """The levels of a measured staircase: the runs between falls of the bandwidth by more than the 10 % margin
    (helpers.formulas.regime.label: "below") from one size to the next; a size inside a run of falls (one step)
    belongs to no level. A rate of zero or none is no fall (its ratio is not a number)."""
    import statistics

    stairs, caches = sorted(stairs, key=lambda r: r.working_set_bytes), data_caches(caches)
    n = len(stairs)
    falls = [regime.label(regime.ratio(stairs[i + 1].read_bandwidth, stairs[i].read_bandwidth)) == regime.BELOW
             for i in range(n - 1)] + [False]
    levels, first = [], 0
    for i in range(n):
        if falls[i] or i == n - 1:
            run = stairs[first:i + 1]
            if not (falls[i] and 0 < first == i):     # a lone size between two falls: the middle of a step
                levels.append(FoundLevel(run[0].working_set_bytes, run[-1].working_set_bytes, len(run),
                                         statistics.median(r.read_bandwidth for r in run),
                                         fits_in(run[-1].working_set_bytes, caches)))
            first = i + 1
    return levels
