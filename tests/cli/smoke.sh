#!/usr/bin/env bash
# cli/smoke.sh DTSIM -- the commands work end to end and the output files have the documented shape.
#
# Checks: --help / simulate --help / presets / version exit 0 with the expected content; a simulation writes
# a summary.json that parses as JSON with schema_version 1, a positive iteration time, one entry per GPU in
# "ranks" and the plan echoed in config.plan; trace.json parses as a Chrome trace with complete ("X") events
# carrying pid/tid/ts/dur and args.microbatch, and "memory (GB)" counter ("C") events by category; an out-of-memory plan is
# a result, not an error (exit 0, "OUT OF MEMORY" on stdout, fits_in_memory false, a per-rank oom list);
# --no-trace writes only summary.json; --quiet prints nothing; `plan --precision fp8` prints plans that carry the
# precision; `capacity --gpu gb200` steps in whole 72-GPU racks past one rack and `--gpu b200` (an alias) is known;
# every example sweep spec (examples/sweeps/) expands with --dry-run.
set -euo pipefail

DTSIM=${1:?usage: smoke.sh /path/to/dtsim}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

failures=0
ok() { echo "ok  $*"; }
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

# run NAME ARGS... -- runs dtsim, stdout to $TMP/NAME.out, stderr to $TMP/NAME.err; requires exit 0 and an
# empty stderr. Returns non-zero (after reporting) otherwise, so callers can skip dependent checks.
run() {
  local name=$1
  shift
  local rc=0
  "$DTSIM" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" || rc=$?
  if [[ $rc -ne 0 ]]; then
    fail "$name: exit code $rc: $(head -c 500 "$TMP/$name.err")"
    return 1
  fi
  if [[ -s $TMP/$name.err ]]; then
    fail "$name: unexpected stderr: $(head -c 500 "$TMP/$name.err")"
    return 1
  fi
  return 0
}

# expect_stdout NAME REGEX DESCRIPTION -- $TMP/NAME.out has a line matching the extended REGEX.
expect_stdout() {
  if grep -qE -- "$2" "$TMP/$1.out"; then ok "$1: $3"; else fail "$1: $3 (no line matches '$2')"; fi
}

# pycheck NAME SCRIPT ARGS... -- runs a python check; the script prints failures as "FAIL ..." lines and
# successes as "ok ..." lines; any FAIL line or a python error counts as a failure.
pycheck() {
  local name=$1 script=$2
  shift 2
  local out rc=0
  out=$(python3 -c "$script" "$@" 2>&1) || rc=$?
  [[ -n $out ]] && echo "$out" | sed "s/^ok /ok  $name: /; s/^FAIL /FAIL $name: /"
  if [[ $rc -ne 0 ]] || grep -q '^FAIL' <<<"$out"; then failures=$((failures + 1)); fi
}

# ---- help, presets, version --------------------------------------------------------------------------
if run help --help; then
  expect_stdout help '^usage: dtsim <command>' "usage line"
  expect_stdout help '^  simulate ' "lists the simulate command"
fi
if run simulate_help simulate --help; then
  expect_stdout simulate_help '--model arg' "documents --model"
  expect_stdout simulate_help '--gbs arg' "documents --gbs"
  expect_stdout simulate_help '--out arg' "documents --out"
fi
if run presets presets; then
  expect_stdout presets '^  gpt3-175b ' "lists gpt3-175b"
  expect_stdout presets '^  llama2-70b ' "lists llama2-70b"
  expect_stdout presets '^  dgx-a100:N ' "lists dgx-a100:N"
fi
if run version version; then
  expect_stdout version '^dtsim [0-9]+\.[0-9]+\.[0-9]+ \(SimGrid [0-9.]+\)$' "prints dtsim and SimGrid versions"
fi

# ---- a normal simulation: summary.json and trace.json ------------------------------------------------
OUT="$TMP/sim"
if run simulate simulate --model gpt3-1.3b --cluster dgx-a100:16 --tp 2 --pp 2 --dp 4 --mbs 2 --gbs 64 --out "$OUT"; then
  expect_stdout simulate '^iteration time +[0-9.]+ s( +\(90% interval [0-9.]+-[0-9.]+ s .*\))?$' "prints the iteration time"
  expect_stdout simulate '^memory: fits' "reports that memory fits"
  pycheck summary.json '
import json, sys
d = json.load(open(sys.argv[1]))
def check(cond, what):
    print(("ok " if cond else "FAIL ") + what)
check(d.get("schema") == "dtsim.summary", "schema is dtsim.summary")
check(d.get("schema_version") == 1, "schema_version is 1")
r = d.get("results", {})
check(isinstance(r.get("iteration_time_s"), (int, float)) and r["iteration_time_s"] > 0, "results.iteration_time_s > 0 (%r)" % r.get("iteration_time_s"))
check(r.get("fits_in_memory") is True and r.get("oom") == [], "fits_in_memory true and empty oom list")
ranks = d.get("ranks", [])
check(len(ranks) == 16, "16 entries in ranks (%d)" % len(ranks))
check(sorted(x.get("rank") for x in ranks) == list(range(16)), "ranks are numbered 0..15")
plan = d.get("config", {}).get("plan", {})
check(plan.get("tp") == 2 and plan.get("pp") == 2 and plan.get("dp") == 4, "config.plan is tp 2 pp 2 dp 4")
check(plan.get("num_microbatches") == 8, "config.plan.num_microbatches is 64 / (2 * 4) = 8")
check(len(d.get("stages", [])) == 2, "2 entries in stages")
' "$OUT/summary.json"
  pycheck trace.json '
import json, sys
d = json.load(open(sys.argv[1]))
def check(cond, what):
    print(("ok " if cond else "FAIL ") + what)
ev = d.get("traceEvents")
check(isinstance(ev, list) and len(ev) > 0, "has a non-empty traceEvents list")
ev = ev or []
xs = [e for e in ev if e.get("ph") == "X"]
check(len(xs) > 0, "has complete (ph X) events (%d)" % len(xs))
bad = [e for e in xs if not all(k in e for k in ("pid", "tid", "ts", "dur"))]
check(not bad, "every X event has pid, tid, ts, dur" + ("" if not bad else " (first bad: %r)" % bad[:1]))
neg = [e for e in xs if e.get("ts", 0) < 0 or e.get("dur", 0) < 0]
check(not neg, "no X event has a negative ts or dur")
mb = [e for e in xs if isinstance(e.get("args", {}).get("microbatch"), int)]
check(len(mb) > 0, "X events carry args.microbatch (%d of %d)" % (len(mb), len(xs)))
cs = [e for e in ev if e.get("ph") == "C"]
mem = [e for e in cs if e.get("name") == "memory (GB)"]
check(len(mem) > 0, "has counter (ph C) events named memory (GB): %d" % len(mem))
cats = {"weights", "gradients", "optimizer", "reserved", "activations", "recompute", "gathered_params", "grad_buffers"}
check(all(set(e.get("args", {})) == cats for e in mem), "memory counters carry one series per memory category")
' "$OUT/trace.json"
fi

# ---- out of memory is a result, not an error ---------------------------------------------------------
OOM="$TMP/oom"
if run oom simulate --model gpt3-175b --cluster dgx-a100:64 --tp 8 --pp 8 --dp 1 --mbs 1 --gbs 64 --out "$OOM" --no-trace; then
  ok "oom: exit code 0"
  expect_stdout oom 'OUT OF MEMORY' "prints OUT OF MEMORY"
  pycheck oom '
import json, sys
d = json.load(open(sys.argv[1]))
def check(cond, what):
    print(("ok " if cond else "FAIL ") + what)
r = d["results"]
check(r.get("fits_in_memory") is False, "results.fits_in_memory is false")
oom = r.get("oom")
check(isinstance(oom, list) and len(oom) > 0, "results.oom is a non-empty list (%d entries)" % len(oom or []))
oom = oom or []
check(all(isinstance(e.get("rank"), int) for e in oom), "every oom entry has a rank")
check(all(e.get("excess_bytes", 0) > 0 for e in oom), "every oom entry has excess_bytes > 0")
check(all(abs(e["peak_memory_bytes"] - e["capacity_bytes"] - e["excess_bytes"]) < 1 for e in oom
          if all(k in e for k in ("peak_memory_bytes", "capacity_bytes", "excess_bytes"))),
      "excess_bytes = peak_memory_bytes - capacity_bytes")
' "$OOM/summary.json"
fi

# ---- --no-trace and --quiet --------------------------------------------------------------------------
NT="$TMP/notrace"
if run no_trace simulate --model gpt3-1.3b --cluster dgx-a100:8 --tp 2 --pp 2 --dp 2 --mbs 2 --gbs 16 --out "$NT" --no-trace; then
  listing=$(find "$NT" -mindepth 1 -printf '%f ')
  if [[ $listing == "summary.json " ]]; then ok "no_trace: only summary.json written"; else fail "no_trace: directory holds: $listing"; fi
  expect_stdout no_trace "^wrote $NT/summary.json\$" "stdout names only summary.json"
fi
Q="$TMP/quiet"
if run quiet simulate --model gpt3-1.3b --cluster dgx-a100:8 --tp 2 --pp 2 --dp 2 --mbs 2 --gbs 16 --out "$Q" --quiet; then
  if [[ ! -s $TMP/quiet.out ]]; then ok "quiet: prints nothing"; else fail "quiet: printed: $(head -c 300 "$TMP/quiet.out")"; fi
  if [[ -s $Q/summary.json && -s $Q/trace.json ]]; then ok "quiet: still writes summary.json and trace.json"; else fail "quiet: outputs missing"; fi
fi
if run quiet_short simulate --model gpt3-1.3b --cluster dgx-a100:8 --gbs 8 -q; then
  if [[ ! -s $TMP/quiet_short.out ]]; then ok "quiet_short: -q prints nothing"; else fail "quiet_short: -q printed output"; fi
fi

