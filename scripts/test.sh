#!/usr/bin/env bash
# Builds dtsim (installing packages if needed, see setup.sh) and runs the whole CPU test suite with ctest.
# GPU tests (label gpu) are excluded here; on a GPU machine run `ctest --test-dir build -L gpu`.
set -euo pipefail
cd "$(dirname "$0")/.."
DTSIM_WERROR=${DTSIM_WERROR:-ON} scripts/setup.sh
ctest --test-dir "${DTSIM_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" -LE gpu
