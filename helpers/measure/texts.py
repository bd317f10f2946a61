"""The texts the models are trained and evaluated on, read from ``helpers/data/``.

- The training text of ``tiny-trained``: Jane Austen, *Persuasion* (1818), public domain, one paragraph
  per line (``persuasion.txt``). Its last chapter is held out: training never sees it, and its opening
  (``heldout_eval_text``, about 1,000 tokens) is the evaluation text of the tiny profiles.
- The evaluation text of every other profile: ``eval_text.txt``, original prose written for this
  repository (public domain), which no published model has seen.
"""
from __future__ import annotations

from pathlib import Path

from .local_models import TINY_PROFILES

DATA = Path(__file__).parents[1] / "data"
TEXT_FILE = DATA / "persuasion.txt"
TEXT_SOURCE = "Jane Austen, Persuasion (1818), public domain"
HELDOUT_HEADING = "Chapter 24"   # the novel's last chapter: held out from training
EVAL_CHARS = 4000                # the tiny profiles' evaluation text: the held-out chapter's paragraphs up to this many characters
EVAL_TEXT = DATA / "eval_text.txt"


def training_text() -> str:
    """The whole training text (Persuasion, one paragraph per line)."""
    return TEXT_FILE.read_text(encoding="utf-8")


def split(full: str | None = None) -> tuple[str, str]:
    """(training part, held-out part): the held-out part starts at the last chapter's heading."""
    full = training_text() if full is None else full
    cut = full.find(f"\n\n{HELDOUT_HEADING}\n\n")
    if cut < 0:
        raise ValueError(f"the training text has no '{HELDOUT_HEADING}' heading to hold out from")
    return full[:cut + 1], full[cut + 2:]


def heldout_text() -> str:
    """The held-out part: the last chapter, which training never sees."""
    return split()[1]


def heldout_eval_text() -> str:
    """The evaluation text of the tiny profiles: the held-out chapter's first paragraphs, EVAL_CHARS at least."""
    paragraphs, out = heldout_text().split("\n\n"), []
    for p in paragraphs:
        out.append(p)
        if sum(len(x) + 2 for x in out) >= EVAL_CHARS:
            break
    return "\n\n".join(out).strip() + "\n"


def eval_text(profile: str | None = None) -> str:
    """The fixed evaluation text of a profile: for the tiny profiles the held-out chapter of the novel
    ``tiny-trained`` learns from (``heldout_eval_text``), so that the random and the trained model are
    measured on the same text; for every other profile the text shipped in ``eval_text.txt``."""
    if profile in TINY_PROFILES:
        return heldout_eval_text()
    return EVAL_TEXT.read_text(encoding="utf-8")
