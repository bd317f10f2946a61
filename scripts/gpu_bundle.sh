#!/usr/bin/env bash
# `make gpu-bundle`: the packages a lent GPU host lacks, as one archive it unpacks onto PYTHONPATH
# (scripts/gpu_record.sh does). The host has python3 3.12 with torch and the packages in
# scripts/gpu_host.txt, and no network: no pip index there. This downloads scripts/gpu_bundle.txt as
# x86-64 manylinux wheels for that Python (never torch), installs them into one folder, strips what a
# headless run never loads, checks that every carried package's requirements are met by the bundle or the
# host, and packs build/gpu-bundle-cp312.tar.xz, at most 24 MiB (what travels to the host is 64 MiB in all).
#
#   bash scripts/gpu_bundle.sh                      # cp312, for the GPU host
#   GPU_BUNDLE_PYTHON=3.11.7 bash scripts/gpu_bundle.sh # the same recipe for another Python (the dry run's)
set -euo pipefail
cd "$(dirname "$0")/.."

PYV="${GPU_BUNDLE_PYTHON:-3.12.3}"           # the host's python3 (a full version: pip reads 3.12 as 3.12.0)
MAJMIN="$(echo "$PYV" | cut -d. -f1-2)"
TAG="cp${MAJMIN/./}"
OUT="${GPU_BUNDLE_OUT:-build/gpu-bundle-$TAG.tar.xz}"
WORK="build/gpu-bundle-$TAG"
LIMIT=$((24 * 1024 * 1024))
BNB_KEEP="${GPU_BUNDLE_BNB:-cuda130}"     # the host's torch is +cu130: bitsandbytes loads libbitsandbytes_cuda130.so
PY="${PY:-.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
# Requirements in the wheels' metadata that a headless run never imports, so they are not carried:
# jedi and parso (completion in IPython and marimo's editor; IPython checks with find_spec), debugpy
# (ipykernel's debugger, imported in a try).
NOT_CARRIED="jedi parso debugpy"

# bitsandbytes is tagged manylinux_2_24 and pyzmq manylinux_2_28: pip matches each platform tag exactly.
PLATFORMS=()
for p in manylinux1 manylinux2010 manylinux2014 manylinux_2_17 manylinux_2_24 manylinux_2_26 manylinux_2_27 manylinux_2_28; do
    PLATFORMS+=(--platform "${p}_x86_64")
done
TARGET=(--only-binary=:all: --python-version "$PYV" --implementation cp --abi "$TAG" --abi abi3 --abi none "${PLATFORMS[@]}")

rm -rf "$WORK"
mkdir -p "$WORK/wheels"
if grep -qiE '^torch[=<> ]' scripts/gpu_bundle.txt; then
    echo "gpu-bundle: scripts/gpu_bundle.txt names torch; the host's own build is used, never carried" >&2
    exit 2
fi
echo "gpu-bundle: downloading $(grep -cE '^[a-zA-Z]' scripts/gpu_bundle.txt) packages for CPython $PYV, x86-64 manylinux"
"$PY" -m pip download --disable-pip-version-check -q --no-deps "${TARGET[@]}" -d "$WORK/wheels" -r scripts/gpu_bundle.txt

# every carried wheel's requirements: met by another carried wheel, by the host, or knowingly left out
"$PY" - "$WORK/wheels" "$PYV" "$NOT_CARRIED" <<'PYEOF'
import re, sys, zipfile
from pathlib import Path
try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version
except ImportError:                     # pip's own copy
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name
    from pip._vendor.packaging.version import Version

wheels, pyv, not_carried = Path(sys.argv[1]), sys.argv[2], set(sys.argv[3].split())
env = {"python_version": ".".join(pyv.split(".")[:2]), "python_full_version": pyv, "sys_platform": "linux", "platform_system": "Linux",
       "platform_machine": "x86_64", "os_name": "posix", "implementation_name": "cpython",
       "platform_python_implementation": "CPython", "extra": ""}
carried = {}
for whl in sorted(wheels.glob("*.whl")):
    with zipfile.ZipFile(whl) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    name = re.search(r"^Name: (.+)$", meta, re.M).group(1).strip()
    carried[canonicalize_name(name)] = (Version(re.search(r"^Version: (.+)$", meta, re.M).group(1).strip()),
                                        re.findall(r"^Requires-Dist: (.+)$", meta, re.M))
