#!/usr/bin/env bash
# cli/chakra_export.sh DTSIM -- `dtsim simulate --export-chakra` and `dtsim replay` of its files, from the command
# line: exit codes, the files written (one <prefix>.<rank>.et per rank and the comm-group JSON, nothing else, no
# temporaries), byte-identical on a second run, --out kept apart from the export, the replayed iteration time
# within 1% of the simulated one, and bad input as one "dtsim: error:" line with exit code 2 and nothing written.
set -euo pipefail

DTSIM=${1:?usage: chakra_export.sh /path/to/dtsim}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

failures=0
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}
ok() { echo "ok  $*"; }

RUN=(simulate --model gpt3-1.3b --cluster dgx-a100:8 --tp 2 --pp 2 --dp 2 --mbs 2 --gbs 16 --network analytic)

# 1. Export (with --out beside it), exit 0, exactly the expected files.
rc=0
"$DTSIM" "${RUN[@]}" --export-chakra "$TMP/a" --out "$TMP/out" >"$TMP/a.stdout" 2>"$TMP/a.stderr" || rc=$?
expected="dtsim.0.et dtsim.1.et dtsim.2.et dtsim.3.et dtsim.4.et dtsim.5.et dtsim.6.et dtsim.7.et dtsim.comm_group.json"
listing=$(find "$TMP/a" -mindepth 1 -printf "%f\n" | sort | tr '\n' ' ' | sed 's/ $//')
if [[ $rc -ne 0 ]]; then fail "export: exit code $rc: $(cat "$TMP/a.stderr")"
elif [[ $listing != "$expected" ]]; then fail "export: directory holds '$listing'"
elif [[ -s $TMP/a.stderr ]]; then fail "export: stderr not empty: $(cat "$TMP/a.stderr")"
elif ! grep -q "wrote Chakra traces of 8 ranks" "$TMP/a.stdout"; then fail "export: no 'wrote Chakra traces' line"
else ok "export: exit 0, $listing"; fi
out_listing=$(find "$TMP/out" -mindepth 1 -printf "%f\n" | sort | tr '\n' ' ' | sed 's/ $//')
if [[ $out_listing == "summary.json trace.json" ]]; then ok "--out holds only $out_listing"
else fail "--out holds '$out_listing'"; fi

# 2. Deterministic.
"$DTSIM" "${RUN[@]}" --export-chakra "$TMP/b" -q
if diff -r "$TMP/a" "$TMP/b" >/dev/null; then ok "second export byte-identical"; else fail "exports differ"; fi

# 3. Replay: the iteration time within 1% of the simulated one.
rc=0
"$DTSIM" replay --trace "$TMP/a" --out "$TMP/rep" >"$TMP/rep.stdout" 2>&1 || rc=$?
sim_s=$(grep -o '"iteration_time_s": [0-9.e+-]*' "$TMP/out/summary.json" | head -1 | awk '{print $2}')
rep_ns=$(grep -o '"span_ns": [0-9]*' "$TMP/rep/replay.json" | head -1 | awk '{print $2}')
if [[ $rc -ne 0 ]]; then fail "replay: exit code $rc: $(cat "$TMP/rep.stdout")"
elif awk -v s="$sim_s" -v r="$rep_ns" 'BEGIN { e = (r * 1e-9 - s) / s; exit !(e < 0.01 && e > -0.01) }'; then
  ok "replay: $rep_ns ns vs simulated $sim_s s ($(awk -v s="$sim_s" -v r="$rep_ns" 'BEGIN { printf "%+.4f%%", 100 * (r * 1e-9 - s) / s }'))"
else fail "replay: $rep_ns ns vs simulated $sim_s s"; fi
# The .et files given one by one, with the comm-group file named, replay the same.
"$DTSIM" replay --trace "$TMP"/a/dtsim.*.et --comm-groups "$TMP/a/dtsim.comm_group.json" --out "$TMP/rep2" -q
if cmp -s <(grep -v '"source"\|communicator_groups' "$TMP/rep/replay.json") \
  <(grep -v '"source"\|communicator_groups' "$TMP/rep2/replay.json"); then ok "replay of the listed files: same result"
