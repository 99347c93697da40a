#!/usr/bin/env bash
# golden/update.sh DTSIM -- regenerates golden/expected/NAME.summary.json for every scenario in scenarios.txt.
#
# Run this only when a change of the simulator's results is intended, then review "git diff tests/golden"
# and explain the change in the commit. The expected files are replaced only if every scenario runs; expected
# files whose scenario no longer exists are removed.
set -euo pipefail

# shellcheck source=SCRIPTDIR/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
DTSIM=$(golden_dtsim_path "${1:?usage: update.sh /path/to/dtsim}")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

mkdir -p "$TMP/new"
golden_scenarios >"$TMP/list"
count=0
while IFS=$'\t' read -r name args; do
  if ! golden_run "$DTSIM" "$name" "$args" "$TMP/run/$name" </dev/null; then
    echo "FAIL $name: dtsim failed; nothing updated"
    exit 1
  fi
  cp "$TMP/run/$name/summary.json" "$TMP/new/$name.summary.json"
  count=$((count + 1))
done <"$TMP/list"

mkdir -p "$EXPECTED_DIR"
for f in "$EXPECTED_DIR"/*.summary.json; do
  [[ -e $f ]] || continue
  if [[ ! -e $TMP/new/$(basename "$f") ]]; then
    rm "$f"
    echo "removed $(basename "$f") (no such scenario)"
  fi
done
for f in "$TMP/new"/*.summary.json; do
  dest="$EXPECTED_DIR/$(basename "$f")"
  if [[ -e $dest ]] && cmp -s "$f" "$dest"; then
    echo "unchanged $(basename "$f")"
  else
    cp "$f" "$dest"
    echo "updated   $(basename "$f")"
  fi
done
echo "golden: $count expected files in $EXPECTED_DIR"
