"""No notebook types a size or direction word about a measured or computed quantity ("a little", "mostly",
"well under", "several times", "higher still" …): a result's size and direction are its numbers and its one
below / at / above label (helpers.formulas.regime). The check itself is tests/prose_lint.py."""
from __future__ import annotations

from pathlib import Path

import pytest

import prose_lint

NOTEBOOKS = sorted((prose_lint.ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_typed_qualifier_in_a_notebooks_prose(notebook):
    found = prose_lint.findings(notebook)
    assert not found, "\n".join(f"{notebook.name}:{line}: “{word}” typed: …{around}…" for line, word, around in found)


def test_the_check_finds_typed_words_and_leaves_numbers_alone(tmp_path: Path):
    nb = tmp_path / "99_probe.py"
    nb.write_text('''
def _(mo, v, rows):
    mo.md("The packed loop is much faster than the bare one, and a little behind generate.")
    mo.md(f"The packed loop runs at {v:.2f}× the bare one at {rows} rows.")   # a number: not typed
    mo.md("How much memory does a user need, as much as a page?")          # a question, not a size
    label = "mostly"                                                         # a label is shown: typed
    hint = {"about equal": "As derived."}[way]                               # a rule's words, retyped
''', encoding="utf-8")
    found = sorted((line, word) for line, word, _ in prose_lint.findings(nb))
    assert found == [(3, "a little"), (3, "much"), (6, "mostly"), (7, "about equal")]
