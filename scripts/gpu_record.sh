#!/usr/bin/env bash
# Record reference results on a CUDA GPU, for facilitators without one on stage: notebooks 03, 05, 01
# and 02 with the full-size Mistral 7B architecture (WORKSHOP_PROFILE=mistral-7b-random: random weights,
# no download), the bench's GPU-sized sections and a quick engines plan, under workshop/results/<gpu>/
# with a meta.json (date, GPU, library versions, each section's time and exit status). Commit what it records.
#
# It runs with a plain Python that already has torch: no venv, no pip, no network. A host that lacks the
# other packages gets them from the bundle (`make gpu-bundle` here: build/gpu-bundle-cp312.tar.xz),
# unpacked onto PYTHONPATH (JUPYTER_PATH names nbconvert's templates inside it).
#
#   bash scripts/gpu_record.sh                                   # with .venv/bin/python, else python3
#   PY=python3 bash scripts/gpu_record.sh --bundle build/gpu-bundle-cp312.tar.xz --archive /some/dir/record.tar.gz
#   bash scripts/gpu_record.sh --only engines                    # some sections: first notebooks bench engines
#   bash scripts/gpu_record.sh --skip bench,engines
#   RECORD_DRY_RUN=1 bash scripts/gpu_record.sh                  # no GPU: the tiny profile into build/results-dry-run/
#
# Sections, in order, each with its own budget (seconds, RECORD_<NAME>_S) and its results written as it ends:
#   first      notebooks 03 and 05: the paths no CPU takes (CUDA timing, torch.compile with CUDA graphs,
#              bitsandbytes on CUDA); 05 saves the random 7B once (~14.5 GB) to quantize it while loading
#   notebooks  notebooks 01 and 02
#   bench      scripts/bench.py's GPU-sized sections (RECORD_BENCH_SECTIONS), no second compile
#   engines    `transformers serve`, continuous batching off and on, the talk's workload (--quick)
# RECORD_TOTAL_S (default 560) bounds the whole run: a section gets what is left of it if that is less than
# its budget, and none starts with under 20 s left. After each section the archive (--archive) is packed
# again, so a run cut short still leaves everything that finished.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

BUNDLE="${RECORD_BUNDLE:-}"
ARCHIVE="${RECORD_ARCHIVE:-}"
ONLY="" SKIP=""
while [ "$#" -gt 0 ]; do
    case "$1" in
        --bundle) BUNDLE="$2"; shift 2 ;;
        --archive) ARCHIVE="$2"; shift 2 ;;
        --only) ONLY="$2"; shift 2 ;;
        --skip) SKIP="$2"; shift 2 ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) echo "gpu-record: unknown argument $1; allowed: --bundle FILE, --archive FILE, --only/--skip SECTIONS" >&2; exit 2 ;;
    esac
done
SECTIONS="first notebooks bench engines"
for s in ${ONLY//,/ } ${SKIP//,/ }; do
    case " $SECTIONS " in *" $s "*) ;; *) echo "gpu-record: unknown section $s; allowed: ${SECTIONS// /, }" >&2; exit 2 ;; esac
done

PY="${PY:-.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"

# ---- the bundle: the packages this Python lacks, onto PYTHONPATH ----------------------------------
if [ -n "$BUNDLE" ]; then
    [ -f "$BUNDLE" ] || { echo "gpu-record: no bundle at $BUNDLE (make gpu-bundle builds it)" >&2; exit 1; }
    SITE="${RECORD_SITE:-${TMPDIR:-/tmp}/workshop-site}"
    rm -rf "$SITE" && mkdir -p "$SITE"
    # tarfile (Python's own lzma): the host needs no xz
    "$PY" -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='data')" "$BUNDLE" "$SITE"
    export PYTHONPATH="$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
    # nbconvert installed with --target finds its 'lab' template only here
    export JUPYTER_PATH="$SITE/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}"
    echo "gpu-record: bundle $BUNDLE unpacked into $SITE"
else
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi

