#!/usr/bin/env bash
# Sanitizer run (CI, from scripts/test.sh): the whole project built with AddressSanitizer + UndefinedBehaviorSanitizer
# (GCC, -O1 -g1 -fno-omit-frame-pointer, _GLIBCXX_ASSERTIONS; every report is fatal; -g1 keeps the line tables a
# report's stack needs and compiles 25-30% faster than -g: 16.5 s against 24.0 s for lowering.cpp) into build-asan, and the whole
# CPU test suite run on it (label gpu excluded, as in scripts/test.sh; cli_sweep_mpi without leak detection, below;
# the 32-GPU UniAP planner contract case, 5.4 min under ASan and the longest test there, runs in the release suite
# only — the 8- and 16-GPU UniAP cases keep the solver under the sanitizers; likewise the NVL72 capacity stepping
# case, 40 s under ASan against 2.4 s released, whose plan searches the other capacity tests cover there; and
# cli_determinism, ~140 s under ASan, which runs every command twice to compare bytes — a property of the release
# build; the code paths it drives are the ones cli_smoke and the goldens run under ASan; and two of the three
# CalibrateRuns fits, 64-67 s each under ASan, 300-400 evaluations of the same fit loop that
# CalibrateRuns.HardwareOnlyFitLeavesEachRunsStackItsOwn runs there).
# A unity build (CMake's UNITY_BUILD: each library compiled as a few merged sources; the tests are one source each),
# as scripts/test.sh's release build.
# Environment: DTSIM_ASAN_DIR (default build-asan), JOBS (default nproc), DTSIM_ASAN_EXCLUDE (ctest -LE regex).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${DTSIM_ASAN_DIR:-build-asan}
start=$SECONDS
# DTSIM_PCH: the common heavy headers precompiled (12-14% less compile time, cmake/DtsimLayers.cmake). Its one known
# problem, a false GCC 12 -Wstringop-overflow under -O3 -Werror, cannot arise at -O1 without -Werror; the ASan + UBSan
# build and suite passed with it on 2026-11-28 (689 tests, 32 min to build on one shared core).
cmake -S . -B "$DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DBUILD_TESTING=ON \
      -DDTSIM_SANITIZE=address,undefined -DDTSIM_PCH=ON -DCMAKE_UNITY_BUILD=ON >/dev/null
# GCC's ASan runtime warns at link time about tmpnam & co. in libasan itself; keep the log readable.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
build_rc=0
cmake --build "$DIR" -j "${JOBS:-$(nproc)}" >"$log" 2>&1 || build_rc=$?
grep -v "libasan.so.*: warning: the use of" "$log" | tail -n 40
[[ $build_rc -eq 0 ]] || { echo "sanitize: build failed" >&2; exit 1; }
built=$((SECONDS - start))
# LeakSanitizer on, every report fatal. scripts/sanitizers/lsan.supp suppresses leaks inside third-party libraries
# only, each with its reason.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/sanitizers/lsan.supp:print_suppressions=0}
ctest --test-dir "$DIR" --output-on-failure -j "${JOBS:-$(nproc)}" -LE "${DTSIM_ASAN_EXCLUDE:-gpu}" \
      -E '^cli_sweep_mpi$|^cli_determinism$|PlannerContract.CandidatesAreValidAndSimulate/uniap_m7b_h100_32gpu|CapacityDeadline.NvlRacksAreSteppedInWholeRacks|CalibrateRuns.RecoversTheTruth|CalibrateRuns.NoiseWidens'
# dtsim sweep under mpirun: Open MPI leaks strdup'ed strings in MCA plugins it dlclose's before the leak report, so
# the stacks end in <unknown module> and no suppression can name them; memory errors are still fatal there.
ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0 ctest --test-dir "$DIR" --output-on-failure -R '^cli_sweep_mpi$'
echo "sanitize: passed (build ${built}s, total $((SECONDS - start))s)"
