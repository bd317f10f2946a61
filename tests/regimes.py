"""Results of every regime a machine can produce, fed to the notebooks through replay mode.

A regime is a committed CPU record as it stands, or a synthetic record made from one by transforming
every measured number in its recordings (helpers.present.replay's `workshop/results/<record>/replay/`):

- `zero`: every measured time and rate is 0 (a timer that saw nothing, a ratio of zero);
- `below`: every measured time × 0.01 and every rate × 100 (below every floor: negative differences);
- `at`: every measured step set to its own prediction or floor, where a recording holds both;
- `far-above`: every measured time × 1000 and every rate ÷ 1000;
- `one-sample`: every list of samples cut to its first;
- `mixed`: the recordings alternately `below` and `far-above` (one result under its floor beside another
  above its own, as notebook 04's two models were on a machine with a large last-level cache).

    python tests/regimes.py NN [regime ...]    # run notebook NN in each regime (all by default), in this
                                               # process; one JSON line per regime: {"notebook", "regime",
                                               # "ok", "error"}
    python tests/regimes.py all                # every notebook, in a process per core (each pays the
                                               # imports once and takes the next notebook, longest first)
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "workshop" / "results"
RECORDS = ("cpu-amd-epyc", "cpu-intel-xeon")
SOURCE = "cpu-amd-epyc"          # the record the synthetic regimes are made from first
SYNTHETIC = ("zero", "below", "at", "far-above", "one-sample", "mixed")
REGIMES = RECORDS + SYNTHETIC

# a measured time, by its key or column name; a measured rate; a figure that is a prediction, not a measurement
TIME = re.compile(r"(^|_)(s|ms|seconds|times|samples|median|mean|p50|p90|p99)$|^(ttft|itl|tpot|e2el?)(_|$)|"
                  r"^(attention|mlp|head|embedding|tokenize|other|next_token|final_norm|norms_and_residuals)$")
RATE = re.compile(r"bandwidth|tok_s|tok_per_s|per_s|_rps$|throughput|^rate$")
KEPT = re.compile(r"^(predicted|floor|slo|deadline|link|published|expected|target)|_floor|floor_|^arrival")
PAIRS = (("measured_step_s", "predicted_step_s"), ("step_s", "floor_s"), ("measured_p90_s", "predicted_step_s"))


def _kind(key: str | None) -> str | None:
    if not isinstance(key, str) or KEPT.search(key):
        return None
    if RATE.search(key):
        return "rate"
    if TIME.search(key):
        return "time"
    return None


def _scale(x: float, kind: str, regime: str) -> float:
    if regime == "zero":
        return 0.0
    k = {"below": 0.01, "far-above": 1000.0}.get(regime, 1.0)
    return x * k if kind == "time" else x / k


def transform(data, regime: str, key: str | None = None):
    """The recorded JSON `data` (helpers.records' tagged form) with its measured numbers changed for
    `regime`: a number is changed when the key, field or column it sits under names a time or a rate."""
    if isinstance(data, list):
        if regime == "one-sample" and len(data) > 1 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                              for v in data):
            return data[:1]
        return [transform(v, regime, key) for v in data]
    if isinstance(data, dict):
        if "$frame" in data:
            frame = dict(data["$frame"])
            kinds = [_kind(c if isinstance(c, str) else None) for c in frame["columns"]]
            frame["data"] = [[_number(v, k, regime) if k else transform(v, regime) for v, k in zip(row, kinds)]
                             for row in frame["data"]]
            if regime == "one-sample":
                frame["data"] = frame["data"][:1]
            return {"$frame": frame}
        if "$dataclass" in data:
            return {**data, "fields": transform(data.get("fields") or {}, regime)}
        if "$dict" in data:
            return {"$dict": [[k, transform(v, regime, k if isinstance(k, str) else key)] for k, v in data["$dict"]]}
        if "$tuple" in data:
            return {"$tuple": transform(data["$tuple"], regime, key)}
        if "$array" in data:
            return {**data, "$array": transform(data["$array"], regime, key)}
        if "$float" in data:
            return data
        out = {k: transform(v, regime, k if not k.startswith("$") else key) for k, v in data.items()}
        if regime == "at":
            for measured, reference in PAIRS:
                if isinstance(out.get(measured), (int, float)) and isinstance(out.get(reference), (int, float)):
                    out[measured] = out[reference]
        return out
    kind = _kind(key)
    if kind and regime in ("zero", "below", "far-above"):
        return _number(data, kind, regime)
    return data


def _number(v, kind, regime):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)):
        return transform(v, regime) if isinstance(v, (list, dict)) else v
    if regime not in ("zero", "below", "far-above"):
        return v
    return _scale(float(v), kind, regime)


def synthetic_results(folder: Path, regimes=SYNTHETIC, source: str = SOURCE) -> Path:
    """`folder` made a results folder holding, for each regime, a record `<regime>/replay/` transformed
    from `source`'s recordings, and the other records' where `source` has none (meta.json copied as it is)."""
    src = {p.name: p for r in sorted(RECORDS, key=lambda r: r == source) for p in (RESULTS / r / "replay").glob("*.json")}
    for regime in regimes:
        out = folder / regime / "replay"
        out.mkdir(parents=True, exist_ok=True)
        for i, p in enumerate(src[name] for name in sorted(src)):
            data = json.loads(p.read_text())
            if "__" in p.name and "value" in data:
                each = regime if regime != "mixed" else ("below", "far-above")[i % 2]
                data["value"] = transform(data["value"], each)
            (out / p.name).write_text(json.dumps(data))
    for record in RECORDS:
        if not (folder / record).exists():
            shutil.copytree(RESULTS / record, folder / record)
    return folder


def run(number: str, regimes=REGIMES) -> list[dict]:
    """Notebook `number` run in this process once per regime, in replay mode, from a temporary results
    folder: [{"regime", "ok", "error"}]."""
    import importlib.util

    sys.path.insert(0, str(ROOT))
    from helpers.present import replay

    path = next((ROOT / "notebooks").glob(f"{number}_*.py"))
    spec = importlib.util.spec_from_file_location(f"notebook_{number}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        replay.RESULTS = synthetic_results(Path(tmp), [r for r in regimes if r in SYNTHETIC])
        for regime in regimes:
            os.environ[replay.REPLAY_ENV] = regime
            try:
                module.app.run()
                out.append({"notebook": number, "regime": regime, "ok": True, "error": ""})
            except Exception as exc:  # noqa: BLE001 - every fault is the finding
                tb = traceback.format_exc().splitlines()
                out.append({"notebook": number, "regime": regime, "ok": False,
                            "error": f"{type(exc).__name__}: {exc}"[:600] + "\n" + "\n".join(tb[-12:])})
    return out


LONGEST = ("07", "08", "00", "06", "03")     # started first, so the processes end together


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)     # a process per core: torch's own threads would only contend


def run_all(regimes=REGIMES, workers: int | None = None) -> list[dict]:
    """Every notebook's run(), in `workers` processes (one per core by default), rows in notebook order."""
    from concurrent.futures import ProcessPoolExecutor

    numbers = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    order = [n for n in LONGEST if n in numbers] + [n for n in numbers if n not in LONGEST]
    workers = max(1, min(workers or os.cpu_count() or 1, len(order)))
    with ProcessPoolExecutor(workers, initializer=_one_thread if workers > 1 else None) as pool:
        done = dict(zip(order, pool.map(run, order, [regimes] * len(order))))
    return [row for n in numbers for row in done[n]]


if __name__ == "__main__":
    number, *which = sys.argv[1:]
    rows = run_all(which or REGIMES) if number == "all" else run(number.zfill(2), which or REGIMES)
    for row in rows:
        print(json.dumps(row), flush=True)
