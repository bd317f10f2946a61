"""Recorded runs: what a notebook measured on another machine (a GPU, usually), shown next to the live run.

`make record` (any device) and `make gpu-record` (a CUDA GPU) run the measuring notebooks and save,
under ``workshop/results/<device>/``: the executed notebooks as HTML, their figures as PNG, the key
figures each notebook noted (``key_figures.json``) and ``meta.json`` (where, when, which profile,
library versions). A notebook notes its key figures with :func:`note_figures` — written only when
the run asks for it (``WORKSHOP_FIGURES_DIR``, set by ``scripts/notebooks.py run``) — and shows a
record beside its own numbers with :func:`beside_live`, labelled with where and when it was recorded.
"""
from __future__ import annotations

import base64
import html
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "workshop" / "results"
FIGURES_ENV = "WORKSHOP_FIGURES_DIR"
KEY_FIGURES = "key_figures.json"


@dataclass(frozen=True)
class Record:
    """One recorded run: a folder under workshop/results/ with its meta.json."""

    folder: Path
    meta: dict

    @property
    def device(self) -> str:
        d = self.meta.get("device") or {}
        return self.meta.get("gpu") or f"{d.get('kind', '?')}: {d.get('name', '?')}"

    @property
    def is_gpu(self) -> bool:
        return (self.meta.get("device") or {}).get("kind") == "cuda"

    @property
    def label(self) -> str:
        """Where, when and how: 'recorded on H200 · profile mistral-7b-random · 2026-11-30 12:01 UTC'."""
        when = str(self.meta.get("recorded_at", "?")).replace("T", " ").replace("+00:00", " UTC")
        note = f" · {self.meta['note']}" if self.meta.get("note") else ""
        return f"recorded on {self.device} · profile {self.meta.get('profile', '?')} · {when}{note}"

    def figures(self, notebook: str) -> list[Path]:
        """The PNG figures this record holds for one notebook (its stem, e.g. '03_prefill_decode_roofline')."""
        return sorted((self.folder / "figures").glob(f"{notebook}-*.png"))

    def key_figures(self, notebook: str | None = None) -> dict[str, Any]:
        path = self.folder / KEY_FIGURES
        data = json.loads(path.read_text()) if path.is_file() else {}
        return data if notebook is None else data.get(notebook, {})


def records(results: Path = RESULTS) -> list[Record]:
    """Every recorded run, GPUs first, then newest first."""
    out = []
    for meta in sorted(Path(results).glob("*/meta.json")):
        out.append(Record(meta.parent, json.loads(meta.read_text())))
    out.sort(key=lambda r: str(r.meta.get("recorded_at", "")), reverse=True)
    out.sort(key=lambda r: not r.is_gpu)
    return out


def pick(notebook: str, results: Path = RESULTS, prefer_gpu: bool = True) -> Record | None:
    """The record to show beside a notebook: one that holds its figures, a GPU's first when asked."""
    rs = [r for r in records(results) if r.figures(notebook) or r.key_figures(notebook)]
    if not prefer_gpu:
        rs.sort(key=lambda r: r.is_gpu)
    return rs[0] if rs else None


def _clean(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python numbers, NaN to None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def note_figures(notebook: str, figures: dict[str, Any], folder: str | Path | None = None) -> Path | None:
    """Save a notebook's key figures (name -> number or short text) for the report and the records.

    Writes ``<folder>/<notebook>.json`` where folder defaults to $WORKSHOP_FIGURES_DIR; does nothing
    (returns None) when neither is set, so an interactive session writes no files.
    """
    folder = folder or os.environ.get(FIGURES_ENV)
    if not folder:
        return None
    if not isinstance(figures, dict) or not figures:
        raise ValueError("figures must be a non-empty dict of name -> number or text")
    path = Path(folder) / f"{notebook}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({k: _clean(v) for k, v in figures.items()}, indent=1) + "\n")
    return path


def noted_figures(folder: str | Path) -> dict[str, dict[str, Any]]:
    """Every notebook's noted key figures in a folder: {notebook stem: {name: value}}."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(Path(folder).glob("[0-9][0-9]_*.json"))}


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return "—" if v is None else str(v)


def _img(path: Path, width: int = 420) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f"<img src='data:image/png;base64,{data}' style='max-width:{width}px;margin:4px' alt='{html.escape(path.stem)}'>"


def beside_live_html(notebook: str, live: dict[str, Any] | None = None, results: Path = RESULTS,
                     max_figures: int = 4) -> str:
    """HTML: the live key figures next to the recorded ones (a table), then the record's figures,
    labelled with where and when they were recorded. Says so when no record holds this notebook."""
    rec = pick(notebook, results)
    if rec is None:
        where = "workshop/results/" if Path(results) == RESULTS else str(results)
        return (f"<p><b>Recorded run:</b> none holds {html.escape(notebook)} in {html.escape(where)} "
                "(<code>make record</code> or <code>make gpu-record</code> makes one).</p>")
    recorded = rec.key_figures(notebook)
    names = list(dict.fromkeys([*(live or {}), *recorded]))
    rows = "".join(f"<tr><td>{html.escape(n)}</td><td>{html.escape(_fmt((live or {}).get(n)))}</td>"
                   f"<td>{html.escape(_fmt(recorded.get(n)))}</td></tr>" for n in names)
    table = (f"<table><tr><th>key figure</th><th>this run (live)</th><th>{html.escape(rec.device)}</th></tr>{rows}</table>"
             if names else "")
    figs = "".join(_img(p) for p in rec.figures(notebook)[:max_figures])
    return (f"<div><p><b>Recorded run</b> — {html.escape(rec.label)} "
            f"(<code>workshop/results/{html.escape(rec.folder.name)}</code>)</p>"
            f"{table}<div>{figs}</div></div>")


def beside_live(notebook: str, live: dict[str, Any] | None = None, results: Path = RESULTS, max_figures: int = 4):
    """The recorded run beside the live one, as a marimo element (plain HTML text outside marimo)."""
    text = beside_live_html(notebook, live, results, max_figures)
    try:
        import marimo as mo

        return mo.Html(text)
    except ImportError:  # pragma: no cover - marimo is a requirement
        return text
