#!/usr/bin/env bash
# run_pytest.sh PYTHON TESTS_DIR -- runs the Python module's pytest suite with PYTHON (ctest python_api); exit code
# 77 (skipped) when PYTHON has no pytest.
set -euo pipefail
PY=${1:?usage: run_pytest.sh PYTHON TESTS_DIR}
DIR=${2:?usage: run_pytest.sh PYTHON TESTS_DIR}
if ! "$PY" -c 'import pytest' 2>/dev/null; then
  echo "SKIP: $PY has no pytest (Debian: apt-get install python3-pytest)"
  exit 77
fi
exec "$PY" -m pytest -q -p no:cacheprovider "$DIR"
