"""How long each notebook takes, from records (`make record-times`, `make record-replay`), never typed: the
headers' table (`header`); scripts/notebooks.py and scripts/agenda.py read the same records.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import records
from ..measure.hardware import measured_label, measured_on_of
from ..records import RESULTS

@dataclass(frozen=True)
class RunTimes:
    """One record's run: seconds per notebook, first and cached, and in replay mode."""

    first: dict[str, dict]
    cached: dict[str, dict]
    meta: dict = field(default_factory=dict)  # measured_on (measured_on_of's dict), load_average_after, how, path
    replay: dict[str, float] | None = None   # seconds per notebook in replay mode (replay/run_times.json)
    record: str = ""                          # the record folder's name

    @property
    def measured(self) -> dict:
        """Where and with what it was measured (helpers.measure.hardware.measured_on_of: None where unstated)."""
        return measured_on_of(self.meta)

    @property
    def device(self) -> str:
        """'AMD EPYC' from the record's device name 'AMD EPYC' ('Intel Xeon' from 'Intel(R) Xeon(R) Processor')."""
        d = self.measured["device"]["name"] or self.record or "?"
        name = re.sub(r"\((R|TM)\)", "", d)
        return re.sub(r"\s*\([^()]*\)$| Processor\b", "", name).strip() or d

    @property
    def label(self) -> str:
        """'cpu: AMD EPYC (2 cores)': the device it ran on, as the guide's table says it."""
        return measured_label(self.measured, cores=True)

    @property
    def is_gpu(self) -> bool:
        return self.measured["device"]["kind"] == "cuda"

    def notebook_seconds(self, number: str, which: str = "cached") -> float | None:
        runs = self.first if which == "first" else self.cached
        return next((float(v["seconds"]) for k, v in runs.items() if k.startswith(number + "_")), None)

    def replay_seconds(self, number: str) -> float | None:
        return next((float(v) for k, v in (self.replay or {}).items() if k.startswith(number + "_")), None)


def run_times(results: Path = RESULTS) -> list[RunTimes]:
    """Every record's run times, GPUs first, then by record name; an unreadable one left out."""
    replayed = {p.parent.parent: d.get("notebooks") for p, d in records.each("*/replay/run_times.json",
                                                                             "replay-run-times", results)}
    found = []
    for p, data in records.each("*/run_times.json", "run-times", results):
        meta = {k: data[k] for k in ("measured_on", "load_average_after", "how") if k in data}
        rep = replayed.get(p.parent)
        found.append(RunTimes(data["first"], data["cached"], {**meta, "path": records.shown(p)},
                              {k: float(v) for k, v in rep.items()} if isinstance(rep, dict) else None, p.parent.name))
    return sorted(found, key=lambda t: (not t.is_gpu, t.record))


def seconds(s: float) -> str:
    """A run time as the headers and the guide write it: '24 s', '7.6 min'."""
    return f"{s:,.0f} s" if s < 120 else f"{s / 60:,.1f} min"


def header(number: str, results: Path = RESULTS, indent: str = "    ") -> str:
    """A notebook's run times from every record as a markdown table, each line after the first indented."""
    times = run_times(results)
    cells = [[t.notebook_seconds(number), t.notebook_seconds(number, "first"), t.replay_seconds(number)] for t in times]
    rows = [f"| {t.device} (`{t.meta.get('path', t.record)}`) | " + " | ".join("–" if x is None else seconds(x) for x in c) + " |"
            for t, c in zip(times, cells) if any(x is not None for x in c)]
    rows += [] if any(t.is_gpu for t in times) else ["| a GPU | not recorded yet | | |"]
    lines = ["**Run time** (headless, recorded in `workshop/results/`; this run's own time is on the last line)", "",
             "| machine | cached run | first run | replay mode |", "| --- | --- | --- | --- |", *rows]
    return lines[0] + "".join(f"\n{indent}{line}" if line else "\n" for line in lines[1:])
