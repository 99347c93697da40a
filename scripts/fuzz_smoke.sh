#!/usr/bin/env bash
# Fuzz smoke test (CI, from scripts/test.sh): builds the libFuzzer targets (fuzz/, clang, ASan + UBSan) into
# build-fuzz, builds their seed corpus (fuzz/make_corpus.sh) and runs every target for a few seconds on it
# (fuzz/run.sh). Skipped, with a message, where clang++ or the libFuzzer runtime is missing (setup.sh installs
# clang and libclang-rt-14-dev).
# Environment: DTSIM_FUZZ_DIR (default build-fuzz), DTSIM_FUZZ_SECONDS (per target, default 15), JOBS (default nproc),
# DTSIM_GRAMMAR_SEEDS (default "1 2") and DTSIM_GRAMMAR_CASES (per seed, default 250) for fuzz/input_grammar.py.
# Build cost (CI time): -g1 (line tables, all a report's stack needs), the precompiled common headers and a unity
# build, as in scripts/sanitize.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${DTSIM_FUZZ_DIR:-build-fuzz}
CXX_FUZZ=${CXX_FUZZ:-clang++}
if ! command -v "$CXX_FUZZ" >/dev/null; then
  echo "fuzz smoke: skipped ($CXX_FUZZ not found)"
  exit 0
fi
rt=$("$CXX_FUZZ" -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null || true)
if [[ ! -f $rt ]]; then
  rt=$("$CXX_FUZZ" -print-resource-dir 2>/dev/null)/lib/linux/libclang_rt.fuzzer-x86_64.a
  if [[ ! -f $rt ]]; then
    echo "fuzz smoke: skipped (no libclang_rt.fuzzer for $CXX_FUZZ; Debian: apt-get install libclang-rt-14-dev)"
    exit 0
  fi
fi
start=$SECONDS
CC=${CC_FUZZ:-clang} CXX=$CXX_FUZZ cmake -S . -B "$DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DBUILD_TESTING=OFF -DDTSIM_FUZZ=ON -DDTSIM_BUILD_PROFILER=OFF -DDTSIM_PCH=ON -DDTSIM_PYTHON=OFF \
  -DCMAKE_UNITY_BUILD=ON >/dev/null
cmake --build "$DIR" --target fuzzers -j "${JOBS:-$(nproc)}"
built=$((SECONDS - start))
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
fuzz/make_corpus.sh "$corpus"
fuzz/run.sh --seconds "${DTSIM_FUZZ_SECONDS:-15}" --jobs "${JOBS:-$(nproc)}" --dict "$DIR" "$corpus"
# The input-grammar fuzzer (fuzz/input_grammar.py, issue Guard) on the release binary: random flag combinations and
# mutated JSON inputs through the whole CLI; any exit code but 0 and 2, a crash, output left by a failed run, a
# summary that breaks an invariant or a run dying of bad_alloc fails the stage. Fixed seeds: the same cases every run.
DTSIM_BIN=${DTSIM_BUILD_DIR:-build}/bin/dtsim
if [[ -x $DTSIM_BIN ]]; then
  for seed in ${DTSIM_GRAMMAR_SEEDS:-1 2}; do
    python3 fuzz/input_grammar.py --dtsim "$DTSIM_BIN" --seed "$seed" --cases "${DTSIM_GRAMMAR_CASES:-250}" \
      --timeout 60 --jobs "${JOBS:-$(nproc)}"
  done
else
  echo "fuzz smoke: input grammar skipped ($DTSIM_BIN not built)"
fi
echo "fuzz smoke: passed (build ${built}s, total $((SECONDS - start))s)"
