"""The planner's web app under bad inputs, through headless Chromium (`marimo run` on notebook 04): every
bad value shows a note next to the controls and the last good ranking stays on the page; the path box
reads JSON config files only, and its note does not tell whether an arbitrary path exists.

Uses tests/test_webapp.py's server and browser fixtures (its own server for this module).
"""
from __future__ import annotations

import json
import re
import time

import pytest

from helpers.formulas.specs import preset_path
from test_webapp import WAIT_S, app_url, page, page_text, ranked_rows, wait_for_change, wait_shown  # noqa: F401

pytestmark = pytest.mark.browser

NOTE = "Cannot plan this"


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    d = tmp_path_factory.mktemp("configs")
    mistral = json.loads(preset_path("mistral-7b-v0.1").read_text())
    lite = json.loads(preset_path("deepseek-v2-lite").read_text())
    files = {
        "string": {**mistral, "num_key_value_heads": "8"},
        "mla0": {**lite, "kv_lora_rank": 0},
        "good": json.loads(preset_path("llama-3.1-8b").read_text()),
    }
    out = {}
    for name, cfg in files.items():
        out[name] = d / f"{name}.json"
        out[name].write_text(json.dumps(cfg))
    out["nested"] = d / "nested.json"
    out["nested"].write_text("[" * 100_000 + "]" * 100_000)
    out["notjson"] = d / "notes.txt"
    out["notjson"].write_text("hello")
    out["badjson"] = d / "bad.json"
    out["badjson"].write_text("hello")
    return out


def type_path(pg, text: str) -> None:
    box = pg.get_by_placeholder("path/to/config.json")
    box.fill(text)
    box.press("Enter")


def note_text(pg, needle: str) -> str:
    return wait_shown(pg, needle).inner_text()


def assert_no_crash(pg) -> None:
    assert pg.get_by_text("Traceback").count() == 0
    assert pg.get_by_text("An internal error occurred").count() == 0


def wait_ranking(pg, want, what: str) -> None:
    """Wait (up to WAIT_S) until the ranked table is `want`; fail with what the page showed."""
    deadline = time.monotonic() + WAIT_S
    while ranked_rows(pg) != want:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {WAIT_S:.0f} s; the page showed: {page_text(pg)}")
        time.sleep(0.5)


def back_to_the_preset(pg, before) -> None:
    """Clear the path box and wait until the preset's ranking is back."""
    type_path(pg, "")
    wait_shown(pg, NOTE, state="detached")
    wait_ranking(pg, before, "the preset's ranking did not come back")


@pytest.mark.parametrize("case,needle", [
    ("string", "num_key_value_heads is '8'; allowed: a whole number"),
    ("mla0", "kv_lora_rank is 0; allowed: a whole number from 1"),
    ("nested", "cannot use"),
])
def test_bad_config_file_is_a_note_and_the_ranking_stays(page, configs, case, needle):
    before = ranked_rows(page)
    assert before and before[0]["status"] == "ok"
    type_path(page, str(configs[case]))
    text = note_text(page, needle)
    assert NOTE in text and "Showing the last good answer: mistral-7b-v0.1" in text
    assert ranked_rows(page) == before
    assert_no_crash(page)
    back_to_the_preset(page, before)


def test_the_note_does_not_tell_whether_a_path_exists(page, configs, tmp_path):
    before = ranked_rows(page)
    notes = {}
    for path in ("/no/such/dir/config.json", "/etc/passwd", "/etc", str(configs["notjson"]),
                 str(configs["badjson"]), str(tmp_path / "missing.json"), "/dev/zero", "/proc/self/environ"):
        type_path(page, path)
        notes[path] = note_text(page, f"cannot use '{path}'").replace(path, "PATH")
        assert ranked_rows(page) == before
    assert len(set(notes.values())) == 1, notes
    assert_no_crash(page)
    back_to_the_preset(page, before)


def test_context_beyond_the_model_keeps_the_ranking(page):
    before = ranked_rows(page)
    context = page.get_by_role("slider").nth(0)
    context.focus()
    # one key, one change: 4096 -> the last step, 131,072, beyond Mistral 7B's 32,768 (arrow presses one by
    # one would each be planned, and the last good answer would be whichever valid step came last)
    page.keyboard.press("End")
    text = note_text(page, "exceeds mistral-7b-v0.1's maximum of 32,768")
    assert NOTE in text and "4,096 tokens" in text       # the last good answer it still shows
    assert ranked_rows(page) == before
    page.keyboard.press("Home")                          # 512: valid again
    wait_shown(page, NOTE, state="detached")
    for _ in range(3):                                   # 512 -> 4096, back where the module's page started
        page.keyboard.press("ArrowRight")
    wait_ranking(page, before, "the 4,096-token ranking did not come back")
    assert_no_crash(page)


def test_a_good_config_file_replaces_the_answer(page, configs):
    before = ranked_rows(page)
    type_path(page, str(configs["good"]))
    after = wait_for_change(page, before)
    assert after[0]["status"] == "ok"
    assert page.get_by_text(re.compile("computed from good config.json")).count() >= 1
    assert page.get_by_text(NOTE).count() == 0
    back_to_the_preset(page, before)
