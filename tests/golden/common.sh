# shellcheck shell=bash disable=SC2034
# golden/common.sh -- shared by check.sh and update.sh (sourced, not run).
#
# scenarios.txt holds one scenario per line: NAME<TAB>ARGS, where ARGS are the arguments of
# "dtsim simulate", split on whitespace (no quoting). Blank lines and lines starting with # are ignored.
# Scenarios run with the golden directory as working directory, so model/plan files are written ./FILE
# and the same relative path appears in every run. The scripts add --out DIR --no-trace --quiet.

GOLDEN_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SCENARIOS="$GOLDEN_DIR/scenarios.txt"
EXPECTED_DIR="$GOLDEN_DIR/expected"

# golden_dtsim_path PATH -- absolute path of the dtsim binary (we cd into GOLDEN_DIR to run it).
golden_dtsim_path() {
  local p=$1
  if [[ $p == */* ]]; then
    p="$(cd "$(dirname "$p")" && pwd)/$(basename "$p")"
  fi
  if ! command -v "$p" >/dev/null; then
    echo "golden: dtsim binary '$1' not found or not executable" >&2
    return 1
  fi
  echo "$p"
}

# golden_scenarios -- prints "NAME<TAB>ARGS" for each scenario; fails on a malformed or duplicate name.
golden_scenarios() {
  local line name args lineno=0
  local -A seen=()
  while IFS= read -r line || [[ -n $line ]]; do
    lineno=$((lineno + 1))
    [[ -z ${line//[[:space:]]/} || $line == \#* ]] && continue
    if [[ $line != *$'\t'* ]]; then
      echo "golden: scenarios.txt:$lineno: expected NAME<TAB>ARGS" >&2
      return 1
    fi
    name=${line%%$'\t'*}
    args=${line#*$'\t'}
    if [[ ! $name =~ ^[A-Za-z0-9_.-]+$ ]]; then
      echo "golden: scenarios.txt:$lineno: bad scenario name '$name'" >&2
      return 1
    fi
    if [[ -n ${seen[$name]:-} ]]; then
      echo "golden: scenarios.txt:$lineno: duplicate scenario name '$name'" >&2
      return 1
    fi
    seen[$name]=1
    printf '%s\t%s\n' "$name" "$args"
  done <"$SCENARIOS"
}

# golden_run DTSIM NAME ARGS OUTDIR -- runs one scenario, writing OUTDIR/summary.json. stderr passes through.
golden_run() {
  local dtsim=$1 name=$2 args=$3 out=$4
  local -a argv
  read -ra argv <<<"$args"
  (cd "$GOLDEN_DIR" && "$dtsim" simulate "${argv[@]}" --out "$out" --no-trace --quiet)
}
