"""The prose check of the notebooks: a word that sizes or compares a quantity ("a little", "mostly",
"well under", "dwarfs", "several times" …) is never typed in a notebook's static text. Numbers speak: the
size and direction of a result are its numbers and its one below / at / above label
(helpers.formulas.regime); the prose beside it teaches how to read every regime, true on every machine.

    python tests/prose_lint.py [notebooks/NN_name.py ...]     # prints each typed qualifier; exit 1 if any

Static text is every string literal of a notebook, the literal parts of its f-strings included; a short
one counts too (a label or a key is shown). `ALLOWED` lists the few sentences where such a word states a
mechanism or a definition, not a measured size, each with why.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUALIFIERS = [
    "a little", "a bit", "slightly", "marginally", "modestly", "noticeably", "hardly", "barely",
    "near", "nearly", "close to", "closer to", "about equal", "roughly", "roughly equal", "mostly", "much",
    "most of", "dominated", "dominates", "dwarfs?", "negligible", "huge", "massive", "vastly", "drastically",
    "substantially", "considerably", "significantly", "by far", "orders? of magnitude",
    "well under", "well below", "well above", "well over", "well within", "well short",
    "far below", "far above", "far from", "far closer", "far more", "far less", "far fewer", "far behind",
    "several times", "a few", "higher still", "lower still", "little else", "tiny fraction", "small fraction",
    "large fraction",
]
PATTERN = re.compile(r"(?<![\w-])(" + "|".join(QUALIFIERS) + r")(?![\w-])", re.I)
# "how much memory" asks; it does not size anything
QUESTIONS = re.compile(r"\b(how|as|too) much\b", re.I)

# (notebook stem, a phrase of the sentence) -> why the word states a mechanism or a definition
ALLOWED: dict[tuple[str, str], str] = {}


def literals(tree: ast.AST):
    """(line, text) of every string literal, the literal parts of f-strings included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def findings(path: Path) -> list[tuple[int, str, str]]:
    """(line, qualifier, the sentence around it) for each typed qualifier in a notebook's prose."""
    out = []
    for line, text in literals(ast.parse(path.read_text(encoding="utf-8"))):
        for m in PATTERN.finditer(text):
            around = " ".join(text[max(0, m.start() - 70): m.end() + 70].split())
            if m.group(1).lower() == "much" and QUESTIONS.search(text[max(0, m.start() - 4): m.end()]):
                continue
            if any(stem == path.stem and phrase in " ".join(text.split()) for stem, phrase in ALLOWED):
                continue
            out.append((line, m.group(1), around))
    return out


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    bad = 0
    for p in paths:
        for line, word, around in findings(p):
            bad += 1
            print(f"{p.name}:{line}: “{word}” typed: …{around}…")
    print(f"{bad} typed qualifier(s) in {len(paths)} notebook(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