host = {}
for line in Path("scripts/gpu_host.txt").read_text().splitlines():
    line = line.split("#")[0].strip()
    if line:
        r = Requirement(line)
        host[canonicalize_name(r.name)] = r.specifier
wanted = {canonicalize_name(Requirement(l.split("#")[0]).name)
          for l in Path("scripts/gpu_bundle.txt").read_text().splitlines() if l.split("#")[0].strip()}
problems = [f"{n} is in gpu_bundle.txt but no wheel came" for n in sorted(wanted - set(carried))]
for name, (version, reqs) in sorted(carried.items()):
    for text in reqs:
        r = Requirement(text)
        if r.marker is not None and not r.marker.evaluate(env):
            continue
        dep = canonicalize_name(r.name)
        if dep == "torch" or dep in not_carried:
            continue
        if dep in carried:
            if r.specifier and carried[dep][0] not in r.specifier:
                problems.append(f"{name} {version} needs {r}, the bundle has {dep} {carried[dep][0]}")
        elif dep in host:
            pinned = [s.version for s in host[dep] if s.operator == "=="]
            if pinned and r.specifier and Version(pinned[0]) not in r.specifier and dep not in carried:
                problems.append(f"{name} {version} needs {r}, the host has {dep} {pinned[0]}")
        else:
            problems.append(f"{name} {version} needs {r}: neither carried nor on the host (gpu_host.txt)")
if problems:
    print("gpu-bundle: requirements not met:\n  " + "\n  ".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"gpu-bundle: {len(carried)} packages, every requirement met by the bundle or the host")
PYEOF

# Install into one folder, for that Python (pip installs for another Python only with --target and wheels).
"$PY" -m pip install --disable-pip-version-check -q --no-index --no-deps --no-compile "${TARGET[@]}" \
    --target "$WORK/site" "$WORK"/wheels/*.whl
site="$WORK/site"

# ---- strip what a headless run never loads (sizes installed, before compression) -----------------
rm -rf "$site/bin"                                  # console scripts, their #! names this machine's Python
rm -rf "$site/marimo/_lsp"                          # marimo's language servers (Copilot's alone ~87 MB)
rm -rf "$site/marimo/_static"                       # marimo's editor front-end (~27 MB): `marimo edit` only
rm -rf "$site/pycountry/locales"                    # pycountry's translations (~22 MB); its databases stay
# the one tokenizer helpers loads (helpers.measure.local_models.TOKENIZER_FILE, read without importing helpers)
tokenizer="$("$PY" -c "import ast; print(next(n.value.value for n in ast.parse(open('helpers/measure/local_models.py').read()).body
    if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', '') == 'TOKENIZER_FILE'))")"
find "$site/mistral_common/data" -maxdepth 1 -type f ! -name "$tokenizer" -delete   # other Mistral tokenizers (~36 MB)
for lib in "$site"/bitsandbytes/libbitsandbytes_*.so; do     # other CUDA and ROCm versions (~150 MB)
    case "$(basename "$lib")" in
        "libbitsandbytes_$BNB_KEEP.so" | libbitsandbytes_cpu.so) ;;
        *) rm -f "$lib" ;;
    esac
done
find "$site" -name __pycache__ -type d -prune -exec rm -rf {} +
[ -d "$site/share/jupyter/nbconvert/templates/lab" ] || { echo "gpu-bundle: nbconvert's lab template is missing" >&2; exit 1; }
[ -f "$site/mistral_common/data/$tokenizer" ] || { echo "gpu-bundle: $tokenizer is missing" >&2; exit 1; }
[ -f "$site/bitsandbytes/libbitsandbytes_$BNB_KEEP.so" ] || { echo "gpu-bundle: libbitsandbytes_$BNB_KEEP.so is missing" >&2; exit 1; }

mkdir -p "$(dirname "$OUT")"
tar -C "$site" -cf - . | xz -T0 -6 > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
size=$(stat -c %s "$OUT")
installed=$(du -sb "$site" | cut -f1)
echo "gpu-bundle: $OUT $((size / 1024)) KiB ($(( installed / 1024 / 1024 )) MiB unpacked, $(ls "$WORK/wheels" | wc -l) packages)"
if [ "$size" -gt "$LIMIT" ]; then
    echo "gpu-bundle: $OUT is $size bytes, over the 24 MiB limit" >&2
    exit 1
fi
