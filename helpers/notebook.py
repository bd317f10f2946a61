"""One call at the top of every notebook: readable tables, quiet libraries, plots that fit."""
from __future__ import annotations

import logging
import warnings


def setup() -> None:
    """Pandas shows whole cells, matplotlib uses the workshop's style, and libraries keep their
    routine chatter (loading bars of a 20 MB model, optional-kernel notices) to themselves."""
    import pandas as pd

    pd.set_option("display.max_colwidth", 160)
    pd.set_option("display.width", 160)
    try:
        import matplotlib as mpl

        mpl.rcParams.update({"figure.dpi": 100, "axes.grid": True, "grid.alpha": 0.3,
                             "axes.spines.top": False, "axes.spines.right": False})
    except ImportError:
        pass
    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=".*IProgress not found.*")
    warnings.filterwarnings("ignore", message=".*MatMul8bitLt: inputs will be cast.*")


def folded(title: str, body: str):
    """A solution that stays folded until opened: a marimo accordion in marimo; in Jupyter and Colab
    (which cannot draw marimo's accordion) an HTML <details> block, folded the same way. `body` is
    markdown (indentation removed)."""
    import textwrap

    import marimo as mo

    text = textwrap.dedent(body).strip()
    if mo.running_in_notebook():
        return mo.accordion({title: mo.md(text)})
    return mo.Html(f"<details><summary>{mo.md(title).text}</summary>{mo.md(text).text}</details>")


def exercise(number: int, question: str, solution: str, label: str = "Solution"):
    """An exercise (markdown) with its solution folded until opened: a marimo accordion in marimo, a
    <details> block in Jupyter and in the HTML report (where marimo's accordion element cannot unfold)."""
    import marimo as mo

    head = mo.md(f"**Exercise {number}.** {question}")
    solution_view = folded(label, solution)
    if mo.running_in_notebook():
        return mo.vstack([head, solution_view])
    return mo.Html(f"<div>{head.text}{solution_view.text}</div>")


def elapsed(start: float) -> str:
    """Seconds since `start` (time.perf_counter()), for a notebook's closing line 'this run took …'."""
    import time

    s = time.perf_counter() - start
    return f"{s:,.0f} s" if s < 120 else f"{s / 60:,.1f} min"
