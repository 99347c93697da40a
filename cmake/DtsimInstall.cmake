# What `cmake --install BUILD --prefix P` installs (included at the end of the top-level CMakeLists.txt):
#   P/bin/dtsim              the command line (and P/bin/dtsim-exec, where the executor is built)
#   P/lib/libdtsim.so*       the library: the public API (dtsim/) and, linked in, every layer below it
#   P/include/dtsim-0.1/     the public headers with their project paths: dtsim/dtsim.hpp and its sections (every
#                            dtsim/*.hpp but internal.hpp) and every header of traces/ strategies/ sim/ studies/
#                            validate/ (the API's headers include traces/*.hpp; the rest serves programs that go
#                            below the API)
#   P/lib/cmake/dtsim/       the CMake package: dtsimConfig.cmake, dtsimConfigVersion.cmake and dtsimTargets.cmake
#                            with the exported target dtsim::dtsim (libdtsim.so, its headers, C++20 and
#                            nlohmann_json, which the config finds with find_dependency)
# A consumer needs only find_package(dtsim CONFIG REQUIRED) and target_link_libraries(app PRIVATE dtsim::dtsim);
# tests/install/check_install.sh installs into a temporary prefix and builds such a consumer against it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DTSIM_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/dtsim-${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
set(DTSIM_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/dtsim)

# Public headers: a header file set of libdtsim.so, relative to the source root, so that the paths are preserved
# under DTSIM_INSTALL_INCLUDEDIR (which becomes dtsim::dtsim's include directory in the install tree).
file(GLOB_RECURSE _dtsim_public_headers CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/traces/*.hpp ${PROJECT_SOURCE_DIR}/strategies/*.hpp ${PROJECT_SOURCE_DIR}/sim/*.hpp
     ${PROJECT_SOURCE_DIR}/studies/*.hpp ${PROJECT_SOURCE_DIR}/validate/*.hpp ${PROJECT_SOURCE_DIR}/dtsim/*.hpp)
list(FILTER _dtsim_public_headers EXCLUDE REGEX "/dtsim/internal\\.hpp$")  # the API sources' own, not API
target_sources(dtsim_shared PUBLIC FILE_SET HEADERS BASE_DIRS ${PROJECT_SOURCE_DIR} FILES ${_dtsim_public_headers})

# Installed, the binaries and the library find libsimgrid, CUDA and the other shared libraries outside the system
# directories where they were found at build time.
set(_dtsim_installed dtsim dtsim_shared)
if(TARGET dtsim-exec)
  list(APPEND _dtsim_installed dtsim-exec)
endif()
set_target_properties(${_dtsim_installed} PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS dtsim RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET dtsim-exec)
  install(TARGETS dtsim-exec RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(TARGETS dtsim_shared EXPORT dtsimTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        FILE_SET HEADERS DESTINATION ${DTSIM_INSTALL_INCLUDEDIR}
        INCLUDES DESTINATION ${DTSIM_INSTALL_INCLUDEDIR})  # the include directory for CMake < 3.23 (no file sets)
install(EXPORT dtsimTargets NAMESPACE dtsim:: FILE dtsimTargets.cmake DESTINATION ${DTSIM_INSTALL_CMAKEDIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/dtsimConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/dtsimConfig.cmake INSTALL_DESTINATION ${DTSIM_INSTALL_CMAKEDIR})
# 0.x: a consumer asking for 0.1 gets 0.1.*, not 0.2.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dtsimConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dtsimConfig.cmake ${PROJECT_BINARY_DIR}/dtsimConfigVersion.cmake
        DESTINATION ${DTSIM_INSTALL_CMAKEDIR})
