"""The memory hierarchy: small fast memory near the arithmetic, large slow memory far from it.

- GPUs: HBM (size and bandwidth from the catalog, helpers.formulas.gpus) against on-chip shared memory / SRAM
  (sizes per SM and SM counts from NVIDIA's and AMD's documents, on-chip bandwidth where a paper
  publishes it), from helpers/data/gpu_onchip.csv; every figure carries its source there.
- This CPU: its cache sizes as the operating system reports them (/sys/devices/system/cpu on Linux,
  sysctl on macOS), and the read bandwidth measured at working sets from a few KiB to far beyond the
  last-level cache: the staircase that shows why tiling pays — data re-read from a level that holds
  it comes back several times faster than from DRAM.

The figures and labelled tables are helpers.present.hierarchy_figures.

The read benchmark sums a buffer of `nbytes` many times in one call (a stride-0 view repeats it), so
the per-call overhead of the framework is paid once per sample, not once per pass: at 32 KiB a pass
takes well under a microsecond, far less than a Python call.
"""
from __future__ import annotations

import contextlib
import csv
import math
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from .. import checks
from ..formulas.units import KiB, MiB

ONCHIP_FILE = Path(__file__).parents[1] / "data" / "gpu_onchip.csv"


# ============================================================================ GPUs

def _num(text: str) -> float | None:
    text = (text or "").strip()
    return float(text) if text else None


def onchip_rows() -> list[dict[str, Any]]:
    """Rows of gpu_onchip.csv with numbers parsed (empty cells are None)."""
    with ONCHIP_FILE.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for key in ("sms", "smem_per_sm_kib", "l1_smem_per_sm_kib", "l2_mb", "onchip_bandwidth_tbs"):
            r[key] = _num(r[key])
    return rows


@dataclass(frozen=True)
class GPUMemoryLevels:
    """One GPU's two levels: HBM (from the catalog) and on-chip shared memory (from gpu_onchip.csv)."""

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
        """Shared memory of all SMs together."""
        return self.sms * self.smem_per_sm_bytes if self.sms and self.smem_per_sm_bytes else None

    @property
    def onchip_over_hbm_bandwidth(self) -> float | None:
        return self.onchip_bandwidth / self.hbm_bandwidth if self.onchip_bandwidth else None

    @property
    def hbm_over_onchip_size(self) -> float | None:
        total = self.smem_total_bytes
        return self.hbm_bytes / total if total else None


def gpu_hierarchy() -> list[GPUMemoryLevels]:
    """One per catalogued GPU: HBM size and bandwidth (helpers.formulas.gpus) beside shared memory per SM,
    SMs, L2 and the on-chip bandwidth where published."""
    from ..formulas.gpus import catalog

    onchip = {r["name"]: r for r in onchip_rows()}
    rows = []
    for gpu in catalog():
        o = onchip.get(gpu.name)
        if o is None:
            continue
        rows.append(GPUMemoryLevels(
            gpu.name, gpu.memory_bytes, gpu.bandwidth,
            int(o["smem_per_sm_kib"] * KiB) if o["smem_per_sm_kib"] else None,
            int(o["sms"]) if o["sms"] else None,
            o["l2_mb"] * 1e6 if o["l2_mb"] else None,
            o["onchip_bandwidth_tbs"] * 1e12 if o["onchip_bandwidth_tbs"] else None,
            o["size_source"], o["bandwidth_source"] or "none published"))
    return rows


# ============================================================================ this CPU's caches

@dataclass(frozen=True)
class CacheLevel:
    """One cache level as the operating system reports it."""

    level: int
    kind: str           # Data, Instruction, Unified
    size_bytes: int
    shared_by: str      # CPUs sharing it, as the system lists them ("0-1"), or "" when unknown

    @property
    def name(self) -> str:
        suffix = {"Data": "d", "Instruction": "i"}.get(self.kind, "")
        return f"L{self.level}{suffix}"


def parse_size(text: str) -> int:
    """'48K' / '1024K' / '32M' / '32768' (bytes) as the kernel writes cache sizes → bytes."""
    t = text.strip().upper().removesuffix("B")
    mult = {"K": KiB, "M": MiB, "G": 2**30}.get(t[-1:], 1)
    digits = t[:-1] if t[-1:] in "KMG" else t
    if not digits.isdigit():
        raise ValueError(f"cannot read a cache size from {text!r}; expected e.g. '48K', '32M' or a byte count")
    return int(digits) * mult


