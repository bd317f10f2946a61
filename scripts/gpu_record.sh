#!/usr/bin/env bash
# Record reference results on a CUDA GPU, for facilitators without one on stage:
# notebooks 01–03 and 05 with the full-size Mistral 7B architecture (WORKSHOP_PROFILE=mistral-7b-random:
# random weights, no download) and `make bench`, saved under workshop/results/<gpu>/ with a meta.json
# (date, GPU, library versions, what ran and how long). Commit what it records.
#
#   make gpu-record                      # or: bash scripts/gpu_record.sh
#   bash scripts/gpu_record.sh 01 03     # only some notebooks
#   RECORD_DRY_RUN=1 bash scripts/gpu_record.sh   # no GPU: the tiny profile into build/results-dry-run/,
#                                                 # to check the script itself
#
# Budget: under 8 minutes on an H100/H200 (sweep sizes for a GPU: helpers.workloads.sweep_sizes), plus
# about two for torch.compile of the decode step (notebook 03's section 6 and the bench's decode
# implementations: eager loop, generate, static cache, static cache + CUDA graphs, helpers.decoding).
# the serving engines (make engines, ENGINES_LIMIT_S, default 900 s) into engines.json.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PY:-.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"

# ---- the notebooks to record --------------------------------------------------------------------
NOTEBOOKS=(01 02 03 05)   # 05 last: it saves the random 7B once (~14.5 GB) to quantize it while loading
if [ "$#" -gt 0 ]; then NOTEBOOKS=("$@"); fi

DRY="${RECORD_DRY_RUN:-}"
if [ -n "$DRY" ]; then export WORKSHOP_PROFILE="${WORKSHOP_PROFILE:-tiny}"; fi
export WORKSHOP_PROFILE="${WORKSHOP_PROFILE:-mistral-7b-random}"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"          # the random profile needs no download
export HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false
unset MPLBACKEND                                        # the kernels draw figures inline
NOTEBOOK_LIMIT_S="${NOTEBOOK_LIMIT_S:-480}"             # all notebooks together
BENCH_LIMIT_S="${BENCH_LIMIT_S:-180}"                   # the decode implementations compile once (helpers.decoding)
if [ -n "$DRY" ]; then export WORKSHOP_BENCH_COMPILE="${WORKSHOP_BENCH_COMPILE:-0}"; fi   # CPU: no compile
ENGINES_LIMIT_S="${ENGINES_LIMIT_S:-900}"               # make engines: every serving configuration installed here

HAS_CUDA=0
"$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null && HAS_CUDA=1
if [ -n "${RECORD_ANY_DEVICE:-}" ] && [ "$HAS_CUDA" = 0 ] && [ -z "$DRY" ]; then
    # make record without a GPU: the tiny profile on this CPU (or Apple GPU), into workshop/results/cpu-<name>/
    export WORKSHOP_PROFILE="${RECORD_PROFILE:-tiny}"
    NOTEBOOK_LIMIT_S="${RECORD_NOTEBOOK_LIMIT_S:-2400}"   # a CPU (and a shared one above all) is slower
    BENCH_LIMIT_S="${RECORD_BENCH_LIMIT_S:-400}"
    GPU_NAME="$("$PY" -c "import sys; sys.path.insert(0, '.'); from helpers.hardware import device_info; print(device_info().label)")"
    SLUG="$(printf '%s' "$GPU_NAME" | tr '[:upper:]' '[:lower:]' | sed -E 's/\(r\)|\(tm\)|cpu @.*$//g; s/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')"
    OUT="workshop/results/${SLUG:-cpu}"
elif [ -n "$DRY" ]; then
    GPU_NAME="dry run on $("$PY" -c "import sys; sys.path.insert(0, '.'); from helpers.hardware import device_info; print(device_info().label)")"
    OUT="build/results-dry-run"
else
    if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
        echo "gpu-record: no CUDA GPU is visible to torch here; run it on a GPU machine (the results it" >&2
        echo "records are what facilitators show when there is none), or RECORD_DRY_RUN=1 to test the script." >&2
        exit 1
    fi
    GPU_NAME="$("$PY" -c "import torch; print(torch.cuda.get_device_name(0))")"
    SLUG="$(printf '%s' "$GPU_NAME" | tr '[:upper:]' '[:lower:]' | sed -E 's/^nvidia //; s/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')"
    OUT="workshop/results/${SLUG:-gpu}"