DRY="${RECORD_DRY_RUN:-}"
if [ -n "$DRY" ]; then export WORKSHOP_PROFILE="${WORKSHOP_PROFILE:-tiny}"; fi
export WORKSHOP_PROFILE="${WORKSHOP_PROFILE:-mistral-7b-random}"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"          # the random profile needs no download
export HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false
unset MPLBACKEND                                        # the kernels draw figures inline
export WORKSHOP_BENCH_COMPILE=0                         # notebook 03 measures torch.compile; the bench does not again
TOTAL_S="${RECORD_TOTAL_S:-560}"
FIRST_S="${RECORD_FIRST_S:-330}" NOTEBOOKS_S="${RECORD_NOTEBOOKS_S:-75}"
BENCH_S="${RECORD_BENCH_S:-60}" ENGINES_S="${RECORD_ENGINES_S:-100}"
CELL_S="${RECORD_CELL_S:-300}"                          # one notebook cell
BENCH_SECTIONS="${RECORD_BENCH_SECTIONS:-roofline attention capacity}"   # serving alone needs ~230 s on a 7B

# ---- where: this GPU, or a CPU for make record / the dry run ---------------------------------------
# Nothing else is importable without the bundle: say what is missing before any time is spent.
if ! missing="$("$PY" - <<'PYEOF' 2>&1
import importlib.util, sys
need = ("torch", "helpers", "transformers", "nbclient", "nbconvert", "ipykernel", "marimo", "bitsandbytes",
        "mistral_common", "pydantic", "pandas", "matplotlib")
gone = [n for n in need if importlib.util.find_spec(n) is None]
if gone:
    sys.exit("missing: " + ", ".join(gone) + " (make gpu-bundle, then --bundle build/gpu-bundle-cp312.tar.xz)")
import helpers    # refuses a transformers that would ignore cache= (helpers/versions.py), in one line
PYEOF
)"; then
    echo "gpu-record: this Python ($PY) cannot run the record: $(printf '%s' "$missing" | tail -1)" >&2
    exit 1
fi

HAS_CUDA=0
"$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null && HAS_CUDA=1
label() { "$PY" -c "from helpers.measure.hardware import device_info; print(device_info().label)"; }
if [ -n "${RECORD_ANY_DEVICE:-}" ] && [ "$HAS_CUDA" = 0 ] && [ -z "$DRY" ]; then
    # make record without a GPU: the tiny profile on this CPU (or Apple GPU), into workshop/results/cpu-<name>/
    export WORKSHOP_PROFILE="${RECORD_PROFILE:-tiny}"
    TOTAL_S="${RECORD_TOTAL_S:-3600}" FIRST_S="${RECORD_FIRST_S:-1800}" NOTEBOOKS_S="${RECORD_NOTEBOOKS_S:-600}"
    BENCH_S="${RECORD_BENCH_S:-400}" ENGINES_S="${RECORD_ENGINES_S:-600}"
    GPU_NAME="$(label)"
    SLUG="$(printf '%s' "$GPU_NAME" | tr '[:upper:]' '[:lower:]' | sed -E 's/\(r\)|\(tm\)|cpu @.*$//g; s/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')"
    DEST="workshop/results/${SLUG:-cpu}"
elif [ -n "$DRY" ]; then
    # the CPU stands in for the GPU: the same sections and switches, budgets that only stop a hang (a
    # loaded 2-core machine runs the tiny profile 5-10 times slower than an idle one)
    TOTAL_S="${RECORD_TOTAL_S:-2400}" FIRST_S="${RECORD_FIRST_S:-1200}" NOTEBOOKS_S="${RECORD_NOTEBOOKS_S:-600}"
    BENCH_S="${RECORD_BENCH_S:-600}" ENGINES_S="${RECORD_ENGINES_S:-600}"
    GPU_NAME="dry run on $(label)"
    DEST="${RECORD_DEST:-build/results-dry-run}"
else
    if [ "$HAS_CUDA" = 0 ]; then
        echo "gpu-record: no CUDA GPU is visible to torch here; run it on a GPU machine (the results it" >&2
        echo "records are what facilitators show when there is none), or RECORD_DRY_RUN=1 to test the script." >&2
        exit 1
    fi
    GPU_NAME="$("$PY" -c "import torch; print(torch.cuda.get_device_name(0))")"
    SLUG="$(printf '%s' "$GPU_NAME" | tr '[:upper:]' '[:lower:]' | sed -E 's/^nvidia //; s/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')"
    DEST="workshop/results/${SLUG:-gpu}"
