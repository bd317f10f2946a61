"""The key-figures part of the report that `make run` writes (build/index.html).

For each notebook that ran: its key figures — computed ones from scripts/keyfigures.py (the same calls
the slides use), measured ones from what the notebook noted during the run (helpers.present.recorded.note_figures,
build/figures/NN_topic.json) — the machine and profile, and links to the executed notebook. Plain HTML,
no script, no external resource: it opens offline.
"""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Iterable

from helpers import records
from helpers.present.plots import cell_text
from helpers.present.recorded import noted_figures

HOW = {"computed": "computed by helpers (Mistral 7B v0.1, bf16; datasheet GPUs)",
       "measured": "measured in this run"}


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    return cell_text(v, 4)


def notebook_figures(stem: str, build: Path, computed: dict[str, dict] | None = None,
                     measured: dict[str, dict] | None = None) -> list[dict[str, str]]:
    """The rows of one notebook's key figures: name, value text, how (computed or measured), source.
    measured: what the notebooks noted ({stem: {name: value}}; default: read from build/figures)."""
    if computed is None:
        from keyfigures import by_notebook

        computed = by_notebook()
    rows = [{"figure": k, "value": f.text, "how": "computed", "source": f.source}
            for k, f in computed.get(stem, {}).items()]
    noted = (noted_figures(build / "figures") if measured is None else measured).get(stem, {})
    rows += [{"figure": k, "value": _fmt(v), "how": "measured", "source": "this run"} for k, v in noted.items()]
    return rows


def section(rows: Iterable[tuple], build: Path, profile: str, device_label: str) -> str:
    """HTML: one block per notebook run (rows: (stem, ok, seconds, error) as scripts/notebooks.py has them)."""
    from keyfigures import by_notebook

    try:
        computed = by_notebook()
    except Exception as exc:  # noqa: BLE001 - the report still lists the runs
        computed, note = {}, f"<p class='bad'>computed figures unavailable: {html.escape(str(exc))}</p>"
    else:
        note = ""
    skipped: list[str] = []
    measured = noted_figures(build / "figures", skipped)
    note += "".join(f"<p class='bad'>measured figures unreadable, left out: {html.escape(why)}</p>" for why in skipped)
    parts = [f"<h2>Key figures</h2>{note}<p>Machine: {html.escape(device_label)} · profile "
             f"<b>{html.escape(profile)}</b>. Computed figures are the talk's (Mistral 7B v0.1, bf16, "
             "catalogued GPUs) and the same on every machine; measured ones are this run's.</p>"]
    for stem, ok, _secs, _err in rows:
        figs = notebook_figures(stem, build, computed, measured)
        links = (f"<a href='{html.escape(stem)}.html'>executed notebook (HTML)</a> · "
                 f"<a href='executed/{html.escape(stem)}.ipynb'>.ipynb</a>")
        body = ("<table><tr><th>figure</th><th>value</th><th>how</th><th>source</th></tr>" + "".join(
            f"<tr><td>{html.escape(r['figure'])}</td><td><b>{html.escape(r['value'])}</b></td>"
            f"<td>{html.escape(r['how'])}</td><td><small>{html.escape(r['source'])}</small></td></tr>" for r in figs)
            + "</table>") if figs else "<p>No key figures: this notebook checks or explores rather than states a figure.</p>"
        state = "" if ok else " <span class='bad'>(failed: measured figures may be missing)</span>"
        parts.append(f"<section id='{html.escape(stem)}'><h3>{html.escape(stem)}{state}</h3><p>{links}</p>{body}</section>")
    return "\n".join(parts)


def write_run_json(rows: Iterable[tuple], build: Path, profile: str, device: str | None = None,
                   sections: dict[str, dict[str, float]] | None = None) -> Path:
    """build/run.json: where and with what the notebooks ran (helpers.measure.hardware.measured_on, on
    `device`), which ran, ok or not, how long (and each section, scripts/agenda.py's section_times) — for
    records and the guide's run times."""
    from helpers.measure.hardware import MEASURED_ON, measured_on

    path = build / "run.json"
    sections = sections or {}
    data = {MEASURED_ON: measured_on(device, profile),
            "notebooks": [{"notebook": s, "ok": bool(ok), "seconds": round(float(t), 1), "error": e,
                           "sections": sections.get(s, {})} for s, ok, t, e in rows]}
    return records.dump(path, "run", data)
