"""The two-hour room, from data: `workshop/agenda.toml` holds each slot — its minutes, the notebook
sections run live, those shown from the recorded run (replay mode), those left for self-paced study — and
the guide's agenda table and the deck's timings are generated from it, never typed.

A slot fits when its minutes cover the time to talk each section through plus the measured run time of
its live sections on the default profile (`workshop/results/<record>/run_times.json`, recorded by
`make record-times`: a first run with nothing cached, then a cached one). `fit()` checks every slot.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import checks

ROOT = Path(__file__).resolve().parents[2]
AGENDA = ROOT / "workshop" / "agenda.toml"
NOTEBOOKS = ROOT / "notebooks"
RESULTS = ROOT / "workshop" / "results"
ROOM_MINUTES = 120          # the workshop's length, breaks included
# a section heading: a line of prose "## …", or a cell that builds its heading, mo.md("## …") (double quotes)
HEADING = re.compile(r"""^[ \t]*## (.+?)[ \t]*$|mo\.md\(f?"(?:"")?## ([^"\n\\]+?)[ \t]*(?=["\\])""", re.M)
KINDS = ("slides", "notebook", "break", "questions")


@dataclass(frozen=True)
class Section:
    """A section of a notebook as the agenda names it: its number ('3') or its heading, and the minutes
    to talk it through."""

    ref: str
    talk_minutes: float = 0.0


@dataclass(frozen=True)
class Slot:
    id: str
    title: str
    minutes: float
    kind: str
    question: str = ""
    notebook: str | None = None                # '01'
    live: tuple[Section, ...] = ()             # run live in the room
    recorded: tuple[Section, ...] = ()         # shown from the recorded run (WORKSHOP_REPLAY=1)
    self_paced: tuple[str, ...] = ()           # left for after the room
    slides: tuple[str, ...] = ()               # deck slides (their titles) talked through here

    @property
    def talk_minutes(self) -> float:
        return sum(s.talk_minutes for s in (*self.live, *self.recorded))


@dataclass(frozen=True)
class Agenda:
    slots: tuple[Slot, ...]
    path: Path = AGENDA

    def start(self, slot_id: str) -> float:
        """Minutes from the start of the room to the slot's start."""
        t = 0.0
        for s in self.slots:
            if s.id == slot_id:
                return t
            t += s.minutes
        raise KeyError(f"no slot {slot_id!r}; slots: {', '.join(s.id for s in self.slots)}")

    @property
    def total_minutes(self) -> float:
        return sum(s.minutes for s in self.slots)

    def slot(self, slot_id: str) -> Slot:
        return next(s for s in self.slots if s.id == slot_id)


def clock(minutes: float) -> str:
    """Minutes from the start as the guide writes them: 75 -> '1:15'."""
    m = round(minutes)
    return f"{m // 60}:{m % 60:02d}"


# ----------------------------------------------------------------------------- reading the file

def _sections(raw, where: str) -> tuple[Section, ...]:
    out = []
    for item in raw or ():
        if isinstance(item, str):
            out.append(Section(item))
        elif isinstance(item, dict) and set(item) <= {"section", "talk"} and "section" in item:
            talk = item.get("talk", 0)
            talk = checks.number(talk, f"{where}: talk minutes", 0, 60)
            out.append(Section(str(item["section"]), talk))
        else:
            raise ValueError(f"{where}: a section is a name or {{section = '…', talk = minutes}}, got {item!r}")
    return tuple(out)


