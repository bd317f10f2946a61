"""What every notebook calls: its setup, controls outside marimo, folded solutions, a measurement that may fail."""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Any, Callable


def in_marimo() -> bool:
    """True when the notebook runs in marimo's own runtime (edit, run, Molab), where controls are live."""
    try:
        import marimo as mo

        return bool(mo.running_in_notebook())
    except Exception:  # noqa: BLE001 - no marimo, or an older one: not live
        return False


def env_default(name: str, default, allowed=None, *, lo: float | None = None, hi: float | None = None):
    """A control's starting value: $`name` when set (how Jupyter, Colab or a headless run sets it), else `default`."""
    from .. import env

    return env.control(name, default, allowed, lo=lo, hi=hi)


def static_note(variables: dict[str, str]):
    """Outside marimo, a note that the controls above are static and which variable sets each: {variable: what}."""
    import marimo as mo

    if in_marimo():
        return mo.md("")
    items = "\n".join(f"- `{k}` — {v}" for k, v in variables.items())
    return mo.md(
        "_These controls are static outside marimo (Jupyter, Colab, a headless run). To change them, set the "
        "environment variable in a cell above and rerun from there (`%env NAME=value`), or open the notebook "
        f"in marimo or Molab:_\n\n{items}")


def setup() -> None:
    """Pandas shows whole cells, matplotlib the workshop's style, libraries keep their routine chatter to themselves."""
    import pandas as pd

    pd.set_option("display.max_colwidth", 160, "display.width", 160)
    import matplotlib as mpl

    mpl.rcParams.update({"figure.dpi": 100, "axes.grid": True, "grid.alpha": 0.3,
                         "axes.spines.top": False, "axes.spines.right": False})
    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=".*IProgress not found.*")
    warnings.filterwarnings("ignore", message=".*MatMul8bitLt: inputs will be cast.*")


def folded(title: str, body: str):
    """Markdown folded until opened: a marimo accordion in marimo, an HTML <details> block elsewhere."""
    import textwrap

    import marimo as mo

    text = textwrap.dedent(body).strip()
    return (mo.accordion({title: mo.md(text)}) if mo.running_in_notebook()
            else mo.Html(f"<details><summary>{mo.md(title).text}</summary>{mo.md(text).text}</details>"))


def exercise(number: int, question: str, solution: str, label: str = "Solution"):
    """An exercise (markdown) with its solution folded until opened (`folded`)."""
    import marimo as mo

    head, solution_view = mo.md(f"**Exercise {number}.** {question}"), folded(label, solution)
    return mo.vstack([head, solution_view]) if mo.running_in_notebook() else mo.Html(f"<div>{head.text}{solution_view.text}</div>")


def elapsed(start: float) -> str:
    """Seconds since `start` (time.perf_counter()) as a run time reads: '24 s', '7.6 min'."""
    import time

    s = time.perf_counter() - start
    return f"{s:,.0f} s" if s < 120 else f"{s / 60:,.1f} min"


@dataclass
class Attempt:
    """A measurement run by attempt(): its value, or the one-line fault that stopped it and its traceback."""

    what: str
    value: Any = None
    error: str | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    def note(self):
        """Where the measurement ran: nothing when it worked, else what failed and what still runs."""
        import marimo as mo

        if self.ok:
            return mo.md("")
        return mo.vstack([
            mo.callout(mo.md(f"**{self.what} failed here:** {self.error}\n\n"
                             "The cells that need its result say so below; the rest of the notebook runs. "
                             "Recorded results from a machine where it ran are in `workshop/results/`."),
                       kind="danger"),
            folded("The full error", f"```\n{self.detail.strip()}\n```")])

    def skipped(self, what_needs_it: str):
        """In a cell that needs the value: a short line saying why it shows nothing."""
        import marimo as mo

        return mo.md(f"_{what_needs_it} needs {self.what}, which failed above ({self.error})._")


def attempt(what: str, fn: Callable[..., Any], *args, **kwargs) -> Attempt:
    """fn(*args, **kwargs), an exception kept as Attempt.error (one line) so it takes only the cells that need it."""
    import traceback

    try:
        return Attempt(what, fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - any fault of a measurement is reported, not raised
        message = " ".join(str(exc).split())[:400] or "(no message)"
        return Attempt(what, None, f"{type(exc).__name__}: {message}", traceback.format_exc())


def code(obj, title: str | None = None, folded_: bool = True):
    """The source of a function, class or module as a code block, folded under `title` unless `folded_` is False."""
    import inspect
    import textwrap

    import marimo as mo

    src = textwrap.dedent(inspect.getsource(obj)).rstrip()
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", "source")
    block = f"```python\n{src}\n```"
    return folded(title or f"`{name}` — {src.count(chr(10)) + 1} lines", block) if folded_ else mo.md(block)
