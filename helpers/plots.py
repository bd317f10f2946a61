"""Plot conventions: every figure names what produced it.

    fig, ax = plots.figure()
    ...
    plots.stamp(fig, loaded)                 # measured: "model · dtype · device · profile"
    plots.stamp(fig, "computed from mistral-7b-v0.1 config.json, bf16")   # computed
"""
from __future__ import annotations

from typing import Any


def figure(ncols: int = 1, nrows: int = 1, width: float = 7.0, height: float = 4.0, **kw):
    """A matplotlib figure with the workshop's size; returns (fig, axes)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), **kw)
    return fig, axes


def source_label(source: Any) -> str:
    """The line that says what produced a figure: a Loaded model's label, or a given text."""
    label = getattr(source, "label", None)
    if isinstance(label, str):
        return "measured: " + label
    return str(source)


def stamp(fig, source: Any) -> Any:
    """Write what produced the figure along its bottom edge; returns the figure for display."""
    fig.text(0.01, 0.005, source_label(source), fontsize=8, color="#555", ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig
