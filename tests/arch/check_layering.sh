#!/usr/bin/env bash
# arch/check_layering.sh ROOT -- enforces the layering rules of the source tree by grepping #include lines.
#
# Layer order: traces <- strategies <- sim; profiler and validate meet the others only through traces, and
# SimGrid is an implementation detail of the engine. Concretely:
#   1. only files under sim/engine/ include SimGrid headers (<simgrid/...>, and its <xbt/...>, <smpi/...>);
#   2. nothing under traces/ includes "strategies/", "sim/", "profiler/" or "validate/" headers;
#   3. nothing under strategies/ includes "sim/", "profiler/", "validate/" or SimGrid headers;
#   4. validate may include traces only: the always-built comparison (validate/compare.*, the dtsim::validate
#      library) includes no "strategies/", "sim/", "profiler/", SimGrid or GPU headers (the executor side of
#      validate/, which runs the simulator's own lowered graph, is not covered);
#   5. nothing under traces/, strategies/ or sim/ includes GPU libraries (<cuda...>, <cupti...>, <nccl...>,
#      <cublas...>, <cudnn...>): the simulator must build on machines without CUDA;
#   6. no exit() (exit, std::exit, _Exit, quick_exit) in library code: errors are exceptions that main()
#      turns into "dtsim: error: ..." and exit code 2; sim/apps/dtsim_main.cpp is the only main file, and
#      tests/ are not library code. // comments are ignored for this rule.
# Files scanned: *.hpp *.cpp *.h *.cc (plus *.cpp.in *.hpp.in *.cu *.cuh) under ROOT, excluding build*/ and
# hidden directories. Each violation is printed as file:line: text; the exit code is 1 if there is any.
set -euo pipefail

ROOT=${1:?usage: check_layering.sh /path/to/project/root}
cd "$ROOT"

# Source files, relative to ROOT, without a leading "./".
mapfile -d '' FILES < <(find . \( -type d \( -name 'build*' -o -name '.*' \) ! -name . -prune \) -o \
  -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.h' -o -name '*.cc' -o -name '*.cpp.in' \
  -o -name '*.hpp.in' -o -name '*.cu' -o -name '*.cuh' \) -printf '%P\0' | sort -z)
if [[ ${#FILES[@]} -eq 0 ]]; then
  echo "FAIL no source files found under $ROOT"
  exit 1
fi

violations=0

# select_files INCLUDE_REGEX [EXCLUDE_REGEX] -- prints (NUL-separated) the files whose path matches
# INCLUDE_REGEX and not EXCLUDE_REGEX (extended regexes on the path relative to ROOT).
select_files() {
  local inc=$1 exc=${2:-} f
  for f in "${FILES[@]}"; do
    [[ $f =~ $inc ]] || continue
    [[ -n $exc && $f =~ $exc ]] && continue
    printf '%s\0' "$f"
  done
}

# rule DESCRIPTION FILE_REGEX EXCLUDE_REGEX HEADER_REGEX -- flags #include lines, in the selected files,
# whose header path (after "..."/<...> opening and any leading ./ or ../) matches HEADER_REGEX.
rule() {
  local desc=$1 inc=$2 exc=$3 hdr=$4 hits
  local pattern="^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"](\\.{1,2}/)*($hdr)"
  hits=$(select_files "$inc" "$exc" | xargs -0 -r grep -nHE -- "$pattern" || true)
  report "$desc" "$hits"
}

# report DESCRIPTION HITS -- prints "ok" or every hit (file:line: text) under the rule's description.
report() {
  local desc=$1 hits=$2
  if [[ -z $hits ]]; then
    echo "ok  $desc"
  else
    echo "FAIL $desc:"
    sed 's/^/     /' <<<"$hits"  # indent each hit
    violations=$((violations + $(wc -l <<<"$hits")))
  fi
}

SIMGRID='simgrid/|xbt/|smpi/'
GPU='cuda|cupti|nccl|cublas|cudnn'

rule "only sim/engine/ includes SimGrid headers" '' '^sim/engine/' "$SIMGRID"
rule "traces/ includes no strategies/, sim/, profiler/, validate/ headers" '^traces/' '' \
  'strategies/|sim/|profiler/|validate/'
rule "strategies/ includes no sim/, profiler/, validate/ or SimGrid headers" '^strategies/' '' \
  "sim/|profiler/|validate/|$SIMGRID"
rule "validate/compare.* includes traces/ headers only" '^validate/compare\.' '' \
  "strategies/|sim/|profiler/|$SIMGRID|$GPU"
rule "traces/, strategies/, sim/ include no CUDA, CUPTI or NCCL headers" '^(traces|strategies|sim)/' '' "$GPU"

# Rule 6: exit() outside the main file. Comments after // are dropped before matching.
exit_hits=$(select_files '' '^(sim/apps/dtsim_main\.cpp|tests/)' | xargs -0 -r grep -nHE -- \
  '(\bexit|std::exit|\b_Exit|\bquick_exit)[[:space:]]*\(' |
  awk '{
    # "file:line:text": strip a // comment from text and keep the hit only if the call is still there.
    match($0, /^[^:]*:[0-9]+:/); loc = substr($0, 1, RLENGTH); text = substr($0, RLENGTH + 1)
    code = text; sub(/\/\/.*/, "", code)
    if (code ~ /(^|[^A-Za-z0-9_])(exit|_Exit|quick_exit)[[:space:]]*\(/) print loc text
  }' || true)
report "no exit() in library code (only sim/apps/dtsim_main.cpp may end the process)" "$exit_hits"

echo
echo "layering: ${#FILES[@]} files scanned"
if [[ $violations -ne 0 ]]; then
  echo "layering: $violations violations"
  exit 1
fi
echo "layering: no violations"
