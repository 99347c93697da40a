#!/usr/bin/env bash
# cli/sweep_resume.sh DTSIM -- `dtsim sweep` survives kill -9 of a worker and of the driver, and resumes exactly.
#
# A 48-point GPT-3 175B sweep (34 simulated after the memory pre-filter, analytic network, -j 2) is run once
# uninterrupted (the reference) and once with interruptions: a worker is killed with kill -9 while the run is in
# flight (its scenario is retried), then the driver itself, after which half a row is appended to results.jsonl
# as if a write had been cut. Rerunning the same command must drop the torn line, simulate only what is missing,
# and end with the reference's rows: same ids, same metrics (sim_wall_s excluded), no id twice, the same sorted
# results.jsonl and results.csv apart from sim_wall_s. Also: a worker that dies on the same scenario twice gives
# a "crashed" row (DTSIM_SWEEP_TEST_CRASH), the rest of the sweep is unaffected; a third run simulates nothing;
# an output directory of another spec is refused.
set -euo pipefail

DTSIM=${1:?usage: sweep_resume.sh /path/to/dtsim}
TMP=$(mktemp -d)
driver=""
trap '[[ -n $driver ]] && kill -9 "$driver" 2>/dev/null; rm -rf "$TMP"' EXIT

failures=0
ok() { echo "ok  $*"; }
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

cat >"$TMP/spec.json" <<'EOF'
{"schema_version": 1, "models": ["gpt3-175b"], "gpus": [1024], "gbs": [768, 1536], "tp": [8], "pp": [4, 8, 16],
 "mbs": [1, 2], "recompute": ["selective", "full"], "zero": [0, 1], "network": "analytic"}
EOF

