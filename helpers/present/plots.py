"""The workshop's one visual style: a title on every figure, its source along the bottom; one colour per
meaning; decimal byte units; bars from zero; readable log ticks; tables captioned once (`table`).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

# ----------------------------------------------------------------------------- one colour per meaning
MEASURED = "#1f77b4"       # measured on this machine (blue)
COMPUTED = "#ff7f0e"       # computed by helpers from a config (orange)
DATASHEET = "#7f7f7f"      # a vendor's published figure (grey; draw dashed)
FIT = "#000000"            # a law fitted through measured points (black, thin)
OOM = "#d62728"            # out of memory, does not fit (red)
FITS = "#2ca02c"           # fits / yes (green)
WAITING = "#e5e5e5"        # a request waiting (light grey)
PREFILL = "#8c564b"        # a request's prefill, up to its first token (brown)
DECODE = "#17becf"         # a request's decode steps (cyan)
IDLE = "#9aabbb"           # a row held idle in a static batch (hatched)
GUIDE = "#a0a0a0"          # a reference line to read a figure against: a slope, a budget the learner set (dotted)
DATASHEET_STYLE = {"color": DATASHEET, "ls": "--", "lw": 1}


def figure(ncols: int = 1, nrows: int = 1, width: float = 7.0, height: float = 4.0, **kw):
    """A matplotlib figure with the workshop's size; returns (fig, axes). It is laid out when it is drawn
    (matplotlib's constrained layout), so a figure that is built and never shown costs no layout."""
    import matplotlib.pyplot as plt

    kw.setdefault("layout", "constrained")
    return plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), **kw)


def source_label(source: Any) -> str:
    """The line that says what produced a figure: a Loaded model's label, or a given text."""
    label = getattr(source, "label", None)
    return "measured: " + label if isinstance(label, str) else str(source)


def has_title(fig) -> bool:
    """Whether the figure has a title: a suptitle, or a title on every visible axes."""
    if fig._suptitle is not None and fig._suptitle.get_text():
        return True
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.axison and ax.get_label() != "<colorbar>"]
    return bool(axes) and all(ax.get_title() or ax.get_title(loc="left") for ax in axes)


def finish(fig, source: Any, title: str | None = None) -> Any:
    """Write what produced the figure along its bottom edge (and `title` as its suptitle), warn when it has no
    title, then close it in pyplot: a cell's value still renders, Jupyter does not draw it twice. The layout
    keeps the bottom edge for that line."""
    import matplotlib.pyplot as plt

    if title:
        fig.suptitle(title, fontsize=11)
    elif not has_title(fig):
        warnings.warn("figure without a title: pass title= to plots.finish or set one per axes", stacklevel=2)
    fig.text(0.01, 0.005, source_label(source), fontsize=8, color="#555", ha="left", va="bottom")
    if fig.get_layout_engine() is None:        # a figure not made by `figure`
        fig.set_layout_engine("constrained")
    fig.get_layout_engine().set(rect=(0, 0.04, 1, 0.96))    # (left, bottom, width, height): the line's strip free
    plt.close(fig)
    return fig


def is_empty(data: Any) -> bool:
    """No rows to draw: None, an empty sequence or mapping, a DataFrame with no rows."""
    return data is None or (data.empty if isinstance(data, (pd.DataFrame, pd.Series))
                            else hasattr(data, "__len__") and len(data) == 0)


def note_figure(source: Any, title: str, why: str = "nothing was measured in this run"):
    """A titled, stamped figure that says why there is nothing to draw, shown in place of the plot."""
    fig, ax = figure(height=1.6)
    ax.axis("off")
    ax.text(0.5, 0.5, f"Nothing to draw: {why}", ha="center", va="center", fontsize=10, color="#555", wrap=True,
            transform=ax.transAxes)
    return finish(fig, source, title)


def notes_when_empty(title: str):
    """Decorate a figure function whose first argument is its data: given no rows, it returns a
    note_figure titled `title`, stamped with its `source` (or `loaded`) argument."""
    import functools
    import inspect

    def wrap(fn):
        @functools.wraps(fn)
        def draw(*args, **kwargs):
            got = inspect.signature(fn).bind_partial(*args, **kwargs).arguments
            if not is_empty(next(iter(got.values()), None)):
                return fn(*args, **kwargs)
            return note_figure(got.get("source", got.get("loaded", "nothing measured")), title)
        draw.empty_title = title       # what the note is titled (tests find the decorated figures by it)
        return draw
    return wrap


_DECIMAL = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"))


def byte_unit(max_bytes: float) -> tuple[float, str]:
    """(divisor, unit) in the decimal family for bytes up to max_bytes: 2.4e9 -> (1e9, 'GB'), so MB never meets MiB."""
    return next(((size, unit) for size, unit in _DECIMAL if abs(max_bytes) >= size), (1.0, "B"))


_POWERS = {"TB": "10¹²", "GB": "10⁹", "MB": "10⁶", "kB": "10³"}


def byte_label(unit: str, what: str = "") -> str:
    """An axis label for bytes in a decimal unit: 'KV cache, MB (10⁶ bytes)'."""
    tail = f"{unit} ({_POWERS[unit]} bytes)" if unit in _POWERS else "bytes"
    return f"{what}, {tail}" if what else tail


