# The layer rule, written in CMake: every dtsim target belongs to a layer, and a target may link only targets of its
# own layer or of a layer below it. Layers of the same rank are peers and may not use each other (studies/ and
# validate/). dtsim_check_layers() (called once, at the end of the top-level CMakeLists.txt) stops the configure
# with one line per violation. tests/arch/check_layering.sh checks the same order on #include lines.
#
#   rank 0  traces      vocabulary, schemas, importers/exporters
#   rank 1  strategies  cost and memory models, schedules, estimator, planners
#   rank 1  profiler    CUPTI plumbing over the interpretation layer (uses traces only)
#   rank 2  sim         the simulator: lowering, engines, replay, reports
#   rank 3  studies     sweeps, Pareto, HTML report, plan search, capacity, multi-job, collective benchmarks
#   rank 3  validate    comparison with measurements: published data, calibration fits, executor, compare
#   rank 4  api         the public library API (dtsim/dtsim.hpp)
#   rank 5  cli         the dtsim command line
#   rank 5  python      the Python module (import dtsim)
set(DTSIM_LAYERS traces strategies profiler sim studies validate api cli python)
set(DTSIM_LAYER_RANK_traces 0)
set(DTSIM_LAYER_RANK_strategies 1)
set(DTSIM_LAYER_RANK_profiler 1)
set(DTSIM_LAYER_RANK_sim 2)
set(DTSIM_LAYER_RANK_studies 3)
set(DTSIM_LAYER_RANK_validate 3)
set(DTSIM_LAYER_RANK_api 4)
set(DTSIM_LAYER_RANK_cli 5)
set(DTSIM_LAYER_RANK_python 5)

# dtsim_layer(TARGET LAYER): records that TARGET (an existing library or executable) belongs to LAYER.
function(dtsim_layer target layer)
  if(NOT DEFINED DTSIM_LAYER_RANK_${layer})
    message(FATAL_ERROR "dtsim_layer: unknown layer '${layer}' for ${target} (known: ${DTSIM_LAYERS})")
  endif()
  set_property(TARGET ${target} PROPERTY DTSIM_LAYER ${layer})
  set_property(GLOBAL APPEND PROPERTY DTSIM_LAYERED_TARGETS ${target})
endfunction()

# dtsim_layer_library(TARGET LAYER SOURCES...): a static library of LAYER.
function(dtsim_layer_library target layer)
  add_library(${target} STATIC ${ARGN})
  dtsim_layer(${target} ${layer})
  dtsim_precompile_common_headers(${target})
endfunction()

# dtsim_precompile_common_headers(TARGET): with DTSIM_PCH, TARGET's C++ sources see nlohmann/json and the standard
# containers precompiled: 12-14% less compile time (dtsim_traces 160 s -> 141 s, Release, one core, 2026-11-28). Off by
# default: the inlining it changes makes GCC 12 -O3 -Werror report a false -Wstringop-overflow (traces/exec_graph.cpp).
# clang-tidy cannot read GCC's precompiled headers: the lint configuration keeps it off.
function(dtsim_precompile_common_headers target)
  if(DTSIM_PCH)
    target_precompile_headers(${target} PRIVATE <nlohmann/json.hpp> <algorithm> <functional> <map> <memory> <string>
                              <unordered_map> <vector>)
  endif()
endfunction()

# The layer of a link item (a target name, an alias, or a $<LINK_ONLY:...> wrapper), or "" for anything else.
function(_dtsim_layer_of item out)
  set(layer "")
  string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
  if(TARGET ${item})
    get_target_property(aliased ${item} ALIASED_TARGET)
    if(aliased)
      set(item ${aliased})
    endif()
    get_target_property(l ${item} DTSIM_LAYER)
    if(l)
      set(layer ${l})
    endif()
  endif()
  set(${out} "${layer}" PARENT_SCOPE)
endfunction()

function(dtsim_check_layers)
  get_property(targets GLOBAL PROPERTY DTSIM_LAYERED_TARGETS)
  set(violations "")
  foreach(t ${targets})
    get_target_property(layer ${t} DTSIM_LAYER)
    set(rank ${DTSIM_LAYER_RANK_${layer}})
    get_target_property(type ${t} TYPE)
    set(items "")
    foreach(prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
      get_target_property(v ${t} ${prop})
      if(v)
        list(APPEND items ${v})
      endif()
    endforeach()
    foreach(item ${items})
      _dtsim_layer_of("${item}" dep_layer)
      if(dep_layer STREQUAL "" OR dep_layer STREQUAL layer)
        continue()
      endif()
      if(NOT DTSIM_LAYER_RANK_${dep_layer} LESS rank)
        list(APPEND violations "${t} (${layer}) links ${item} (${dep_layer}): a layer may link only layers below it")
      endif()
    endforeach()
  endforeach()
  if(violations)
    list(JOIN violations "\n  " text)
    message(FATAL_ERROR "dtsim layering violated:\n  ${text}")
  endif()
  list(LENGTH targets n)
  message(STATUS "dtsim layers: ${n} targets checked, each links only its own layer and those below")
endfunction()
