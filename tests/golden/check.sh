#!/usr/bin/env bash
# golden/check.sh DTSIM -- compares each golden scenario's summary.json with its committed reference.
#
# Golden scenarios are small simulations (scenarios.txt; model tiny-2layer.json) whose full summary.json is
# committed under expected/. dtsim is deterministic and its version strings are fixed, so the comparison is
# exact text, with nothing removed: any change of a number, a field or the formatting is a failure that must
# be either fixed or accepted on purpose with update.sh. The first mismatch is shown as a unified diff.
set -euo pipefail

# shellcheck source=SCRIPTDIR/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
DTSIM=$(golden_dtsim_path "${1:?usage: check.sh /path/to/dtsim}")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

golden_scenarios >"$TMP/list"
failures=0
count=0
diff_shown=0
declare -A names=()
while IFS=$'\t' read -r name args; do
  count=$((count + 1))
  names[$name]=1
  expected="$EXPECTED_DIR/$name.summary.json"
  out="$TMP/run/$name"
  if ! golden_run "$DTSIM" "$name" "$args" "$out" </dev/null 2>"$TMP/stderr"; then
    echo "FAIL $name: dtsim failed: $(cat "$TMP/stderr")"
    failures=$((failures + 1))
  elif [[ ! -e $expected ]]; then
    echo "FAIL $name: no expected file tests/golden/expected/$name.summary.json (run golden/update.sh)"
    failures=$((failures + 1))
  elif cmp -s "$expected" "$out/summary.json"; then
    echo "ok  $name"
  else
    echo "FAIL $name: summary.json differs from tests/golden/expected/$name.summary.json"
    if [[ $diff_shown -eq 0 ]]; then
      diff -u --label "expected/$name.summary.json" --label "actual/$name.summary.json" \
        "$expected" "$out/summary.json" || true
      diff_shown=1
    fi
    failures=$((failures + 1))
  fi
done <"$TMP/list"

# An expected file without a scenario is a leftover of a renamed or deleted scenario.
for f in "$EXPECTED_DIR"/*.summary.json; do
  [[ -e $f ]] || continue
  name=$(basename "$f" .summary.json)
  if [[ -z ${names[$name]:-} ]]; then
    echo "FAIL stale expected file expected/$name.summary.json has no scenario in scenarios.txt"
    failures=$((failures + 1))
  fi
done

echo
if [[ $count -eq 0 ]]; then
  echo "golden: no scenarios found in $SCENARIOS"
  exit 1
fi
if [[ $failures -ne 0 ]]; then
  echo "golden: $failures failures in $count scenarios (if the change is intended: bash tests/golden/update.sh DTSIM, review the diff)"
  exit 1
fi
echo "golden: all $count scenarios match"
