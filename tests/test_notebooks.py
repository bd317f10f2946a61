"""Each .ipynb is the current export of its marimo source, every marimo source has one, and each runs
in the marimo runtime as well as in Jupyter."""
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.slow
@pytest.mark.parametrize("src", notebooks.sources(), ids=lambda p: p.stem)
def test_marimo_notebook_runs_in_marimo(src, tmp_path):
    """The marimo runtime itself (not only the Jupyter export under nbmake) runs every cell: it enforces
    rules Jupyter does not, such as reading a control's value only in a later cell than the control."""
    import os

    env = dict(os.environ, HF_HUB_OFFLINE="1", WORKSHOP_PROFILE="tiny", MPLBACKEND="Agg")
    r = subprocess.run([sys.executable, str(src)], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert r.returncode == 0, f"{src.name} failed under marimo:\n{r.stderr[-3000:]}"


def test_readme_describes_the_tiny_profile_as_built():
    """The README's profile table states the tiny model's shape: it must be the one helpers builds."""
    from helpers.measure.models import DEFAULT_MODEL_ID
    from helpers.measure.local_models import TINY_CONFIG

    readme = (ROOT / "README.md").read_text()
    assert (f"{TINY_CONFIG['num_hidden_layers']} layers, hidden {TINY_CONFIG['hidden_size']}, random weights, "
            f"real {TINY_CONFIG['vocab_size'] // 1000}k Mistral tokenizer") in readme
    assert f"`{DEFAULT_MODEL_ID}`" in readme