def load(path: Path = AGENDA) -> Agenda:
    """The agenda file, validated: every field typed, every slot's sections present in its notebook."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    slots = []
    for i, raw in enumerate(data.get("slot", [])):
        where = f"{Path(path).name} slot {i + 1} ({raw.get('id', '?')})"
        kind = raw.get("kind", "notebook" if raw.get("notebook") else "slides")
        minutes = raw.get("minutes")
        if kind not in KINDS:
            raise ValueError(f"{where}: kind {kind!r}; allowed: {', '.join(KINDS)}")
        minutes = checks.number(minutes, f"{where}: minutes", 0, ROOM_MINUTES, positive=True)
        nb = raw.get("notebook")
        slot = Slot(id=str(raw.get("id") or f"slot{i + 1}"), title=str(raw["title"]), minutes=float(minutes),
                    kind=kind, question=str(raw.get("question", "")), notebook=str(nb) if nb else None,
                    live=_sections(raw.get("live"), where), recorded=_sections(raw.get("recorded"), where),
                    self_paced=tuple(str(x) for x in raw.get("self_paced", ())),
                    slides=tuple(str(x) for x in raw.get("slides", ())))
        if slot.notebook:
            headings = notebook_sections(slot.notebook)
            for ref in [s.ref for s in (*slot.live, *slot.recorded)] + list(slot.self_paced):
                if match_heading(ref, headings) is None:
                    raise ValueError(f"{where}: notebook {slot.notebook} has no section {ref!r}; "
                                     f"its sections: {'; '.join(headings)}")
        slots.append(slot)
    ids = [s.id for s in slots]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{Path(path).name}: slot ids repeat: {', '.join(sorted({i for i in ids if ids.count(i) > 1}))}")
    return Agenda(tuple(slots), Path(path))


def notebook_file(number: str) -> Path:
    found = sorted(NOTEBOOKS.glob(f"{number}_*.py"))
    if not found:
        raise ValueError(f"no notebook {number!r} in notebooks/")
    return found[0]


def notebook_sections(number: str) -> list[str]:
    """The `## ` headings of a notebook's prose, in order, each once (a cell may draw its heading in two
    branches)."""
    return list(dict.fromkeys(headings(notebook_file(number).read_text(encoding="utf-8"))))


def headings(text: str) -> list[str]:
    """Every section heading in a text, in order (HEADING's two forms)."""
    return [m.group(1) or m.group(2) for m in HEADING.finditer(text)]


def match_heading(ref: str, headings: list[str]) -> str | None:
    """The heading a reference names: '3' names '3 · Throughput: …'; otherwise the heading itself or its
    first words ('Speed' names 'Speed: prefill and decode, side by side')."""
    for h in headings:
        if ref == h or ref == h.split(" · ", 1)[0]:
            return h
    for h in headings:
        if h.startswith(ref) and not h[len(ref)].isalnum():
            return h
    return None


# ----------------------------------------------------------------------------- measured run times

@dataclass(frozen=True)
class RunTimes:
    """A recorded `make run` on the default profile: seconds per notebook and per section, first (nothing
    cached) and cached; `set-up` is what runs before a notebook's first section (imports, the model load)."""

    first: dict[str, dict]
    cached: dict[str, dict]
    meta: dict = field(default_factory=dict)
    replay: dict[str, float] | None = None   # seconds per notebook in replay mode (replay/run_times.json)

    def notebook_seconds(self, number: str, which: str = "cached") -> float | None:
        nb = self._nb(number, which)
        return None if nb is None else float(nb["seconds"])

    def section_seconds(self, number: str, ref: str, which: str = "cached") -> float | None:
        nb = self._nb(number, which)
        if nb is None:
            return None
        heading = match_heading(ref, list(nb.get("sections", {})))
        return None if heading is None else float(nb["sections"][heading])

    def _nb(self, number: str, which: str) -> dict | None:
        runs = self.first if which == "first" else self.cached
        return next((v for k, v in runs.items() if k.startswith(number + "_")), None)


def run_times(results: Path = RESULTS) -> RunTimes | None:
    """The newest recorded run times (run_times.json under a record folder), or None."""
    found = []
    for p in Path(results).glob("*/run_times.json"):
        try:
            data = json.loads(p.read_text())
            found.append((str(data.get("recorded_at", "")), data, p))
        except (OSError, ValueError):
            continue
    if not found:
        return None
    _, data, path = max(found, key=lambda x: x[0])
    replayed = None
    try:   # make record-replay's run in replay mode, beside its recordings
        replayed = json.loads((path.parent / "replay" / "run_times.json").read_text())["notebooks"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return RunTimes(data["first"], data["cached"], {**data.get("meta", {}), "path": str(path.relative_to(ROOT))
                                                     if path.is_relative_to(ROOT) else str(path)},
                    {k: float(v) for k, v in replayed.items()} if isinstance(replayed, dict) else None)


def section_times(executed_nb: dict) -> dict[str, float]:
    """Seconds per section of an executed .ipynb, from nbclient's cell timings: each code cell counted in
    the last `## ` heading above it (cells before the first: 'set-up')."""
    from datetime import datetime

    out: dict[str, float] = {}
    current = "set-up"
    for cell in executed_nb.get("cells", []):
        found = headings("".join(cell.get("source", "")))
        if found:
            current = found[0]
        t = cell.get("metadata", {}).get("execution", {})
        start, end = t.get("iopub.execute_input"), t.get("shell.execute_reply")
        if start and end:
            secs = (datetime.fromisoformat(end.replace("Z", "+00:00"))
                    - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
            out[current] = round(out.get(current, 0.0) + max(secs, 0.0), 2)
    return out


# ----------------------------------------------------------------------------- fit and the generated text

@dataclass(frozen=True)
class SlotFit:
    slot: Slot
    talk_minutes: float
    run_minutes: float | None        # the live sections' measured run time (and the set-up), cached run

    @property
    def need_minutes(self) -> float | None:
        return None if self.run_minutes is None else self.talk_minutes + self.run_minutes

    @property
    def fits(self) -> bool | None:
        return None if self.need_minutes is None else self.need_minutes <= self.slot.minutes


def fit(agenda: Agenda, times: RunTimes | None) -> list[SlotFit]:
    """Each slot against what it needs: talk + the measured run time of its live sections (plus the
    notebook's set-up — imports and the model load — whenever any section runs live)."""
    out = []
    for s in agenda.slots:
        run = 0.0 if not s.live else None
        if s.live and times is not None:
            parts = [times.section_seconds(s.notebook, x.ref) for x in s.live]
            setup = times.section_seconds(s.notebook, "set-up") or 0.0
            run = None if any(p is None for p in parts) else (sum(parts) + setup) / 60
        out.append(SlotFit(s, s.talk_minutes, run))
    return out


def _ref(ref: str) -> str:
    """A section as the guide names it: '§3' for a numbered one, else its heading in quotes."""
    return f"§{ref}" if ref[:1].isdigit() else f"“{ref}”"


def guide_table(agenda: Agenda) -> str:
    """The guide's agenda table (markdown), generated from the agenda file."""
    rows = ["| time | minutes | part | notebook: live · from the recorded run · self-paced | the question it answers |",
            "| --- | --- | --- | --- | --- |"]
    for s in agenda.slots:
        if s.notebook:
            name = notebook_file(s.notebook).stem
            parts = [f"`{name}`"]
            if s.live:
                parts.append("live: " + ", ".join(_ref(x.ref) for x in s.live))
            if s.recorded:
                parts.append("recorded: " + ", ".join(_ref(x.ref) for x in s.recorded))
            if s.self_paced:
                parts.append("self-paced: " + ", ".join(_ref(x) for x in s.self_paced))
            where = " · ".join(parts)
        else:
            where = "—"
        rows.append(f"| {clock(agenda.start(s.id))} | {s.minutes:g} | {s.title} | {where} | {s.question} |")
    rows.append(f"| {clock(agenda.total_minutes)} | | end | | |")
    return "\n".join(rows)


def run_time_table(times: RunTimes | None) -> str:
    """The guide's run-time table: each notebook's headless run on the default profile, first and cached."""
    if times is None:
        return "_No recorded run times yet: `make record-times` records them._"
    rep = times.replay
    rows = ["| notebook | first run (nothing cached) | cached |" + (" replay mode |" if rep else ""),
            "| --- | --- | --- |" + (" --- |" if rep else "")]
    for name in sorted(times.cached):
        first = times.first.get(name, {}).get("seconds")
        again = "" if not rep else (f" {rep[name]:,.0f} s |" if name in rep else " – |")
        rows.append(f"| `{name}` | {'–' if first is None else f'{first:,.0f} s'} | {times.cached[name]['seconds']:,.0f} s |"
                    + again)
    m = times.meta
    rows.append("")
    load = f", load average {m['load_average_after']:g} at the end" if m.get("load_average_after") is not None else ""
    rows.append(f"_Recorded by `make record-times` on {m.get('device', '?')}, profile {m.get('profile', '?')}, "
                f"{m.get('recorded_at', '?')}{load} (`{m.get('path', '?')}`); the first run trains the tiny model "
                "once._")
    if rep:
        rows.append("")
        rows.append(f"_Replay mode (`WORKSHOP_REPLAY=1`: every long measurement shows its recording): "
                    f"{sum(rep.values()):,.0f} s for all {len(rep)} notebooks (`make record-replay`)._")
    return "\n".join(rows)
