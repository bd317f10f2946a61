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



def finish(fig, source: Any) -> Any:
    """stamp(), then close the figure in pyplot: returned as a cell's value it still renders (marimo and
    Jupyter draw Figure objects), and Jupyter's inline backend does not draw it a second time."""
    import matplotlib.pyplot as plt

    stamp(fig, source)
    plt.close(fig)
    return fig


def heatmap(ax, values, xlabels, ylabels, fmt=str, cmap: str = "viridis", mask=None, colorbar_label: str = ""):
    """A labelled heat map on `ax`: values[row][col], each cell annotated with fmt(value); cells where
    mask[row][col] is true are greyed and hatched (e.g. 'does not fit'). Returns the image."""
    import matplotlib
    import numpy as np
    from matplotlib.patches import Rectangle

    data = np.asarray(values, dtype=float)
    hidden = np.zeros(data.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    colours = matplotlib.colormaps[cmap].with_extremes(bad="#eeeeee")
    im = ax.imshow(np.ma.masked_array(data, mask=hidden), cmap=colours, aspect="auto", origin="lower")
    ax.grid(False)
    ax.set_xticks(range(len(xlabels)), [str(x) for x in xlabels], fontsize=8)
    ax.set_yticks(range(len(ylabels)), [str(y) for y in ylabels], fontsize=8)
    top = np.nanmax(np.where(hidden, np.nan, data)) if (~hidden).any() else 1.0
    for i in range(data.shape[0]):
        for j in range(data.shape[1]):
            colour = "#999" if hidden[i, j] else ("white" if data[i, j] < 0.6 * top else "black")
            ax.text(j, i, fmt(data[i, j]), ha="center", va="center", fontsize=7, color=colour)
            if hidden[i, j]:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="#ccc", lw=0))
    ax.figure.colorbar(im, ax=ax).set_label(colorbar_label)
    return im
