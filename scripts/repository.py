"""Where the workshop lives, stated once: the repository URL and branch in pyproject.toml
(`[project.urls] Repository`, `[tool.workshop] branch`). The Colab set-up cell, the Molab dependency
header of every marimo notebook and the "Open in Colab / Molab" links are generated from it by
`make export` (scripts/notebooks.py, beside it); tests/test_links.py checks every copy agrees with it.

Until the real URL is known, the URL holds PLACEHOLDER_OWNER: the links say so and the Colab set-up
cell prints one line saying what to edit instead of failing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
PLACEHOLDER_OWNER = "YOUR-GITHUB-OWNER"
PACKAGE = "llm-inference-workshop-helpers"

COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
MOLAB_BADGE = "https://marimo.io/molab-shield.svg"


@dataclass(frozen=True)
class Where:
    repo_url: str      # https://github.com/OWNER/NAME
    branch: str

    @property
    def is_placeholder(self) -> bool:
        return PLACEHOLDER_OWNER in self.repo_url

    @property
    def owner_repo(self) -> str:
        m = re.fullmatch(r"https://github\.com/([^/\s]+)/([^/\s]+?)(?:\.git)?/?", self.repo_url)
        if not m:
            raise ValueError(f"[project.urls] Repository must be a https://github.com/OWNER/NAME URL, got {self.repo_url!r}")
        return f"{m.group(1)}/{m.group(2)}"

    def pip_requirement(self) -> str:
        """The helpers package as pip installs it straight from the repository (PEP 508 direct URL)."""
        return f"{PACKAGE} @ git+{self.repo_url}@{self.branch}"

    def colab_url(self, stem: str) -> str:
        return f"https://colab.research.google.com/github/{self.owner_repo}/blob/{self.branch}/notebooks/colab/{stem}.ipynb"

    def molab_url(self, stem: str) -> str:
        return f"https://molab.marimo.io/github/{self.owner_repo}/blob/{self.branch}/notebooks/{stem}.py"

    def badges(self, stem: str) -> str:
        """Markdown: an "Open in Molab" and an "Open in Colab" badge for one notebook."""
        return (f"[![Open in Molab]({MOLAB_BADGE})]({self.molab_url(stem)}) "
                f"[![Open in Colab]({COLAB_BADGE})]({self.colab_url(stem)})")


def _toml_value(text: str, table: str, key: str) -> str | None:
    """A string value under [table] in a small TOML file (pyproject.toml is ours: plain key = "value")."""
    m = re.search(rf"^\[{re.escape(table)}\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if not m:
        return None
    v = re.search(rf'^{re.escape(key)}\s*=\s*"([^"]*)"', m.group(1), re.M)
    return v.group(1) if v else None


def where(pyproject: Path = PYPROJECT) -> Where:
    """The repository URL and branch from pyproject.toml."""
    if not pyproject.is_file():
        raise ValueError(f"{pyproject} not found: links are generated inside a clone of the workshop repository")
    text = pyproject.read_text()
    url = _toml_value(text, "project.urls", "Repository")
    branch = _toml_value(text, "tool.workshop", "branch") or "main"
    if not url:
        raise ValueError(f"{pyproject}: [project.urls] needs Repository = \"https://github.com/OWNER/NAME\"")
    w = Where(url.rstrip("/"), branch)
    w.owner_repo  # validates the form  # noqa: B018
    return w
