"""The GPU a notebook's computed figures name, and the figures it cites: the reference model and GPU of
the talk, a published figure by its key (helpers/data/published.csv: value, unit, what, source, address),
and a notebook's closing "Sources" cell, each publication once. A GPU's computed figures are
helpers.present.on_gpu and helpers.formulas.roofline.gpu_roofline.
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

    rows = pd.read_csv(PUBLISHED).set_index("key")
    r = rows.loc[key]
    return Published(key, float(r["value"]), r["unit"], r["what"], r["source"], r["url"])


def sources(*keys: str, more: tuple[str, ...] = ()):
    """A notebook's closing "Sources" cell: each publication cited in it once — the rows of
    helpers/data/published.csv named by `keys` (their source and address, each source once) and `more`
    (markdown lines for sources that are not a published figure: a datasheet, a paper's table, a library's
    file at its version). Markdown (a marimo element)."""
    import marimo as mo

    seen = dict.fromkeys(f"{published(k).source} — <{published(k).url}>" for k in keys)
    lines = [*seen, *more]
    return mo.md("## Sources\n\n" + "\n".join(f"- {line}" for line in lines) if lines else "")
