"""The peak resident memory of this process within a block (PeakMemory) — what `make bench` writes beside
each section's figures (scripts/bench.py). Where and with what they were measured is
helpers.measure.hardware.measured_on, as in every record."""
from __future__ import annotations

import sys
import threading
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_bytes(field: str) -> int | None:
    """A memory line of /proc/self/status (VmRSS, VmHWM) in bytes; None where there is none."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _lifetime_peak_bytes() -> int:
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024   # bytes on macOS, KiB elsewhere


class PeakMemory:
    """The peak resident memory (RSS) of this process within a `with` block, in bytes (`.peak_bytes`), and
    how it was found (`.method`):

    - "VmHWM reset": Linux's high-water mark, reset at the start (writing 5 to /proc/self/clear_refs), read
      at the end — exact, nothing sampled;
    - "sampled VmRSS": where the reset is refused, the current RSS read every `interval_s` — can miss a
      peak shorter than the interval;
    - "process peak so far": elsewhere (macOS), the process's lifetime peak — an upper bound that includes
      whatever ran before the block."""

    def __init__(self, interval_s: float = 0.02):
        self.interval_s = interval_s
        self.peak_bytes: int | None = None
        self.method: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "PeakMemory":
        if _status_bytes("VmHWM") is None:
            self.method = "process peak so far"
            return self
        try:
            _CLEAR_REFS.write_text("5")
            self.method = "VmHWM reset"
        except OSError:
            self.method = "sampled VmRSS"
            self.peak_bytes = _status_bytes("VmRSS") or 0
            self._thread = threading.Thread(target=self._sample, daemon=True, name="peak-memory")
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.peak_bytes = max(self.peak_bytes or 0, _status_bytes("VmRSS") or 0)

    def __exit__(self, *exc) -> None:
        if self.method == "VmHWM reset":
            self.peak_bytes = _status_bytes("VmHWM")
        elif self.method == "sampled VmRSS":
            self._stop.set()
            self._thread.join()
            self.peak_bytes = max(self.peak_bytes or 0, _status_bytes("VmRSS") or 0)
        else:
            self.peak_bytes = _lifetime_peak_bytes()
