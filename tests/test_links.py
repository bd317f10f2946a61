"""Where the workshop lives is stated once (pyproject.toml); every generated copy agrees with it: the
Colab set-up cell of every export, the Molab (PEP 723) header of every marimo notebook, and the Open
in Colab / Molab links of the guide."""
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import notebooks  # noqa: E402  (scripts/notebooks.py)
import repository  # noqa: E402  (scripts/repository.py)

W = repository.where()


def test_pyproject_states_the_repository_once():
    assert W.repo_url.startswith("https://github.com/") and W.branch
    assert W.owner_repo.count("/") == 1
    text = (ROOT / "pyproject.toml").read_text()
    assert text.count(W.repo_url) == 1


def test_links_are_built_from_owner_repo_and_branch():
    w = repository.Where("https://github.com/acme/workshop", "dev")
    assert w.colab_url("01_feel_the_pain") == \
        "https://colab.research.google.com/github/acme/workshop/blob/dev/notebooks/colab/01_feel_the_pain.ipynb"
    assert w.molab_url("01_feel_the_pain") == \
        "https://molab.marimo.io/github/acme/workshop/blob/dev/notebooks/01_feel_the_pain.py"
    assert w.pip_requirement() == "llm-inference-workshop-helpers @ git+https://github.com/acme/workshop@dev"
    assert not w.is_placeholder and repository.Where(f"https://github.com/{repository.PLACEHOLDER_OWNER}/x", "main").is_placeholder


@pytest.mark.parametrize("bad", ["https://gitlab.com/a/b", "github.com/a/b", "https://github.com/only-owner"])
def test_a_repository_that_is_not_a_github_url_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="https://github.com/OWNER/NAME"):
        repository.Where(bad, "main").owner_repo


def test_every_export_sets_up_from_the_stated_repository():
    for src in notebooks.sources():
        nb = json.loads(notebooks.target(src).read_text())
        first = "".join(nb["cells"][0]["source"])
        assert f'REPO_URL, BRANCH = "{W.repo_url}", "{W.branch}"' in first, src.name
        assert "google.colab" in first and "raise" not in first   # never an obscure error on Colab


def test_every_marimo_notebook_declares_helpers_from_the_repository():
    for src in notebooks.sources():
        text = src.read_text()
        assert text.startswith(notebooks.HEADER_START), src.name
        header = text[: text.index("\n# ///\n")]
        assert f'"{W.pip_requirement()}"' in header and '"torch"' in header, src.name


def test_guide_links_open_the_notebooks_of_the_stated_repository():
    guide = (ROOT / "workshop" / "README.md").read_text()
    found = re.findall(r"\((https://(?:colab\.research\.google\.com|molab\.marimo\.io)/github/[^)]+)\)", guide)
    stems = [s.stem for s in notebooks.sources()]
    assert found, "the guide has no Open in Colab / Molab links"
    assert sorted(found) == sorted([W.colab_url(s) for s in stems] + [W.molab_url(s) for s in stems])


def test_the_colab_cell_does_nothing_outside_colab(tmp_path):
    """Run the generated cell as a script outside Colab, in a folder that is not a clone: it prints one
    line and raises nothing; inside the repository it leaves the import path alone."""
    import subprocess

    cell = notebooks.setup_cell(W)
    r = subprocess.run([sys.executable, "-c", cell], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") <= 1
