"""Replay: a long measurement shows its committed recording at once, the live run one click away.

`measure(key, fn)` runs live, or with `WORKSHOP_REPLAY=1` (or a record's name) returns the recording under
`workshop/results/<record>/replay/`, labelled; in marimo a `long=True` sweep waits for its button. With
`WORKSHOP_REPLAY_RECORD=<folder>` every measurement is saved there. A recording that does not load runs live.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .. import env, records
from ..measure import hardware
from ..measure.hardware import MEASURED_ON, measured_label, measured_on_of, measured_when
from ..records import RESULTS
from .notebook import in_marimo

REPLAY_ENV = "WORKSHOP_REPLAY"
RECORD_ENV = "WORKSHOP_REPLAY_RECORD"
FOLDER = "replay"          # inside a record's folder
KEY = re.compile(r"^[0-9]{2}/[a-z0-9_]+$")   # '01/ttft_sweep': notebook number / measurement


@dataclass
class Measured:
    """One measurement's value, measured here (`recorded` is None) or replayed from a recording."""

    key: str
    value: Any
    seconds: float                 # what it took here, or when it was recorded
    recorded: dict | None = None   # the recording's: measured_on (measured_on_of's dict), seconds, record
    why_live: str = ""             # replay was asked for but this ran live: why

    @property
    def replayed(self) -> bool:
        return self.recorded is not None

    @property
    def label(self) -> str:
        """'recorded on cpu: AMD EPYC · profile tiny-trained · 2026-12-01 10:02 UTC' or 'measured in this run'."""
        if not self.replayed:
            return "measured in this run"
        m = measured_on_of(self.recorded)
        return f"recorded on {measured_label(m)} · profile {m['profile'] or '?'} · {measured_when(m)}"

    def source(self, live_source: Any) -> Any:
        """What a figure or table of this value is stamped with: the live source, or the recording's label."""
        return f"replayed: {self.label}" if self.replayed else live_source

    def note(self):
        """A line under the measurement: replayed (from where), why a replay ran live, or nothing."""
        import marimo as mo

        if self.replayed:
            return mo.callout(mo.md(f"**Replayed**, not measured here: {self.label} (it took {self.seconds:,.0f} s "
                                    "there). Press **Run live** to measure it on this machine."), kind="info")
        if self.why_live:
            return mo.callout(mo.md(f"Measured live in replay mode: {self.why_live}."), kind="warn")
        return mo.md("")


def replay_wanted() -> str | None:
    """None in the ordinary live mode; else the replay setting ('1', or a record folder's name)."""
    raw = env.text(REPLAY_ENV) or ""
    if raw.lower() in ("", "0", "false", "no", "off"):
        return None
    if raw.lower() not in ("1", "true", "yes", "on") and not (records.NAME.match(raw) and (RESULTS / raw / FOLDER).is_dir()):
        have = ", ".join(r.name for r in recordings()) or "none"
        raise env.refuse(REPLAY_ENV, raw, f"1 (a recorded run that fits), 0, or a record with replays ({have})")
    return raw


def recordings(results: Path | None = None) -> list[Path]:
    """Record folders that hold replays: GPU records first, then newest first."""
    found = [(measured_on_of(m), p.parent.parent) for p, m in records.each(f"*/{FOLDER}/meta.json", "replay-meta",
                                                                          results or RESULTS)]
    found.sort(key=lambda m: m[0]["recorded_at"] or "", reverse=True)
    return [folder for m, folder in sorted(found, key=lambda m: m[0]["device"]["kind"] != "cuda")]


def _meta(folder: Path) -> dict:
    """The folder's recordings' measured_on (None where not stated)."""
    got = records.each(f"{FOLDER}/meta.json", "replay-meta", folder)
    return measured_on_of(got[0][1] if got else {})


def _path(folder: Path, key: str) -> Path:
    return folder / FOLDER / (key.replace("/", "__") + ".json")


