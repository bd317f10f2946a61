"""The room from data (scripts/agenda.py, workshop/agenda.toml): two hours with the break, every section it
names present in its notebook, the guide's tables generated from it, section run times read from an
executed notebook's own cell timings, and bad agenda files refused with what is wrong."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import sys
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import agenda  # noqa: E402  (scripts/agenda.py)


def test_the_room_fits_in_two_hours_with_a_break():
    a = agenda.load()
    assert a.total_minutes <= agenda.ROOM_MINUTES
    assert any(s.kind == "break" for s in a.slots)
    assert a.start(a.slots[0].id) == 0
    assert agenda.clock(a.start(a.slots[-1].id) + a.slots[-1].minutes) == agenda.clock(a.total_minutes)
    for s in a.slots:           # a slot's minutes cover at least the time to talk its sections through
        assert s.talk_minutes <= s.minutes, s.id


def test_every_workshop_notebook_is_in_the_room_or_named_self_paced():
    a = agenda.load()
    in_room = {s.notebook for s in a.slots if s.notebook}
    numbers = {p.name[:2] for p in agenda.NOTEBOOKS.glob("[0-9][0-9]_*.py")}
    assert numbers == in_room
    for s in a.slots:
        if s.notebook:          # each of its sections is named once: live, recorded or self-paced
            named = [agenda.match_heading(r, agenda.notebook_sections(s.notebook))
                     for r in [x.ref for x in (*s.live, *s.recorded)] + list(s.self_paced)]
            assert len(named) == len(set(named)), s.id


def test_sections_are_found_by_number_heading_or_first_words():
    headings = ["1 · Memory grows with every token", "1b · Batching", "Speed: prefill and decode", "Exercises"]
    assert agenda.match_heading("1", headings) == headings[0]
    assert agenda.match_heading("1b", headings) == headings[1]
    assert agenda.match_heading("Speed", headings) == headings[2]
    assert agenda.match_heading("Spee", headings) is None          # a word, not a prefix of one
    assert agenda.match_heading("2", headings) is None


def test_fit_adds_the_live_sections_run_time_to_the_talk(tmp_path):
    a = agenda.load()
    slot = next(s for s in a.slots if s.live)
    headings = agenda.notebook_sections(slot.notebook)
    sections = {agenda.match_heading(x.ref, headings): 30.0 for x in slot.live}
    sections["set-up"] = 6.0
    name = agenda.notebook_file(slot.notebook).stem
    times = agenda.RunTimes(first={}, cached={name: {"seconds": 99.0, "sections": sections}})
    slower = agenda.RunTimes(first={}, cached={name: {"seconds": 99.0, "sections": {**sections, "set-up": 66.0}}})
    got = next(f for f in agenda.fit(a, [times]) if f.slot.id == slot.id)
    assert got.run_minutes == pytest.approx((30.0 * len(slot.live) + 6.0) / 60)
    assert got.need_minutes == pytest.approx(slot.talk_minutes + got.run_minutes)
    assert got.fits == (got.need_minutes <= slot.minutes)
    both = next(f for f in agenda.fit(a, [times, slower]) if f.slot.id == slot.id)     # the slowest record counts
    assert both.run_minutes == pytest.approx((30.0 * len(slot.live) + 66.0) / 60)
    assert next(f for f in agenda.fit(a, []) if f.slot.id == slot.id).fits is None     # nothing measured: unknown


def _write(tmp_path, body: str):
    p = tmp_path / "agenda.toml"
    p.write_text(body)
    return p


SLOT = '[[slot]]\nid = "a"\ntitle = "x"\nminutes = 5\n'


def _refused(tmp_path, body) -> list[str]:
    """The lines of the AgendaError a file's text gives."""
    with pytest.raises(agenda.AgendaError) as err:
        agenda.load(_write(tmp_path, body))
    assert str(err.value).splitlines() == err.value.lines
    return err.value.lines