def tick_label(value: float) -> str:
    """A readable tick: powers of two from 1,024 as '1k', '128k'; others with separators ('1,000', '0.5')."""
    if value >= 1024 and float(value).is_integer() and (int(value) & (int(value) - 1)) == 0:
        return f"{int(value) // 1024:,}k"
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.3g}"


def log_axis(ax, axis: str = "x", ticks: Iterable[float] | None = None, base: float = 10) -> None:
    """`axis` ('x' or 'y') on a log scale, ticks at `ticks` or 1, 2, 5 × each decade, read as plain numbers."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=base)
    if ticks is not None:
        vals = sorted({float(t) for t in ticks if t and t > 0})
        if len(vals) > 9:  # thin out: keep about eight, always the ends
            step = math.ceil(len(vals) / 8)
            vals = sorted(set(vals[::step]) | {vals[-1]})
        target.set_major_locator(FixedLocator(vals))
    elif base == 10:
        target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(FuncFormatter(lambda v, _: tick_label(v)))
    target.set_minor_formatter(NullFormatter())


# ----------------------------------------------------------------------------- tables

# Cells spaced and ruled by the table itself: marimo draws a Styler with no stylesheet of its own for its
# cells (Jupyter and nbconvert bring theirs), so without these its cells touch ("7,241,732,09628,966,…").
TABLE_STYLES = [
    {"selector": "", "props": "border-collapse: collapse; margin: 0.4em 0;"},
    {"selector": "caption", "props": "caption-side: top; text-align: left; font-style: italic; color: #555; "
                                     "padding-bottom: 0.3em;"},
    {"selector": "th", "props": "padding: 0.25em 0.8em; border-bottom: 1.5px solid #888; text-align: left; "
                                "font-weight: 600; vertical-align: bottom;"},
    {"selector": "td", "props": "padding: 0.25em 0.8em; border-bottom: 1px solid #ddd; vertical-align: top;"},
]


def table(df, caption: str, precision: int = 3, hide_index: bool = True, formats: dict | None = None):
    """A pandas Styler captioned once with the source, all-empty columns (CUDA-only figures on a CPU) left
    out, cells as cell_text reads them, or by `formats` (column -> format string, e.g. "{:.1%}")."""
    shown = df.dropna(axis=1, how="all")
    numeric = [c for c in shown.columns if pd.api.types.is_numeric_dtype(shown[c]) and not pd.api.types.is_bool_dtype(shown[c])]
    fmts = {c: f for c, f in (formats or {}).items() if c in shown}
    styler = (shown.style.set_caption(caption).set_table_styles(TABLE_STYLES).format(lambda v: cell_text(v, precision))
              .format(fmts, subset=list(fmts), na_rep="–").set_properties(subset=numeric, **{"text-align": "right"}))
    return styler.hide(axis="index") if hide_index else styler


def cell_text(v: Any, precision: int = 3) -> str:
    """A table cell: integers with separators, floats to `precision` significant digits, missing as '–'."""
    import numbers

    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, numbers.Integral):
        return f"{int(v):,}"
    if isinstance(v, numbers.Real):
        return "–" if math.isnan(v) else f"{v:,.0f}" if abs(v) >= 10 ** precision else f"{v:.{precision}g}"
    return "–" if v is None or v is pd.NA or v is pd.NaT else str(v)


def heatmap(ax, values, xlabels, ylabels, fmt=str, cmap: str = "viridis", mask=None, colorbar_label: str = ""):
    """A heat map on `ax` of values[row][col], each cell annotated; cells where `mask` is true greyed and hatched."""
    import matplotlib
    from matplotlib.patches import Rectangle

    data = np.asarray(values, dtype=float)
    hidden = np.zeros(data.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    colours = matplotlib.colormaps[cmap].with_extremes(bad="#eeeeee")
    im = ax.imshow(np.ma.masked_array(data, mask=hidden), cmap=colours, aspect="auto", origin="lower")
    ax.grid(False)
    ax.set_xticks(range(len(xlabels)), [str(x) for x in xlabels], fontsize=8)
    ax.set_yticks(range(len(ylabels)), [str(y) for y in ylabels], fontsize=8)
    top = np.nanmax(np.where(hidden, np.nan, data)) if (~hidden).any() else 1.0
    for (i, j), v in np.ndenumerate(data):
        ax.text(j, i, fmt(v), ha="center", va="center", fontsize=7,
                color="#999" if hidden[i, j] else "white" if v < 0.6 * top else "black")
        if hidden[i, j]:
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="#ccc", lw=0))
    ax.figure.colorbar(im, ax=ax).set_label(colorbar_label)
    return im


def bars(ax, labels: Sequence[str], values: Sequence[float], color: str | Sequence[str], fmt=None) -> None:
    """Bars from zero, each labelled with fmt(value); one per label, in order, even where labels repeat."""
    fmt = fmt or cell_text
    values = list(values)
    ax.bar(range(len(values)), values, color=color)
    ax.set_xticks(range(len(values)), [str(x) for x in labels])
    ax.set_ylim(bottom=0, top=max([float(v) for v in values] + [0]) * 1.15 or 1)
    for i, v in enumerate(values):
        ax.text(i, float(v), fmt(v), ha="center", va="bottom", fontsize=8)
