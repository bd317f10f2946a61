"""The room from data (helpers.present.agenda, workshop/agenda.toml): two hours with the break, every section it
names present in its notebook, the guide's tables generated from it, section run times read from an
executed notebook's own cell timings, and bad agenda files refused with what is wrong."""
from __future__ import annotations

import pytest

from helpers.present import agenda


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


@pytest.mark.parametrize("body,needle", [
    ('[[slot]]\ntitle = "x"\nminutes = 0\n', "minutes must be a finite number > 0 and ≤ 120, got 0"),
    ('[[slot]]\ntitle = "x"\nminutes = "ten"\n', "got 'ten'"),
    ('[[slot]]\ntitle = "x"\nminutes = 5\nkind = "lunch"\n', "kind 'lunch'; allowed: slides, notebook"),
    ('[[slot]]\ntitle = "x"\nminutes = 5\nnotebook = "01"\nlive = ["9"]\n', "notebook 01 has no section '9'"),
    ('[[slot]]\ntitle = "x"\nminutes = 5\nnotebook = "01"\nlive = [{ section = "1", talk = -1 }]\n',
     "talk minutes must be a finite number ≥ 0 and ≤ 60"),
    ('[[slot]]\ntitle = "x"\nminutes = 5\nnotebook = "42"\n', "no notebook '42'"),
    ('[[slot]]\nid = "a"\ntitle = "x"\nminutes = 5\n[[slot]]\nid = "a"\ntitle = "y"\nminutes = 5\n', "slot ids repeat: a"),
])
def test_bad_agenda_files_say_what_is_wrong(tmp_path, body, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        agenda.load(_write(tmp_path, body))


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


