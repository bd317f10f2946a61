"""Links into `workshop/glossary.md`: `term('TTFT')` links to its anchor, ValueError for one the glossary lacks;
with WORKSHOP_REPO_URL set (Colab) the links point at the published file.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

GLOSSARY = Path(__file__).resolve().parents[2] / "workshop" / "glossary.md"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped (hyphens kept), spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@functools.lru_cache(maxsize=1)
def anchors(path: Path = GLOSSARY) -> frozenset[str]:
    """Every anchor of the glossary: its headings' slugs and its explicit ids."""
    text = Path(path).read_text(encoding="utf-8")
    found = {slug(m.group(1)) for m in re.finditer(r"^#{2,4}\s+(.+?)\s*$", text, flags=re.M)}
    return frozenset(found | set(re.findall(r'<a id="([^"]+)"></a>', text)))


def url(anchor: str) -> str:
    """A glossary anchor's address: the published file's with WORKSHOP_REPO_URL, else relative to notebooks/."""
    from .. import env

    base = (env.url("WORKSHOP_REPO_URL") or "").rstrip("/").removesuffix(".git")
    where = f"{base}/blob/main/workshop/glossary.md" if base else "../workshop/glossary.md"
    return f"{where}#{anchor}"


def term(text: str, anchor: str | None = None) -> str:
    """A markdown link from `text` to its glossary entry (anchor: slug(text) unless given)."""
    key = anchor or slug(text)
    if GLOSSARY.exists() and key not in anchors():
        close = sorted(a for a in anchors() if a[:3] == key[:3])
        raise ValueError(f"no glossary entry {key!r} in workshop/glossary.md"
                         + (f"; did you mean: {', '.join(close)}" if close else ""))
    return f"[{text}]({url(key)})"
