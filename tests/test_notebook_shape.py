"""Every notebook has the shape the workshop promises: objectives and run time at the top, "What you
should see" after measurements, two or three exercises with folded solutions, takeaways, glossary
links, and tables captioned through helpers.present.plots.table instead of a "measured on" column per row."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHAPED = ("00", "01", "02", "03", "04", "05", "06", "07", "08", "09", "10")
# tables captioned once through helpers.present.plots.table; 04 and 10 still add a "measured on"/"source" column
CAPTIONED_TABLES = ("00", "01", "02", "03", "05", "06", "07", "08")


def _source(number: str) -> str:
    (path,) = (ROOT / "notebooks").glob(f"{number}_*.py")
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("number", SHAPED)
def test_notebook_has_the_teaching_shape(number):
    src = _source(number)
    top = src[:src.index("## ")] if "## " in src else src
    header = f'run_times.header("{number}")'                 # the run time from the records, never typed
    assert "**What you will learn**" in top and header in top and "**Run time**" not in src
    objectives = re.findall(r"^\s{4}\d\. ", top[top.index("**What you will learn**"):top.index(header)], re.M)
    assert 3 <= len(objectives) <= 4, objectives
    assert src.count("What you should see") >= 1
    assert 2 <= src.count("notebook.exercise(") <= 3
    assert "## Takeaways" in src and "notebook.elapsed(started)" in src
    assert "term(" in src, "no glossary link"


@pytest.mark.parametrize("number", CAPTIONED_TABLES)
def test_tables_say_their_source_once(number):
    src = _source(number)
    assert '["measured on"] =' not in src and '**{"measured on": label}' not in src
    assert 'assign(source=' not in src and '["source"] = "computed' not in src
    assert "plots.table(" in src


def test_readme_lists_every_notebook_in_number_order():
    """README.md's notebook table: one row per notebook in notebooks/, in number order."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\d\d_\w+)` \|", readme, re.M)
    names = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    assert rows == sorted(rows), rows
    assert rows == names, (rows, names)


@pytest.mark.parametrize("number", ("01", "02", "03", "04", "05", "06", "07", "08", "09"))
def test_the_learner_predicts_before_central_results_and_checks_at_the_end(number):
    """At least two predictions, each read back beside its result, and one self-check (issue 34)."""
    src = _source(number)
    predictions = src.count("learner.prediction(")
    assert predictions >= 2 and src.count("learner.beside(") >= predictions
    assert src.count("learner.self_check(") == 1 and src.count("learner.answers(") == 1
    assert src.index("learner.self_check(") > src.rindex("learner.beside(")       # the self-check closes it
