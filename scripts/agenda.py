"""The two-hour room, from data: `workshop/agenda.toml` holds each slot — its minutes, the notebook
sections run live, those shown from the recorded run (replay mode), those left for self-paced study — and
the guide's agenda table and the deck's timings are generated from it, never typed.

The file is read through one schema (pydantic v2, strict, unknown keys refused): minutes above 0 and at
most the workshop's length, all slots together at most that length, each slot's talk within its
minutes, a notebook named by its two-digit number, every section it names present in that notebook and
named once. A bad file is an ``AgendaError`` (a ValueError) with one line per violation, each naming the
slot, the field, the value and what is allowed.

A slot fits when its minutes cover the time to talk each section through plus the measured run time of
its live sections on the default profile (`workshop/results/<record>/run_times.json`, recorded by
`make record-times`: a first run with nothing cached, then a cached one). `fit()` checks every slot.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
import re
from pathlib import Path
from typing import Annotated, Literal, Optional

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError,
                      ValidationInfo, field_validator, model_validator)

from helpers.formulas.config_schema import show
from helpers.present.run_times import RunTimes

ROOT = Path(__file__).resolve().parents[1]
AGENDA = ROOT / "workshop" / "agenda.toml"
NOTEBOOKS = ROOT / "notebooks"
RESULTS = ROOT / "workshop" / "results"
ROOM_MINUTES = 120          # the workshop's length, breaks included
MAX_AGENDA_BYTES = 1_000_000  # the agenda is 6 kB; a larger file is not an agenda
KINDS = ("slides", "notebook", "break", "questions")


# a section heading: a line of prose "## …", or a cell that builds its heading, mo.md("## …") (double quotes)
HEADING = re.compile(r"""^[ \t]*## (.+?)[ \t]*$|mo\.md\(f?"(?:"")?## ([^"\n\\]+?)[ \t]*(?=["\\])""", re.M)


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


def section_seconds(times: RunTimes, number: str, ref: str) -> float | None:
    """A record's cached seconds for the section `ref` names in notebook `number` (None when not recorded)."""
    nb = next((v for k, v in times.cached.items() if k.startswith(number + "_")), None)
    heading = None if nb is None else match_heading(ref, list(nb.get("sections", {})))
    return None if heading is None else float(nb["sections"][heading])


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

class AgendaError(ValueError):
    """A bad agenda file: one line per violation (the slot, the field, the value, what is allowed)."""

    def __init__(self, lines: list[str]):
        self.lines = list(lines)
        super().__init__("\n".join(self.lines))


Text = Annotated[str, StringConstraints(min_length=1, max_length=300)]
Ref = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Minutes = Annotated[float, Field(gt=0, le=ROOM_MINUTES, allow_inf_nan=False)]
TalkMinutes = Annotated[float, Field(ge=0, le=ROOM_MINUTES, allow_inf_nan=False)]

# What each field accepts, in words: the second half of every error line.
SECTIONS = 'a list of sections, each a number or heading ("2") or {section = "2", talk = minutes}'
ALLOWED = {
    "slot": "[[slot]] tables, at least one",
    "id": "a short name of lower-case letters, digits and '_', starting with a letter (at most 40; the deck's "
          "{{time_<id>}} names it)",
    "title": "text of 1 to 300 characters",
    "kind": "one of " + ", ".join(KINDS),
    "minutes": f"a number of minutes above 0 and at most {ROOM_MINUTES} (the workshop's length)",
    "question": "text of at most 300 characters",
    "notebook": "a notebook's two-digit number as text",
    "live": SECTIONS,
    "recorded": SECTIONS,
    "self_paced": 'a list of sections, each a number or heading as text ("2", "Exercises")',
    "slides": "a list of the deck's slide titles, as text",
    "section": "a section's number or heading as text (1 to 200 characters)",
    "talk": f"minutes from 0 to {ROOM_MINUTES}",
}


def _section(value):
    """A section as the file may write it: "2" is {section = "2"} (no talk time)."""
    return {"section": value} if isinstance(value, str) else value


