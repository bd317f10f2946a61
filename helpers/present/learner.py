"""The learner takes part: a prediction typed before a central result (`prediction`; in Jupyter the cell's
variable `given`), shown beside the result with result ÷ prediction and its label (`beside`, helpers.formulas.regime),
then the notebook's static hint for that direction; and a self-check whose answers are this run's numbers.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Sequence

from ..formulas import regime

# how the learner may type a number: 131072, 131,072, 1.3e5, 128k, 128 KiB, 14.5 GB, 60 %
_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}
_NUMBER = re.compile(r"^\s*([-+]?(?:\d[\d,_]*\.?\d*|\.\d+)(?:e[-+]?\d+)?)\s*(ki|mi|gi|ti|k|m|g|t)?(?:b|bytes?|ib)?\s*"
                     r"(%|×|x|ms|s|tokens?(?:/s)?|users?|flop/b|gb/s|tb/s)?\s*$", re.I)


@dataclass(frozen=True)
class Guess:
    """What the learner predicted: a number (None when not given), the text it was read from, why it could not be read."""

    value: float | None
    text: str = ""
    error: str = ""


def parse(text: str) -> Guess:
    """A typed prediction as a number (separators, an exponent, a k/M/G or KiB/MiB/GiB suffix, a unit word)."""
    raw = (text or "").strip()
    if not raw:
        return Guess(None)
    m = _NUMBER.match(raw)
    if not m:
        return Guess(None, raw, f"could not read {raw[:40]!r} as a number (e.g. 131072, 128 KiB, 14.5 GB, 1.3e5)")
    value = float(m.group(1).replace(",", "").replace("_", "")) * _SUFFIX[(m.group(2) or "").lower()]
    if not math.isfinite(value):
        return Guess(None, raw, f"{raw[:40]!r} is not a finite number")
    return Guess(value, raw)


def prediction(question: str, unit: str = ""):
    """The box a prediction is typed into (marimo); elsewhere the question, pointing to the cell's variable."""
    import marimo as mo

    label = f"**Predict first.** {question}" + (f" ({unit})" if unit else "")
    if not mo.running_in_notebook():   # Jupyter, Colab, headless: a marimo control draws nothing there
        return mo.md(f"{label}\n\n*In Jupyter or Colab, write your prediction into the variable at the top of the "
                     "cell that shows the result, and run that cell.*")
    return mo.ui.text(placeholder="your prediction", label=label, full_width=True)


def read(box, given=None) -> Guess:
    """The prediction: `given` (the Jupyter variable) when it is set, else the box's text."""
    return parse(str(given) if given is not None else getattr(box, "value", "") or "")


def number(v: float) -> str:
    """A number as a prediction and its result are shown: whole with separators from 1,000, else 4 digits."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def gap(guess: Guess, result: float, shown: Callable[[float], str] = number) -> tuple[str, str]:
    """(markdown: prediction, result, result ÷ prediction and its label; the label, "" when none was given)."""
    if guess.value is None:
        why = f" ({guess.error})" if guess.error else ""
        return f"Your prediction: not given{why}. The result: **{shown(result)}**.", ""
    r, way = regime.against(result, guess.value)
    if guess.value < 0 or result < 0:      # a ratio of opposite signs says nothing: the direction alone
        r, way = math.nan, regime.ABOVE if result > guess.value else regime.BELOW if result < guess.value else regime.AT
    if guess.value == 0 and result == 0:
        way = regime.AT
    shown_ratio = "–" if math.isnan(r) else "∞" if math.isinf(r) else f"{r:,.2f}"
    return (f"You predicted {shown(guess.value)}; the result is **{shown(result)}**: result ÷ prediction = "
            f"**{shown_ratio}** ({way} your prediction).", way)


def beside(box, given, result: float, shown: Callable[[float], str] = number, *,
           higher: str = "", lower: str = "", within: str = ""):
    """The gap (markdown), then the notebook's hint for its direction: `higher`, `lower` or `within` the margin."""
    import marimo as mo

    words, way = gap(read(box, given), result, shown)
    hint = {regime.ABOVE: higher, regime.BELOW: lower, regime.AT: within}.get(way, "")
    return mo.md(f"{words}{' ' + hint if hint else ''}")


@dataclass(frozen=True)
class Question:
    """A self-check question: a number of this run (within `tolerance`, relative) or one of `options`."""

    text: str
    answer: float | str
    unit: str = ""
    tolerance: float = regime.MARGIN
    options: tuple[str, ...] = ()

    def shown(self) -> str:
        return self.answer if isinstance(self.answer, str) else f"{number(self.answer)}{' ' + self.unit if self.unit else ''}"

    def check(self, typed) -> bool | None:
        """True or False for an answer given, None for none."""
        if typed is None or str(typed).strip() == "":
            return None
        if self.options or isinstance(self.answer, str):
            return str(typed).strip().lower() == str(self.answer).strip().lower()
        g = parse(str(typed)).value
        return g is not None and (abs(g - self.answer) <= self.tolerance * abs(self.answer) if self.answer else g == 0)


def self_check(questions: Sequence[Question]):
    """The questions in a form with a Check button (marimo); elsewhere a numbered list."""
    import marimo as mo

    assert 1 <= len(questions) <= 5, len(questions)
    if not mo.running_in_notebook():   # Jupyter, Colab, headless: the questions as text, the answers folded below
        return mo.md("\n".join(f"{i + 1}. {q.text}" + (f" ({' / '.join(q.options)})" if q.options else
                                                       f" ({q.unit})" if q.unit else "")
                               for i, q in enumerate(questions)))
    fields = {f"q{i}": mo.ui.radio(options=list(q.options), label=f"{i + 1}. {q.text}") if q.options else
              mo.ui.text(label=f"{i + 1}. {q.text}" + (f" ({q.unit})" if q.unit else ""), placeholder="your answer", full_width=True)
              for i, q in enumerate(questions)}
    return mo.ui.dictionary(fields).form(submit_button_label="Check my answers", bordered=True)


def self_check_section(form, questions: Sequence[Question], follows: str):
    """The self-check's heading, how many questions and what their answers follow (`follows`), then the form."""
    import marimo as mo

    n = len(questions)
    return mo.vstack([mo.md(f"## Self-check\n\n{('One', 'Two', 'Three', 'Four', 'Five')[n - 1]} question"
                            f"{'s' if n > 1 else ''} whose answers are this run's numbers ({follows})."), form])


def answers(form, questions: Sequence[Question]):
    """Each answer checked (marimo, once the form is submitted), or the answers folded (Jupyter, headless)."""
    import marimo as mo

    from .notebook import folded

    typed = getattr(form, "value", None)
    if not typed:
        body = "\n".join(f"{i + 1}. {q.text} — **{q.shown()}**" for i, q in enumerate(questions))
        return folded("Self-check: the answers from this run", body)
    marks = {True: "✅", False: "❌", None: "—"}
    return mo.md("\n\n".join(f"{marks[q.check(typed.get(f'q{i}'))]} {i + 1}. {q.text} — this run: **{q.shown()}**"
                              for i, q in enumerate(questions)))