# (the file's text, the one line it must give): each was a traceback, an unclear error or silently accepted
@pytest.mark.parametrize("body,line", [
    # tracebacks before the schema: AttributeError on a slot that is not a table, KeyError on no title
    ('slot = "x"\n', "agenda.toml: slot is 'x'; allowed: [[slot]] tables, at least one"),
    ('slot = ["x"]\n', "agenda.toml slot 1: slot is 'x'; allowed: a [[slot]] table of fields"),
    ('[slot]\ntitle = "x"\nminutes = 5\n', "agenda.toml: slot is {'title': 'x', 'minutes': 5}; allowed: [[slot]] "
                                           "tables, at least one"),
    ('[[slot]]\nid = "a"\nminutes = 5\n', "agenda.toml slot 1 ('a'): title is missing; allowed: text of 1 to 300 "
                                          "characters"),
    # accepted before: an empty agenda, a 1,400-minute workshop, a talk longer than its slot, live = "123",
    # self_paced = "Exercises" read letter by letter, notebook = "*", unknown keys, sections with no notebook
    ('', "agenda.toml: slot is missing; allowed: [[slot]] tables, at least one"),
    ('[[slot]]\ntitle = "x"\nminutes = 100\n' * 14, "agenda.toml: the slots add to 1400 minutes; allowed: at most 120 (the workshop's "
                                    "length, breaks included)"),
    (SLOT + 'notebook = "01"\nlive = [{ section = "1", talk = 3 }, { section = "2", talk = 2.5 }]\n',
     "agenda.toml slot 1 ('a'): talk adds to 5.5 minutes over the live and recorded sections; allowed: at most the "
     "slot's minutes, 5"),
    (SLOT + 'notebook = "01"\nlive = "123"\n', "agenda.toml slot 1 ('a'): live is '123'; allowed: a list of sections, "
                                              'each a number or heading ("2") or {section = "2", talk = minutes}'),
    (SLOT + 'notebook = "01"\nself_paced = "Exercises"\n', "agenda.toml slot 1 ('a'): self_paced is 'Exercises'; "
                                                          "allowed: a list of sections"),
    (SLOT + 'notebook = "*"\n', "agenda.toml slot 1 ('a'): notebook is '*'; allowed: a notebook's two-digit number as "
                               "text, one of 00, 01, 02"),
    (SLOT + 'colour = "red"\n', "agenda.toml slot 1 ('a'): colour is not a field here; allowed: id, title, kind, "
                               "minutes, question, notebook, live, recorded, self_paced, slides"),
    (SLOT + 'notebook = "01"\nlive = [{ section = "1", tlak = 2 }]\n',
     "agenda.toml slot 1 ('a'): live item 1, tlak is not a field here; allowed: section, talk"),
    (SLOT + '[extra]\nx = 1\n', "agenda.toml: extra is not a field here; allowed: slot"),
    (SLOT + 'live = ["1"]\n', "agenda.toml slot 1 ('a'): live names sections but the slot names no notebook; "
                              'allowed: notebook = "NN" beside them'),
    (SLOT + 'kind = "break"\nnotebook = "01"\n', "agenda.toml slot 1 ('a'): kind is 'break' with notebook '01'; "
                                                "allowed: kind 'notebook' (or no kind)"),
    (SLOT + 'kind = "notebook"\n', "agenda.toml slot 1 ('a'): kind is 'notebook' but the slot names no notebook"),
    (SLOT + 'notebook = "01"\nlive = ["1"]\nrecorded = ["1 · Memory grows with every token"]\n',
     "agenda.toml slot 1 ('a'): recorded: section '1 · Memory grows with every token' is named again (first in "
     "live); allowed: each section once"),
    # unclear before ("no notebook '1' in notebooks/": which slot?), or checked with a poorer line
    (SLOT + 'notebook = "1"\n', "agenda.toml slot 1 ('a'): notebook is '1'; allowed: a notebook's two-digit number"),
    (SLOT + 'notebook = 1\n', "agenda.toml slot 1 ('a'): notebook is 1; allowed: a notebook's two-digit number as text"),
    (SLOT + 'notebook = "42"\n', "agenda.toml slot 1 ('a'): notebook is '42'; allowed: a notebook's two-digit number"),
    (SLOT.replace("5", '"ten"'), "agenda.toml slot 1 ('a'): minutes is 'ten'; allowed: a number of minutes above 0 and "
                                 "at most 120 (the workshop's length)"),
    (SLOT.replace("5", "1e9"), "agenda.toml slot 1 ('a'): minutes is 1000000000.0; allowed: a number of minutes"),
    (SLOT.replace("5", "0"), "agenda.toml slot 1 ('a'): minutes is 0; allowed: a number of minutes above 0"),
    (SLOT.replace("5", "true"), "agenda.toml slot 1 ('a'): minutes is true; allowed: a number of minutes"),
    (SLOT.replace("5", "nan"), "agenda.toml slot 1 ('a'): minutes is nan; allowed: a number of minutes"),
    (SLOT + 'kind = "lunch"\n', "agenda.toml slot 1 ('a'): kind is 'lunch'; allowed: one of slides, notebook, break, "
                               "questions"),
    (SLOT + 'notebook = "01"\nlive = ["9"]\n', "agenda.toml slot 1 ('a'): live item 1: notebook 01 has no section '9'; "
                                              "allowed: one of its sections, '1', '2', '3', '4', '5', 'Exercises'"),
    (SLOT + 'notebook = "01"\nlive = [{ section = "1", talk = -1 }]\n',
     "agenda.toml slot 1 ('a'): live item 1, talk is -1; allowed: minutes from 0 to 120"),
    (SLOT + 'notebook = "01"\nlive = [1]\n', "agenda.toml slot 1 ('a'): live item 1 is 1; allowed: a section: its "
                                            "number or heading as text"),
    (SLOT + 'id = "Bad id"\n', None),    # a TOML error: a key given twice
    (SLOT.replace('"a"', '"Bad id"'), "agenda.toml slot 1 ('Bad id'): id is 'Bad id'; allowed: a short name of "
                                       "lower-case letters"),
    (SLOT + SLOT, "agenda.toml: slot ids repeat: a; allowed: each id once"),
    ("this is [not toml", "cannot read agenda.toml as TOML: "),
    (SLOT + "live = " + "[" * 50_000 + "]" * 50_000 + "\n", "cannot read agenda.toml as TOML: it nests too deeply"),
])
def test_a_bad_agenda_is_one_line_naming_the_slot_field_value_and_what_is_allowed(tmp_path, body, line):
    lines = _refused(tmp_path, body)
    assert len(lines) == 1, lines
    if line is None:
        assert lines[0].startswith("cannot read") and "as TOML" in lines[0]
    else:
        assert lines[0].replace(str(tmp_path) + "/", "").startswith(line), lines[0]


