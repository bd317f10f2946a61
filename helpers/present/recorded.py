"""Recorded runs: what a notebook measured on another machine (a GPU, usually), shown next to the live run.

`make record` (any device) and `make gpu-record` (a CUDA GPU) run the measuring notebooks and save,
under ``workshop/results/<device>/``: the executed notebooks as HTML, their figures as PNG, the key
figures each notebook noted (``key_figures.json``) and ``meta.json`` (where, when, which profile,
library versions: helpers.measure.hardware.measured_on under ``measured_on``, as in every record). A
notebook notes its key figures with :func:`note_figures` — written only when the run asks for it (``WORKSHOP_FIGURES_DIR``, set by ``scripts/notebooks.py run``) — and shows a
record beside its own numbers with :func:`beside_live`, labelled with where and when it was recorded.

A record whose meta.json or key_figures.json cannot be read (empty, truncated, not a JSON object, not
UTF-8) is skipped, and the panel names the file and what is wrong with it: one broken record never
takes the panel of every notebook with it.
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
from ..records import RESULTS, RecordError, dump, load, shown

FIGURES_ENV = "WORKSHOP_FIGURES_DIR"
CELL = "padding: 0.25em 0.8em; border-bottom: 1px solid #ddd;"   # marimo gives a raw table no cell spacing
KEY_FIGURES = "key_figures.json"


def read_json_object(path: Path, kind: str) -> dict:
    """The record in a file (helpers.records.load, from its own folder), or RecordError naming the file."""
    return load(path, kind, roots=(Path(path).parent,))


@dataclass(frozen=True)
class Record:
    """One recorded run: a folder under workshop/results/ with its meta.json."""

    folder: Path
    meta: dict

    def _text(self, key: str, default: str = "?") -> str:
        value = self.meta.get(key)
        return str(value)[:200] if isinstance(value, (str, int, float)) and not isinstance(value, bool) \
            and str(value) else default

    @property
    def measured(self) -> dict:
        """Where and with what it was measured (helpers.measure.hardware.measured_on_of: None where unstated)."""
        return measured_on_of(self.meta)

    @property
    def device(self) -> str:
        return self._text("gpu", "") or measured_label(self.measured)

    @property
    def is_gpu(self) -> bool:
        return self.measured["device"]["kind"] == "cuda"

    @property
    def label(self) -> str:
        """Where, when and how: 'recorded on H200 · profile mistral-7b-random · 2026-11-30 12:01 UTC'."""
        note = f" · {self._text('note', '')}" if self._text("note", "") else ""
        return (f"recorded on {self.device} · profile {self.measured['profile'] or '?'} · "
                f"{measured_when(self.measured)}{note}")

    def figures(self, notebook: str) -> list[Path]:
        """The PNG figures this record holds for one notebook (its stem, e.g. '03_prefill_decode_roofline')."""
        return sorted((self.folder / "figures").glob(f"{notebook}-*.png"))

    def key_figures(self, notebook: str | None = None) -> dict[str, Any]:
        """The key figures this record noted ({notebook: {name: value}}, or one notebook's); {} when it
        has none. RecordError when key_figures.json cannot be read or a notebook's entry is not an object."""
        path = self.folder / KEY_FIGURES
        data = read_json_object(path, "key-figures") if path.exists() else {}
        data = {k: v for k, v in data.items() if k not in ("record_format", "kind")}
        if notebook is None:
            return data
        one = data.get(notebook, {})
        if not isinstance(one, dict):
            raise RecordError(f"{shown(path)}: the entry of {notebook} is a JSON {type(one).__name__}, not an object")
        return one


def records(results: Path = RESULTS, skipped: list[str] | None = None) -> list[Record]:
    """Every recorded run, GPUs first, then newest first. A record whose meta.json cannot be read is
    left out, and why is appended to `skipped` (when given)."""
    out = []
    for meta in sorted(Path(results).glob("*/meta.json")):
        try:
            out.append(Record(meta.parent, read_json_object(meta, "record-meta")))
        except RecordError as exc:
            if skipped is not None:
                skipped.append(str(exc))
    out.sort(key=lambda r: r.measured["recorded_at"] or "", reverse=True)
    out.sort(key=lambda r: not r.is_gpu)
    return out


def gpu_records(notebook: str | None = None) -> list[Record]:
    """The committed GPU records, those holding `notebook`'s figures when named. Empty until a GPU has been
    recorded: no *recorded* sentence is said without one."""
    return [r for r in records() if r.is_gpu and (notebook is None or r.key_figures(notebook))]


def pick(notebook: str, results: Path = RESULTS, prefer_gpu: bool = True,
         skipped: list[str] | None = None) -> Record | None:
    """The record to show beside a notebook: one that holds its figures, a GPU's first when asked.
    Records that cannot be read are passed over, each noted in `skipped` (when given)."""
    rs = []
    for r in records(results, skipped):
        try:
            noted = r.key_figures(notebook)   # read first: a record whose figures cannot be read is skipped
        except RecordError as exc:
            if skipped is not None:
                skipped.append(str(exc))
            continue
        if noted or r.figures(notebook):
            rs.append(r)
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

    Writes ``<folder>/<notebook>.json`` (atomically) where folder defaults to $WORKSHOP_FIGURES_DIR;
    does nothing (returns None) when neither is set, so an interactive session writes no files. A
    $WORKSHOP_FIGURES_DIR this process cannot write is a warning naming it, not a failed notebook.
    """
    try:
        where = Path(folder) if folder else env.folder(FIGURES_ENV)
    except env.EnvError as exc:
        warnings.warn(f"key figures of {notebook} not noted: {exc}", stacklevel=2)
        return None
    if where is None:
        return None
    return dump(where / f"{notebook}.json", "key-figures",
                        {str(k): _clean(v) for k, v in figures.items()})


def noted_figures(folder: str | Path, skipped: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Every notebook's noted key figures in a folder: {notebook stem: {name: value}}. A file that
    cannot be read is left out, and why is appended to `skipped` (when given)."""
    out = {}
    for p in sorted(Path(folder).glob("[0-9][0-9]_*.json")):
        try:
            out[p.stem] = {k: v for k, v in read_json_object(p, "key-figures").items()
                           if k not in ("record_format", "kind")}
        except RecordError as exc:
            if skipped is not None:
                skipped.append(str(exc))
    return out


def fmt_value(v: Any) -> str:
    """A key figure as the tables show it: 4 significant digits, thousands separated, — for none."""
    if isinstance(v, float):
        return f"{v:,.4g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}" if abs(v) < 10**15 else f"{v:.4g}"
    return "—" if v is None else str(v)[:200]


def _img(path: Path, width: int = 420) -> str:
    try:
        data = base64.b64encode(path.read_bytes()).decode()
    except OSError as exc:
        return f"<p><small>cannot read {html.escape(shown(path))}: {html.escape(exc.strerror or str(exc))}</small></p>"
    return f"<img src='data:image/png;base64,{data}' style='max-width:{width}px;margin:4px' alt='{html.escape(path.stem)}'>"


def beside_live_html(notebook: str, live: dict[str, Any] | None = None, results: Path = RESULTS,
                     max_figures: int = 4) -> str:
    """HTML: the live key figures next to the recorded ones (a table), then the record's figures,
    labelled with where and when they were recorded. Says so when no record holds this notebook, and
    names each record file that could not be read (that record is skipped)."""
    skipped: list[str] = []
    rec = pick(notebook, results, skipped=skipped)
    notes = "".join(f"<p><small>⚠️ skipped a record: {html.escape(why)}</small></p>"
                    for why in dict.fromkeys(skipped))
    if rec is None:
        where = "workshop/results/" if Path(results) == RESULTS else str(results)
        return (f"<p><b>Recorded run:</b> none holds {html.escape(notebook)} in {html.escape(where)} "
                f"(<code>make record</code> or <code>make gpu-record</code> makes one).</p>{notes}")
    recorded = rec.key_figures(notebook)
    names = list(dict.fromkeys([*(live or {}), *recorded]))
    td, th = f"<td style='{CELL}'>", f"<th style='{CELL} text-align: left;'>"
    rows = "".join(f"<tr>{td}{html.escape(n)}</td>{td}{html.escape(fmt_value((live or {}).get(n)))}</td>"
                   f"{td}{html.escape(fmt_value(recorded.get(n)))}</td></tr>" for n in names)
    table = (f"<table style='border-collapse: collapse;'><tr>{th}key figure</th>{th}this run (live)</th>"
             f"{th}{html.escape(rec.device)}</th></tr>{rows}</table>"
             if names else "")
    figs = "".join(_img(p) for p in rec.figures(notebook)[:max_figures])
    return (f"<div><p><b>Recorded run</b> — {html.escape(rec.label)} "
            f"(<code>workshop/results/{html.escape(rec.folder.name)}</code>)</p>"
            f"{table}<div>{figs}</div>{notes}</div>")


def beside_live(notebook: str, live: dict[str, Any] | None = None, results: Path = RESULTS, max_figures: int = 4):
    """The recorded run beside the live one, as a marimo element (plain HTML text outside marimo)."""
    text = beside_live_html(notebook, live, results, max_figures)
    try:
        import marimo as mo

        return mo.Html(text)
    except ImportError:  # pragma: no cover - marimo is a requirement
        return text