def cpu_caches(root: str | Path = "/sys/devices/system/cpu/cpu0/cache") -> list[CacheLevel]:
    """This machine's caches (as seen from CPU 0): Linux sysfs, else macOS sysctl, else [] (unknown)."""
    root = Path(root)
    out = []
    if root.is_dir():
        for d in sorted(root.glob("index*")):
            try:
                out.append(CacheLevel(int((d / "level").read_text()), (d / "type").read_text().strip(),
                                      parse_size((d / "size").read_text()),
                                      (d / "shared_cpu_list").read_text().strip()
                                      if (d / "shared_cpu_list").exists() else ""))
            except (OSError, ValueError):
                continue
        return out
    if sys.platform == "darwin":  # pragma: no cover - not on the CI machine
        keys = (("hw.l1dcachesize", 1, "Data"), ("hw.l2cachesize", 2, "Unified"), ("hw.l3cachesize", 3, "Unified"))
        for key, level, kind in keys:
            r = subprocess.run(["sysctl", "-n", key], capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.strip().isdigit() and int(r.stdout) > 0:
                out.append(CacheLevel(level, kind, int(r.stdout), ""))
    return out


def data_caches(levels: Sequence[CacheLevel] | None = None) -> list[CacheLevel]:
    """The caches data goes through (instruction caches left out), smallest first."""
    levels = cpu_caches() if levels is None else levels
    return sorted((c for c in levels if c.kind != "Instruction"), key=lambda c: (c.level, c.size_bytes))


# ============================================================================ the staircase, measured

@contextlib.contextmanager
def cpu_threads(n: int | None, device: str = "cpu"):
    """Run torch on `n` CPU threads inside the block (on a CPU device; a GPU or n=None changes nothing).
    One thread keeps CPU timings steady on a machine that other programs share: several threads
    waiting on each other are slowed by every other process, one thread only by its share of a core."""
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
    """Read bandwidth (bytes/s, best of `repeats`) over a working set of `nbytes`, re-read until about
    `bytes_per_sample` bytes are read per sample, on `threads` CPU threads."""
    import torch

    from .timing import measure

    nbytes = checks.count(nbytes, "nbytes", minimum=1024)
    n = nbytes // 4
    x = torch.ones(n, dtype=torch.float32)          # touched now: no page faults in the timed reads
    passes = max(1, bytes_per_sample // (n * 4))
    view = x.expand(passes, n)                      # the same buffer `passes` times: one call, many passes
    with cpu_threads(threads):
        stats = measure(lambda: view.sum(), "cpu", warmup=1, repeats=repeats)
    return passes * n * 4 / stats.min


def working_set_sizes(lo: int = 4 * KiB, hi: int = 256 * MiB, per_octave: int = 2) -> list[int]:
    """Sizes from lo to hi, `per_octave` per doubling, rounded to whole KiB."""
    steps = int(round(math.log2(hi / lo) * per_octave))
    return sorted({int(round(lo * 2 ** (i / per_octave) / KiB)) * KiB for i in range(steps + 1)})


@dataclass(frozen=True)
class Stair:
    """The read bandwidth measured over one working set, and the smallest cache that holds it."""

    working_set_bytes: int
    read_bandwidth: float      # bytes/s
    fits_in: str               # "L1d", "L2", … or "DRAM"


def staircase(sizes: Sequence[int] | None = None, threads: int = 1, repeats: int = 5,
              bytes_per_sample: int = 128 * MiB, levels: Sequence[CacheLevel] | None = None) -> list[Stair]:
    """Measured read bandwidth at each working-set size, with the cache level that holds it."""
    from tqdm.auto import tqdm

    sizes = list(sizes or working_set_sizes())
    caches = data_caches(levels)
    rows = []
    for nbytes in tqdm(sizes, desc="working sets", leave=False):
        bw = read_bandwidth(nbytes, bytes_per_sample, repeats, threads)
        rows.append(Stair(nbytes, bw, fits_in(nbytes, caches)))
    return rows


def fits_in(nbytes: int, caches: Sequence[CacheLevel]) -> str:
    """The smallest data cache that holds `nbytes`, or 'DRAM'."""
    for c in caches:
        if nbytes <= c.size_bytes:
            return c.name
    return "DRAM"


@dataclass(frozen=True)
class Plateau:
    """One level of the staircase: the median bandwidth of the working sets it holds."""

    level: str
    sizes_measured: int
    median_bandwidth: float          # bytes/s
    over_dram: float | None          # median_bandwidth ÷ DRAM's, None when no size reached DRAM


def plateaus(stairs: Sequence[Stair]) -> list[Plateau]:
    """Median measured bandwidth per level (from staircase), and each level's speed over DRAM's."""
    import statistics

    by: dict[str, list[float]] = {}
    for r in stairs:
        by.setdefault(r.fits_in, []).append(r.read_bandwidth)
    dram = statistics.median(by["DRAM"]) if "DRAM" in by else None
    return [Plateau(k, len(v), statistics.median(v), statistics.median(v) / dram if dram else None)
            for k, v in by.items()]


def bench_staircase(repeats: int = 3) -> dict[str, Any]:
    """`make bench` section: this CPU's data caches and the measured read bandwidth per level (one core)."""
    caches = data_caches()
    rows = staircase(working_set_sizes(per_octave=1), repeats=repeats, bytes_per_sample=64 * MiB, levels=caches)
    return {"caches": [{"level": c.name, "bytes": c.size_bytes, "shared_by": c.shared_by} for c in caches],
            "staircase": [asdict(r) for r in rows], "plateaus": [asdict(p) for p in plateaus(rows)],
            "definitions": {"read_bandwidth": "bytes/s: bytes summed ÷ seconds, float32 sum re-reading one buffer, "
                                              "best of repeats, one CPU thread",
                            "over_dram": "a level's median bandwidth ÷ the median of the sizes beyond the last cache"}}
