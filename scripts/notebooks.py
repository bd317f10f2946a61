"""Notebook tooling: export the marimo sources to .ipynb, check the exports are current, and run
the whole workshop headless into an HTML report.

    python scripts/notebooks.py export        # notebooks/NN_*.py -> notebooks/colab/NN_*.ipynb
    python scripts/notebooks.py check         # exit 1 when an .ipynb is not the current export
    python scripts/notebooks.py run [NN ...]  # execute every notebook, build/NN_*.html + build/index.html

The .ipynb files are what Colab opens and what nbmake runs: the marimo notebook's cells in
dependency order, after a first cell that makes ``helpers`` importable.
"""
from __future__ import annotations

import argparse
import datetime as dt
import html
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
COLAB = NOTEBOOKS / "colab"
BUILD = ROOT / "build"

SETUP_CELL = '''# Set-up for Jupyter and Colab: make the workshop's `helpers` package importable.
# In the repository (or after `make setup`) this does nothing. On Colab it clones the repository
# named by WORKSHOP_REPO_URL (see workshop/README.md) and installs its requirements.
import importlib.util, os, pathlib, subprocess, sys
if importlib.util.find_spec("helpers") is None:
    here = pathlib.Path.cwd()
    root = next((p for p in [here, *here.parents] if (p / "helpers" / "__init__.py").exists()), None)
    if root is None and "google.colab" in sys.modules and os.environ.get("WORKSHOP_REPO_URL"):
        root = pathlib.Path("/content/llm-inference-workshop")
        if not root.exists():
            subprocess.run(["git", "clone", "--depth", "1", os.environ["WORKSHOP_REPO_URL"], str(root)], check=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", str(root / "requirements.txt")], check=True)
    if root is None:
        raise RuntimeError("cannot find the workshop's helpers package: open this notebook from the repository, "
                           "or set WORKSHOP_REPO_URL on Colab")
    sys.path.insert(0, str(root))'''


def sources() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def export_text(src: Path) -> str:
    """The .ipynb text for one marimo notebook (deterministic)."""
    out = subprocess.run(
        [sys.executable, "-m", "marimo", "export", "ipynb", str(src), "--sort", "topological"],
        capture_output=True, text=True, check=False, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"marimo export ipynb {src.name} failed:\n{out.stderr}")
    nb = json.loads(out.stdout)
    setup = {"cell_type": "code", "execution_count": None, "id": "workshop-setup", "metadata": {},
             "outputs": [], "source": SETUP_CELL.splitlines(keepends=True)}
    nb["cells"].insert(0, setup)
    nb.setdefault("metadata", {})["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb["metadata"]["workshop"] = {"generated_from": f"notebooks/{src.name}",
                                  "regenerate": "python scripts/notebooks.py export"}
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def target(src: Path) -> Path:
    return COLAB / (src.stem + ".ipynb")


def export() -> list[Path]:
    COLAB.mkdir(parents=True, exist_ok=True)
    written = []
    for src in sources():
        text = export_text(src)
        dst = target(src)
        if not dst.exists() or dst.read_text() != text:
            dst.write_text(text)
            written.append(dst)
    for stale in set(COLAB.glob("*.ipynb")) - {target(s) for s in sources()}:
        stale.unlink()
        written.append(stale)
    return written


def stale() -> list[str]:
    """Names of exports that are missing, out of date, or have no marimo source."""
    bad = [target(s).name for s in sources() if not target(s).exists() or target(s).read_text() != export_text(s)]
    bad += [p.name for p in set(COLAB.glob("*.ipynb")) - {target(s) for s in sources()}]
    return sorted(bad)


# ------------------------------------------------------------------ run the workshop

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")  # colour and cursor codes in tracebacks (ECMA-48 CSI)


def strip_ansi(text: str) -> str:
    """Text without terminal colour codes, for the HTML report's error column."""
    return ANSI.sub("", text)


