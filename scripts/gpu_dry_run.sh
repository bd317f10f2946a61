#!/usr/bin/env bash
# `make gpu-dry-run`: the lent GPU host, imitated on this CPU, and the record run end to end on it.
#
# The host (scripts/gpu_host.txt) is a plain Python with torch, transformers 5.17 and a few more packages,
# no pip index and no network. Here: a fresh virtual environment holding only torch (the CPU build) and
# gpu_host.txt's packages at the host's versions; pip is removed from it once they are in. Then the bundle is
# unpacked onto PYTHONPATH and scripts/gpu_record.sh runs every section on the tiny profile with
# WORKSHOP_DEVICE=cpu, in a network namespace with only the loopback where one can be made (root, unshare).
# If this passes, the GPU run can fail only for GPU reasons.
#
# The bundle for the host is cp312 (its Python is 3.12); this machine's Python is 3.11, so this builds the
# same recipe (scripts/gpu_bundle.sh: the same package list, platforms and stripping) for CPython 3.11:
# build/gpu-bundle-cp311.tar.xz. Only the interpreter tag of the compiled wheels differs.
#
# It also checks that `import helpers` in that environment, without the bundle, stops with the one line
# of helpers.versions (transformers 5.17 ignores cache=), and that the archive holds every section's results.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
T0=$(date +%s)
HOST_PY="${PYTHON:-python3}"
PYV="$("$HOST_PY" -c 'import platform; print(platform.python_version())')"
TAG="cp$("$HOST_PY" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
WORK=build/gpu-dry
ENV="$WORK/venv"
BUNDLE="build/gpu-bundle-$TAG.tar.xz"
ARCHIVE="$WORK/out/gpu-record.tar.gz"

# ---- 1. the bundle, for this Python (the host's recipe) ------------------------------------------------
# built again unless it is newer than everything its recipe reads (a fresh clone, as in CI, always builds)
if [ -n "$(find "$BUNDLE" -newer scripts/gpu_bundle.sh 2>/dev/null)" ] && \
   [ -z "$(find scripts/gpu_bundle.sh scripts/gpu_bundle.txt scripts/gpu_host.txt helpers/measure/models.py -newer "$BUNDLE")" ]; then
    echo "gpu-dry-run: $BUNDLE is newer than its recipe; kept"
else
    GPU_BUNDLE_PYTHON="$PYV" bash scripts/gpu_bundle.sh
fi
T1=$(date +%s)

# ---- 2. the bare host: torch + gpu_host.txt, then no pip ------------------------------------------------
want="$(cat scripts/gpu_host.txt | sha256sum | cut -c1-16)-$TORCH_VERSION"
if [ ! -f "$ENV/.host" ] || [ "$(cat "$ENV/.host")" != "$want" ]; then
    rm -rf "$ENV"
    "$HOST_PY" -m venv "$ENV"
    pip=("$ENV/bin/python" -m pip install --disable-pip-version-check -q)
    "${pip[@]}" "torch==$TORCH_VERSION"                     # the CPU build, from this machine's disk
    pin="$(mktemp)"
    echo "torch==$TORCH_VERSION" > "$pin"
    "${pip[@]}" -r scripts/gpu_host.txt -c "$pin"
    rm -f "$pin"
    "$ENV/bin/python" -m pip uninstall -q -y pip            # the host has no index: nothing may install
    echo "$want" > "$ENV/.host"
fi
PY="$ENV/bin/python"
"$PY" -c "import torch, transformers; print(f'gpu-dry-run: host python {torch.__version__}, transformers {transformers.__version__}')"
T2=$(date +%s)

# the host's own transformers is too old: helpers refuses it, in one line, before the bundle is there
if refusal="$(cd "$WORK" && PYTHONPATH="$ROOT" "$ROOT/$PY" -c "import helpers" 2>&1)"; then
    echo "gpu-dry-run: helpers imported under the host's transformers; it must refuse it" >&2
    exit 1
fi
echo "gpu-dry-run: without the bundle: $(printf '%s' "$refusal" | tail -1)"
printf '%s' "$refusal" | tail -1 | grep -q "helpers needs transformers>=" || { echo "$refusal" >&2; exit 1; }

# ---- 3. the record, as on the host ------------------------------------------------------------------------
rm -rf "$WORK/out" build/results-dry-run
mkdir -p "$WORK/out"
run=(env -u PYTHONPATH -u VIRTUAL_ENV PYTHONNOUSERSITE=1 PIP_NO_INDEX=1 HF_HUB_OFFLINE=1
     WORKSHOP_DEVICE=cpu WORKSHOP_PROFILE=tiny RECORD_DRY_RUN=1 PY="$PY" RECORD_SITE="$ROOT/$WORK/site"
     bash scripts/gpu_record.sh --bundle "$BUNDLE" --archive "$ARCHIVE")
if unshare -n true 2>/dev/null; then
    echo "gpu-dry-run: no network (a namespace with only the loopback)"
    rc=0
    unshare -n bash -c 'ip link set lo up && exec "$@"' _ "${run[@]}" || rc=$?
else
    echo "gpu-dry-run: cannot make a network namespace here; the network stays reachable"
    rc=0
    "${run[@]}" || rc=$?
fi
T3=$(date +%s)

# ---- 4. what came back --------------------------------------------------------------------------------------
"$HOST_PY" - "$ARCHIVE" <<'PYEOF'
import json, sys, tarfile
archive = sys.argv[1]
with tarfile.open(archive) as t:
    names = t.getnames()
    meta = json.load(t.extractfile(next(n for n in names if n.endswith("/meta.json"))))
    engines = json.load(t.extractfile(next(n for n in names if n.endswith("/engines.json"))))
problems = [f"section {s['section']}: exit {s['exit_code']} {s['note']}" for s in meta["sections"] if s["exit_code"] != 0]
problems += [f"notebook {n['notebook']}: {n['errors']}" for n in meta["notebooks"] if not n["ok"]]
ran = sorted(n["notebook"][:2] for n in meta["notebooks"])
if ran != ["01", "02", "03", "05"]:
    problems.append(f"notebooks run: {ran}, not 01 02 03 05")
for f in ("roofline.json", "attention.json", "capacity.json"):
    if not any(n.endswith("/" + f) for n in names):
        problems.append(f"no {f}")
if not engines.get("complete") or not engines.get("configs"):
    problems.append("engines.json is not complete")
if meta["measured_on"]["versions"]["transformers"] == "5.17.0":
    problems.append("the run imported the host's transformers, not the bundle's")
print(f"gpu-dry-run: {archive}: {len(names)} entries; sections "
      + ", ".join(f"{s['section']} {s['seconds']} s" for s in meta["sections"]))
if problems:
    print("gpu-dry-run: FAILED\n  " + "\n  ".join(problems), file=sys.stderr)
    sys.exit(1)
PYEOF
echo "gpu-dry-run: passed in $((T3 - T0)) s (bundle $((T1 - T0)) s, host environment $((T2 - T1)) s, record $((T3 - T2)) s)"
exit "$rc"
