# FindSimGrid: Debian's libsimgrid-dev (3.32) ships no CMake package configuration.
# Defines SimGrid_FOUND, SimGrid_VERSION, SimGrid_INCLUDE_DIR, SimGrid_LIBRARY and the imported target
# SimGrid::SimGrid.
find_path(SimGrid_INCLUDE_DIR NAMES simgrid/s4u.hpp)
find_library(SimGrid_LIBRARY NAMES simgrid)
if(SimGrid_INCLUDE_DIR AND EXISTS "${SimGrid_INCLUDE_DIR}/simgrid/version.h")
  file(STRINGS "${SimGrid_INCLUDE_DIR}/simgrid/version.h" _sg_ver REGEX "#define SIMGRID_VERSION_(MAJOR|MINOR|PATCH) ")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define SIMGRID_VERSION_${_part} ([0-9]+).*" "\\1" _sg_${_part} "${_sg_ver}")
  endforeach()
  set(SimGrid_VERSION "${_sg_MAJOR}.${_sg_MINOR}.${_sg_PATCH}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(SimGrid REQUIRED_VARS SimGrid_LIBRARY SimGrid_INCLUDE_DIR
                                  VERSION_VAR SimGrid_VERSION)
if(SimGrid_FOUND AND NOT TARGET SimGrid::SimGrid)
  add_library(SimGrid::SimGrid UNKNOWN IMPORTED)
  set_target_properties(SimGrid::SimGrid PROPERTIES IMPORTED_LOCATION "${SimGrid_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${SimGrid_INCLUDE_DIR}")
endif()
mark_as_advanced(SimGrid_INCLUDE_DIR SimGrid_LIBRARY)