# Row set of a results.jsonl without sim_wall_s, one canonical line per row, sorted; exits 1 on a duplicate id.
rows() {
  python3 - "$1" <<'PY'
import json, sys
seen, out = set(), []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["id"] in seen:
        sys.exit("duplicate id " + r["id"])
    seen.add(r["id"])
    r.pop("sim_wall_s")
    out.append(json.dumps(r, sort_keys=True))
print("\n".join(sorted(out)))
PY
}
strip_wall() { sed -E 's/"sim_wall_s":[^,}]*//' "$1"; }
strip_wall_csv() { python3 -c "
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
k = rows[0].index('sim_wall_s')
for r in rows: print(','.join(r[:k] + r[k + 1:]))" "$1"; }
lines() { [[ -f $1 ]] && wc -l <"$1" || echo 0; }

# 1. Reference.
"$DTSIM" sweep "$TMP/spec.json" -j 2 -q --out "$TMP/ref"
n_ref=$(lines "$TMP/ref/results.jsonl")
[[ $n_ref -eq 34 ]] && ok "reference: 34 rows" || fail "reference: $n_ref rows, expected 34"

# 2. Interrupted run: kill -9 a worker, then the driver.
OUT=$TMP/run
"$DTSIM" sweep "$TMP/spec.json" -j 2 -q --out "$OUT" &
driver=$!
disown "$driver"  # no "Killed" job report; the kill is the point
wait_rows() {  # N: wait until results.jsonl has N rows or the driver is gone
  for _ in $(seq 1 1500); do
    [[ $(lines "$OUT/results.jsonl") -ge $1 ]] && return 0
    kill -0 "$driver" 2>/dev/null || return 0
    sleep 0.01
  done
}
wait_rows 3
worker=$(pgrep -P "$driver" | head -n 1 || true)
if [[ -n $worker ]]; then
  kill -9 "$worker"
  ok "killed worker $worker with $(lines "$OUT/results.jsonl") rows written"
else
  fail "no worker process found under driver $driver"
fi
wait_rows 12
if kill -9 "$driver" 2>/dev/null; then
  ok "killed the driver with $(lines "$OUT/results.jsonl") of 34 rows written"
else
  fail "the driver finished before it could be killed (scenarios too fast for this test)"
fi
while kill -0 "$driver" 2>/dev/null; do sleep 0.01; done
driver=""
sleep 0.2  # workers die with the driver (PR_SET_PDEATHSIG)
[[ -z $(pgrep -f -- "--out $OUT\$" || true) ]] && ok "no worker outlived the driver" || fail "workers outlived the driver"
[[ ! -f $OUT/sweep.json ]] && ok "interrupted run left no sweep.json" || fail "interrupted run wrote sweep.json"
rows "$OUT/results.jsonl" >/dev/null && ok "interrupted results have no duplicate id" || fail "duplicate id after kills"
printf '{"id":"0123456789abcdef","index":7,"model":"gpt3-1' >>"$OUT/results.jsonl"  # a torn write

# 3. Resume.
before=$(($(lines "$OUT/results.jsonl")))
"$DTSIM" sweep "$TMP/spec.json" -j 2 --out "$OUT" >"$TMP/resume.out" 2>&1
grep -q "simulated $((34 - before)) scenarios" "$TMP/resume.out" && ok "resume simulated only the $((34 - before)) missing scenarios" ||
  fail "resume: $(grep simulated "$TMP/resume.out")"
if diff <(rows "$TMP/ref/results.jsonl") <(rows "$OUT/results.jsonl") >"$TMP/diff"; then
  ok "resumed row set (ids + metrics) equals the uninterrupted run's, no duplicates"
else
  fail "resumed rows differ: $(head -c 600 "$TMP/diff")"
fi
cmp -s <(strip_wall "$TMP/ref/results.jsonl") <(strip_wall "$OUT/results.jsonl") &&
  ok "results.jsonl identical apart from sim_wall_s" || fail "results.jsonl differs beyond sim_wall_s"
cmp -s <(strip_wall_csv "$TMP/ref/results.csv") <(strip_wall_csv "$OUT/results.csv") &&
  ok "results.csv identical apart from sim_wall_s" || fail "results.csv differs beyond sim_wall_s"
python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['counts']; sys.exit(0 if c['rows']==34 and c['prefiltered']==14 and c['status']['ok']==34 else 1)" \
  "$OUT/sweep.json" && ok "sweep.json counts: 34 rows ok, 14 pre-filtered" || fail "sweep.json counts wrong"

# 4. Nothing left to do.
"$DTSIM" sweep "$TMP/spec.json" -j 2 --out "$OUT" >"$TMP/again.out" 2>&1
grep -q "simulated 0 scenarios" "$TMP/again.out" && ok "a finished sweep reruns nothing" || fail "rerun: $(cat "$TMP/again.out")"

# 5. A worker that dies twice on one scenario: a crashed row, everything else as in the reference.
DTSIM_SWEEP_TEST_CRASH=3 "$DTSIM" sweep "$TMP/spec.json" -j 2 -q --out "$TMP/crash"
python3 - "$TMP/crash/results.jsonl" "$TMP/ref/results.jsonl" <<'PY' && ok "scenario 3 crashed twice -> status crashed, other rows unchanged" || fail "crash handling"
import json, sys
crash = {json.loads(l)["index"]: json.loads(l) for l in open(sys.argv[1])}
ref = {json.loads(l)["index"]: json.loads(l) for l in open(sys.argv[2])}
assert crash.keys() == ref.keys()
assert crash[3]["status"] == "crashed" and crash[3]["iteration_time_s"] is None and "signal 9" in crash[3]["error"]
for i in ref:
    if i != 3:
        a, b = dict(crash[i]), dict(ref[i])
        a.pop("sim_wall_s"), b.pop("sim_wall_s")
        assert a == b, i
PY

# 6. Another spec's directory is refused.
sed 's/"gbs": \[768, 1536\]/"gbs": [768]/' "$TMP/spec.json" >"$TMP/other.json"
rc=0
"$DTSIM" sweep "$TMP/other.json" -q --out "$OUT" 2>"$TMP/other.err" || rc=$?
[[ $rc -eq 2 ]] && grep -q "not scenarios of this spec" "$TMP/other.err" && ok "another spec's output directory is refused" ||
  fail "other spec: exit $rc: $(cat "$TMP/other.err")"

if [[ $failures -ne 0 ]]; then
  echo "sweep_resume: $failures failures"
  exit 1
fi
echo "sweep_resume: all checks passed"
