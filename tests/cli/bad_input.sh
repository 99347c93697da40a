#!/usr/bin/env bash
# cli/bad_input.sh DTSIM -- the error contract for bad input.
#
# Every user mistake must end in exactly one line on stderr, "dtsim: error: <what is wrong>", exit code 2,
# nothing on stdout, and no output written: the --out directory is not created, and an existing --out
# directory keeps its previous contents untouched. Each row of the table below is one bad input with a
# substring the message must contain (so the message names the offending field or value). The printed
# "ok  <case>: <stderr>" lines double as documentation of the messages.
set -euo pipefail

DTSIM=${1:?usage: bad_input.sh /path/to/dtsim}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# ---- input files used by some cases ------------------------------------------------------------------
# A valid tiny model: the file cases below differ from it in one way each.
cat >"$TMP/model_ok.json" <<'EOF'
{"schema_version": 1, "name": "tiny", "num_layers": 2, "hidden": 1024, "heads": 16,
 "seq_len": 1024, "vocab": 32000, "dtype": "fp16"}
EOF
cat >"$TMP/model_missing_hidden.json" <<'EOF'
{"schema_version": 1, "name": "tiny", "num_layers": 2, "heads": 16, "seq_len": 1024, "vocab": 32000}
EOF
cat >"$TMP/model_typo.json" <<'EOF'
{"schema_version": 1, "name": "tiny", "num_layers": 2, "hiden": 1024, "hidden": 1024, "heads": 16,
 "seq_len": 1024, "vocab": 32000}
