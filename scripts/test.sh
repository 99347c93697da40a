#!/usr/bin/env bash
# Builds dtsim (installing packages if needed, see setup.sh) and runs the whole CPU test suite with ctest.
# GPU tests (label gpu) are excluded here; on a GPU machine run `ctest --test-dir build -L gpu`.
set -euo pipefail
cd "$(dirname "$0")/.."
# A unity build of the libraries (about half their compile time on 2 cores); DTSIM_UNITY=OFF keeps one object per
# source for incremental work in an existing build directory.
DTSIM_WERROR=${DTSIM_WERROR:-ON} DTSIM_UNITY=${DTSIM_UNITY:-ON} scripts/setup.sh --tests
ctest --test-dir "${DTSIM_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" -LE gpu
# Every tracked C++ file as .clang-format says, and clang-tidy (.clang-tidy) without a finding over every
# translation unit (each finding or differing file is listed). DTSIM_LINT=0 skips both.
if [ "${DTSIM_LINT:-1}" = 1 ]; then LINT_VERBOSE=1 scripts/lint.sh --strict; fi
# The same suite under ASan + UBSan (build-asan), then every fuzz target for 15 s on its seeds (build-fuzz, clang):
# scripts/sanitize.sh and scripts/fuzz_smoke.sh. DTSIM_SANITIZE_CI=0 / DTSIM_FUZZ_SMOKE=0 skip them.
if [ "${DTSIM_SANITIZE_CI:-1}" = 1 ]; then scripts/sanitize.sh; fi
if [ "${DTSIM_FUZZ_SMOKE:-1}" = 1 ]; then scripts/fuzz_smoke.sh; fi
