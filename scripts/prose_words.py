"""How much prose a learner reads: the words of each executed notebook that `make run` writes
(build/executed/NN_*.ipynb) — its markdown and its rendered outputs, with tables, code listings, figures
and controls left out.

    python scripts/prose_words.py [build/executed]         # a table; exit 1 past the budget
    python scripts/prose_words.py --json

The budget: at most BUDGET_NOTEBOOK words in any one notebook and BUDGET_TOTAL in all.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXECUTED = ROOT / "build" / "executed"
BUDGET_NOTEBOOK, BUDGET_TOTAL = 3000, 20000
SKIPPED = {"table", "pre", "svg", "img", "script", "style", "marimo-ui-element", "marimo-slider",
           "marimo-dropdown", "marimo-button", "marimo-text", "marimo-number", "marimo-radio", "marimo-form",
           "marimo-dict", "marimo-run-button", "marimo-checkbox", "marimo-multiselect", "marimo-switch",
           "marimo-table", "marimo-tabs", "marimo-plotly", "marimo-anywidget"}
WORD = re.compile(r"[^\W_](?:[\w'’.,-]*[^\W_])?")


class _Text(HTMLParser):
    """The text of an HTML fragment outside the SKIPPED elements."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth, self.parts = 0, []

    def handle_starttag(self, tag, attrs):
        if tag in SKIPPED:
            self.depth += 1

    def handle_endtag(self, tag):
        if tag in SKIPPED and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if not self.depth:
            self.parts.append(data)


def html_words(html: str) -> int:
    parser = _Text()
    parser.feed(html)
    return len(WORD.findall(" ".join(parser.parts)))


def markdown_words(text: str) -> int:
    """Words of markdown with fenced code and table rows left out."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    return len(WORD.findall(" ".join(l for l in text.splitlines() if not l.lstrip().startswith("|"))))


def notebook_words(nb: dict) -> int:
    """The prose of one executed notebook: markdown cells, and each output's HTML (else its markdown)."""
    n = 0
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            n += markdown_words("".join(cell.get("source", "")))
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "text/html" in data:
                n += html_words("".join(data["text/html"]))
            elif "text/markdown" in data:
                n += markdown_words("".join(data["text/markdown"]))
    return n


def measure(folder: Path = EXECUTED) -> dict[str, int]:
    return {p.stem: notebook_words(json.loads(p.read_text())) for p in sorted(Path(folder).glob("[0-9][0-9]_*.ipynb"))}


def over_budget(words: dict[str, int]) -> list[str]:
    bad = [f"{k}: {v:,} words (at most {BUDGET_NOTEBOOK:,})" for k, v in words.items() if v > BUDGET_NOTEBOOK]
    if sum(words.values()) > BUDGET_TOTAL:
        bad.append(f"all notebooks: {sum(words.values()):,} words (at most {BUDGET_TOTAL:,})")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=str(EXECUTED))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    words = measure(Path(a.folder))
    if a.json:
        print(json.dumps({"words": words, "total": sum(words.values())}, indent=2))
        return 0
    if not words:
        print(f"prose: no executed notebooks in {a.folder} (make run writes them)")
        return 0
    print("prose a learner reads (words; make run's executed notebooks):")
    for k, v in words.items():
        print(f"  {k:32s} {v:7,}")
    print(f"  {'total':32s} {sum(words.values()):7,}")
    bad = over_budget(words)
    for b in bad:
        print(f"over budget: {b}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