fi
rm -rf "$DEST/figures" "$DEST"/*.html "$DEST"/*.json "$DEST"/sections.tsv "$DEST"/record.log
mkdir -p "$DEST/figures"
export WORKSHOP_FIGURES_DIR="build/figures"           # notebooks note their key figures here (helpers.present.recorded)
rm -rf "$WORKSHOP_FIGURES_DIR" build/executed/[0-9][0-9]_*.ipynb
exec > >(tee -a "$DEST/record.log") 2>&1               # the run's own log travels with its results
echo "gpu-record: $GPU_NAME -> $DEST (profile $WORKSHOP_PROFILE, python $("$PY" -c 'import sys; print(sys.version.split()[0])'))"
printf 'section\texit_code\tseconds\tlimit_s\tnote\n' > "$DEST/sections.tsv"

T0=$(date +%s)
RESERVE_S=15                                           # for the last meta.json and archive

selected() {
    local s="$1"
    if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$s,"* ]]; then return 1; fi
    if [ -n "$SKIP" ] && [[ ",$SKIP," == *",$s,"* ]]; then return 1; fi
    return 0
}

finish() {   # meta.json from what has run so far, then the archive
    "$PY" scripts/record_meta.py "$DEST" "$GPU_NAME" || echo "gpu-record: meta.json not written" >&2
    if [ -n "$ARCHIVE" ]; then
        mkdir -p "$(dirname "$ARCHIVE")"
        tar -czf "$ARCHIVE.tmp" -C "$(dirname "$DEST")" "$(basename "$DEST")" && mv "$ARCHIVE.tmp" "$ARCHIVE"
        echo "gpu-record: packed $ARCHIVE ($(( $(stat -c %s "$ARCHIVE") / 1024 )) KiB)"
    fi
}

section() {   # section NAME BUDGET_S COMMAND...: run it within its budget and what is left of the total
    local name="$1" budget="$2"; shift 2
    if ! selected "$name"; then
        printf '%s\t\t0\t0\tnot selected\n' "$name" >> "$DEST/sections.tsv"; return 0
    fi
    local left=$(( TOTAL_S - RESERVE_S - ($(date +%s) - T0) ))
    if [ "$left" -lt 20 ]; then
        echo "gpu-record: $name skipped: ${left} s left of RECORD_TOTAL_S=$TOTAL_S"
        printf '%s\t\t0\t0\tskipped: %s s left of %s\n' "$name" "$left" "$TOTAL_S" >> "$DEST/sections.tsv"; return 0
    fi
    local limit=$(( budget < left ? budget : left )) t=$(date +%s) rc=0
    echo "gpu-record: section $name (limit $limit s of $budget s)"
    timeout --signal=INT -k 20 "$limit" "$@" || rc=$?
    local secs=$(( $(date +%s) - t )) note=""
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then note="stopped at its limit"; fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" "$secs" "$limit" "$note" >> "$DEST/sections.tsv"
    echo "gpu-record: section $name exit $rc in $secs s $note"
    finish
}

ENGINE_ARGS=(--quick --no-guidellm --engines "${RECORD_ENGINES:-transformers}" --out "$DEST/engines.json")

section first "$FIRST_S" "$PY" scripts/notebooks.py run 03 05 --timeout "$CELL_S"
section notebooks "$NOTEBOOKS_S" "$PY" scripts/notebooks.py run 01 02 --timeout "$CELL_S"
# shellcheck disable=SC2086  # the section names are words
section bench "$BENCH_S" "$PY" scripts/bench.py $BENCH_SECTIONS --out "$DEST"
section engines "$ENGINES_S" "$PY" -m servebench record "${ENGINE_ARGS[@]}"

finish                                                 # with the sections skipped at the end, too
echo "gpu-record: done in $(( $(date +%s) - T0 )) s; commit $DEST"
# every selected section that ran exited 0
! awk -F'\t' 'NR > 1 && $2 != "" && $2 != "0" {bad = 1} END {exit !bad}' "$DEST/sections.tsv"