fi
rm -f "$OUT"/figures/*.png
mkdir -p "$OUT/figures"
export WORKSHOP_FIGURES_DIR="build/figures"           # notebooks note their key figures here (helpers.recorded)
rm -rf "$WORKSHOP_FIGURES_DIR"
echo "gpu-record: $GPU_NAME -> $OUT (profile $WORKSHOP_PROFILE, notebooks ${NOTEBOOKS[*]})"

T0=$(date +%s)
NB_RC=0
rm -f build/executed/[0-9][0-9]_*.ipynb
timeout --signal=INT -k 20 "$NOTEBOOK_LIMIT_S" "$PY" scripts/notebooks.py run "${NOTEBOOKS[@]}" --timeout 300 || NB_RC=$?
T1=$(date +%s)
BENCH_RC=0
timeout --signal=INT -k 20 "$BENCH_LIMIT_S" "$PY" scripts/bench.py --out "$OUT" || BENCH_RC=$?
T2=$(date +%s)
# The serving engines (make engines): engines.json is rewritten after each configuration, so a time
# limit keeps what finished. Its exit code is recorded in engines-exit-code.txt, not fatal here.
ENGINES_RC=0
if [ -n "$DRY" ]; then ENGINES_ARGS=(--quick --engines transformers); else ENGINES_ARGS=(); fi
timeout --signal=INT -k 30 "$ENGINES_LIMIT_S" "$PY" -m helpers.engines --out "$OUT/engines.json" "${ENGINES_ARGS[@]}" \
    || ENGINES_RC=$?
echo "$ENGINES_RC" > "$OUT/engines-exit-code.txt"
echo "gpu-record: engines exit code $ENGINES_RC in $(( $(date +%s) - T2 )) s -> $OUT/engines.json"

"$PY" - "$OUT" "$GPU_NAME" "$NB_RC" "$BENCH_RC" "$((T1 - T0))" "$((T2 - T1))" "${NOTEBOOKS[@]}" <<'PYEOF'
"""Copy the executed notebooks' HTML, extract their figures as PNG, and write meta.json."""
import base64, datetime as dt, json, os, shutil, subprocess, sys
from pathlib import Path

sys.path.insert(0, os.getcwd())
import nbformat

from helpers.hardware import device_info
from helpers.preflight import library_versions

out, gpu, nb_rc, bench_rc, nb_s, bench_s, *wanted = sys.argv[1:]
out = Path(out)
build = Path("build")
notebooks = []
for ipynb in sorted((build / "executed").glob("[0-9][0-9]_*.ipynb")):
    if ipynb.name[:2] not in wanted:
        continue
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
    notebooks.append({"notebook": ipynb.stem, "ok": not errors, "errors": errors, "figures": figures,
                      "html": html.name if html.exists() else None})
try:
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
except Exception:  # noqa: BLE001 - not a git checkout
    commit = None
meta = {
    "recorded_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    "gpu": gpu,
    "device": device_info().to_dict(),
    "profile": os.environ.get("WORKSHOP_PROFILE"),
    "versions": library_versions(),
    "git_commit": commit,
    "notebooks": notebooks,
    "notebooks_exit_code": int(nb_rc),
    "notebooks_seconds": int(nb_s),
    "bench_exit_code": int(bench_rc),
    "bench_seconds": int(bench_s),
    "bench_files": sorted(p.name for p in out.glob("*.json") if p.name not in ("meta.json", "key_figures.json")),
}
# per-notebook seconds (build/run.json, written by scripts/notebooks.py run) and the key figures noted
from helpers.recorded import KEY_FIGURES, noted_figures
run_json = build / "run.json"
if run_json.is_file():
    secs = {r["notebook"]: r["seconds"] for r in json.loads(run_json.read_text()).get("notebooks", [])}
    for n in notebooks:
        n["seconds"] = secs.get(n["notebook"])
if os.environ.get("RECORD_NOTE"):
    meta["note"] = os.environ["RECORD_NOTE"]
figs = noted_figures(build / "figures")
(out / KEY_FIGURES).write_text(json.dumps(figs, indent=1) + "\n")
(out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
print(json.dumps({k: meta[k] for k in ("gpu", "recorded_at", "notebooks_seconds", "bench_seconds")}))
for n in notebooks:
    print(f"  {n['notebook']}: {'ok' if n['ok'] else 'FAILED'}, {n['figures']} figures")
PYEOF

echo "gpu-record: done in $(( $(date +%s) - T0 )) s; commit $OUT"
[ "$NB_RC" -eq 0 ] && [ "$BENCH_RC" -eq 0 ]