def test_every_violation_is_listed_one_per_line(tmp_path):
    body = ('[[slot]]\nid = "a"\ntitle = "x"\nminutes = "ten"\nnotebook = "*"\n'
            '[[slot]]\nid = "b"\nminutes = 1e9\nlive = "123"\ncolour = 1\n'
            '[[slot]]\ntitle = "ok"\nminutes = 5\nnotebook = "01"\nlive = ["9", "1", { section = "8", talk = 1 }]\n')
    lines = [x.split(": ", 1)[1].split(";")[0] for x in _refused(tmp_path, body)]
    assert lines == ["minutes is 'ten'", "notebook is '*'", "title is missing", "minutes is 1000000000.0",
                     "live is '123'", "colour is not a field here", "live item 1: notebook 01 has no section '9'",
                     "live item 3: notebook 01 has no section '8'"]


def test_a_file_that_cannot_be_read_is_named(tmp_path):
    (tmp_path / "latin1.toml").write_bytes(b'[[slot]]\ntitle = "caf\xe9"\n')
    for path, needle in ((tmp_path / "none.toml", "No such file or directory"), (tmp_path, "not a regular file"),
                         (tmp_path / "latin1.toml", "it is not UTF-8 text"), (Path("/dev/zero"), "not a regular file")):
        with pytest.raises(agenda.AgendaError, match=f"^cannot read {re.escape(str(path))}: {needle}; allowed: "):
            agenda.load(path)
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * agenda.MAX_AGENDA_BYTES)
    with pytest.raises(agenda.AgendaError, match="is over 1,000,000 bytes"):
        agenda.load(big)


