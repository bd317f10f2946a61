"""Microbenchmarks of this device, the roofs of the roofline, each the best of its repeats (as STREAM reports):
the read bandwidth (the sum of a buffer past the caches: a decode step's floor is its bytes ÷ this rate), the copy
bandwidth for comparison (read + written, STREAM's "copy", McCalpin 1995), peak matmul FLOP/s (2·n³ per n × n)."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..formulas.regime import ratio
from ..formulas.units import FLOAT_DTYPES, normalize_dtype
from .dtypes import torch_dtype
from .timing import Stats, measure


def parse_size(text: str) -> int:
    """'48K' / '1024K' / '32M' / '32768' (bytes) as the kernel writes cache sizes → bytes."""
    t = text.strip().upper().removesuffix("B")
    digits, unit = (t[:-1], t[-1]) if t[-1:] in ("K", "M", "G") else (t, "")
    if not digits.isdigit():
        raise ValueError(f"cannot read a cache size from {text!r}; expected e.g. '48K', '32M' or a byte count")
    return int(digits) * 2 ** (10 * " KMG".index(unit or " "))


def cache_rows(root: str | Path = "/sys/devices/system/cpu/cpu0/cache") -> list[tuple[int, str, int, str]]:
    """This machine's caches as hierarchy.CacheLevel's fields: Linux sysfs, else macOS sysctl, else []."""
    root = Path(root)
    out = []
    if root.is_dir():
        for d in sorted(root.glob("index*")):
            try:
                shared = d / "shared_cpu_list"
                out.append((int((d / "level").read_text()), (d / "type").read_text().strip(),
                            parse_size((d / "size").read_text()), shared.read_text().strip() if shared.exists() else ""))
            except (OSError, ValueError):
                continue
        return out
    if sys.platform == "darwin":  # pragma: no cover - not on the CI machine
        keys = (("hw.l1dcachesize", 1, "Data"), ("hw.l2cachesize", 2, "Unified"), ("hw.l3cachesize", 3, "Unified"))
        for key, level, kind in keys:
            r = subprocess.run(["sysctl", "-n", key], capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.strip().isdigit() and int(r.stdout) > 0:
                out.append((level, kind, int(r.stdout), ""))
    return out


def last_level_cache_bytes(caches=None) -> int | None:
    """The largest data cache's bytes of `caches` (CacheLevels; default this machine's); None when none is reported."""
    sizes = ([c.size_bytes for c in caches if c.kind != "Instruction"] if caches is not None else
             [size for _, kind, size, _ in cache_rows() if kind != "Instruction"])
    return max(sizes, default=None)


# The working sets reach this many times the last-level cache, so that the last ones are read from DRAM.
PAST_LAST_CACHE = 4
# ... and never take more than this share of the memory free now.
SHARE_OF_FREE = 0.25


def beyond_last_cache(caches=None, free_bytes: int | None = None, floor: int = 256 * 2**20, buffers: int = 1) -> int:
    """A working set past this machine's caches: PAST_LAST_CACHE × the last-level cache, halved while `buffers` of it
    would take more than SHARE_OF_FREE of the free memory, never below `floor`: the one sizing of every measurement
    that must read from memory (the staircase's last working set, the bandwidth benchmark's buffer)."""
    if free_bytes is None:
        import psutil

        free_bytes = psutil.virtual_memory().available
    hi = max(floor, PAST_LAST_CACHE * (last_level_cache_bytes(caches) or 0))
    while hi > floor and buffers * hi > SHARE_OF_FREE * free_bytes:
        hi //= 2
    return max(floor, hi)


@dataclass(frozen=True)
class CopyBenchmark:
    """One bandwidth measurement (a copy or a read): `iters` passes over `nbytes` per timed sample."""

    device: str
    nbytes: int          # size of the buffer
    bytes_moved: int     # per pass: a copy's read + written, a read's read
    iters: int
    stats: Stats         # seconds per timed sample (iters copies)

    @property
    def seconds_per_copy(self) -> float:
        """The best sample per pass: a roof is the best the device sustains (other work only ever slows a sample)."""
        return ratio(self.stats.min, self.iters)

    @property
    def bandwidth(self) -> float:
        return ratio(self.bytes_moved, self.seconds_per_copy)   # inf for a zero time, never an exception

    def to_dict(self) -> dict:
        return {"device": self.device, "nbytes": self.nbytes, "bytes_moved_per_copy": self.bytes_moved,
                "iters": self.iters, "seconds_per_copy": self.seconds_per_copy,
                "bandwidth_bytes_per_s": self.bandwidth, **{f"sample_{k}": v for k, v in self.stats.to_dict().items()}}


def _buffer(device: str | None, nbytes: int | None, iters: int | None) -> tuple[str, int, int]:
    """(device, bytes, passes per sample) of a bandwidth benchmark: on a GPU 20 passes of 1 GiB (at most a tenth of
    the free memory), on a CPU one pass past this machine's last-level cache (a 480 MiB L3 holds 256 MiB whole)."""
    import torch

    from .hardware import pick_device

    dev = pick_device(device)
    if not nbytes and dev.startswith("cuda"):
        nbytes = int(min(2**30, max(64 * 2**20, torch.cuda.mem_get_info()[0] // 10)))
    return dev, nbytes or beyond_last_cache(buffers=2), iters or (20 if dev.startswith(("cuda", "mps")) else 1)


def copy_benchmark(device: str | None = None, nbytes: int | None = None, repeats: int = 5,
                   iters: int | None = None) -> CopyBenchmark:
    """Time dst.copy_(src) for two device buffers of `nbytes`; each copy moves 2 × nbytes."""
    import torch

    dev, nbytes, iters = _buffer(device, nbytes, iters)
    src = torch.ones(nbytes, dtype=torch.uint8, device=dev)
    dst = torch.zeros(nbytes, dtype=torch.uint8, device=dev)  # touched now, so no page faults are timed
    return CopyBenchmark(dev, nbytes, 2 * nbytes, iters,
                         measure(lambda: [dst.copy_(src) for _ in range(iters)], dev, 1, repeats))


def read_benchmark(device: str | None = None, nbytes: int | None = None, repeats: int = 5,
                   iters: int | None = None) -> CopyBenchmark:
    """The read bandwidth, the floor's: the sum of an fp32 buffer past the caches, bytes read ÷ the best time."""
    import torch

    dev, nbytes, iters = _buffer(device, nbytes, iters)
    x = torch.ones(nbytes // 4, dtype=torch.float32, device=dev)
    return CopyBenchmark(dev, x.numel() * 4, x.numel() * 4, iters,
                         measure(lambda: [x.sum() for _ in range(iters)], dev, 1, repeats))


@dataclass(frozen=True)
class MatmulBenchmark:
    """`iters` n × n matmuls per timed sample."""

    device: str
    dtype: str
    n: int
    iters: int
    stats: Stats

    @property
    def flops_per_matmul(self) -> int:
        return 2 * self.n**3

    @property
    def flops_per_s(self) -> float:
        return ratio(self.flops_per_matmul * self.iters, self.stats.min)

    def to_dict(self) -> dict:
        return {"device": self.device, "dtype": self.dtype, "n": self.n, "iters": self.iters,
                "flops_per_matmul": self.flops_per_matmul, "flops_per_s": self.flops_per_s,
                **{f"sample_{k}": v for k, v in self.stats.to_dict().items()}}


def matmul_benchmark(device: str | None = None, dtype: str = "fp32", n: int | None = None, repeats: int = 5,
                     iters: int | None = None) -> MatmulBenchmark:
    """torch.mm on n × n matrices of a dtype; on CUDA fp32 runs as true fp32 (TF32 off), bf16/fp16 on the tensor cores."""
    import torch

    from .hardware import pick_device

    dev = pick_device(device)
    dt = normalize_dtype(dtype, FLOAT_DTYPES)
    n = n or (8192 if dev.startswith("cuda") else 4096 if dev.startswith("mps") else 2048 if dt == "fp32" else 1024)
    iters = iters or (10 if dev.startswith(("cuda", "mps")) else 1)
    tdt = torch_dtype(dt)
    a = torch.randn(n, n, device=dev, dtype=tdt)  # the values do not change the time
    b = torch.randn(n, n, device=dev, dtype=tdt)
    c = torch.empty(n, n, device=dev, dtype=tdt)
    return MatmulBenchmark(dev, dt, n, iters,
                           measure(lambda: [torch.mm(a, b, out=c) for _ in range(iters)], dev, 1, repeats))

