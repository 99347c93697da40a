#!/usr/bin/env bash
# arch/check_layering.sh ROOT -- enforces the layering rules of the source tree by grepping #include lines: no
# library includes a header of a layer above it. The layers and their ranks are read from cmake/DtsimLayers.cmake
# (the same table dtsim_check_layers() applies to link lines; layer "api" is the folder dtsim/):
#   traces (0) <- strategies, profiler (1) <- sim (2) <- studies, validate (3) <- dtsim (4) <- cli, python (5).
# Concretely:
#   1. no file under a layer folder includes a header ("X/...") of another layer folder X of the same or a higher
#      rank: a layer uses only those below it, and peers (strategies/profiler, studies/validate) never use each
#      other; so studies/ and validate/ never include each other, dtsim/ includes no "cli/";
#   2. within sim/, sim/model/ (lowering, task graph, platform: pure) includes no sim/engine/, sim/replay/,
#      sim/report/ or sim/simulate.hpp;
#   3. only files under sim/engine/ include SimGrid headers (<simgrid/...>, and its <xbt/...>, <smpi/...>);
#   4. validate/compare/compare.* and validate/compare/measurements.* include project headers of traces/ (and each
#      other) only, and no SimGrid or GPU headers: the executor (validate/exec/) links them without the simulator;
#   5. nothing under traces/, strategies/, sim/, studies/, dtsim/, cli/ or python/ includes GPU libraries (<cuda...>,
#      <cupti...>, <nccl...>, <cublas...>, <cudnn...>): the simulator and its front ends build without CUDA;
#   6. cli/ and python/ (the front ends) go through the library API: their files include project headers of their
#      own folder, dtsim/ and traces/ (the vocabulary the API's structs are made of: model, cluster, plan,
#      calibration, errors, units) only;
#   7. no exit() (exit, std::exit, _Exit, quick_exit) in library code: errors are exceptions that main()
#      turns into "dtsim: error: ..." and exit code 2; cli/main.cpp is the only main file that may end the
#      process, and tests/ are not library code. // comments are ignored for this rule.
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

# Layer folders and their ranks, from cmake/DtsimLayers.cmake: "set(DTSIM_LAYER_RANK_<layer> <rank>)".
LAYERS_CMAKE=cmake/DtsimLayers.cmake
declare -A RANK=()
if [[ -f $LAYERS_CMAKE ]]; then
  while read -r layer rank; do
    [[ $layer == api ]] && layer=dtsim  # the public API's layer lives in dtsim/
    RANK[$layer]=$rank
  done < <(sed -nE 's/^[[:space:]]*set\(DTSIM_LAYER_RANK_([A-Za-z0-9_]+)[[:space:]]+([0-9]+)\).*/\1 \2/p' \
             "$LAYERS_CMAKE")
fi
if [[ ${#RANK[@]} -eq 0 ]]; then
  echo "FAIL no layer ranks (set(DTSIM_LAYER_RANK_<layer> N)) found in $ROOT/$LAYERS_CMAKE"
  exit 1
fi
mapfile -t FOLDERS < <(for l in "${!RANK[@]}"; do echo "${RANK[$l]} $l"; done | sort -n -k1,1 -k2,2 | cut -d' ' -f2)

# Rule 1: per layer folder, the folders of the same or a higher rank (other than its own).
for f in "${FOLDERS[@]}"; do
  if [[ ! -d $f ]]; then
    echo "FAIL layer folder $f/ (from $LAYERS_CMAKE) does not exist"
    violations=$((violations + 1))
    continue
  fi
  above=()
  for g in "${FOLDERS[@]}"; do
    [[ $g != "$f" && ${RANK[$g]} -ge ${RANK[$f]} ]] && above+=("$g")
  done
  if [[ ${#above[@]} -eq 0 ]]; then
    echo "ok  $f/ (rank ${RANK[$f]}) is the top layer: it may include any layer"
    continue
  fi
  regex=$(printf '%s/|' "${above[@]}")
  names=$(printf '%s/, ' "${above[@]}")
  rule "$f/ (rank ${RANK[$f]}) includes no ${names%, } headers" "^$f/" '' "${regex%|}"
done

rule "sim/model/ includes no sim/engine/, sim/replay/, sim/report/ or sim/simulate.hpp" '^sim/model/' '' \
  'sim/engine/|sim/replay/|sim/report/|sim/simulate\.hpp'
rule "only sim/engine/ includes SimGrid headers" '' '^sim/engine/' "$SIMGRID"

# Rule 4: every #include "..." in the comparison files must name traces/ or the comparison files themselves.
compare_hits=$(select_files '^validate/compare/(compare|measurements)\.' |
  xargs -0 -r grep -nHE -- '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' |
  grep -vE ':[[:space:]]*#[[:space:]]*include[[:space:]]*"(traces/|validate/compare/(compare|measurements)\.hpp")' ||
  true)
system_hits=$(select_files '^validate/compare/(compare|measurements)\.' |
  xargs -0 -r grep -nHE -- "^[[:space:]]*#[[:space:]]*include[[:space:]]*<($SIMGRID|$GPU)" || true)
[[ -n $compare_hits && -n $system_hits ]] && compare_hits+=$'\n'
compare_hits+=$system_hits
report "validate/compare/compare.* and measurements.* include traces/ headers only" "$compare_hits"

rule "cli/ and python/ include project headers of their own folder, dtsim/ and traces/ only (the library API)" \
  '^(cli|python)/' '' 'strategies/|profiler/|sim/|studies/|validate/'
rule "traces/, strategies/, sim/, studies/, dtsim/, cli/, python/ include no CUDA, CUPTI or NCCL headers" \
  '^(traces|strategies|sim|studies|dtsim|cli|python)/' '' "$GPU"

# Rule 7: exit() outside the main file. Comments after // are dropped before matching.
exit_hits=$(select_files '' '^(cli/main\.cpp|tests/)' | xargs -0 -r grep -nHE -- \
  '(\bexit|std::exit|\b_Exit|\bquick_exit)[[:space:]]*\(' |
  awk '{
    # "file:line:text": strip a // comment from text and keep the hit only if the call is still there.
    match($0, /^[^:]*:[0-9]+:/); loc = substr($0, 1, RLENGTH); text = substr($0, RLENGTH + 1)
    code = text; sub(/\/\/.*/, "", code)
    if (code ~ /(^|[^A-Za-z0-9_])(exit|_Exit|quick_exit)[[:space:]]*\(/) print loc text
  }' || true)
report "no exit() in library code (only cli/main.cpp may end the process)" "$exit_hits"

echo
echo "layering: ${#FILES[@]} files scanned"
if [[ $violations -ne 0 ]]; then
  echo "layering: $violations violations"
  exit 1
fi
echo "layering: no violations"
