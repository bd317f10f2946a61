"""The reference model and GPU of the talk, a published figure by its key (helpers/data/published.csv) and a
notebook's closing "Sources" cell.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REFERENCE_MODEL = "mistral-7b-v0.1"
REFERENCE_GPU = "H100 SXM"   # the GPU of the talk's serving benchmark (talk outline, Demo F)
PUBLISHED = Path(__file__).resolve().parents[1] / "data" / "published.csv"


@dataclass(frozen=True)
class Published:
    """A figure a publication printed (helpers/data/published.csv)."""

    key: str
    value: float
    unit: str
    what: str
    source: str
    url: str


def published(key: str) -> Published:
    """One cited figure by its key in helpers/data/published.csv."""
    import pandas as pd

    r = pd.read_csv(PUBLISHED).set_index("key").loc[key]
    return Published(key, float(r["value"]), r["unit"], r["what"], r["source"], r["url"])


def sources(*keys: str, more: tuple[str, ...] = ()):
    """A notebook's "Sources" cell: the sources of the published figures `keys`, each once, then `more` lines."""
    import marimo as mo

    seen = dict.fromkeys(f"{published(k).source} — <{published(k).url}>" for k in keys)
    lines = [*seen, *more]
    return mo.md("## Sources\n\n" + "\n".join(f"- {line}" for line in lines) if lines else "")
