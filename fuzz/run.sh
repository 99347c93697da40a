#!/usr/bin/env bash
# fuzz/run.sh [--seconds N] [--jobs J] [--dict] BUILD_DIR CORPUS_DIR [TARGET...] -- runs libFuzzer targets.
#
# Each target (default: every fuzz_* executable in BUILD_DIR/fuzz) runs for N seconds (default 15) on a scratch
# copy of CORPUS_DIR/<target> (the seeds are not modified), J targets at a time (default 2). Prints one line per
# target (executions, executions per second, new corpus units) and, for a finding, the reproducer; exits 1 if any
# target found a crash, leak, timeout or sanitizer report. Artifacts go to $FUZZ_ARTIFACTS (default a temporary
# directory, printed). Extra libFuzzer flags: $FUZZ_FLAGS.
set -euo pipefail
seconds=15 jobs=2 dict=0
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --dict) dict=1; shift ;;
    *) echo "fuzz/run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
BUILD=${1:?usage: fuzz/run.sh [--seconds N] [--jobs J] [--dict] BUILD_DIR CORPUS_DIR [TARGET...]}
CORPUS=${2:?usage: fuzz/run.sh [--seconds N] [--jobs J] [--dict] BUILD_DIR CORPUS_DIR [TARGET...]}
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in "$BUILD"/fuzz/fuzz_*; do [[ -x $f ]] && targets+=("$(basename "$f")"); done
fi
[[ ${#targets[@]} -gt 0 ]] || { echo "fuzz/run.sh: no fuzz targets in $BUILD/fuzz" >&2; exit 2; }
WORK=$(mktemp -d)
ART=${FUZZ_ARTIFACTS:-$WORK/artifacts}
mkdir -p "$ART"
trap 'rm -rf "$WORK"' EXIT

run_one() {
  local t=$1 bin="$BUILD/fuzz/$1" corpus="$WORK/corpus/$1" log="$WORK/$1.log"
  mkdir -p "$corpus"
  [[ -d $CORPUS/$t ]] && cp -r "$CORPUS/$t/." "$corpus/"
  local -a flags=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1
                  -artifact_prefix="$ART/$t-")
  [[ $dict = 1 && $t != fuzz_archive && $t != fuzz_chakra_et ]] && flags+=(-dict="$HERE/json.dict")
  # shellcheck disable=SC2086
  if "$bin" "${flags[@]}" ${FUZZ_FLAGS:-} "$corpus" >"$log" 2>&1; then
    local rc=0
  else
    local rc=$?
  fi
  local execs rate units
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  units=$(sed -n 's/^stat::new_units_added: *//p' "$log" | tail -1)
  if [[ $rc -eq 0 ]]; then
    printf 'ok    %-18s %9s executions %6s exec/s %5s new units (%ss)\n' "$t" "${execs:-?}" "${rate:-?}" "${units:-?}" "$seconds"
  else
    printf 'FAIL  %-18s exit %s after %s executions\n' "$t" "$rc" "${execs:-?}"
    grep -E -m8 'what\(\)|runtime error|ERROR: |SUMMARY|Test unit written|==[0-9]+==.*(leak|timeout)' "$log" | sed 's/^/      /'
    local a
    a=$(ls "$ART/$t-"* 2>/dev/null | head -1 || true)
    [[ -n $a ]] && echo "      reproduce: $bin $a"
    return 1
  fi
}
export -f run_one
export BUILD CORPUS WORK ART seconds dict HERE FUZZ_FLAGS
status=0
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ {} || status=1
[[ $status -eq 0 ]] || echo "fuzz: findings; artifacts in $ART (kept: set FUZZ_ARTIFACTS to keep them elsewhere)"
if [[ $status -ne 0 && -z ${FUZZ_ARTIFACTS:-} ]]; then
  keep=$(mktemp -d /tmp/dtsim-fuzz-artifacts.XXXXXX)
  cp -r "$ART/." "$keep/" && echo "fuzz: artifacts copied to $keep"
fi
exit $status