def _candidates(setting: str | None, profile: str | None, device_kind: str | None) -> list[Path]:
    """Record folders to try, in order, for a replay setting (without one, this device kind's and profile's)."""
    every = recordings()
    if setting and setting.lower() not in ("1", "true", "yes", "on"):
        return [RESULTS / setting]       # its name was checked by replay_wanted
    if setting:  # replay: a GPU's record first, then the live profile's, then the rest
        return sorted(every, key=lambda f: (_meta(f)["device"]["kind"] != "cuda", _meta(f)["profile"] != profile))
    return [f for f in every if _meta(f)["device"]["kind"] == device_kind and _meta(f)["profile"] == profile]


def load(key: str, folders: list[Path]) -> tuple[Any, dict] | str:
    """(value, meta) of the first folder that holds a loadable recording of `key`, else why none did."""
    why = "no recorded run holds it (make record-replay records one)"
    for folder in folders:
        path = _path(folder, key)
        if not path.is_file():
            continue
        try:
            saved = records.load(path, "replay", roots=(folder,))
            seconds = saved.get("seconds")
            if saved.get("key") != key or type(seconds) not in (int, float) or not 0 <= seconds < 1e6:
                raise records.RecordError(f"{records.shown(path)} is not the recording of {key} (its key "
                                          f"{saved.get('key')!r}, seconds {seconds!r})")
            where = measured_on_of(saved) if MEASURED_ON in saved else _meta(folder)   # its own, else its record's
            return saved["value"], {MEASURED_ON: where, "seconds": float(seconds), "record": folder.name}
        except records.RecordError as exc:   # a stale or broken recording is a reason to run live
            why = f"its recording does not load: {exc}"
    return why


def save(key: str, value: Any, seconds: float, folder: Path, meta: dict) -> Path:
    """Write one recording, its meta ({MEASURED_ON: ...}) in it and beside it."""
    records.dump(folder / FOLDER / "meta.json", "replay-meta", meta)
    return records.dump(_path(folder, key), "replay", {"key": key, "seconds": seconds, "value": value,
                                                        MEASURED_ON: meta[MEASURED_ON]})


_META: dict = {}      # this process's recordings' measured_on, made at the first one


def measure(key: str, fn: Callable[..., Any], *args, run: bool | None = None, long: bool = False,
            profile: str | None = None, device: str | None = None, **kwargs) -> Measured:
    """fn(*args, **kwargs) as the measurement `key` ('NN/name'), live or replayed; `run`: the Run live button's
    value; `long`: waits for it in marimo; `profile`, `device`: to pick a recording and label a new one."""
    if not KEY.match(key):
        raise ValueError(f"a replay key is 'NN/name' (notebook number, lower-case name), got {key!r}")
    setting = replay_wanted()
    waits = long and in_marimo() and not run
    why_live = ""
    if not run and (setting or waits):
        kind = "cuda" if str(device or "").startswith("cuda") else (str(device).split(":")[0] if device else "cpu")
        got = load(key, _candidates(setting, profile, kind))
        if not isinstance(got, str):
            value, meta = got
            return Measured(key, value, float(meta.get("seconds", 0.0)), meta)
        why_live = got
        if waits and not setting:
            import marimo as mo

            mo.stop(True, mo.callout(mo.md(f"Press **Run live** to measure this here ({why_live})."), kind="neutral"))
    t0 = time.perf_counter()
    value = fn(*args, **kwargs)
    seconds = time.perf_counter() - t0
    target = env.folder(RECORD_ENV)           # a folder this process can write, else one EnvError line
    if target is not None:
        _META.setdefault(MEASURED_ON, hardware.measured_on(device, profile))
        save(key, value, seconds, target, _META)
    return Measured(key, value, seconds, None, why_live if setting else "")


def run_button(label: str = "Run live"):
    """The button a replayed or waiting measurement offers (marimo's run button)."""
    import marimo as mo

    return mo.ui.run_button(label=label, kind="success")
