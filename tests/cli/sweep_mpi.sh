#!/usr/bin/env bash
# cli/sweep_mpi.sh DTSIM -- `mpirun -np N dtsim sweep` shards the scenarios over the ranks and gathers results equal
# to a local run's.
#
# A small sweep (GPT-3 1.3B on 16 and 32 GPUs: 24 grid points, two planner scenarios, analytic) runs locally with
# -j 2, then under mpirun with 2 and with 3 ranks (-j 1 each). Each MPI run must leave one results.rank-R.jsonl
# per rank holding exactly the scenarios i with i % N == R, and a results.jsonl / results.csv identical to the
# local run's apart from sim_wall_s. Resuming under mpirun simulates nothing. Exit 77 (skipped) when mpirun is
# not installed or this dtsim was built without MPI (then the run under mpirun must fail with one clear error).
set -euo pipefail

DTSIM=${1:?usage: sweep_mpi.sh /path/to/dtsim}
command -v mpirun >/dev/null || { echo "skip: mpirun not found"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
MPIRUN=(mpirun --oversubscribe)
[[ $(id -u) -eq 0 ]] && MPIRUN+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # containers without CMA: avoid Open MPI's warning

failures=0
ok() { echo "ok  $*"; }
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

cat >"$TMP/spec.json" <<'EOF'
{"schema_version": 1, "models": ["gpt3-1.3b"], "clusters": ["dgx-a100:16", "dgx-a100:32"], "gbs": [64],
 "tp": [1, 2, 4], "pp": [1, 2], "mbs": [1, 2], "planners": ["dapple"], "network": "analytic"}
EOF
strip_wall() { sed -E 's/"sim_wall_s":[^,}]*//' "$1"; }
strip_wall_csv() { python3 -c "
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
k = rows[0].index('sim_wall_s')
for r in rows: print(','.join(r[:k] + r[k + 1:]))" "$1"; }

"$DTSIM" sweep "$TMP/spec.json" -j 2 -q --out "$TMP/local"
n=$(wc -l <"$TMP/local/results.jsonl")
[[ $n -eq 26 ]] && ok "local run: 26 rows" || fail "local run: $n rows, expected 26"

for np in 2 3; do
  out=$TMP/mpi$np
  rc=0
  "${MPIRUN[@]}" -np "$np" "$DTSIM" sweep "$TMP/spec.json" -j 1 -q --out "$out" >"$TMP/mpi$np.log" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then
    if grep -q "built without MPI" "$TMP/mpi$np.log"; then
      echo "skip: this dtsim was built without MPI ($(grep -m1 'error' "$TMP/mpi$np.log"))"
      exit 77
    fi
    fail "mpirun -np $np: exit $rc: $(tail -c 800 "$TMP/mpi$np.log")"
    continue
  fi
  cmp -s <(strip_wall "$TMP/local/results.jsonl") <(strip_wall "$out/results.jsonl") &&
    ok "mpirun -np $np: results.jsonl equals the local run's (apart from sim_wall_s)" ||
    fail "mpirun -np $np: results.jsonl differs from the local run's"
  cmp -s <(strip_wall_csv "$TMP/local/results.csv") <(strip_wall_csv "$out/results.csv") &&
    ok "mpirun -np $np: results.csv equals the local run's" || fail "mpirun -np $np: results.csv differs"
  python3 - "$out" "$np" <<'PY' && ok "mpirun -np $np: rank R's file holds exactly the scenarios i % $np == R" ||
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
for r in range(n):
    idx = [json.loads(l)["index"] for l in open(f"{out}/results.rank-{r}.jsonl")]
    assert idx and all(i % n == r for i in idx), (r, idx)
assert sum(1 for r in range(n) for _ in open(f"{out}/results.rank-{r}.jsonl")) == 26
PY
    fail "mpirun -np $np: rank files do not shard i % N"
done

# Resume under mpirun: nothing left.
"${MPIRUN[@]}" -np 2 "$DTSIM" sweep "$TMP/spec.json" -j 1 --out "$TMP/mpi2" >"$TMP/again.log" 2>&1 || true
grep -q "simulated 0 scenarios" "$TMP/again.log" && ok "mpirun rerun resumes (simulates nothing)" ||
  fail "mpirun rerun: $(tail -c 600 "$TMP/again.log")"

if [[ $failures -ne 0 ]]; then
  echo "sweep_mpi: $failures failures"
  exit 1
fi
echo "sweep_mpi: all checks passed"
