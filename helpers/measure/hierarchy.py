"""The memory hierarchy: small fast memory near the arithmetic, large slow memory far from it.

- GPUs: HBM (size and bandwidth from the catalog, helpers.cost.gpus) against on-chip shared memory / SRAM
  (sizes per SM and SM counts from NVIDIA's and AMD's documents, on-chip bandwidth where a paper
  publishes it), from helpers/data/gpu_onchip.csv; every figure carries its source there.
- This CPU: its cache sizes as the operating system reports them (/sys/devices/system/cpu on Linux,
  sysctl on macOS), and the read bandwidth measured at working sets from a few KiB to far beyond the
  last-level cache: the staircase that shows why tiling pays — data re-read from a level that holds
  it comes back several times faster than from DRAM.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence
from ..present import plots

ONCHIP_FILE = Path(__file__).parents[1] / "data" / "gpu_onchip.csv"
KiB, MiB = 2**10, 2**20


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


def gpu_hierarchy() -> list[dict[str, Any]]:
    """One row per catalogued GPU: HBM size and bandwidth (helpers.cost.gpus) beside shared memory per SM,
    SMs, shared memory in total (SMs × per SM), L2 and the on-chip bandwidth where published."""
    from ..cost.gpus import catalog

    onchip = {r["name"]: r for r in onchip_rows()}
    rows = []
    for gpu in catalog():
        o = onchip.get(gpu.name)
        if o is None:
            continue
        total = o["sms"] * o["smem_per_sm_kib"] * KiB if o["sms"] and o["smem_per_sm_kib"] else None
        bw = o["onchip_bandwidth_tbs"] * 1e12 if o["onchip_bandwidth_tbs"] else None
        rows.append({
            "GPU": gpu.name, "HBM / device memory (GB)": gpu.memory_gb, "HBM bandwidth (TB/s)": gpu.bandwidth_tbs,
            "shared memory per SM (KiB)": o["smem_per_sm_kib"], "SMs": o["sms"],
            "shared memory, all SMs (MiB)": total / MiB if total else None,
            "L2 (MB)": o["l2_mb"], "on-chip bandwidth (TB/s)": o["onchip_bandwidth_tbs"],
            "on-chip ÷ HBM bandwidth": bw / gpu.bandwidth if bw else None,
            "HBM ÷ on-chip size": gpu.memory_bytes / total if total else None,
            "source (sizes)": o["size_source"], "source (on-chip bandwidth)": o["bandwidth_source"] or "none published",
        })
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

    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1024:
        raise ValueError(f"nbytes must be an integer ≥ 1024, got {nbytes!r}")
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


def staircase(sizes: Sequence[int] | None = None, threads: int = 1, repeats: int = 5,
              bytes_per_sample: int = 128 * MiB, levels: Sequence[CacheLevel] | None = None) -> list[dict[str, Any]]:
    """Measured read bandwidth at each working-set size, with the cache level that holds it."""
    from tqdm.auto import tqdm

    sizes = list(sizes or working_set_sizes())
    caches = data_caches(levels)
    rows = []
    for nbytes in tqdm(sizes, desc="working sets", leave=False):
        bw = read_bandwidth(nbytes, bytes_per_sample, repeats, threads)
        rows.append({"working set (bytes)": nbytes, "read bandwidth (GB/s)": bw / 1e9,
                     "fits in": fits_in(nbytes, caches)})
    return rows


def fits_in(nbytes: int, caches: Sequence[CacheLevel]) -> str:
    """The smallest data cache that holds `nbytes`, or 'DRAM'."""
    for c in caches:
        if nbytes <= c.size_bytes:
            return c.name
    return "DRAM"


def plateaus(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median measured bandwidth per level (rows from staircase), and each level's speed over DRAM's."""
    import statistics

    by: dict[str, list[float]] = {}
    for r in rows:
        by.setdefault(r["fits in"], []).append(r["read bandwidth (GB/s)"])
    dram = statistics.median(by["DRAM"]) if "DRAM" in by else None
    return [{"level": k, "sizes measured": len(v), "median read bandwidth (GB/s)": statistics.median(v),
             "× DRAM": statistics.median(v) / dram if dram else None} for k, v in by.items()]


@plots.notes_when_empty("This CPU's cache staircase")
def staircase_figure(rows: Sequence[dict[str, Any]], caches: Sequence[CacheLevel], source: Any):
    """Read bandwidth against working-set size (log x), with the cache sizes marked."""
    from ..present import plots

    fig, ax = plots.figure(width=8, height=4.2)
    xs = [r["working set (bytes)"] for r in rows]
    ax.plot(xs, [r["read bandwidth (GB/s)"] for r in rows], "o-", color="tab:blue", label="measured read bandwidth")
    for c in caches:
        ax.axvline(c.size_bytes, color="grey", ls=":", lw=1)
        ax.annotate(f"{c.name} {c.size_bytes // KiB:,} KiB" if c.size_bytes < MiB else f"{c.name} {c.size_bytes // MiB:,} MiB",
                    (c.size_bytes, 0), textcoords="offset points", xytext=(3, 4), fontsize=8, color="grey", rotation=90)
    ax.set_xscale("log", base=2)
    ticks = [t for t in (4 * KiB, 32 * KiB, 256 * KiB, 2 * MiB, 16 * MiB, 128 * MiB, 1024 * MiB) if min(xs) <= t <= max(xs)]
    ax.set_xticks(ticks, [f"{t // KiB} KiB" if t < MiB else f"{t // MiB} MiB" for t in ticks])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("working set re-read (bytes, log scale)")
    ax.set_ylabel("read bandwidth (GB/s, 10⁹ B/s)")
    ax.set_title("This CPU's memory hierarchy: bandwidth falls at each cache size")
    ax.legend(fontsize=8)
    return plots.finish(fig, source)


def bench_staircase(repeats: int = 3) -> dict[str, Any]:
    """`make bench` section: this CPU's data caches and the measured read bandwidth per level (one core)."""
    caches = data_caches()
    rows = staircase(working_set_sizes(per_octave=1), repeats=repeats, bytes_per_sample=64 * MiB, levels=caches)
    return {"caches": [{"level": c.name, "bytes": c.size_bytes, "shared_by": c.shared_by} for c in caches],
            "staircase": rows, "plateaus": plateaus(rows),
            "definitions": {"read bandwidth": "bytes summed ÷ seconds, float32 sum re-reading one buffer, "
                                              "best of repeats, one CPU thread",
                            "× DRAM": "a level's median bandwidth ÷ the median of the sizes beyond the last cache"}}