EOF
# A parallel transformer block on a model with experts (dense full-attention layers only).
cat >"$TMP/model_parallel_moe.json" <<'EOF'
{"num_layers": 2, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 32000, "parallel_block": true,
 "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 2048}}
EOF
# Truncated in the middle of an object.
printf '{"schema_version": 1, "name": "tiny", "num_layers": 2, "hidden": 10' >"$TMP/model_truncated.json"
cat >"$TMP/model_bad_dtype.json" <<'EOF'
{"num_layers": 2, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 32000, "dtype": "fp8"}
EOF
cat >"$TMP/model_wrong_type.json" <<'EOF'
{"num_layers": "two", "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 32000}
EOF
cat >"$TMP/model_schema2.json" <<'EOF'
{"schema_version": 2, "num_layers": 2, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 32000}
EOF
# Layer kinds: an unknown pattern character; Mamba blocks without their mixer's sizes.
cat >"$TMP/model_bad_pattern.json" <<'EOF'
{"schema_version": 1, "name": "tiny", "num_layers": 2, "hidden": 1024, "heads": 16,
 "seq_len": 1024, "vocab": 32000, "layer_pattern": "MX", "mamba": {"heads": 32}}
EOF
cat >"$TMP/model_mamba_missing.json" <<'EOF'
{"schema_version": 1, "name": "tiny", "num_layers": 2, "hidden": 1024, "heads": 16,
 "seq_len": 1024, "vocab": 32000, "layer_pattern": "M-"}
EOF
cat >"$TMP/plan_bad_map.json" <<'EOF'
{"schema_version": 1, "tp": 1, "pp": 1, "dp": 8, "micro_batch_size": 1, "global_batch_size": 8,
 "device_map": [0, 1, 2, 3, 4, 5, 6, 6]}
EOF
# gbs 16 / (mbs 2 * dp 2) = 4 micro-batches, the file claims 3.
cat >"$TMP/plan_bad_nmb.json" <<'EOF'
{"schema_version": 1, "tp": 2, "pp": 2, "dp": 2, "micro_batch_size": 2, "global_batch_size": 16,
 "num_microbatches": 3}
EOF
# Three strategies for two stages; per-stage TP on a model that ties its embeddings; cuts for a wrong pp.
cat >"$TMP/plan_stage_count.json" <<'EOF'
{"schema_version": 1, "tp": 2, "pp": 2, "dp": 2, "micro_batch_size": 1, "global_batch_size": 8,
 "stage_strategies": [{}, {}, {}]}
EOF
cat >"$TMP/plan_tied_ends.json" <<'EOF'
{"schema_version": 1, "tp": 2, "pp": 2, "dp": 1, "micro_batch_size": 2, "global_batch_size": 8,
 "stage_replicas": [1, 2], "stage_strategies": [{}, {"tp": 1}]}
EOF
cat >"$TMP/plan_cut_count.json" <<'EOF'
{"schema_version": 1, "tp": 2, "pp": 2, "dp": 2, "micro_batch_size": 2, "global_batch_size": 16,
 "stage_cut_atoms": [1, 2]}
EOF
cat >"$TMP/plan_ok.json" <<'EOF'
{"schema_version": 1, "tp": 2, "pp": 2, "dp": 2, "micro_batch_size": 2, "global_batch_size": 16}
EOF
cat >"$TMP/calib_eff15.json" <<'EOF'
{"schema_version": 1, "name": "bad", "gpu": "a100-sxm4-80gb",
 "compute": {"gemm_efficiency_max": 1.5, "gemm_half_efficiency_flops": 1e9, "memory_bandwidth_efficiency": 0.8,
             "kernel_launch_s": 4e-6, "optimizer_bytes_per_param": 28},
 "network": {"intra_bandwidth_efficiency": 0.8, "inter_bandwidth_efficiency": 0.9,
             "collective_step_overhead_s": 2e-6, "p2p_overhead_s": 5e-6},
 "memory": {"reserved_memory_bytes": 2e9}}
EOF
echo "not a directory" >"$TMP/plainfile"
# A Chakra .et stream cut short: its GlobalMetadata claims 10 bytes, 6 follow.
printf '\x0a\x08\x0a\x050.0' >"$TMP/truncated.et"
mkdir -p "$TMP/empty_et_dir"
cat >"$TMP/jobs_overlap.json" <<'EOF'
{"schema_version": 1, "jobs": [
  {"name": "a", "model": "gpt3-1.3b", "first_gpu": 0, "plan": {"dp": 8, "micro_batch_size": 1, "global_batch_size": 8}},
  {"name": "b", "model": "gpt3-1.3b", "first_gpu": 4, "plan": {"dp": 4, "micro_batch_size": 1, "global_batch_size": 4}}]}
EOF
cat >"$TMP/jobs_outside.json" <<'EOF'
{"schema_version": 1, "jobs": [
  {"name": "a", "model": "gpt3-1.3b", "first_gpu": 6, "plan": {"dp": 4, "micro_batch_size": 1, "global_batch_size": 4}}]}
EOF
printf '# nccl-tests\n        1024   256  float sum -1  12.x  0.1  0.1 0\n' >"$TMP/nccl_bad.log"
# Explicit network graphs: one with a link to an unknown vertex, one where GPU 1 is unreachable.
cat >"$TMP/graph_unknown_vertex.json" <<'EOF'
{"schema_version": 1, "gpu": "a100-sxm4-80gb", "num_nodes": 1, "gpus_per_node": 2,
 "intra_node": {"bandwidth_Bps": 3e11, "latency_s": 1e-6},
 "graph": {"vertices": [{"name": "g0", "gpu": 0}, {"name": "g1", "gpu": 1}],
           "links": [{"between": ["g0", "sw"], "bandwidth_Bps": 1e11, "latency_s": 1e-6}]}}
EOF
cat >"$TMP/graph_disconnected.json" <<'EOF'
{"schema_version": 1, "gpu": "a100-sxm4-80gb", "num_nodes": 1, "gpus_per_node": 2,
 "intra_node": {"bandwidth_Bps": 3e11, "latency_s": 1e-6},
 "graph": {"vertices": [{"name": "g0", "gpu": 0}, {"name": "g1", "gpu": 1}, {"name": "sw"}],
           "links": [{"between": ["g0", "sw"], "bandwidth_Bps": 1e11, "latency_s": 1e-6}]}}
EOF
# Custom schedules for pp 2 and 4 micro-batches (gbs 16 / (mbs 2 * dp 2)).
cat >"$TMP/custom_cycle.json" <<'EOF'
{"schema_version": 1, "stages": [["F0","B0","F1","B1","F2","B2","F3","B3"], ["F1","B1","F0","B0","F2","B2","F3","B3"]]}
EOF
cat >"$TMP/custom_missing.json" <<'EOF'
{"schema_version": 1, "stages": [["F0","F1","F2","F3","B0","B1","B2","B3"], ["F0","B0","F1","B1","F2","B2","F3"]]}
EOF
cat >"$TMP/custom_bad_pass.json" <<'EOF'
{"schema_version": 1, "stages": [["F0","X1"], ["F0"]]}
EOF
cat >"$TMP/custom_three_stages.json" <<'EOF'
{"schema_version": 1, "stages": [["F0","B0"], ["F0","B0"], ["F0","B0"]]}
EOF

# Common valid arguments; each case changes one thing.
M=(--model gpt3-1.3b)
C=(--cluster dgx-a100:8)
P=(--tp 2 --pp 2 --dp 2 --mbs 2 --gbs 16)
T=(--model "$TMP/model_ok.json" --cluster dgx-a100:8)

failures=0
n=0

fail() {
  echo "FAIL $1"
  shift
  for line in "$@"; do echo "     $line"; done
  failures=$((failures + 1))
}

# expect_error_at OUTDIR NAME SUBSTRING ARGS... -- runs "dtsim ARGS... --out OUTDIR" and checks the contract
# (OUTDIR must not exist before and must not exist after).
expect_error_at() {
  local out=$1 name=$2 want=$3
  shift 3
  n=$((n + 1))
  local rc=0
  "$DTSIM" "$@" --out "$out" >"$TMP/stdout" 2>"$TMP/stderr" || rc=$?
  local err lines
  err=$(cat "$TMP/stderr")
  lines=$(wc -l <"$TMP/stderr")
  if [[ $rc -ne 2 ]]; then
    fail "$name: exit code $rc, expected 2" "stderr: $err"
  elif [[ $lines -ne 1 ]]; then
    fail "$name: stderr has $lines lines, expected exactly 1" "$err"
  elif [[ $err != "dtsim: error: "* ]]; then
    fail "$name: stderr does not start with 'dtsim: error: '" "$err"
  elif [[ $err != *"$want"* ]]; then
    fail "$name: stderr does not mention '$want'" "$err"
  elif [[ -s $TMP/stdout ]]; then
    fail "$name: stdout is not empty" "$(head -c 300 "$TMP/stdout")"
  elif [[ -e $out ]]; then
    fail "$name: --out directory $out was created" "$(ls -la "$out")"
  else
    echo "ok  $name: ${err//"$TMP"/\$TMP}"
  fi
}

# expect_error NAME SUBSTRING ARGS... -- as above with a fresh OUTDIR $TMP/outN.
expect_error() {
  expect_error_at "$TMP/out$((n + 1))" "$@"
}

# ---- presets and degrees -----------------------------------------------------------------------------
expect_error "unknown model preset"          "'gpt4'"              simulate --model gpt4 "${C[@]}" "${P[@]}"
expect_error "unknown cluster preset"        "'dgx-z100'"          simulate "${M[@]}" --cluster dgx-z100:8 "${P[@]}"
expect_error "cluster GPUs not whole nodes"  "12 GPUs"             simulate "${M[@]}" --cluster dgx-a100:12 --tp 2 --pp 2 --dp 3 --gbs 12
expect_error "NVL72 GPUs not whole racks"    "100 GPUs is not a whole number of 64-GPU nodes" simulate "${M[@]}" --cluster gb200-nvl72:100@64 --gbs 100
expect_error "NVL72 GPUs uneven racks"      "152 GPUs on gb200-nvl72 racks does not split evenly" simulate "${M[@]}" --cluster gb200-nvl72:152 --gbs 152
expect_error "cluster GPU count not integer" "'eight'"             simulate "${M[@]}" --cluster dgx-a100:eight "${P[@]}"
expect_error "sequential experts, dense model" "has no effect on a dense model" simulate "${M[@]}" "${C[@]}" "${P[@]}" --sequential-experts
expect_error "GPUs per node not integer"     "after '@'"           simulate "${M[@]}" --cluster dgx-a100:8@four "${P[@]}"
expect_error "GPUs per node above the node"  "9 GPUs per node"     simulate "${M[@]}" --cluster dgx-a100:18@9 "${P[@]}"
expect_error "GPUs not whole partial nodes"  "6-GPU nodes"         simulate "${M[@]}" --cluster dgx-a100:8@6 "${P[@]}"
expect_error "cluster GPU count zero"        "'0'"                 simulate "${M[@]}" --cluster dgx-a100:0 "${P[@]}"
expect_error "tp*pp*dp != GPUs"              "tp*pp*dp"            simulate "${M[@]}" "${C[@]}" --tp 2 --pp 2 --dp 4 --mbs 2 --gbs 16
expect_error "tp*pp does not divide GPUs"    "one pipeline copy needs 3"           simulate "${M[@]}" "${C[@]}" --tp 3 --gbs 16
expect_error "gbs not divisible by mbs*dp"   "global batch 18"     simulate "${M[@]}" "${C[@]}" --tp 2 --pp 2 --dp 2 --mbs 2 --gbs 18
expect_error "tp does not divide heads"      "attention heads"     simulate "${M[@]}" --cluster dgx-a100:6 --tp 6 --pp 1 --dp 1 --gbs 6
expect_error "pp exceeds layers"             "pp 4 exceeds"        simulate "${T[@]}" --tp 2 --pp 4 --dp 1 --gbs 4
expect_error "negative tp"                   "tp must be positive" simulate "${M[@]}" "${C[@]}" --tp -2 --pp 2 --dp -2 --gbs 16
expect_error "non-numeric tp"                "'--tp'"              simulate "${M[@]}" "${C[@]}" --tp two --gbs 16
# ---- plan options ------------------------------------------------------------------------------------
expect_error "ep does not divide experts"     "must divide the 8 experts" simulate --model mixtral-8x7b --cluster dgx-h100:8 --ep 3 --dp 8 --gbs 8
expect_error "ep on a dense model"           "needs a mixture-of-experts" simulate --model llama3-8b --cluster dgx-h100:8 --ep 2 --dp 8 --gbs 8
expect_error "etp*ep does not divide block"  "etp*ep"              simulate --model mixtral-8x7b --cluster dgx-h100:8 --tp 2 --sequence-parallel --etp 2 --ep 8 --dp 4 --gbs 8
expect_error "MoE tp without SP"             "needs sequence parallelism" simulate --model mixtral-8x7b --cluster dgx-h100:8 --tp 2 --dp 4 --gbs 8
expect_error "cp does not divide sequence"   "must divide the sequence" simulate --model llama3-8b --cluster dgx-h100:8 --cp 8 --dp 1 --seq-len 8200 --gbs 1
expect_error "cp without flash attention"    "needs flash attention" simulate --model llama3-8b --cluster dgx-h100:8 --cp 8 --dp 1 --attention unfused --gbs 1
expect_error "unknown cp kind"               "'zigzag'"            simulate --model llama3-8b --cluster dgx-h100:8 --cp 8 --dp 1 --cp-kind zigzag --gbs 1
expect_error "unknown routing"               "unknown routing 'hot'" simulate --model mixtral-8x7b --cluster dgx-h100:8 --ep 8 --dp 8 --routing hot --gbs 8
expect_error "gpu speed spread 2"             "compute.gpu_speed_cv must be in [0, 0.3]" simulate --model gpt3-1.3b --cluster dgx-h100:8 --gbs 8 --gpu-speed-cv 2
expect_error "unknown layer kind"            "field 'layer_pattern' has 'X'" simulate --model "$TMP/model_bad_pattern.json" --cluster dgx-a100:8 --gbs 8
expect_error "mamba blocks without a mixer"  "no 'mamba' object" simulate --model "$TMP/model_mamba_missing.json" --cluster dgx-a100:8 --gbs 8
expect_error "sliding windows with cp"       "context parallelism with sliding-window attention is not modelled for the hybrid layers" simulate --model gpt-oss-120b --cluster dgx-h100:16 --cp 2 --ep 8 --dp 8 --gbs 16 --attention flash
expect_error "mamba heads over cp"           "context parallelism splits the 128 Mamba heads over tp*cp = 3 ranks" simulate --model nemotron-h-8b --seq-len 6144 --cluster dgx-h100:6 --cp 3 --dp 2 --gbs 8
expect_error "tp splitting mamba groups"     "must divide the 256 Mamba heads and 8 groups" simulate --model nemotron-h-56b --cluster dgx-h100:16 --tp 16 --sequence-parallel --gbs 8
expect_error "layout chunk count"            "has 3 chunks but pp * virtual stages is 4" simulate --model deepseek-v3-mtp --cluster dgx-h100:64 --pp 4 --ep 16 --gbs 16 --pipeline-layout 'Et*20|t*20|t*21mL'
expect_error "layout without the mtp depth"  "must place one 'm' per MTP depth" simulate --model deepseek-v3-mtp --cluster dgx-h100:64 --pp 4 --ep 16 --gbs 16 --pipeline-layout 'Et*15|t*15|t*15|t*16L'
expect_error "layout unknown character"      "pipeline layout 'Et*4|q' has 'q'" simulate --model llama3-8b --cluster dgx-h100:8 --pp 2 --gbs 8 --pipeline-layout 'Et*4|q'
expect_error "routing loads count"           "loads for 3 experts" simulate --model mixtral-8x7b --cluster dgx-h100:8 --ep 8 --dp 8 --routing loads:1,2,3 --gbs 8
expect_error "unknown attention kind"        "unknown attention 'fast'" simulate --model llama3-8b --cluster dgx-h100:8 --dp 8 --attention fast --gbs 8
expect_error "unknown schedule"              "'zigzag'"            simulate "${M[@]}" "${C[@]}" "${P[@]}" --schedule zigzag
expect_error "interleaved without chunks"    "interleaved:2"       simulate "${M[@]}" "${C[@]}" "${P[@]}" --schedule interleaved
expect_error "interleaved zero chunks"       "interleaved:2"       simulate "${M[@]}" "${C[@]}" "${P[@]}" --schedule interleaved:0
expect_error "interleaved m not multiple of p" "multiple of pp"    simulate "${M[@]}" "${C[@]}" --tp 2 --pp 2 --dp 2 --mbs 2 --gbs 12 --schedule interleaved:2
expect_error "interleaved chunks exceed layers" "exceeds the"      simulate --model "$TMP/model_ok.json" "${C[@]}" "${P[@]}" --schedule interleaved:2
expect_error "1f1b unknown warm-up"          "'zigzag'"            simulate "${M[@]}" "${C[@]}" "${P[@]}" --schedule 1f1b:zigzag
expect_error "zb-h1 with an argument"        "takes no"            simulate "${M[@]}" "${C[@]}" "${P[@]}" --schedule zb-h1:2
expect_error "custom schedule without file"  "needs a file"        simulate "${M[@]}" "${C[@]}" "${P[@]}" --schedule custom
expect_error "custom schedule missing file"  "cannot open"         simulate "${M[@]}" "${C[@]}" "${P[@]}" --schedule "custom:$TMP/nope.json"
expect_error "custom schedule with a cycle"  "deadlocks"           simulate "${M[@]}" "${C[@]}" "${P[@]}" --schedule "custom:$TMP/custom_cycle.json"
expect_error "custom schedule missing pass"  "lacks pass B3"       simulate "${M[@]}" "${C[@]}" "${P[@]}" --schedule "custom:$TMP/custom_missing.json"
expect_error "custom schedule bad pass"      "'X1'"                simulate "${M[@]}" "${C[@]}" "${P[@]}" --schedule "custom:$TMP/custom_bad_pass.json"
expect_error "custom schedule wrong stages"  "lists 3 stages"      simulate "${M[@]}" "${C[@]}" "${P[@]}" --schedule "custom:$TMP/custom_three_stages.json"
expect_error "stage replicas wrong count"    "stage_replicas has 3 entries" simulate "${M[@]}" "${C[@]}" --pp 2 --dp 1 --mbs 2 --gbs 16 --stage-replicas 2,1,1
expect_error "stage replicas not dividing mbs" "do not divide the micro batch" simulate "${M[@]}" "${C[@]}" --pp 2 --dp 1 --mbs 2 --gbs 16 --stage-replicas 3,5
expect_error "stage replicas vs GPUs"        "sum(stage tp*replicas)" simulate "${M[@]}" "${C[@]}" --pp 2 --dp 1 --mbs 2 --gbs 16 --stage-replicas 2,2
expect_error "stage replicas not integers"   "--stage-replicas"    simulate "${M[@]}" "${C[@]}" --stage-replicas 2,x --gbs 16
expect_error "unknown recompute"             "'partial'"           simulate "${M[@]}" "${C[@]}" "${P[@]}" --recompute partial
expect_error "unknown recompute module"      "unknown recompute module 'attn'" simulate "${M[@]}" "${C[@]}" "${P[@]}" --recompute-modules core_attn,attn
expect_error "recompute modules, not selective" "needs recompute selective" simulate "${M[@]}" "${C[@]}" "${P[@]}" --recompute full --recompute-modules mlp
expect_error "recompute module without MLA"  "has no effect without multi-head latent attention" simulate "${M[@]}" "${C[@]}" "${P[@]}" --recompute-modules mla_up_proj
expect_error "recompute module moe, dense"   "recompute module moe has no effect on a dense model" simulate "${M[@]}" "${C[@]}" "${P[@]}" --recompute-modules moe
expect_error "op_sac with unfused attention" "recompute module op_sac is modelled for dense attention + MLP blocks only" simulate "${M[@]}" "${C[@]}" "${P[@]}" --recompute-modules op_sac
expect_error "op_sac with megatron modules" "cannot be combined with Megatron-Core's modules (mlp)" simulate "${M[@]}" "${C[@]}" "${P[@]}" --recompute-modules mlp,op_sac
expect_error "fsdp float8 all-gather, zero 1" "has no effect unless zero stage is 3" simulate "${M[@]}" "${C[@]}" "${P[@]}" --zero 1 --precision fp8 --fsdp-float8-all-gather
expect_error "fsdp float8 all-gather, bf16"  "without per-tensor FP8 linears" simulate "${M[@]}" "${C[@]}" --dp 8 --zero 3 --gbs 16 --fsdp-float8-all-gather
expect_error "recompute layers, not full"    "recompute num layers (Megatron's block method) needs recompute full" simulate "${M[@]}" "${C[@]}" "${P[@]}" --recompute selective --recompute-num-layers 2
expect_error "recompute layers, every layer" "recomputes every layer of every model chunk (the largest has 12)" simulate "${M[@]}" "${C[@]}" "${P[@]}" --recompute-num-layers 12
expect_error "optimizer offload fraction"    "optimizer offload fraction must be between 0 and 1" simulate "${M[@]}" "${C[@]}" "${P[@]}" --optimizer-offload 1.5
expect_error "overlap offload without offload" "has no effect without optimizer_offload_fraction" simulate "${M[@]}" "${C[@]}" "${P[@]}" --overlap-optimizer-offload
expect_error "offload beyond host memory"    "GiB of host memory per GPU" simulate --model gpt3-175b --cluster clariden:4 --tp 4 --mbs 1 --gbs 4 --optimizer-offload 1 --network analytic
expect_error "activation offload all layers" "must be fewer than the layers of every chunk" simulate "${M[@]}" "${C[@]}" "${P[@]}" --offload-activations 12
expect_error "activation offload negative"  "activation offload layers must be 0 or more" simulate "${M[@]}" "${C[@]}" "${P[@]}" --offload-activations -1
expect_error "dualpipev too few micro-batches" "needs at least 2 * pp = 4 micro-batches, got 2" simulate --model llama3-8b --cluster dgx-h100:8 --pp 2 --dp 4 --mbs 1 --gbs 8 --schedule dualpipev
expect_error "dualpipev on one stage"        "the dualpipev schedule needs pp >= 2" simulate --model llama3-8b --cluster dgx-h100:8 --dp 8 --mbs 1 --gbs 32 --schedule dualpipev
expect_error "dualpipe, tied embeddings"     "the dualpipe schedule is modelled for untied embeddings" simulate "${M[@]}" "${C[@]}" "${P[@]}" --schedule dualpipe
expect_error "dualpipe, odd pp"              "the dualpipe schedule needs an even pp >= 2" simulate --model llama3-8b --cluster dgx-h100:24 --pp 3 --dp 8 --mbs 1 --gbs 48 --schedule dualpipe
expect_error "dualpipe, odd micro-batches"   "the dualpipe schedule needs an even number of micro-batches, at least 2 * pp = 4, got 5" simulate --model llama3-8b --cluster dgx-h100:8 --pp 2 --dp 4 --mbs 1 --gbs 20 --schedule dualpipe
expect_error "moe comm overlap, dense model" "overlap_moe_comm overlaps expert-parallel all-to-alls" simulate "${M[@]}" "${C[@]}" "${P[@]}" --overlap-moe-comm
expect_error "moe comm overlap, 1f1b with pp" "not 1f1b with pp 2" simulate --model mixtral-8x7b --cluster dgx-h100:8 --pp 2 --ep 4 --dp 4 --mbs 1 --gbs 8 --overlap-moe-comm
expect_error "moe comm overlap, zb-h1"       "not zb-h1 with pp 2" simulate --model mixtral-8x7b --cluster dgx-h100:8 --pp 2 --ep 4 --dp 4 --mbs 1 --gbs 8 --schedule zb-h1 --overlap-moe-comm
# The flex dispatcher (deepep, hybridep): EP ranks to send between, no expert TP, dropless balanced routing.
expect_error "deepep without EP"              "the deepep dispatcher sends tokens between EP ranks; it needs ep >= 2" simulate --model mixtral-8x7b --cluster dgx-h100:8 --dp 8 --mbs 1 --gbs 8 --dispatcher deepep
expect_error "hybridep with expert TP"        "modelled without expert tensor parallelism (etp 2)" simulate --model mixtral-8x7b --cluster dgx-h100:8 --tp 2 --sequence-parallel --ep 4 --etp 2 --dp 4 --mbs 1 --gbs 8 --dispatcher hybridep
expect_error "deepep with skewed routing"     "modelled for dropless balanced routing" simulate --model mixtral-8x7b --cluster dgx-h100:8 --ep 8 --dp 8 --mbs 1 --gbs 8 --routing skew:1.0 --dispatcher deepep
expect_error "unknown dispatcher"             "--dispatcher: unknown MoE dispatcher 'ncclep'" simulate --model mixtral-8x7b --cluster dgx-h100:8 --ep 8 --dp 8 --mbs 1 --gbs 8 --dispatcher ncclep
cat >"$TMP/model_router_groups.json" <<'EOF'
{"schema_version": 1, "name": "tiny-moe", "num_layers": 2, "hidden": 1024, "heads": 16, "seq_len": 1024,
 "vocab": 32000, "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 1024, "router_groups": 3, "router_group_topk": 1}}
EOF
expect_error "model router_groups"            "field 'moe.router_groups' must divide the 8 experts, got 3" simulate --model "$TMP/model_router_groups.json" --cluster dgx-h100:8 --ep 8 --dp 8 --mbs 1 --gbs 8
expect_error "zero stage 4"                  "zero stage 4"        simulate "${M[@]}" "${C[@]}" "${P[@]}" --zero 4
expect_error "sequence-parallel with tp 1"   "sequence parallelism" simulate "${M[@]}" "${C[@]}" --tp 1 --pp 2 --dp 4 --gbs 16 --sequence-parallel
expect_error "layers-per-stage wrong count"  "3 entries but pp is 2" simulate "${M[@]}" "${C[@]}" "${P[@]}" --layers-per-stage 8,8,8
expect_error "layers-per-stage wrong sum"    "sums to 20"          simulate "${M[@]}" "${C[@]}" "${P[@]}" --layers-per-stage 10,10
expect_error "layers-per-stage non-integer"  "'12,x'"              simulate "${M[@]}" "${C[@]}" "${P[@]}" --layers-per-stage 12,x
expect_error "layers-per-stage inner zero entry" "only the first and last chunks may hold no decoder layers" simulate "${M[@]}" "${C[@]}" --pp 4 --dp 2 --mbs 2 --gbs 16 --layers-per-stage 12,0,6,6
expect_error "rank order unknown axis"       "'ep'"                simulate "${M[@]}" "${C[@]}" "${P[@]}" --rank-order tp,ep,pp
expect_error "rank order axis twice"         "'tp' twice"          simulate "${M[@]}" "${C[@]}" "${P[@]}" --rank-order tp,tp,pp
expect_error "rank order too short"          "'tp,dp'"             simulate "${M[@]}" "${C[@]}" "${P[@]}" --rank-order tp,dp
expect_error "dp bucket size zero"           "bucket"              simulate "${M[@]}" "${C[@]}" "${P[@]}" --dp-bucket-mb 0
expect_error "unknown precision"             "precision 'fp9' is not known" simulate "${M[@]}" --cluster dgx-h100:8 --gbs 8 --precision fp9
expect_error "fp8 without FP8 tensor cores"  "needs FP8 tensor cores, and gpu 'a100-sxm4-80gb' has none" simulate "${M[@]}" "${C[@]}" --gbs 8 --precision fp8
expect_error "nvfp4 without FP4 tensor cores" "needs FP4 tensor cores, and gpu 'h100-sxm5-80gb' has none" simulate "${M[@]}" --cluster dgx-h100:8 --gbs 8 --precision nvfp4
expect_error "unknown software stack"        "unknown software stack 'nemo' (known: megatron-core, megatron-deepspeed, megatron-lm, torchtitan, torchtitan-cudnn, or a .json profile file)" simulate "${M[@]}" "${C[@]}" --gbs 8 --stack nemo
expect_error "cross-validate one source"     "give at least two --data sources" validate published --cross-validate --data "$TMP/rows_h100.json"
expect_error "fit-max-gpus not positive"     "--fit-max-gpus must be positive" validate published --data "$TMP/rows_h100.json" --fit-max-gpus 0
expect_error "fit-max-gpus with cross-validate" "--fit-max-gpus applies to validate published alone" validate published --cross-validate --data "$TMP/rows_h100.json" --data "$TMP/rows_h100.json" --fit-max-gpus 8
expect_error "tp-comm-overlap without SP"    "tp-comm-overlap needs sequence parallelism" simulate "${M[@]}" --cluster dgx-h100:8 --tp 2 --gbs 8 --tp-comm-overlap
expect_error "tp-comm-overlap with tp 1"     "tp-comm-overlap needs tp >= 2" simulate "${M[@]}" --cluster dgx-h100:8 --gbs 8 --tp-comm-overlap
expect_error "pp-comm-overlap, pp 1"         "pp-comm-overlap needs pipeline parallelism (pp > 1)" simulate "${M[@]}" --cluster dgx-h100:8 --gbs 8 --pp-comm-overlap
expect_error "overlap-param-gather, zero 0"  "overlap-param-gather needs the distributed optimizer" simulate "${M[@]}" --cluster dgx-h100:8 --gbs 8 --overlap-param-gather
expect_error "fsdp prefetch 9"               "fsdp prefetch must be between 0 and 8" simulate "${M[@]}" --cluster dgx-h100:8 --gbs 8 --zero 3 --fsdp-prefetch 9
expect_error "megatron-fsdp, zero 1"         "megatron-fsdp needs zero stage 2 (optim_grads) or 3" simulate "${M[@]}" --cluster dgx-h100:8 --gbs 8 --zero 1 --megatron-fsdp
expect_error "megatron-fsdp, param gather"   "megatron-fsdp gathers parameters itself" simulate "${M[@]}" --cluster dgx-h100:8 --gbs 8 --zero 2 --megatron-fsdp --overlap-param-gather
expect_error "fsdp-double-buffer alone"      "fsdp-double-buffer is Megatron-FSDP's option" simulate "${M[@]}" --cluster dgx-h100:8 --gbs 8 --zero 3 --fsdp-double-buffer
expect_error "double buffer, MoE overlap"    "overlap-moe-comm with megatron-fsdp does not support fsdp-double-buffer" simulate --model mixtral-8x7b --cluster dgx-h100:16 --ep 8 --gbs 16 --zero 3 --megatron-fsdp --fsdp-double-buffer --overlap-moe-comm
expect_error "megatron-fsdp, fsdp-prefetch"  "fsdp_prefetch (--fsdp-prefetch) has no effect with megatron_fsdp" simulate "${M[@]}" --cluster dgx-h100:8 --gbs 8 --zero 3 --megatron-fsdp --fsdp-prefetch 2
# ---- command line ------------------------------------------------------------------------------------
expect_error "missing --model"               "--model"             simulate "${C[@]}" "${P[@]}"
expect_error "missing --cluster"             "--cluster"           simulate "${M[@]}" "${P[@]}"
expect_error "missing --gbs"                 "--gbs"               simulate "${M[@]}" "${C[@]}" --tp 2 --pp 2 --dp 2 --mbs 2
expect_error "unknown option"                "--frobnicate"        simulate "${M[@]}" "${C[@]}" "${P[@]}" --frobnicate
expect_error "unknown command"               "'simulte'"           simulte "${M[@]}" "${C[@]}" "${P[@]}"
expect_error "--collectives bogus"           "'bogus'"             simulate "${M[@]}" "${C[@]}" "${P[@]}" --collectives bogus
expect_error "--fold bogus"                  "'bogus'"             simulate "${M[@]}" "${C[@]}" "${P[@]}" --fold bogus
expect_error "--trace-ranks outside the run"  "--trace-ranks: rank 9 is outside the run's ranks 0-7" simulate "${M[@]}" "${C[@]}" "${P[@]}" --trace-ranks 0-3,9
expect_error "--trace-ranks not a rank"      "--trace-ranks: 'x' is not a rank or a range of ranks" simulate "${M[@]}" "${C[@]}" "${P[@]}" --trace-ranks 0,x
expect_error "--trace-ranks reversed range"  "--trace-ranks: range '5-2' ends before it starts" simulate "${M[@]}" "${C[@]}" "${P[@]}" --trace-ranks 5-2
expect_error "--trace-links zero"            "--trace-links: '0' is not a number of links" simulate "${M[@]}" "${C[@]}" "${P[@]}" --trace-links=0
expect_error "--collective-algo bogus"       "'bogus'"             simulate "${M[@]}" "${C[@]}" "${P[@]}" --collective-algo bogus
expect_error "--max-memory not a size"      "--max-memory 'lots' is not a size" simulate "${M[@]}" "${C[@]}" "${P[@]}" --max-memory lots
expect_error "--max-memory unknown unit"     "--max-memory '8GBs' has an unknown unit 'GBs'" simulate "${M[@]}" "${C[@]}" "${P[@]}" --max-memory 8GBs
expect_error "--max-memory zero"             "--max-memory '0' must be positive" simulate "${M[@]}" "${C[@]}" "${P[@]}" --max-memory 0
# Refused before lowering: the estimate (tasks, ranks, bytes) over --max-memory, with what to change.
expect_error "run over --max-memory"         "but --max-memory is 1.0 MB: use fewer micro-batches (a smaller --gbs or a larger --mbs), or raise --max-memory" simulate "${M[@]}" "${C[@]}" "${P[@]}" --max-memory 1MB
expect_error "--fold none over --max-memory" "(20.4 M tasks over 1,024 simulated ranks) but --max-memory is 2.0 GB: drop --fold none" simulate --model gpt3-175b --cluster dgx-a100:1024 --tp 8 --pp 8 --dp 16 --gbs 1536 --fold none --max-memory 2GB
expect_error "unfoldable run over --max-memory" "16,384 simulated ranks; not folded: symmetric ranks sit under different leaf (rail) switches" simulate --model gpt3-175b --cluster dgx-a100:16384:rail:16:4 --tp 8 --pp 8 --dp 256 --gbs 24576 --max-memory 8GB
# Out of memory although the estimate let the run start (here: no limit, 400 MB of address space): std::bad_alloc
# ends in one error line, exit 2, no output. Not under AddressSanitizer, which reserves far more address space
# (scripts/sanitize.sh sets ASAN_OPTIONS; its dtsim need not link libasan dynamically).
if [[ -z ${ASAN_OPTIONS:-} ]] && ! ldd "$DTSIM" 2>/dev/null | grep -q libasan; then
  printf '#!/usr/bin/env bash\nulimit -v 400000\nexec "%s" "$@"\n' "$DTSIM" >"$TMP/dtsim_400mb"
  chmod +x "$TMP/dtsim_400mb"
  dtsim_saved=$DTSIM
  DTSIM=$TMP/dtsim_400mb
  expect_error "out of memory mid-run"       "out of memory (std::bad_alloc)" simulate --model gpt3-175b --cluster dgx-a100:256 --tp 8 --pp 8 --dp 4 --gbs 512 --fold none --max-memory none
  DTSIM=$dtsim_saved
fi
expect_error "plan unknown planner"          "unknown planner 'oracle'" plan --planner oracle --model gpt3-1.3b --cluster dgx-a100:8 --gbs 16
expect_error "plan without --gbs"            "--gbs is required"   plan --model gpt3-1.3b --cluster dgx-a100:8
expect_error "plan --tp not dividing a node" "must divide the 8"   plan --planner dapple --tp 3 --model gpt3-1.3b --cluster dgx-a100:8 --gbs 16
expect_error "plan fp8 without FP8 tensor cores" "plan: precision fp8-delayed needs FP8 tensor cores" plan --model gpt3-1.3b --cluster dgx-a100:8 --gbs 16 --precision fp8
expect_error "plan --seq-len zero"           "plan: --seq-len must be positive" plan --model gpt3-1.3b --cluster dgx-a100:8 --gbs 16 --seq-len 0
expect_error "bakeoff without --cluster"     "bakeoff: --cluster is required" bakeoff --model gpt3-1.3b --gbs 16
expect_error "bakeoff unknown model"         "gpt5"                bakeoff --model gpt5 --cluster dgx-a100:8 --gbs 16
expect_error "capacity without --gbs"        "capacity: --gbs is required" capacity --cluster dgx-a100:8
expect_error "capacity unknown ladder model" "gpt5"                capacity --cluster dgx-a100:8 --gbs 16 --models megatron-1.7b,gpt5
expect_error "capacity unknown planner"      "unknown planner 'oracle'" capacity --cluster dgx-a100:8 --gbs 16 --planners grid,oracle
expect_error "tp layout not a square"        "cannot arrange tp 8"  simulate "${M[@]}" --cluster dgx-a100:8 --tp 8 --tp-layout 2d --gbs 8
expect_error "tp layout 2.5d without depth"  "needs its depth"     simulate "${M[@]}" --cluster dgx-a100:8 --tp 8 --tp-layout 2.5d --gbs 8
expect_error "unknown tp layout"             "'4d'"                simulate "${M[@]}" --cluster dgx-a100:8 --tp 8 --tp-layout 4d --gbs 8
expect_error "device map reuses a GPU"       "to two ranks"        simulate "${M[@]}" --cluster dgx-a100:8 --plan "$TMP/plan_bad_map.json"
expect_error "stage strategies vs pp"        "stage_strategies has 3 entries" simulate "${M[@]}" --cluster dgx-a100:8 --plan "$TMP/plan_stage_count.json"
expect_error "per-stage tp, tied embeddings" "need the same tp"    simulate "${M[@]}" --cluster dgx-a100:4 --plan "$TMP/plan_tied_ends.json"
expect_error "cuts inside layers vs pp"      "stage_cut_atoms has 2 entries for 1" simulate "${M[@]}" --cluster dgx-a100:8 --plan "$TMP/plan_cut_count.json"
expect_error "--network bogus"              "'bogus'"             simulate "${M[@]}" "${C[@]}" "${P[@]}" --network bogus
expect_error "jobs sharing GPUs"             "both use GPU 4"      simulate --cluster dgx-a100:8 --jobs "$TMP/jobs_overlap.json"
expect_error "job outside the cluster"       "are not all in the"  simulate --cluster dgx-a100:8 --jobs "$TMP/jobs_outside.json"
expect_error "jobs with a model flag"        "--model cannot be combined with --jobs" simulate --cluster dgx-a100:8 --jobs "$TMP/jobs_overlap.json" --model gpt3-1.3b
expect_error "jobs with --export-chakra"     "--export-chakra exports one job; it cannot be combined with --jobs" simulate --cluster dgx-a100:8 --jobs "$TMP/jobs_overlap.json" --export-chakra "$TMP/et_out"
expect_error "replay truncated .et"          "claims 10 bytes but 6 remain (truncated file?)" replay --trace "$TMP/truncated.et"
expect_error "replay empty .et directory"    "holds no .et file" replay --trace "$TMP/empty_et_dir"
expect_error "calibrate unknown source"      "nccl-tests"          calibrate kineto x.json --cluster dgx-a100:8
expect_error "calibrate malformed log"       "'12.x' is not a number" calibrate nccl-tests "$TMP/nccl_bad.log" --cluster dgx-a100:8 --op all-reduce --ranks 8
expect_error "device model without board power" "gpu 'gh200' states no board_power_w" calibrate device-model --gpu gh200
printf 'm,n,k,dtype,time_s,tflops\n1024,1024,1024,fp16,1e-05,214.7\n' >"$TMP/gemm_one.csv"
expect_error "calibrate compute --stack without a trace" "--stack needs a --trace" calibrate compute --gemm-csv "$TMP/gemm_one.csv" --gpu h100-sxm5-80gb --stack torchtitan
expect_error "calibrate compute unknown stack"  "unknown software stack 'nonesuch'" calibrate compute --trace "$TMP/no_trace.json.gz" --stack nonesuch
cat >"$TMP/runs_two.json" <<'EOF'
[{"id": "a", "model": "gpt3-1.3b", "cluster": "dgx-h100:8", "plan": {"tp": 1, "dp": 8, "micro_batch_size": 1, "global_batch_size": 64}, "measured_s": 1.0},
 {"id": "b", "model": "gpt3-1.3b", "cluster": "dgx-h100:8", "plan": {"tp": 2, "dp": 4, "micro_batch_size": 1, "global_batch_size": 64}, "measured_s": 1.1}]
EOF
cat >"$TMP/runs_typo.json" <<'EOF'
[{"id": "a", "model": "gpt3-1.3b", "cluster": "dgx-h100:8", "plan": {"tp": 1, "dp": 8, "micro_batch_size": 1, "global_batch_size": 64}, "measured_sec": 1.0}]
EOF
cat >"$TMP/runs_bad_plan.json" <<'EOF'
[{"id": "a", "model": "gpt3-1.3b", "cluster": "dgx-h100:8", "plan": {"tp": 3, "dp": 8, "micro_batch_size": 1, "global_batch_size": 64}, "measured_s": 1.0}]
EOF
expect_error "calibrate runs without data"   "--data FILE is required" calibrate runs
expect_error "calibrate runs too few runs"   "2 usable runs"       calibrate runs --data "$TMP/runs_two.json"
expect_error "calibrate runs unknown key"    "measured_sec"        calibrate runs --data "$TMP/runs_typo.json"
expect_error "calibrate runs bad plan"       "row 0"               calibrate runs --data "$TMP/runs_bad_plan.json"
expect_error "plan unknown stack"            "unknown software stack 'nosuch'" plan --model gpt3-1.3b --cluster dgx-a100:8 --gbs 32 --stack nosuch
expect_error "calibrate runs bad noise"      "--noise"             calibrate runs --data "$TMP/runs_two.json" --noise 2
expect_error "graph with an unknown vertex"  "unknown vertex 'sw'" simulate "${M[@]}" --cluster "$TMP/graph_unknown_vertex.json" --tp 2 --gbs 2
expect_error "disconnected graph"            "disconnected"        simulate "${M[@]}" --cluster "$TMP/graph_disconnected.json" --tp 2 --gbs 2
expect_error "unknown fabric"                "unknown fabric 'torus'" simulate "${M[@]}" --cluster dgx-a100:16:torus "${P[@]}"
expect_error "fat-tree without leaf size"    "needs nodes per leaf" simulate "${M[@]}" --cluster dgx-a100:16:fat-tree "${P[@]}"
expect_error "fat-tree undersubscribed"      "oversubscription = 0.5 is outside its range [1, 1024]" simulate "${M[@]}" --cluster dgx-a100:16:fat-tree:1:0.5 "${P[@]}"
expect_error "nics without a rate"           "nics needs NICS_PER_NODE:GBPS" simulate "${M[@]}" --cluster dgx-a100:16:nics:4 "${P[@]}"
expect_error "nics not dividing the node"   "3 NICs per node do not divide a dgx-a100 node's 8 GPUs evenly" simulate "${M[@]}" --cluster dgx-a100:16:nics:3:100 "${P[@]}"
expect_error "nics rate not a number"       "NIC rate 'fast' Gb/s is not a number" simulate "${M[@]}" --cluster dgx-a100:16:nics:4:fast "${P[@]}"
expect_error "nics on a graph preset"       "dgx1-v100 has its own NICs in its graph" simulate "${M[@]}" --cluster dgx1-v100:16:nics:4:100 "${P[@]}"
expect_error "collective group larger than cluster" "does not fit" collective --cluster dgx-a100:16 --ranks 32
expect_error "collective unknown op"         "'all-to-some'"       collective --cluster dgx-a100:8 --op all-to-some
expect_error "collective bad size"           "unknown unit"        collective --cluster dgx-a100:8 --bytes 12XB
expect_error "collective sweep reversed"     "MIN above MAX"       collective --cluster dgx-a100:8 --sweep 1GiB:8
expect_error "collective missing cluster"    "--cluster is required" collective --bytes 1MiB
cat >"$TMP/rows_h100.json" <<'EOF'
[{"hidden": 1024, "heads": 16, "num_layers": 2, "micro_batch": 1, "global_batch": 1, "cluster": "dgx-h100:1",
  "measured_s": 0.01}]
EOF
cat >"$TMP/rows_gpu_mismatch.json" <<'EOF'
[{"hidden": 1024, "heads": 16, "num_layers": 2, "micro_batch": 1, "global_batch": 1, "cluster": "dgx-h100:1",
  "gpu": "a100-sxm4-80gb", "measured_s": 0.01}]
EOF
CAL_A100=$(cd "$(dirname "$0")/../.." && pwd)/traces/calibration/a100-sxm4-80gb.json  # the shipped A100 file
expect_error "fit-max-gpus above every row"  "nothing is left to score" validate published --data "$TMP/rows_h100.json" --fit-max-gpus 1024
expect_error "validate: calibration of another GPU" "is for a100-sxm4-80gb, but row 0" validate published --data "$TMP/rows_h100.json" --calibration "$CAL_A100"
expect_error "validate: row gpu not the cluster's" "gpu 'a100-sxm4-80gb' is not the GPU of cluster 'dgx-h100:1'" validate published --data "$TMP/rows_gpu_mismatch.json"
expect_error "capacity: unknown GPU"          "--gpu 'b900' is not known" capacity --model gpt3-1.3b --tokens 1B --days 1 --gpu b900
expect_error "capacity: bad token count"     "--tokens '12XB' has an unknown suffix" capacity --model gpt3-1.3b --tokens 12XB --days 1 --gpu dgx-h100
expect_error "capacity: deadline not positive" "--days must be positive" capacity --model gpt3-1.3b --tokens 1B --days 0 --gpu dgx-h100
# dtsim compare: a predicted run directory from a tiny valid simulation, and a measured one whose trace is cut off.
"$DTSIM" simulate "${T[@]}" --tp 2 --pp 2 --dp 2 --mbs 2 --gbs 16 --out "$TMP/run_pred" -q
mkdir "$TMP/run_trunc" && cp "$TMP/run_pred/summary.json" "$TMP/run_trunc/"
head -c 1000 "$TMP/run_pred/trace.json" >"$TMP/run_trunc/trace.json"
expect_error "compare: missing --measured dir" "run directory '$TMP/no_such_run' does not exist" compare --predicted "$TMP/run_pred" --measured "$TMP/no_such_run"
expect_error "compare: truncated measured trace" "run_trunc/trace.json' is not valid JSON" compare --predicted "$TMP/run_pred" --measured "$TMP/run_trunc"
# ---- input files -------------------------------------------------------------------------------------
expect_error "model file missing field"      "missing field 'hidden'" simulate --model "$TMP/model_missing_hidden.json" "${C[@]}" "${P[@]}"
expect_error "model file typo'd field"       "unknown field 'hiden'" simulate --model "$TMP/model_typo.json" "${C[@]}" "${P[@]}"
expect_error "model file truncated JSON"     "not valid JSON"      simulate --model "$TMP/model_truncated.json" "${C[@]}" "${P[@]}"
expect_error "model file parallel block + MoE" "'parallel_block' models dense full-attention layers only" simulate --model "$TMP/model_parallel_moe.json" "${C[@]}" "${P[@]}"
expect_error "model file nonexistent"        "no_such_model.json"  simulate --model "$TMP/no_such_model.json" "${C[@]}" "${P[@]}"
expect_error "model file unknown dtype"      "'fp8'"               simulate --model "$TMP/model_bad_dtype.json" "${C[@]}" "${P[@]}"
expect_error "model file wrong field type"   "'num_layers'"        simulate --model "$TMP/model_wrong_type.json" "${C[@]}" "${P[@]}"
expect_error "model file schema_version 2"   "schema_version 2"    simulate --model "$TMP/model_schema2.json" "${C[@]}" "${P[@]}"
expect_error "plan file num_microbatches"    "num_microbatches 3"  simulate "${T[@]}" --plan "$TMP/plan_bad_nmb.json"
expect_error "--plan combined with --tp"     "--tp"                simulate "${T[@]}" --plan "$TMP/plan_ok.json" --tp 2
expect_error "calibration efficiency 1.5"    "gemm_efficiency_max" simulate "${T[@]}" "${P[@]}" --calibration "$TMP/calib_eff15.json"
# An output directory that cannot be created is found only after the simulation ran: still exit 2, no output.
expect_error_at "$TMP/plainfile/sub" "--out under a regular file" "cannot create output directory" simulate "${T[@]}" "${P[@]}"
if [[ $(cat "$TMP/plainfile") != "not a directory" ]]; then fail "--out under a regular file: the file was modified"; fi

# Regressions: NaN/inf bucket sizes were accepted, and stray words were ignored ("--sequence-parallel false"
# switched sequence parallelism on).
expect_error "dp bucket size NaN"            "bucket"              simulate "${M[@]}" "${C[@]}" "${P[@]}" --dp-bucket-mb nan
expect_error "dp bucket size infinite"       "bucket"              simulate "${M[@]}" "${C[@]}" "${P[@]}" --dp-bucket-mb inf
expect_error "stray positional argument"     "false"               simulate "${M[@]}" "${C[@]}" "${P[@]}" --sequence-parallel false

# Fuzzing findings (fuzz/, docs/testing.md "Reliability"): a number beyond double escaped as an internal error (exit 3);
# int fields out of range were wrapped (4294967297 read as 1) or converted with undefined behaviour; products of
# valid degrees overflowed int.
printf '{"num_layers": 2, "hidden": 1e400, "heads": 16, "seq_len": 1024, "vocab": 32000}' >"$TMP/model_1e400.json"
printf '{"num_layers": 4294967297, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 32000}' >"$TMP/model_wrap.json"
printf '{"num_layers": 1000000, "hidden": 1000000, "heads": 16, "seq_len": 1024, "vocab": 32000}' >"$TMP/model_huge.json"
printf '{"tp": 65536, "pp": 65536, "dp": 1, "micro_batch_size": 1, "global_batch_size": 16}' >"$TMP/plan_overflow.json"
expect_error "model file number beyond double" "number overflow"   simulate --model "$TMP/model_1e400.json" "${C[@]}" "${P[@]}"
expect_error "model file int field > 2^31"   "is not an integer from" simulate --model "$TMP/model_wrap.json" "${C[@]}" "${P[@]}"
expect_error "model file over 10^15 params"  "10^15 parameters"    simulate --model "$TMP/model_huge.json" "${C[@]}" "${P[@]}"
expect_error "plan file tp*pp beyond int"    "= 4294967296 does not match" simulate "${T[@]}" --plan "$TMP/plan_overflow.json"
expect_error "cluster fabric count 1e20"     "is not an integer from 0" simulate "${M[@]}" --cluster dgx-a100:16:fat-tree:1e20 --tp 2 --pp 2 --dp 4 --mbs 2 --gbs 16

# ---- Guard (issue 38): bounded numbers, results that cannot be true, options with no effect ------------------------
# A stack profile / calibration / cluster number far outside what is physical was accepted (1e308 s of host issue
# deadlocked the task graph and crashed SimGrid's exit handlers); routing loads and capacity factors at the limits of a
# double gave MFU above 100%. Every number's range: `dtsim presets --limits` (docs/errors.md).
REPO=$(cd "$(dirname "$0")/../.." && pwd)
sed '0,/"host_issue_s"/s/"host_issue_s": [0-9.e-]*/"host_issue_s": 1e308/' "$REPO/traces/stacks/torchtitan.json" >"$TMP/stack_1e308.json"
sed '0,/"p2p_overhead_s"/s/"p2p_overhead_s": [0-9.e-]*/"p2p_overhead_s": -1e-6/' "$REPO/traces/stacks/torchtitan.json" >"$TMP/stack_negative.json"
sed '0,/"p2p_sync"/s/"p2p_sync": "[a-z_]*"/"p2p_sync": "sometimes"/' "$REPO/traces/stacks/torchtitan.json" >"$TMP/stack_p2p_sync.json"
sed '0,/"pp_scatter_gather"/s/"pp_scatter_gather": "[a-z_]*"/"pp_scatter_gather": "half"/' "$REPO/traces/stacks/torchtitan.json" >"$TMP/stack_pp_sg.json"
printf '{"schema_version": 1, "name": "ours", "base": "nemo-25.09", "host_issue_s": 2e-05}\n' >"$TMP/stack_bad_base.json"
printf '{"schema_version": 1, "name": "loop", "base": "%s"}\n' "$TMP/stack_loop.json" >"$TMP/stack_loop.json"
sed '0,/"kernel_launch_s"/s/"kernel_launch_s": [0-9.e-]*/"kernel_launch_s": 1e308/' "$REPO/traces/calibration/h100-sxm5-80gb.json" >"$TMP/calib_launch_1e308.json"
cat >"$TMP/cluster_bw_1e308.json" <<'JSON'
{"schema_version": 1, "gpu": "h100-sxm5-80gb", "num_nodes": 1, "gpus_per_node": 8,
 "intra_node": {"bandwidth_Bps": 1e308, "latency_s": 1e-6}}
JSON
cat >"$TMP/cluster_latency_1e9.json" <<'JSON'
{"schema_version": 1, "gpu": "h100-sxm5-80gb", "num_nodes": 1, "gpus_per_node": 8,
 "intra_node": {"bandwidth_Bps": 4.5e11, "latency_s": 1e9}}
JSON
cat >"$TMP/cluster_sm_fraction.json" <<'JSON'
{"schema_version": 1, "gpu": {"preset": "h100-sxm5-80gb", "sm_count": 131.5}, "num_nodes": 1, "gpus_per_node": 8,
 "intra_node": {"bandwidth_Bps": 4.5e11, "latency_s": 1e-6}}
JSON
cat >"$TMP/cluster_sm_huge.json" <<'JSON'
{"schema_version": 1, "gpu": {"preset": "h100-sxm5-80gb", "sm_count": 1e6}, "num_nodes": 1, "gpus_per_node": 8,
 "intra_node": {"bandwidth_Bps": 4.5e11, "latency_s": 1e-6}}
JSON
MX=(--model mixtral-8x7b --cluster dgx-h100:16 --tp 2 --ep 2 --sequence-parallel --mbs 1 --gbs 16 --network analytic)
H8=(--model gpt3-1.3b --cluster dgx-h100:8 --gbs 16 --mbs 1)
expect_error "stack host_issue_s 1e308"       "host_issue_s = 1e+308 is outside its range [0, 1] s" simulate "${H8[@]}" --stack "$TMP/stack_1e308.json"
expect_error "stack p2p_sync unknown"         "p2p_sync 'sometimes' is not known (known: none, non_interleaved, all)" simulate "${H8[@]}" --stack "$TMP/stack_p2p_sync.json"
expect_error "stack pp_scatter_gather unknown" "pp_scatter_gather 'half' is not known (known: none, without_sp, always)" simulate "${H8[@]}" --stack "$TMP/stack_pp_sg.json"
expect_error "stack p2p overhead negative"    "p2p_overhead_s = -1e-06 is outside its range" simulate "${H8[@]}" --stack "$TMP/stack_negative.json"
expect_error "stack base unknown"             "'base' names an unknown software stack 'nemo-25.09'" simulate "${H8[@]}" --stack "$TMP/stack_bad_base.json"
expect_error "stack base chain endless"       "'base' chain longer than 8 profiles" simulate "${H8[@]}" --stack "$TMP/stack_loop.json"
expect_error "calibration kernel launch 1e308" "compute.kernel_launch_s = 1e+308 is outside its range" simulate "${H8[@]}" --calibration "$TMP/calib_launch_1e308.json"
expect_error "cluster bandwidth 1e308"        "intra_node.bandwidth_Bps = 1e+308 is outside its range" simulate --model gpt3-1.3b --cluster "$TMP/cluster_bw_1e308.json" --gbs 16 --mbs 1
expect_error "cluster latency 1e9 s"          "intra_node.latency_s = 1e+09 is outside its range [0, 1] s" simulate --model gpt3-1.3b --cluster "$TMP/cluster_latency_1e9.json" --gbs 16 --mbs 1
expect_error "cluster sm_count fractional"    "gpu.sm_count must be a whole number, got 131.5" simulate --model gpt3-1.3b --cluster "$TMP/cluster_sm_fraction.json" --gbs 16 --mbs 1
expect_error "cluster sm_count 1e6"           "gpu.sm_count = 1e+06 is outside its range" simulate --model gpt3-1.3b --cluster "$TMP/cluster_sm_huge.json" --gbs 16 --mbs 1
expect_error "routing loads 1e308"            "routing load '1e308' is outside its range [0, 1e+12]" simulate "${MX[@]}" --routing loads:1e308,1e308,1e308,1e308,1e308,1e308,1e308,1e308
expect_error "routing load 1e-320"            "routing load '1e-320' is outside its range" simulate "${MX[@]}" --routing loads:1e-320,1,1,1,1,1,1,1
expect_error "routing load not a number"      "routing load 'x' is not a number" simulate "${MX[@]}" --routing loads:x,1,1,1,1,1,1,1
expect_error "capacity factor 1e-9"           "capacity factor '1e-9' is outside its range [0.01, 1024]" simulate "${MX[@]}" --routing skew:1,cf:1e-9
expect_error "capacity factor 1e400"          "capacity factor '1e400' is outside its range" simulate "${MX[@]}" --routing cf:1e400
expect_error "--cp 0"                         "--cp must be positive, got 0" simulate "${M[@]}" "${C[@]}" --cp 0 --mbs 1 --gbs 8
expect_error "--pp -1 (default dp)"           "--pp must be positive, got -1" simulate "${M[@]}" "${C[@]}" --pp -1 --mbs 1 --gbs 8
expect_error "--etp 0"                        "--etp must be positive, got 0" simulate "${MX[@]}" --etp 0
expect_error "--stage-replicas 0 (default dp)" "--stage-replicas entries must be positive" simulate "${M[@]}" "${C[@]}" --stage-replicas 0,1 --mbs 2 --gbs 16
sed '0,/"gemm_efficiency_max"/s/"gemm_efficiency_max": [0-9.e-]*/"gemm_efficiency_max": 1e-320/' "$REPO/traces/calibration/h100-sxm5-80gb.json" >"$TMP/calib_eff_denormal.json"
cat >"$TMP/cluster_switch_pods.json" <<'JSON'
{"schema_version": 1, "gpu": "h100-sxm5-80gb", "num_nodes": 2, "gpus_per_node": 8,
 "intra_node": {"bandwidth_Bps": 4.5e11, "latency_s": 1e-6},
 "inter_node": {"nics_per_node": 8, "nic_bandwidth_Bps": 5e10, "latency_s": 5e-6, "topology": "switch", "leaves_per_pod": 1}}
JSON
expect_error "seq_len 2^31-1"                 "field 'seq_len' must be at most 16777216" simulate "${H8[@]}" --seq-len 2147483647
expect_error "calibration efficiency 1e-320"  "compute.gemm_efficiency_max must be in (0, 1] (at least 1e-06)" simulate "${H8[@]}" --calibration "$TMP/calib_eff_denormal.json"
sed '0,/"gemm_efficiency_max"/s/"gemm_efficiency_max"/"gemm_tile_m": -128, "gemm_efficiency_max"/' "$REPO/traces/calibration/h100-sxm5-80gb.json" >"$TMP/calib_tile_neg.json"
expect_error "calibration tile rows -128"     "compute.gemm_tile_m must be in [0, 4096] (0: off), got -128" simulate "${H8[@]}" --calibration "$TMP/calib_tile_neg.json"
sed '0,/"sustained_tensor_ratio"/s/"sustained_tensor_ratio": [0-9.e-]*/"sustained_tensor_ratio": 1.2/' "$REPO/traces/calibration/h100-sxm5-80gb.json" >"$TMP/calib_sustained_12.json"
expect_error "calibration sustained ratio 1.2" "compute.sustained_tensor_ratio must be in (0, 1] (at least 1e-06), got 1.2" simulate "${H8[@]}" --calibration "$TMP/calib_sustained_12.json"
expect_error "switch cluster with pods"       "inter_node.leaves_per_pod needs the fat-tree or rail topology" simulate --model gpt3-1.3b --cluster "$TMP/cluster_switch_pods.json" --gbs 16 --mbs 1
expect_error "collective too big for --max-memory" "all-to-all of 1.0 MB over 1024 GPUs would need about" collective --cluster dgx-h100:1024 --op all-to-all --bytes 1MiB --max-memory 100MB
expect_error "collective on 2^20 GPUs"        "over 1048576 GPUs would need about" collective --cluster dgx-h100:1048576 --op all-to-all --sweep 8:1MiB
expect_error "capacity --gbs 2^31-1"          "capacity: --gbs must be from 1 to 16777216, got 2147483647" capacity --cluster dgx-h100:8 --gbs 2147483647
expect_error "simulate: --gbs 2^30"            "global batch size must be at most 16777216" simulate --model gpt3-1.3b --cluster dgx-h100:8 --mbs 1 --gbs 1073741824
expect_error "simulate: 2^21 micro-batches"   "is 2097152 micro-batches of 1 per data-parallel replica; dtsim models at most 1048576" simulate --model gpt3-1.3b --cluster dgx-h100:8 --tp 8 --mbs 1 --gbs 2097152
# SimGrid's link-load plugin samples a link between a flow's end and the next solve (1.5x on this ring): a correct
# result, its peak capped at the bandwidth, not an invariant violation.
rc=0
"$DTSIM" simulate --model mixtral-8x7b --cluster dgx-h100:16 --ep 2 --tp 2 --sequence-parallel --gbs 32 \
  --collective-algo ring --out "$TMP/ring_peak" >/dev/null 2>"$TMP/stderr" || rc=$?
if [[ $rc -ne 0 ]]; then fail "SimGrid ring all-gather peak: exit $rc" "$(cat "$TMP/stderr")"; fi
# One rule for options that act only with others: refused with the reason, from flags and plan files alike.
printf '{"tp": 2, "pp": 1, "dp": 4, "micro_batch_size": 1, "global_batch_size": 8, "fsdp_prefetch": 2}' >"$TMP/plan_fsdp_prefetch.json"
expect_error "--tp-overlap-chunks without overlap" "tp_overlap_chunks (--tp-overlap-chunks) has no effect without tp_comm_overlap" simulate "${M[@]}" "${C[@]}" "${P[@]}" --tp-overlap-chunks 4
expect_error "--fsdp-prefetch without ZeRO-3" "fsdp_prefetch (--fsdp-prefetch) has no effect unless zero stage is 3" simulate "${M[@]}" "${C[@]}" "${P[@]}" --fsdp-prefetch 2
expect_error "plan file fsdp_prefetch without ZeRO-3" "fsdp_prefetch (--fsdp-prefetch) has no effect" simulate "${M[@]}" "${C[@]}" --plan "$TMP/plan_fsdp_prefetch.json"
expect_error "--cp-kind with cp 1"            "cp_kind (--cp-kind) has no effect with cp 1" simulate "${M[@]}" "${C[@]}" "${P[@]}" --cp-kind a2a
expect_error "--etp on a dense model"         "etp (--etp) has no effect on a dense model" simulate "${M[@]}" "${C[@]}" "${P[@]}" --etp 2
expect_error "--dispatcher on a dense model"  "dispatcher (--dispatcher) has no effect on a dense model" simulate "${M[@]}" "${C[@]}" "${P[@]}" --dispatcher allgather
# The published-data harness: no MAPE of zero rows; degree products in 64 bits; unknown keys and bad times refused.
cat >"$TMP/rows_all_fail.json" <<'JSON'
[{"hidden": 1024, "heads": 16, "num_layers": 2, "micro_batch": 1, "global_batch": -16, "cluster": "dgx-h100:1",
  "measured_s": 0.01}]
JSON
cat >"$TMP/rows_overflow.json" <<'JSON'
[{"hidden": 1024, "heads": 16, "num_layers": 2, "tp": 65536, "dp": 65536, "micro_batch": 1, "global_batch": 65536,
  "measured_s": 0.01}]
JSON
cat >"$TMP/rows_unknown_key.json" <<'JSON'
[{"hidden": 1024, "heads": 16, "num_layers": 2, "micro_batch": 1, "global_batch": 1, "cluster": "dgx-h100:1",
  "precison": "fp8", "measured_s": 0.01}]
JSON
cat >"$TMP/rows_time_1e308.json" <<'JSON'
[{"hidden": 1024, "heads": 16, "num_layers": 2, "micro_batch": 1, "global_batch": 1, "cluster": "dgx-h100:1",
  "measured_s": 1e308}]
JSON
expect_error "validate: every row fails"      "no row could be scored (1 rows, 1 failed" validate published --data "$TMP/rows_all_fail.json"
expect_error "validate: tp*dp beyond int"     "tp*pp*dp = 65536*1*65536 is beyond what dtsim models" validate published --data "$TMP/rows_overflow.json"
expect_error "validate: row with unknown key" "unknown field 'precison'" validate published --data "$TMP/rows_unknown_key.json"
expect_error "validate: measured time 1e308"  "measured time = 1e+308 is outside its range" validate published --data "$TMP/rows_time_1e308.json"
# Chakra: an empty .et is not "no JSON document"; libprotobuf's own ERROR line (invalid UTF-8 in a string field) is not
# printed; an export never mixes with a directory of other files.
: >"$TMP/empty.et"
printf '\x04\x0a\x02\xff\xfe' >"$TMP/bad_utf8.et"
mkdir -p "$TMP/export_foreign" && echo "notes" >"$TMP/export_foreign/notes.txt"
expect_error "replay: empty .et"              "empty file (no Chakra GlobalMetadata" replay --trace "$TMP/empty.et"
expect_error "replay: .et with invalid UTF-8" "bad_utf8.et" replay --trace "$TMP/bad_utf8.et"
expect_error "export into a foreign directory" "holds 'notes.txt', which is not part of a dtsim Chakra export" simulate "${T[@]}" "${P[@]}" --network analytic --export-chakra "$TMP/export_foreign"
if [[ $(ls "$TMP/export_foreign") != notes.txt ]]; then fail "export into a foreign directory: the directory changed"; fi

# ---- an existing --out directory is left untouched by a bad input ------------------------------------
# expect_untouched NAME ARGS... -- --out points at a directory holding keep.txt (content and mtime fixed);
# after the failing run it must hold exactly keep.txt, unchanged.
expect_untouched() {
  local name=$1
  shift
  n=$((n + 1))
  local keep="$TMP/keep$n"
  mkdir "$keep"
  echo "previous results" >"$keep/keep.txt"
  cp "$keep/keep.txt" "$TMP/keep.txt.orig"
  touch -d '2001-01-01 00:00:00' "$keep/keep.txt"
  local rc=0 listing
  "$DTSIM" "$@" --out "$keep" >"$TMP/stdout" 2>"$TMP/stderr" || rc=$?
  listing=$(find "$keep" -mindepth 1 -printf '%f ')
  if [[ $rc -ne 2 ]]; then
    fail "$name: exit code $rc, expected 2" "$(cat "$TMP/stderr")"
  elif [[ $(wc -l <"$TMP/stderr") -ne 1 || -s $TMP/stdout ]]; then
    fail "$name: expected one stderr line and empty stdout" "$(cat "$TMP/stderr" "$TMP/stdout")"
  elif [[ $listing != "keep.txt " ]]; then
    fail "$name: directory now holds: $listing"
  elif ! cmp -s "$keep/keep.txt" "$TMP/keep.txt.orig"; then
    fail "$name: keep.txt content changed"
  elif [[ $(date -r "$keep/keep.txt" +%Y) != 2001 ]]; then
    fail "$name: keep.txt modification time changed"
  else
    local err
    err=$(cat "$TMP/stderr")
    echo "ok  $name: ${err//"$TMP"/\$TMP}"
  fi
}
# Rejected while reading the command line / presets ...
expect_untouched "existing --out dir untouched (unknown preset)" simulate --model gpt4 "${C[@]}" "${P[@]}"
# ... and rejected only when the simulation validates its inputs.
expect_untouched "existing --out dir untouched (bad calibration)" \
  simulate "${T[@]}" "${P[@]}" --calibration "$TMP/calib_eff15.json"

echo
if [[ $failures -ne 0 ]]; then
  echo "bad_input: $failures of $n cases FAILED"
  exit 1
fi
echo "bad_input: all $n cases passed"
