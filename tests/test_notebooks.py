"""Each .ipynb is the current export of its marimo source, and every marimo source has one."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import notebooks  # noqa: E402  (scripts/notebooks.py)


def test_every_marimo_notebook_has_a_current_export():
    assert notebooks.sources(), "no notebooks found"
    assert notebooks.stale() == [], "run `make export` and commit notebooks/colab/"


def test_marimo_sources_are_valid_notebooks():
    for src in notebooks.sources():
        r = subprocess.run([sys.executable, "-m", "marimo", "check", str(src)], capture_output=True, text=True,
                           timeout=120, cwd=ROOT)
        assert r.returncode == 0, f"{src.name}: {r.stdout}{r.stderr}"


def test_preflight_go_no_go_lists_every_notebook():
    from helpers import preflight

    rows = preflight.go_no_go(True, preflight.library_versions(), "cpu")
    assert [r["notebook"] for r in rows] == [s.name for s in notebooks.sources()]
    assert all(r["verdict"] == "go" for r in rows)
    rows = preflight.go_no_go(False, {"bitsandbytes": "missing (ImportError)"}, "cpu")
    by_name = {r["notebook"][:2]: r for r in rows}
    assert by_name["00"]["verdict"] == "go"
    assert by_name.get("01", {"verdict": "no-go"})["verdict"] == "no-go"
