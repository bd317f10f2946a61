"""Recorded runs: what a notebook measured on another machine (a GPU, usually), shown beside the live run
(`beside_live_html`); the key figures each run noted (`note_figures`).
"""
from __future__ import annotations

import base64
import html
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import env
from ..measure.hardware import measured_label, measured_on_of, measured_when
from ..records import RESULTS, RecordError, dump, each, load, shown

FIGURES_ENV = "WORKSHOP_FIGURES_DIR"
KEY_FIGURES = "key_figures.json"


@dataclass(frozen=True)
class Record:
    """One recorded run: a folder under workshop/results/ with its meta.json."""

    folder: Path
    meta: dict

    @property
    def measured(self) -> dict:
        return measured_on_of(self.meta)

    @property
    def device(self) -> str:
        gpu = self.meta.get("gpu")
        return gpu[:200] if isinstance(gpu, str) and gpu else measured_label(self.measured)

    @property
    def is_gpu(self) -> bool:
        return self.measured["device"]["kind"] == "cuda"

    @property
    def label(self) -> str:
        """'recorded on H200 · profile mistral-7b-random · 2026-11-30 12:01 UTC'."""
        note = self.meta.get("note")
        note = f" · {note[:200]}" if isinstance(note, str) and note else ""
        return f"recorded on {self.device} · profile {self.measured['profile'] or '?'} · {measured_when(self.measured)}{note}"

    def figures(self, notebook: str) -> list[Path]:
        """The PNG figures this record holds for one notebook (its stem, e.g. '03_prefill_decode_roofline')."""
        return sorted((self.folder / "figures").glob(f"{notebook}-*.png"))

    def key_figures(self, notebook: str | None = None) -> dict[str, Any]:
        """{notebook: {name: value}}, or one notebook's; {} when none. RecordError when unreadable."""
        path = self.folder / KEY_FIGURES
        data = _body(load(path, "key-figures", roots=(self.folder,))) if path.exists() else {}
        one = data if notebook is None else data.get(notebook, {})
        if not isinstance(one, dict):
            raise RecordError(f"{shown(path)}: the entry of {notebook} is a JSON {type(one).__name__}, not an object")
        return one


def _body(data: dict) -> dict:
    return {k: v for k, v in data.items() if k not in ("record_format", "kind")}


def records(results: Path = RESULTS, skipped: list[str] | None = None) -> list[Record]:
    """Every recorded run, GPUs first, then newest first; one whose meta.json cannot be read is noted in `skipped`."""
    out = [Record(p.parent, meta) for p, meta in each("*/meta.json", "record-meta", results, skipped)]
    out.sort(key=lambda r: r.measured["recorded_at"] or "", reverse=True)
    return sorted(out, key=lambda r: not r.is_gpu)


def pick(notebook: str, results: Path = RESULTS, skipped: list[str] | None = None) -> Record | None:
    """The record to show beside a notebook: the first (GPUs first) that holds its figures."""
    for r in records(results, skipped):
        try:
            if r.key_figures(notebook) or r.figures(notebook):   # read first: unreadable figures skip the record
                return r
        except RecordError as exc:
            if skipped is not None:
                skipped.append(str(exc))
    return None


def note_figures(notebook: str, figures: dict[str, Any], folder: str | Path | None = None) -> Path | None:
    """Save a notebook's key figures as <folder or $WORKSHOP_FIGURES_DIR>/<notebook>.json; unwritable: a warning."""
    try:
        where = Path(folder) if folder else env.folder(FIGURES_ENV)
    except env.EnvError as exc:
        warnings.warn(f"key figures of {notebook} not noted: {exc}", stacklevel=2)
        return None
    if where is None:
        return None
    clean = {str(k): None if isinstance(v, float) and not math.isfinite(v) else v
             for k, v in ((k, v.item() if hasattr(v, "item") else v) for k, v in figures.items())}
    return dump(where / f"{notebook}.json", "key-figures", clean)


def noted_figures(folder: str | Path, skipped: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Every notebook's noted key figures in a folder: {notebook stem: {name: value}}; unreadable files noted in `skipped`."""
    return {p.stem: _body(d) for p, d in each("[0-9][0-9]_*.json", "key-figures", folder, skipped)}


def _img(path: Path, width: int = 420) -> str:
    try:
        data = base64.b64encode(path.read_bytes()).decode()
    except OSError as exc:
        return f"<p><small>cannot read {html.escape(shown(path))}: {html.escape(exc.strerror or str(exc))}</small></p>"
    return f"<img src='data:image/png;base64,{data}' style='max-width:{width}px;margin:4px' alt='{html.escape(path.stem)}'>"


def beside_live_html(notebook: str, live: dict[str, Any] | None = None, results: Path = RESULTS) -> str:
    """HTML: the live key figures beside the recorded ones, the record's figures, the records that did not load."""
    import pandas as pd

    from .plots import table

    skipped: list[str] = []
    rec = pick(notebook, results, skipped=skipped)
    notes = "".join(f"<p><small>⚠️ skipped a record: {html.escape(why)}</small></p>" for why in dict.fromkeys(skipped))
    if rec is None:
        where = "workshop/results/" if Path(results) == RESULTS else str(results)
        return (f"<p><b>Recorded run:</b> none holds {html.escape(notebook)} in {html.escape(where)} "
                f"(<code>make record</code> or <code>make gpu-record</code> makes one).</p>{notes}")
    live, recorded = live or {}, rec.key_figures(notebook)
    names = list(dict.fromkeys([*live, *recorded]))
    frame = pd.DataFrame({"key figure": names, "this run (live)": [live.get(n) for n in names],
                          rec.device: [recorded.get(n) for n in names]}, dtype=object)
    shown = table(frame, "", precision=4).to_html() if names else ""
    figs = "".join(_img(p) for p in rec.figures(notebook)[:4])
    return (f"<div><p><b>Recorded run</b> — {html.escape(rec.label)} "
            f"(<code>workshop/results/{html.escape(rec.folder.name)}</code>)</p>{shown}<div>{figs}</div>{notes}</div>")
