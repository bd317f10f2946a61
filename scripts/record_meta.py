"""meta.json of a recorded run (scripts/gpu_record.sh calls it after each section): the executed notebooks'
HTML copied and their figures extracted as PNG, each notebook's time and errors, each section's exit status
and time (sections.tsv), the bench and engines files, the key figures the notebooks noted, and where and with
what it was measured (helpers.measure.hardware.measured_on, under "measured_on").

    python scripts/record_meta.py DEST GPU_NAME
"""
from __future__ import annotations

import base64
import csv
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def notebooks(out: Path, build: Path) -> list[dict]:
    """Each executed notebook of this run: errors, figures (written as PNG), HTML copied, seconds. The
    seconds come from build/run.json, which each `notebooks.py run` rewrites: merged into notebooks.json."""
    import nbformat

    from helpers import records

    seen = out / "notebooks.json"
    secs = records.load(seen, "notebook-seconds", roots=(out,))["seconds"] if seen.is_file() else {}
    run_json = build / "run.json"
    if run_json.is_file():
        secs.update({r["notebook"]: r["seconds"] for r in records.load(run_json, "run").get("notebooks", [])})
    records.dump(seen, "notebook-seconds", {"seconds": secs})
    rows = []
    for ipynb in sorted((build / "executed").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(ipynb, as_version=4)
        errors, figures = [], 0
        for cell in nb.cells:
            for o in cell.get("outputs", []):
                if o.get("output_type") == "error":
                    errors.append(f"{o.get('ename')}: {o.get('evalue', '')[:300]}")
                png = o.get("data", {}).get("image/png")
                if png:
                    figures += 1
                    (out / "figures" / f"{ipynb.stem}-{figures:02d}.png").write_bytes(base64.b64decode(png))
        html = build / f"{ipynb.stem}.html"
        if html.exists():
            shutil.copy(html, out / html.name)
        rows.append({"notebook": ipynb.stem, "ok": not errors, "errors": errors, "figures": figures,
                     "html": html.name if html.exists() else None, "seconds": secs.get(ipynb.stem)})
    return rows


def sections(out: Path) -> list[dict]:
    path = out / "sections.tsv"
    if not path.is_file():
        return []
    rows = []
    for r in csv.DictReader(path.open(), delimiter="\t"):
        rows.append({"section": r["section"], "exit_code": int(r["exit_code"]) if r["exit_code"] else None,
                     "seconds": int(r["seconds"]), "limit_s": int(r["limit_s"]), "note": r["note"]})
    return rows


def main(argv: list[str]) -> int:
    import argparse

    from cli_common import writable_folder
    from helpers.command import CliError, Parser, fail
    from helpers import records
    from helpers import env
    from helpers.measure.hardware import MEASURED_ON, measured_on
    from helpers.present.recorded import KEY_FIGURES, noted_figures

    ap = Parser(prog="python scripts/record_meta.py", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dest", type=Path, help="the record's folder, workshop/results/<gpu>")
    ap.add_argument("gpu", help="the GPU's name as the record states it")
    try:
        a = ap.parse_args(argv)
        writable_folder(a.dest / "figures", "DEST")
    except (CliError, ValueError) as exc:
        return fail(str(exc))
    out, gpu = a.dest, a.gpu
    build = ROOT / "build"
    nbs = notebooks(out, build)
    meta = {
        MEASURED_ON: measured_on(profile=env.text("WORKSHOP_PROFILE")),   # its git_commit: RECORD_COMMIT on a GPU host
        "gpu": gpu,
        "sections": sections(out),
        "notebooks": nbs,
        "bench_files": sorted(p.name for p in out.glob("*.json")
                              if p.name not in ("meta.json", KEY_FIGURES, "notebooks.json", "engines.json")),
        "engines": "engines.json" if (out / "engines.json").is_file() else None,
    }
    if os.environ.get("RECORD_NOTE"):
        meta["note"] = os.environ["RECORD_NOTE"]
    records.dump(out / KEY_FIGURES, "key-figures", noted_figures(build / "figures"))
    records.dump(out / "meta.json", "record-meta", meta)
    for n in nbs:
        print(f"  {n['notebook']}: {'ok' if n['ok'] else 'FAILED'}, {n['figures']} figures, {n['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