def test_the_committed_agenda_passes_the_schema_and_sections_are_found_by_name():
    a = agenda.load()
    assert a.path == agenda.AGENDA and [s.id for s in a.slots][:2] == ["why", "preflight"]
    pain = a.slot("pain")
    assert pain.notebook == "01" and [x.ref for x in pain.live] == ["1", "2", "3"]
    assert [x.talk_minutes for x in pain.live] == [2, 2.5, 3] and pain.self_paced == ("Exercises",)


def _bad_room(tmp_path, monkeypatch):
    """The room's agenda replaced by a file with two violations, as make export and make slides would read it."""
    path = _write(tmp_path, SLOT.replace("5", '"ten"') + 'notebook = "*"\n')
    monkeypatch.setattr(agenda, "AGENDA", path)
    return path


def test_make_export_prints_the_agendas_lines_and_exits_2(tmp_path, monkeypatch, capsys):
    import sys

    sys.path.insert(0, str(agenda.ROOT / "scripts"))
    import notebooks

    _bad_room(tmp_path, monkeypatch)
    guide = (agenda.ROOT / "workshop" / "README.md").read_text()
    for cmd in ("export", "check"):
        monkeypatch.setattr(sys, "argv", ["notebooks.py", cmd])
        assert notebooks.main() == 2
        err = capsys.readouterr().err.replace(str(tmp_path) + "/", "").splitlines()
        assert [x.split(";")[0] for x in err] == ["error: agenda.toml slot 1 ('a'): minutes is 'ten'",
                                                  "error: agenda.toml slot 1 ('a'): notebook is '*'"], err
    assert (agenda.ROOT / "workshop" / "README.md").read_text() == guide      # nothing written


def test_make_slides_prints_the_agendas_lines_and_exits_2(tmp_path, monkeypatch, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("slides_figures", agenda.ROOT / "slides" / "figures.py")
    figures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figures)
    _bad_room(tmp_path, monkeypatch)
    assert figures.main(["--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.replace(str(tmp_path) + "/", "").splitlines()
    assert len(err) == 2 and err[0].startswith("error: agenda.toml slot 1 ('a'): minutes is 'ten'"), err
    assert not (tmp_path / "out" / "numbers.json").exists()


def test_the_guide_table_is_generated_from_the_file():
    a = agenda.load()
    table = agenda.guide_table(a)
    for s in a.slots:
        assert f"| {agenda.clock(a.start(s.id))} | {s.minutes:g} | {s.title} |" in table
    guide = (agenda.ROOT / "workshop" / "README.md").read_text()
    assert table in guide


def test_the_deck_follows_the_agenda_and_says_each_slots_time():
    import re

    deck = (agenda.ROOT / "slides" / "deck.md").read_text()
    titles = re.findall(r"^#{1,2} (.+?)\s*$", deck, flags=re.M)
    a = agenda.load()
    named = [t for s in a.slots for t in s.slides]
    assert set(named) <= set(titles), set(named) - set(titles)
    assert [titles.index(t) for t in named] == sorted(titles.index(t) for t in named)   # the agenda's order
    for s in a.slots:
        assert "{{time_" + s.id + "}}" in deck, s.id          # every slot's time is said, generated
    assert "{{agenda_outline}}" in deck