class _Section(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    section: Ref
    talk: TalkMinutes = 0.0


LiveSection = Annotated[_Section, BeforeValidator(_section)]


def _name(section: _Section | str) -> str:
    """The name a section is given by: a live or recorded section's `section`, a self-paced one itself."""
    return section if isinstance(section, str) else section.section


class _Slot(BaseModel):
    """One [[slot]] of the file; fields in the order the checks need them (the notebook before its sections)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    id: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,39}$")]
    title: Text
    kind: Optional[Literal[KINDS]] = None
    minutes: Minutes
    question: Annotated[str, StringConstraints(max_length=300)] = ""
    notebook: Optional[str] = None
    live: list[LiveSection] = []
    recorded: list[LiveSection] = []
    self_paced: list[Ref] = []
    slides: list[Text] = []

    @field_validator("notebook")
    @classmethod
    def _notebook_exists(cls, nb):
        numbers = notebook_numbers()
        if nb is not None and nb not in numbers:
            raise ValueError(f"notebook is {show(nb)}; allowed: {ALLOWED['notebook']}, one of {', '.join(numbers)}")
        return nb

    @field_validator("live", "recorded", "self_paced")
    @classmethod
    def _sections_exist(cls, items, info: ValidationInfo):
        if not items or "notebook" not in info.data:    # no sections, or a notebook refused already
            return items
        nb = info.data["notebook"]
        if nb is None:
            raise ValueError(f"{info.field_name} names sections but the slot names no notebook; allowed: "
                             f'notebook = "NN" beside them')
        headings = notebook_sections(nb)
        bad = [f"{info.field_name} item {i}: notebook {nb} has no section {show(_name(s))}; allowed: one of its "
               f"sections, {_sections_named(headings)}"
               for i, s in enumerate(items, 1) if match_heading(_name(s), headings) is None]
        if bad:
            raise ValueError("\n".join(bad))
        return items

    @model_validator(mode="after")
    def _consistent(self):
        bad = []
        if self.kind == "notebook" and self.notebook is None:
            bad.append('kind is \'notebook\' but the slot names no notebook; allowed: notebook = "NN" with it')
        if self.notebook is not None and self.kind not in (None, "notebook"):
            bad.append(f"kind is {show(self.kind)} with notebook {show(self.notebook)}; allowed: kind 'notebook' "
                       "(or no kind) for a slot that runs a notebook")
        talk = sum(s.talk for s in (*self.live, *self.recorded))
        if talk > self.minutes:
            bad.append(f"talk adds to {talk:g} minutes over the live and recorded sections; allowed: at most "
                       f"the slot's minutes, {self.minutes:g}")
        if self.notebook is not None:
            headings = notebook_sections(self.notebook)
            seen: dict[str, str] = {}
            for where in ("live", "recorded", "self_paced"):
                for s in getattr(self, where):
                    h = match_heading(_name(s), headings)
                    if h in seen:
                        bad.append(f"{where}: section {show(_name(s))} is named again (first in {seen[h]}); allowed: "
                                   "each section once, live, recorded or self-paced")
                    seen.setdefault(h, where)
        if bad:
            raise ValueError("\n".join(bad))
        return self


class _Agenda(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    slot: Annotated[list[_Slot], Field(min_length=1)]

    @model_validator(mode="before")
    @classmethod
    def _default_ids(cls, data):
        """A slot without an id is named by its place: slot1, slot2, …"""
        if isinstance(data, dict) and isinstance(data.get("slot"), list):
            data = {**data, "slot": [{"id": f"slot{i}", **s} if isinstance(s, dict) and "id" not in s else s
                                     for i, s in enumerate(data["slot"], 1)]}
        return data

    @model_validator(mode="after")
    def _whole_room(self):
        bad = []
        total = sum(s.minutes for s in self.slot)
        if total > ROOM_MINUTES:
            bad.append(f"the slots add to {total:g} minutes; allowed: at most {ROOM_MINUTES} (the workshop's "
                       "length, breaks included)")
        ids = [s.id for s in self.slot]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            bad.append(f"slot ids repeat: {', '.join(twice)}; allowed: each id once")
        if bad:
            raise ValueError("\n".join(bad))
        return self


def _sections_named(headings: list[str]) -> str:
    """A notebook's sections as an error line lists them: the number of a numbered one, else its heading."""
    names = [h.split(" · ", 1)[0] if " · " in h else h for h in headings]
    return ", ".join(show(n, 40) for n in names)


def _where(name: str, raw: dict, loc: tuple) -> tuple[str, tuple]:
    """(which slot, the rest of the location) of an error at `loc` in the file's data."""
    if len(loc) < 2 or loc[0] != "slot" or not isinstance(loc[1], int):
        return name, loc
    i = loc[1]
    slot = raw["slot"][i]
    sid = slot.get("id") if isinstance(slot, dict) else None
    label = f" ({show(sid)})" if isinstance(sid, str) else ""
    return f"{name} slot {i + 1}{label}", loc[2:]


ITEM_ALLOWED = {"live": 'a section: its number or heading as text, or {section = "2", talk = minutes}',
                "recorded": 'a section: its number or heading as text, or {section = "2", talk = minutes}',
                "self_paced": "a section's number or heading as text (1 to 200 characters)",
                "slides": "a slide's title as text (1 to 300 characters)", "slot": "a [[slot]] table of fields"}


def _field(rest: tuple, in_slot: bool) -> tuple[str, str]:
    """(the field as the line names it, what it allows) at `rest`: ('live item 2, talk', 'minutes from 0 …')."""
    text, allowed = "", ALLOWED["slot"] if not in_slot else ITEM_ALLOWED["slot"]
    for part in rest:
        if isinstance(part, int):
            text += f" item {part + 1}"
            allowed = ITEM_ALLOWED.get(text.split()[0], allowed)
        else:
            text += (", " if text else "") + str(part)
            allowed = ALLOWED.get(str(part), allowed)
            if part == "notebook":
                allowed += ", one of " + ", ".join(notebook_numbers())
    return text or "slot", allowed


def _fields_of(rest: tuple, in_slot: bool) -> str:
    """The fields allowed where an unknown key `rest[-1]` was found: the file's, a slot's or a section's."""
    model = _Section if len(rest) > 1 else _Slot if in_slot else _Agenda
    return ", ".join(model.model_fields)


def _lines(exc: ValidationError, name: str, raw: dict) -> list[str]:
    """pydantic's errors, each rewritten as our one line (a validator's own message may hold several)."""
    out = []
    for err in exc.errors(include_url=False):
        where, rest = _where(name, raw, tuple(err["loc"]))
        in_slot = where != name
        if err["type"] == "value_error":
            out += [f"{where}: {line}" for line in str(err["ctx"]["error"]).splitlines()]
            continue
        what, allowed = _field(rest, in_slot)
        if err["type"] == "extra_forbidden":
            out.append(f"{where}: {what} is not a field here; allowed: {_fields_of(rest, in_slot)}")
        elif err["type"] == "missing":
            out.append(f"{where}: {what} is missing; allowed: {allowed}")
        else:
            out.append(f"{where}: {what} is {show(err['input'])}; allowed: {allowed}")
    return out


def _shown_path(path: Path) -> str:
    """The file as an error line names it: relative to the checkout when inside it, quoted when unprintable."""
    try:
        text = str(Path(path).resolve().relative_to(ROOT))
    except (ValueError, OSError):
        text = str(path)
    return text if text.isprintable() else repr(text)


def read_toml(path: Path) -> dict:
    """The file's TOML as a dict, or AgendaError naming the file and what is wrong with it."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    name = _shown_path(path)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):     # a folder, a pipe or a device is no agenda
            raise IsADirectoryError(0, "not a regular file")
        with open(path, "rb") as f:
            data = f.read(MAX_AGENDA_BYTES + 1)
    except (OSError, ValueError) as exc:  # missing, not a file, no permission; ValueError: a NUL in the path
        raise AgendaError([f"cannot read {name}: {getattr(exc, 'strerror', None) or exc}; allowed: the agenda, "
                           "a TOML file of [[slot]] tables"]) from None
    if len(data) > MAX_AGENDA_BYTES:
        raise AgendaError([f"{name} is over {MAX_AGENDA_BYTES:,} bytes; allowed: an agenda of at most "
                           f"{MAX_AGENDA_BYTES:,} bytes"])
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise AgendaError([f"cannot read {name}: it is not UTF-8 text; allowed: a TOML file"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise AgendaError([f"cannot read {name} as TOML: {str(exc).splitlines()[0]}; allowed: a TOML file "
                           "of [[slot]] tables"]) from None
    except RecursionError:   # arrays or tables nested thousands deep
        raise AgendaError([f"cannot read {name} as TOML: it nests too deeply; allowed: a TOML file of [[slot]] "
                           "tables"]) from None


def load(path: Path | None = None) -> Agenda:
    """The agenda file (default AGENDA), validated by the schema above; AgendaError lists every violation,
    one per line."""
    path = AGENDA if path is None else path
    raw = read_toml(path)
    try:
        checked = _Agenda.model_validate(raw)
    except ValidationError as exc:
        raise AgendaError(_lines(exc, _shown_path(path), raw)) from None
    slots = tuple(Slot(id=s.id, title=s.title, minutes=s.minutes, kind=s.kind or ("notebook" if s.notebook else "slides"),
                       question=s.question, notebook=s.notebook,
                       live=tuple(Section(x.section, x.talk) for x in s.live),
                       recorded=tuple(Section(x.section, x.talk) for x in s.recorded),
                       self_paced=tuple(s.self_paced), slides=tuple(s.slides)) for s in checked.slot)
    return Agenda(slots, Path(path))


def notebook_numbers() -> list[str]:
    """The two-digit numbers of the workshop's notebooks (notebooks/NN_*.py)."""
    return sorted({p.name[:2] for p in NOTEBOOKS.glob("[0-9][0-9]_*.py")})


def notebook_file(number: str) -> Path:
    found = sorted(NOTEBOOKS.glob(f"{number}_*.py")) if number in notebook_numbers() else []
    if not found:
        raise ValueError(f"no notebook {number!r} in notebooks/; allowed: {', '.join(notebook_numbers())}")
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
            parts = [section_seconds(t, s.notebook, x.ref) for x in s.live]
            if any(p is None for p in parts):
                continue
            mine = (sum(parts) + (section_seconds(t, s.notebook, "set-up") or 0.0)) / 60
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
