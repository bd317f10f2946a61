"""Each .ipynb is the current export of its marimo source, every marimo source has one, and each is a valid
marimo notebook. Each runs in the marimo runtime in tests/test_regimes.py (app.run(), what `python NN_*.py`
does, on every regime), in Jupyter under nbmake (`make test`) and live in `make run`."""
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
    # one `marimo check` for all of them (it names the file of each problem it finds)
    r = subprocess.run([sys.executable, "-m", "marimo", "check", *map(str, notebooks.sources())], capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, f"{r.stdout}{r.stderr}"


def test_preflight_go_no_go_lists_every_notebook():
    from helpers import preflight

    rows = preflight.go_no_go(True, preflight.library_versions(), "cpu")
    assert [r["notebook"] for r in rows] == [s.name for s in notebooks.sources()]
    assert all(r["verdict"] == "go" for r in rows)
    rows = preflight.go_no_go(False, {"bitsandbytes": "missing (ImportError)"}, "cpu")
    by_name = {r["notebook"][:2]: r for r in rows}
    assert by_name["00"]["verdict"] == "go"
    assert by_name.get("01", {"verdict": "no-go"})["verdict"] == "no-go"


def test_readme_describes_the_tiny_profile_as_built():
    """The README's profile table states the tiny model's shape: it must be the one helpers builds."""
    from helpers.measure.models import DEFAULT_MODEL_ID
    from helpers.measure.local_models import TINY_CONFIG

    readme = (ROOT / "README.md").read_text()
    assert (f"{TINY_CONFIG['num_hidden_layers']} layers, hidden {TINY_CONFIG['hidden_size']}, random weights, "
            f"real {TINY_CONFIG['vocab_size'] // 1000}k Mistral tokenizer") in readme
    assert f"`{DEFAULT_MODEL_ID}`" in readme
