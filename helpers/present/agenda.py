"""The two-hour room, from data: `workshop/agenda.toml` holds each slot — its minutes, the notebook
sections run live, those shown from the recorded run (replay mode), those left for self-paced study — and
the guide's agenda table and the deck's timings are generated from it, never typed.

A slot fits when its minutes cover the time to talk each section through plus the measured run time of
its live sections on the default profile (`workshop/results/<record>/run_times.json`, recorded by
`make record-times`: a first run with nothing cached, then a cached one). `fit()` checks every slot.
"""
from __future__ import annotations


from dataclasses import dataclass
from pathlib import Path

from .. import checks
from .run_times import RunTimes, headings, match_heading

ROOT = Path(__file__).resolve().parents[2]
AGENDA = ROOT / "workshop" / "agenda.toml"
NOTEBOOKS = ROOT / "notebooks"
RESULTS = ROOT / "workshop" / "results"
ROOM_MINUTES = 120          # the workshop's length, breaks included
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


# ----------------------------------------------------------------------------- fit and the generated text

@dataclass(frozen=True)
class SlotFit:
    slot: Slot
    talk_minutes: float
    run_minutes: float | None        # the live sections' measured run time (and the set-up), cached run, slowest record

    @property
    def need_minutes(self) -> float | None:
        return None if self.run_minutes is None else self.talk_minutes + self.run_minutes

    @property
    def fits(self) -> bool | None:
        return None if self.need_minutes is None else self.need_minutes <= self.slot.minutes


def fit(agenda: Agenda, times: list[RunTimes]) -> list[SlotFit]:
    """Each slot against what it needs: talk + the measured run time of its live sections (plus the
    notebook's set-up — imports and the model load — whenever any section runs live), on the slowest of
    the records that measured them all (the room must fit on every machine recorded)."""
    out = []
    for s in agenda.slots:
        run = 0.0 if not s.live else None
        for t in times if s.live else ():
            parts = [t.section_seconds(s.notebook, x.ref) for x in s.live]
            if any(p is None for p in parts):
                continue
            mine = (sum(parts) + (t.section_seconds(s.notebook, "set-up") or 0.0)) / 60
            run = mine if run is None else max(run, mine)
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
