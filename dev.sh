#!/usr/bin/env bash
# verishape's two commands for a fresh machine:
#   ./dev.sh demo   set up, then compile a small dynamic-shape program with verishape
#   ./dev.sh test   set up, then run the test suite
# Set-up installs torch==2.13.0 first (a local CPU build on these machines), so the
# project's "torch>=2.11" is already satisfied and never pulls a CUDA build.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}

setup() {
  if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.__version__.split("+")[0] == "2.13.0" else 1)' 2>/dev/null; then
    "$PY" -m pip install --quiet "torch==2.13.0"
  fi
  "$PY" -m pip install --quiet -e ".[dev,triton]"
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