else fail "replay of the listed files differs from the directory's"; fi

# 3b. Re-exporting a smaller run into the directory of a larger export replaces it whole (issue Guard: the old
# ranks' files used to stay, and the directory no longer replayed).
"$DTSIM" "${RUN[@]}" --export-chakra "$TMP/c" -q
"$DTSIM" simulate --model gpt3-1.3b --cluster dgx-a100:4 --tp 2 --pp 2 --dp 1 --mbs 2 --gbs 8 --network analytic \
  --export-chakra "$TMP/c" -q
listing=$(find "$TMP/c" -mindepth 1 -printf "%f\n" | sort | tr '\n' ' ' | sed 's/ $//')
if [[ $listing == "dtsim.0.et dtsim.1.et dtsim.2.et dtsim.3.et dtsim.comm_group.json" ]]; then
  ok "re-export of 4 ranks over 8: $listing"
else fail "re-export of 4 ranks over 8 left '$listing'"; fi
if "$DTSIM" replay --trace "$TMP/c" -q >/dev/null 2>"$TMP/c.stderr"; then ok "the re-exported directory replays"
else fail "the re-exported directory does not replay: $(cat "$TMP/c.stderr")"; fi

# 4. Bad input: one error line, exit 2, nothing written.
expect_error() {
  local name=$1 want=$2 dir=$3
  shift 3
  local rc=0
  "$DTSIM" "$@" >"$TMP/stdout" 2>"$TMP/stderr" || rc=$?
  if [[ $rc -ne 2 ]]; then fail "$name: exit code $rc, expected 2: $(cat "$TMP/stderr")"
  elif [[ $(wc -l <"$TMP/stderr") -ne 1 || -s $TMP/stdout ]]; then fail "$name: expected one stderr line, no stdout"
  elif ! grep -q "^dtsim: error: .*$want" "$TMP/stderr"; then fail "$name: '$(cat "$TMP/stderr")' lacks '$want'"
  elif [[ -e $dir ]]; then fail "$name: $dir was created"
  else ok "$name: $(sed "s|$TMP|\$TMP|g" "$TMP/stderr")"; fi
}
cat >"$TMP/jobs.json" <<'JOBS'
{"schema_version": 1, "jobs": [
  {"name": "a", "model": "gpt3-1.3b", "first_gpu": 0, "plan": {"tp": 1, "pp": 1, "dp": 4, "micro_batch_size": 1,
   "global_batch_size": 4}}]}
JOBS
expect_error "export with --jobs" "cannot be combined with --jobs" "$TMP/x1" \
  simulate --cluster dgx-a100:8 --jobs "$TMP/jobs.json" --export-chakra "$TMP/x1"
expect_error "export of an invalid plan" "tp\*pp\*dp" "$TMP/x2" \
  simulate --model gpt3-1.3b --cluster dgx-a100:8 --tp 2 --pp 2 --dp 4 --gbs 16 --export-chakra "$TMP/x2"
mkdir "$TMP/trunc"
cp "$TMP"/a/* "$TMP/trunc/"
head -c 1000 "$TMP/a/dtsim.3.et" >"$TMP/trunc/dtsim.3.et"
expect_error "replay of a truncated .et" "dtsim.3.et: .*truncated" "$TMP/x3" replay --trace "$TMP/trunc" --out "$TMP/x3"
mkdir "$TMP/missing"
cp "$TMP"/a/dtsim.[0-6].et "$TMP/a/dtsim.comm_group.json" "$TMP/missing/"
expect_error "replay without rank 7" "rank 7, which has no trace" "$TMP/x4" replay --trace "$TMP/missing" --out "$TMP/x4"
expect_error "replay: a Kineto edit on .et" "apply to Kineto traces" "$TMP/x5" \
  replay --trace "$TMP/a" --cpu-scale 2 --out "$TMP/x5"

echo
if [[ $failures -ne 0 ]]; then
  echo "chakra_export: $failures FAILED"
  exit 1
fi
echo "chakra_export: all passed"