# ---- link load tracks, the collective, calibrate and jobs commands ----------------------------------
TL="$TMP/links"
if run trace_links simulate --model gpt3-1.3b --cluster dgx-a100:16 --tp 2 --pp 2 --dp 4 --mbs 2 --gbs 64 --out "$TL" --trace-links -q; then
  pycheck trace.json '
import json, sys
d = json.load(open(sys.argv[1]))
def check(cond, what):
    print(("ok " if cond else "FAIL ") + what)
links = [e for e in d["traceEvents"] if e.get("ph") == "C" and e.get("pid") == 1 << 30]
check(len(links) > 0, "trace_links: link load counters present (%d)" % len(links))
eff = json.load(open(sys.argv[2]))["config"]["calibration"]["network"]["intra_bandwidth_efficiency"]
check(all(e["args"]["GB/s"] <= 300.0 * eff * 1.0001 for e in links if e["name"].startswith("nvl")), "trace_links: NVLink load never above the effective port bandwidth (300 GB/s x %.4f)" % eff)
' "$TL/trace.json" "$TL/summary.json"
fi
if run collective collective --cluster dgx-a100:8 --op all-gather --bytes 64MiB --out "$TMP/coll"; then
  expect_stdout collective 'all-gather over 8 GPUs' "collective: names the operation and group"
  if [[ $(wc -l < "$TMP/coll/collective.tsv") -eq 2 ]]; then ok "collective: one row in collective.tsv"; else fail "collective: collective.tsv rows"; fi
fi
HERE=$(cd "$(dirname "$0")/../.." && pwd)
if run calibrate calibrate nccl-tests "$HERE/tests/data/nccl-tests/all_reduce_perf_synthetic.txt" --cluster dgx-a100:8 --out "$TMP/cal"; then
  expect_stdout calibrate 'residuals: mean' "calibrate: reports the residuals"
  if run calibrated_sim simulate --model gpt3-1.3b --cluster dgx-a100:8 --tp 2 --pp 2 --dp 2 --mbs 2 --gbs 16 --calibration "$TMP/cal/calibration.json" -q; then
    ok "calibrate: the fitted calibration file is accepted by simulate"
  fi
fi
if run jobs simulate --cluster dgx-a100:32 --jobs "$HERE/examples/two-jobs-shared-nics.json" --out "$TMP/jobs"; then
  expect_stdout jobs 'slowdown x1.000' "jobs: private links give no slowdown"
  if [[ -s $TMP/jobs/summary.json ]]; then ok "jobs: summary.json written"; else fail "jobs: no summary.json"; fi
fi

# ---- planners with a precision; capacity on NVL72 racks and the b200 alias ---------------------------
if run plan_fp8 plan --planner grid --model llama3-8b --cluster dgx-h100:8 --gbs 16 --precision fp8 --top 3 --out "$TMP/plan_fp8"; then
  expect_stdout plan_fp8 'global batch 16, precision fp8-delayed$' "plan: names the precision"
  expect_stdout plan_fp8 '^ +1\*? tp [0-9]+ pp [0-9]+ dp [0-9]+ ' "plan: prints the candidate plans"
  pycheck plan_fp8 '
import json, sys
d = json.load(open(sys.argv[1]))
def check(cond, what):
    print(("ok " if cond else "FAIL ") + what)
check(len(d["candidates"]) == 3 and d["chosen"] >= 0, "3 candidates simulated, one chosen")
check(all(c["plan"].get("precision") == "fp8-delayed" for c in d["candidates"]), "every candidate carries fp8-delayed")
' "$TMP/plan_fp8/candidates.json"
fi
if run capacity_nvl72 capacity --model llama3-70b --gpu gb200 --tokens 1T --days 30; then
  expect_stdout capacity_nvl72 'on gb200-nvl72 \(gb200\), global batch 288 x 8192' "capacity: NVL72 default batch is 9 x 2^k"
  expect_stdout capacity_nvl72 '^ +144  tp ' "capacity: past one rack the counts are whole racks (144)"
  expect_stdout capacity_nvl72 '^answer: [0-9]+ GPUs' "capacity: NVL72 scan finds an answer"
fi
if run capacity_b200 capacity --model gpt3-1.3b --gpu b200 --tokens 100B --days 3; then
  expect_stdout capacity_b200 'on dgx-b200 \(b200-sxm-180gb\)' "capacity: --gpu b200 (alias) maps to dgx-b200"
fi
# Every example sweep spec expands (examples/sweeps/: the README's default sweep, the speed benchmark's 300 plans).
for spec in "$(cd "$(dirname "$0")/../.." && pwd)"/examples/sweeps/*.json; do
  name=sweep_$(basename "$spec" .json)
  if run "$name" sweep "$spec" --dry-run --out "$TMP/$name"; then
    expect_stdout "$name" '-> [1-9][0-9]* scenarios' "sweep --dry-run: $(basename "$spec") expands to scenarios"
  fi
done

echo
if [[ $failures -ne 0 ]]; then
  echo "smoke: $failures checks FAILED"
  exit 1
fi
echo "smoke: all checks passed"