def _execute(ipynb: Path, timeout: int) -> tuple[bool, float, object, str]:
    import nbformat
    from jupyter_client import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(ipynb, as_version=4)
    # IPC sockets: the kernel is local, and TCP would make it warn about unencrypted traffic.
    km = KernelManager(kernel_name="python3", transport="ipc")
    client = NotebookClient(nb, km=km, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}})
    t0 = time.perf_counter()
    try:
        client.execute()
        ok, err = True, ""
    except CellExecutionError as exc:
        ok, err = False, strip_ansi(str(exc)).strip().splitlines()[-1][:500]
    except Exception as exc:  # noqa: BLE001 - a kernel death or timeout is a failed notebook in the report
        ok, err = False, strip_ansi(f"{type(exc).__name__}: {exc}")[:500]
    finally:
        if km.has_kernel:  # we own the kernel manager, so the kernel is ours to stop
            km.shutdown_kernel(now=True)
    return ok, time.perf_counter() - t0, nb, err


def _to_html(nb, title: str) -> str:
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab")
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    return body


def run(only: list[str], timeout: int) -> int:
    sys.path.insert(0, str(ROOT))
    from helpers.hardware import device_info
    from helpers.models import resolve_profile

    BUILD.mkdir(exist_ok=True)
    (BUILD / "executed").mkdir(exist_ok=True)
    profile, reason = resolve_profile()
    info = device_info()
    rows, failed = [], 0
    for src in sources():
        if only and src.name[:2] not in only:
            continue
        ipynb = target(src)
        print(f"run: {src.name} …", flush=True)
        ok, secs, nb, err = _execute(ipynb, timeout)
        import nbformat

        nbformat.write(nb, BUILD / "executed" / ipynb.name)
        (BUILD / f"{src.stem}.html").write_text(_to_html(nb, src.stem))
        failed += not ok
        rows.append((src.stem, ok, secs, err))
        print(f"run: {src.name} {'ok' if ok else 'FAILED'} in {secs:.1f} s {err}", flush=True)
    when = dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    items = "\n".join(
        f"<tr><td><a href='{html.escape(n)}.html'>{html.escape(n)}</a></td>"
        f"<td class='{'ok' if ok else 'bad'}'>{'ok' if ok else 'failed'}</td><td>{s:.1f} s</td>"
        f"<td>{html.escape(e)}</td></tr>" for n, ok, s, e in rows)
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>LLM Inference at Scale — workshop run</title>
<style>body{{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto}}td,th{{padding:.3rem .8rem;text-align:left}}
.ok{{color:#070}}.bad{{color:#b00;font-weight:bold}}</style></head><body>
<h1>LLM Inference at Scale — workshop run</h1>
<p>{html.escape(when)} · profile <b>{html.escape(profile)}</b> ({html.escape(reason)}) ·
device {html.escape(info.label)} · torch {html.escape(info.torch_version)}</p>
<table><tr><th>notebook</th><th>status</th><th>time</th><th>error</th></tr>
{items}
</table></body></html>
"""
    (BUILD / "index.html").write_text(page)
    print(f"run: {len(rows) - failed} of {len(rows)} notebooks ran; report: {BUILD / 'index.html'}")
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("export")
    sub.add_parser("check")
    r = sub.add_parser("run")
    r.add_argument("only", nargs="*", help="notebook numbers, e.g. 01 03 (default: all)")
    r.add_argument("--timeout", type=int, default=int(os.environ.get("WORKSHOP_CELL_TIMEOUT", "1200")))
    a = ap.parse_args()
    if a.cmd == "export":
        for p in export():
            print(f"export: wrote {p.relative_to(ROOT)}")
        return 0
    if a.cmd == "check":
        bad = stale()
        if bad:
            print("stale exports (run `python scripts/notebooks.py export`): " + ", ".join(bad))
            return 1
        print("exports are current")
        return 0
    return run(a.only, a.timeout)


if __name__ == "__main__":
    sys.exit(main())
