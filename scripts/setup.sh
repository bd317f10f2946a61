#!/usr/bin/env bash
# Create .venv at the repository root when missing and install what the workshop needs.
# - A host that already has torch (Colab, Molab, a GPU box) keeps it: the venv sees the system
#   site-packages and pip does not replace torch.
# - A machine without torch gets a CPU build pinned to TORCH_VERSION, so pip never pulls a
#   multi-GB CUDA wheel there (on Linux the "+cpu" wheel from PyTorch's CPU index, TORCH_INDEX_URL
#   to use a mirror); a CUDA host without torch gets PyPI's default (CUDA) build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
VENV=.venv
stamp=$VENV/.workshop-installed
want=$(cat requirements.txt requirements-test.txt pyproject.toml | sha256sum | cut -c1-16)

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c "import torch, helpers" 2>/dev/null; then
  exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
  if "$PY" -c "import torch" 2>/dev/null; then
    echo "setup: this Python already has torch $("$PY" -c 'import torch; print(torch.__version__)'); the venv keeps it"
    "$PY" -m venv --system-site-packages "$VENV"
  else
    "$PY" -m venv "$VENV"
  fi
fi
pip=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)

if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "setup: CUDA GPU found; installing torch with CUDA"
    "${pip[@]}" torch
  elif [ "$(uname -s)" = Linux ]; then
    # PyPI's Linux wheel bundles CUDA (GBs); the CPU build is "+cpu" on PyTorch's CPU index.
    echo "setup: no GPU; installing the CPU build torch==$TORCH_VERSION+cpu"
    # torch alone from there (its dependencies then come from PyPI as usual).
    if "${pip[@]}" --no-deps --retries 1 --timeout 15 "torch==$TORCH_VERSION+cpu" \
         --extra-index-url "${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}" 2>/dev/null; then
      "${pip[@]}" "torch==$TORCH_VERSION+cpu"
    else
      "${pip[@]}" "torch==$TORCH_VERSION"
    fi
  else
    echo "setup: no GPU; installing torch==$TORCH_VERSION (PyPI's macOS and Windows wheels have no CUDA)"
    "${pip[@]}" "torch==$TORCH_VERSION"
  fi
fi

# The requirements never name torch, so an installed torch is kept as it is; packages that depend on
# torch (guidellm, transformers[serving], optimum-quanto) are installed under a constraint that pins the installed build.
# uv installs what pip would, several times faster (downloads in parallel, unpacks from its cache); pip does
# the work where uv cannot be installed (SETUP_INSTALLER=pip asks for pip).
torch_pin=$(mktemp)
"$VENV/bin/python" -c "import torch; print('torch==' + torch.__version__)" > "$torch_pin"
install=("${pip[@]}")
if [ "${SETUP_INSTALLER:-uv}" = uv ] && "${pip[@]}" uv 2>/dev/null; then
  install=("$VENV/bin/uv" pip install -q --compile-bytecode --python "$VENV/bin/python")
fi
"${install[@]}" -r requirements.txt -r requirements-test.txt -c "$torch_pin"
rm -f "$torch_pin"
"${install[@]}" --no-deps -e .
echo "$want" > "$stamp"
"$VENV/bin/python" -c "import torch, transformers, marimo; print(f'setup: torch {torch.__version__}, transformers {transformers.__version__}, marimo {marimo.__version__}')"
