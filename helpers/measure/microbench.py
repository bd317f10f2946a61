"""Microbenchmarks of this device: the two roofs of the roofline (helpers.formulas.roofline), measured with
helpers.measure.timing (warm-up, synchronisation, repeats):
- memory bandwidth: a device-to-device copy of a buffer larger than the caches, counting the bytes
  read plus the bytes written (the STREAM "copy" convention, McCalpin 1995); a read-only sum for
  comparison;
- peak matmul FLOP/s in a dtype: a square n × n matmul, 2·n³ FLOPs (n³ multiply–adds).
Both roofs use the best of the repeats (as STREAM reports its best rate).
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..formulas.units import normalize_dtype
from .dtypes import torch_dtype
from .timing import Stats, measure

MATMUL_DTYPES = ("fp32", "bf16", "fp16")


def _device(device: str | None) -> str:
    from .hardware import pick_device

    return pick_device(device)


# ============================================================================ this CPU's caches, for sizing buffers

def parse_size(text: str) -> int:
    """'48K' / '1024K' / '32M' / '32768' (bytes) as the kernel writes cache sizes → bytes."""
    t = text.strip().upper().removesuffix("B")
    mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(t[-1:], 1)
    digits = t[:-1] if t[-1:] in "KMG" else t
    if not digits.isdigit():
        raise ValueError(f"cannot read a cache size from {text!r}; expected e.g. '48K', '32M' or a byte count")
    return int(digits) * mult


def cache_rows(root: str | Path = "/sys/devices/system/cpu/cpu0/cache") -> list[tuple[int, str, int, str]]:
    """This machine's caches as seen from CPU 0, (level, kind, bytes, CPUs sharing it or ""): Linux sysfs,
    else macOS sysctl, else [] (unknown). helpers.measure.hierarchy.CacheLevel is one row."""
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
    """The largest data cache (its last level) of `caches` (helpers.measure.hierarchy.CacheLevel; default this
    machine's, cache_rows), in bytes; None when none is reported."""
    sizes = ([c.size_bytes for c in caches if c.kind != "Instruction"] if caches is not None else
             [size for _, kind, size, _ in cache_rows() if kind != "Instruction"])
    return max(sizes, default=None)


# The working sets reach this many times the last-level cache, so that the last ones are read from DRAM.
PAST_LAST_CACHE = 4
# ... and never take more than this share of the memory free now.
SHARE_OF_FREE = 0.25


def beyond_last_cache(caches=None, free_bytes: int | None = None, floor: int = 256 * 2**20, buffers: int = 1) -> int:
    """A working set past this machine's caches: PAST_LAST_CACHE × the last-level cache (at least `floor`),
    halved while `buffers` of it would take more than SHARE_OF_FREE of the free memory (`free_bytes`,
    default: measured now with psutil), never below `floor`. The one sizing of every measurement that must
    read from memory, not from a cache: the staircase's last working set, the bandwidth benchmark's buffer."""
    if free_bytes is None:
        import psutil

        free_bytes = psutil.virtual_memory().available
    hi = max(floor, PAST_LAST_CACHE * (last_level_cache_bytes(caches) or 0))
    while hi > floor and buffers * hi > SHARE_OF_FREE * free_bytes:
        hi //= 2
    return max(floor, hi)


def default_copy_bytes(device: str, caches=None, free_bytes: int | None = None) -> int:
    """Bytes copied by the bandwidth benchmark (and read by the kernel probe): on a GPU, past its L2 (1 GiB,
    capped at a tenth of the free memory); on a CPU, past this machine's own last-level cache
    (beyond_last_cache, the two buffers of a copy): a 480 MiB L3 holds a 256 MiB buffer whole."""
    if device.startswith("cuda"):
        import torch

        free, _ = torch.cuda.mem_get_info()
        return int(min(2**30, max(64 * 2**20, free // 10)))
    return beyond_last_cache(caches, free_bytes, buffers=2)


def copy_size_note(nbytes: int, device: str, last: int | None) -> str:
    """The buffer against `last`, the last-level cache (bytes; None when unknown) of the machine that measured, as
    the roofs' table says it: '1,920 MiB, 4.0× the 480 MiB last-level cache (past it)', or '… (the cache holds it)'."""
    from ..formulas.verdicts import factor

    if device.startswith(("cuda", "mps")):
        return f"{nbytes / 2**20:,.0f} MiB, past the GPU's L2"
    if not last:
        return f"{nbytes / 2**20:,.0f} MiB (no cache size reported)"
    return (f"{nbytes / 2**20:,.0f} MiB, {factor(nbytes / last)} the {last / 2**20:,.0f} MiB last-level cache "
            f"({'past it' if nbytes > last else 'the cache holds it'})")


def against_copy(rate: float, copy_bandwidth: float, read_bytes: float, what: str, cache_bytes: float | None,
                 copy_bytes: float | None = None, roof_name: str = "the copy's bandwidth",
                 read_what: str = "its weights"):
    """A measured read rate (bytes/s) of `what` against the copy's bandwidth, by
    helpers.formulas.verdicts.against_roof: 'N % of the copy's bandwidth', 'at …', or 'above the copy's
    bandwidth (1.07×)' with its reason (verdicts.above_floor_reason: the `read_bytes` fit the last-level cache of
    `cache_bytes`, None when unknown); and, where the copy's own buffer (`copy_bytes`) fits that cache, that
    the floor itself was partly read from the cache."""
    from ..formulas import verdicts

    v = verdicts.against_roof(rate, copy_bandwidth, roof_name)
    words = f"{what} at {rate / 1e9:,.1f} GB/s: {v.words}"
    above = verdicts.change_verdict(rate / copy_bandwidth) == "higher"
    if above:
        words += verdicts.above_floor_reason(read_bytes, cache_bytes, read_what)
    if copy_bytes and cache_bytes and copy_bytes <= cache_bytes:
        words += (f" (the copy's own {copy_bytes / 2**20:,.0f} MiB buffer fits that {cache_bytes / 2**20:,.0f} MiB "
                  "cache: its bandwidth is partly the cache's)")
    return verdicts.Verdict(words, "against_copy", {**v.evidence, "read_bytes": read_bytes, "above": float(above),
                                                    "cache_bytes": float(cache_bytes or 0),
                                                    "copy_bytes": float(copy_bytes or 0)})


@dataclass(frozen=True)
class CopyBenchmark:
    """One bandwidth measurement: `iters` copies of `nbytes` per timed sample."""

    device: str
    nbytes: int          # size of the buffer copied
    bytes_moved: int     # per copy: nbytes read + nbytes written
    iters: int
    stats: Stats         # seconds per timed sample (iters copies)

    @property
    def seconds_per_copy(self) -> float:
        """The best (shortest) sample per copy: a roof is the best the device sustains, and STREAM
        reports its best rate the same way; interference from other work only ever slows a sample."""
        return self.stats.min / self.iters

    @property
    def bandwidth(self) -> float:
        """Bytes per second, read + write, from the best sample."""
        return self.bytes_moved / self.seconds_per_copy

    def to_dict(self) -> dict:
        return {"device": self.device, "nbytes": self.nbytes, "bytes_moved_per_copy": self.bytes_moved,
                "iters": self.iters, "seconds_per_copy": self.seconds_per_copy,
                "bandwidth_bytes_per_s": self.bandwidth, **{f"sample_{k}": v for k, v in self.stats.to_dict().items()}}


def _timed(once, dev: str, iters: int, repeats: int) -> Stats:
    """helpers.measure.timing.measure of `iters` calls of `once` per sample (one warm-up)."""
    def run():
        for _ in range(iters):
            once()

    return measure(run, dev, warmup=1, repeats=repeats)


def _buffer(device: str | None, nbytes: int | None, iters: int | None) -> tuple[str, int, int]:
    """(device, bytes, copies per sample) of a bandwidth benchmark: default_copy_bytes; 20 copies on a GPU, 1 on a CPU."""
    dev = _device(device)
    return dev, nbytes or default_copy_bytes(dev), iters or (20 if dev.startswith(("cuda", "mps")) else 1)


def copy_benchmark(device: str | None = None, nbytes: int | None = None, repeats: int = 5,
                   iters: int | None = None) -> CopyBenchmark:
    """Time dst.copy_(src) for two device buffers of `nbytes`; each copy moves 2 × nbytes."""
    import torch

    dev, nbytes, iters = _buffer(device, nbytes, iters)
    src = torch.ones(nbytes, dtype=torch.uint8, device=dev)
    dst = torch.zeros(nbytes, dtype=torch.uint8, device=dev)  # touched now, so no page faults are timed
    return CopyBenchmark(dev, nbytes, 2 * nbytes, iters, _timed(lambda: dst.copy_(src), dev, iters, repeats))


def read_benchmark(device: str | None = None, nbytes: int | None = None, repeats: int = 5,
                   iters: int | None = None) -> CopyBenchmark:
    """Read-only bandwidth, for comparison: the sum of an fp32 buffer of `nbytes`. On many CPUs reading alone
    streams more slowly than a copy's read + write total: the roofline's bandwidth can sit above what a
    decode step can read."""
    import torch

    dev, nbytes, iters = _buffer(device, nbytes, iters)
    x = torch.ones(nbytes // 4, dtype=torch.float32, device=dev)
    return CopyBenchmark(dev, x.numel() * 4, x.numel() * 4, iters, _timed(x.sum, dev, iters, repeats))


GEMV_SHAPE = (3584, 1024)        # one weight matrix of the stack on a CPU: the small profile's MLP projection
GEMV_SHAPE_CUDA = (14336, 4096)  # on a GPU: Mistral 7B's MLP projection (config.json: intermediate × hidden)


def gemv_shape(device: str) -> tuple[int, int]:
    """The weight matrix the kernel-bandwidth probe reads, per device: a GPU reads the CPU's 14.7 MB in about
    one kernel launch's time, so on CUDA each matrix is the 7B's own MLP projection (117 MB in bf16)."""
    return GEMV_SHAPE_CUDA if str(device).startswith("cuda") else GEMV_SHAPE


def gemv_benchmark(device: str | None = None, dtype: str = "fp32", nbytes: int | None = None,
                   packed: bool = False, repeats: int = 5) -> CopyBenchmark:
    """The bandwidth a decode step's own kernel attains: one activation row times a stack of weight matrices
    (gemv_shape(device) each) holding `nbytes` in all, each read once per pass so that nothing stays in a cache —
    a decode step at batch 1 in miniature. `packed=False` times ``F.linear`` (what ``nn.Linear`` calls),
    `packed=True` oneDNN on prepacked weights (helpers.decoding.packed, CPU). Bytes counted: the weights read."""
    import torch

    dev = _device(device)
    dt = normalize_dtype(dtype, MATMUL_DTYPES)
    nbytes = nbytes or default_copy_bytes(dev)
    tdt = torch_dtype(dt)
    shape = gemv_shape(dev)
    per = shape[0] * shape[1] * torch.empty((), dtype=tdt).element_size()
    first = torch.randn(shape, device=dev).to(tdt)     # the values do not change the time: copies of one matrix
    weights = [first] + [first.clone() for _ in range(nbytes // per - 1)]
    x = torch.randn(1, shape[1], device=dev).to(tdt)
    if packed:
        stack = [torch.ops.mkldnn._reorder_linear_weight(w, 1) for w in weights]
        del weights

        def run():
            for w in stack:
                torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], "")
    else:
        stack = weights

        def run():
            for w in stack:
                torch.nn.functional.linear(x, w)

    read = len(stack) * per
    with torch.inference_mode():
        stats = measure(run, dev, warmup=1, repeats=repeats)
    return CopyBenchmark(dev, read, read, 1, stats)


def kernel_bandwidths(device: str | None = None, dtype: str = "fp32", repeats: int = 5) -> dict[str, float]:
    """Bytes/s a decode step's matrix–vector kernel reads here: {"linear": F.linear's} and, where oneDNN
    prepacking runs (CPU, fp32/bf16), {"packed": …} too."""
    from ..decoding import packed as packing

    dev = _device(device)
    out = {"linear": gemv_benchmark(dev, dtype, repeats=repeats).bandwidth}
    if packing.available(dev, normalize_dtype(dtype))[0]:
        out["packed"] = gemv_benchmark(dev, dtype, packed=True, repeats=repeats).bandwidth
    return out


def default_matmul_n(device: str, dtype: str) -> int:
    """Matrix size for the FLOP/s benchmark: big enough to saturate the device, quick to run."""
    if device.startswith("cuda"):
        return 8192
    if device.startswith("mps"):
        return 4096
    return 2048 if dtype == "fp32" else 1024


@dataclass(frozen=True)
class MatmulBenchmark:
    """One peak-FLOP/s measurement: `iters` n × n matmuls per timed sample."""

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
        """FLOP/s of the best (shortest) sample, as for the bandwidth: a peak is the best sustained rate."""
        return self.flops_per_matmul * self.iters / self.stats.min

    def to_dict(self) -> dict:
        return {"device": self.device, "dtype": self.dtype, "n": self.n, "iters": self.iters,
                "flops_per_matmul": self.flops_per_matmul, "flops_per_s": self.flops_per_s,
                **{f"sample_{k}": v for k, v in self.stats.to_dict().items()}}


def matmul_benchmark(device: str | None = None, dtype: str = "fp32", n: int | None = None, repeats: int = 5,
                     iters: int | None = None) -> MatmulBenchmark:
    """Time torch.mm(a, b, out=c) on n × n matrices of a dtype (fp32, bf16 or fp16). On CUDA fp32 runs as true
    fp32 (TF32 off by default), bf16/fp16 on the tensor cores: compare with a GPU's dense tensor-core figure."""
    import torch

    dev = _device(device)
    dt = normalize_dtype(dtype, MATMUL_DTYPES)
    n = n or default_matmul_n(dev, dt)
    iters = iters or (10 if dev.startswith(("cuda", "mps")) else 1)
    tdt = torch_dtype(dt)
    a = torch.randn(n, n, device=dev, dtype=tdt)  # the values do not change the time
    b = torch.randn(n, n, device=dev, dtype=tdt)
    c = torch.empty(n, n, device=dev, dtype=tdt)
    return MatmulBenchmark(dev, dt, n, iters, _timed(lambda: torch.mm(a, b, out=c), dev, iters, repeats))

