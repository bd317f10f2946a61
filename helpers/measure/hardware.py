"""The device in use (CUDA, MPS or CPU): its name, memory, and on CUDA the allocator's peak; and where and
with what a record was measured (measured_on), the one shape every record under workshop/results/ carries
under its ``measured_on`` key, read back by measured_on_of.
"""
from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass

DEVICES = ("auto", "cuda", "mps", "cpu")


def pick_device(prefer: str | None = None) -> str:
    """'cuda', 'mps' or 'cpu': `prefer`, else WORKSHOP_DEVICE, else the best available; one not here is refused."""
    import torch

    from .. import env

    want = str(prefer).strip().lower() if prefer else env.choice("WORKSHOP_DEVICE", DEVICES, "auto")
    if want not in DEVICES:
        raise ValueError(f"unknown device {want[:40]!r}; allowed: {', '.join(DEVICES)}. Fix: set WORKSHOP_DEVICE "
                         "to one of them, or unset it for auto")
    has_cuda, has_mps = torch.cuda.is_available(), torch.backends.mps.is_available()
    if want == "cuda" and not has_cuda:
        raise ValueError("WORKSHOP_DEVICE=cuda but no CUDA GPU is visible to torch. Fix: unset WORKSHOP_DEVICE "
                         "(auto uses the best device here) or run on a machine with a CUDA GPU")
    if want == "mps" and not has_mps:
        raise ValueError("WORKSHOP_DEVICE=mps but torch sees no Apple-silicon GPU (MPS) here. Fix: unset "
                         "WORKSHOP_DEVICE (auto uses the best device here) or run on a Mac with Apple silicon")
    return want if want != "auto" else "cuda" if has_cuda else "mps" if has_mps else "cpu"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


@dataclass(frozen=True)
class DeviceInfo:
    kind: str                   # cuda, mps, cpu
    name: str                   # e.g. "NVIDIA H100 80GB HBM3" or the CPU model
    total_memory: int | None    # bytes of the device's memory (host RAM for cpu and mps)
    free_memory: int | None     # bytes available now
    cores: int | None           # CPU threads torch uses, or CUDA SMs
    capability: str | None      # CUDA compute capability, e.g. "9.0"
    torch_version: str

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def label(self) -> str:
        return f"{self.kind}: {self.name}"


def device_info(device: str | None = None) -> DeviceInfo:
    """What the device is and how much memory it has (free memory measured now)."""
    import psutil
    import torch

    kind = pick_device(device)
    if kind == "cuda":
        props = torch.cuda.get_device_properties()
        free, total = torch.cuda.mem_get_info()
        return DeviceInfo("cuda", props.name, total, free, props.multi_processor_count,
                          f"{props.major}.{props.minor}", torch.__version__)
    mem = psutil.virtual_memory()
    name = _cpu_name() if kind == "cpu" else f"Apple GPU ({platform.machine()})"
    return DeviceInfo(kind, name, mem.total, mem.available, torch.get_num_threads(), None, torch.__version__)


MEASURED_ON = "measured_on"    # the key every record holds measured_on's dict under
MEASURED_FIELDS = ("recorded_at", "device", "profile", "versions", "git_commit", "host")
DEVICE_FIELDS = tuple(DeviceInfo.__dataclass_fields__)
HOST_FIELDS = ("platform", "machine", "cpu_count", "torch_threads")


def measured_on(device: str | None = None, profile: str | None = None, packages: tuple[str, ...] = ()) -> dict:
    """Where and with what a record was measured, the one shape every writer puts under ``MEASURED_ON``
    (MEASURED_FIELDS; host's torch_threads None where torch is not imported)."""
    import datetime as dt
    import sys

    from ..versions import git_commit, library_versions

    info = device_info(device)
    torch = sys.modules.get("torch")
    return {"recorded_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "device": info.to_dict(), "profile": profile, "versions": library_versions(tuple(packages)),
            "git_commit": git_commit(),
            "host": {"platform": platform.platform(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
                     "torch_threads": torch.get_num_threads() if torch is not None else None}}


def measured_on_of(record: dict) -> dict:
    """A record's measured_on as every reader reads it: each of MEASURED_FIELDS and DeviceInfo's fields present, one
    the record does not state (an older record) or states with the wrong type None, so a reader shows '?'."""
    m = record.get(MEASURED_ON) if isinstance(record, dict) else None
    m = m if isinstance(m, dict) else {}
    text = lambda v: v if isinstance(v, str) and v.strip() else None  # noqa: E731
    device, host, versions = (m.get(k) if isinstance(m.get(k), dict) else None for k in ("device", "host", "versions"))
    device = device or {}
    return {"recorded_at": text(m.get("recorded_at")),
            "device": {k: device.get(k) if not isinstance(device.get(k), (dict, list)) else None
                       for k in DEVICE_FIELDS},
            "profile": text(m.get("profile")), "versions": versions, "git_commit": text(m.get("git_commit")),
            "host": None if host is None else {k: host.get(k) for k in HOST_FIELDS}}


def measured_label(measured: dict, cores: bool = False) -> str:
    """'cpu: AMD EPYC' (with ' (2 cores)') from measured_on_of's dict; '?' for a part it does not state."""
    d = measured.get("device") or {}
    kind, name = str(d.get("kind") or "?")[:40], str(d.get("name") or "?")[:120]
    n = d.get("cores")
    return f"{kind}: {name}" + (f" ({n} cores)" if cores and isinstance(n, int) and not isinstance(n, bool) else "")


def measured_when(measured: dict) -> str:
    """'2026-12-01 10:02 UTC' from measured_on_of's dict (recorded_at to the minute); '?' when not stated."""
    at = measured.get("recorded_at")
    return f"{at[:16].replace('T', ' ')} UTC" if at else "?"


def synchronize(device: str) -> None:
    """Wait for queued GPU work, so a timer measures the work and not its launch."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    elif device.startswith("mps"):
        torch.mps.synchronize()


def is_out_of_memory(exc: BaseException) -> bool:
    """True for the errors a device raises when it runs out of memory (a result in a sweep, not a crash)."""
    import torch

    return isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower())


# What CUDA's libraries say when they cannot allocate a workspace or handle, and a kernel when a batch is past
# its launch grid: a sweep that grows a batch meets these before or instead of OutOfMemoryError, each its end.
DEVICE_LIMIT_MESSAGES = ("alloc_failed", "cudaerrormemoryallocation", "memory allocation",
                         "invalid configuration argument")


def is_device_limit(exc: BaseException) -> bool:
    """Out of memory, or a CUDA library's failed allocation or a launch grid too large (DEVICE_LIMIT_MESSAGES)."""
    return is_out_of_memory(exc) or (
        isinstance(exc, RuntimeError) and any(m in str(exc).lower() for m in DEVICE_LIMIT_MESSAGES))


def free_memory(device: str) -> None:
    """Return cached blocks to the device after an out-of-memory or a big sweep."""
    import gc

    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
