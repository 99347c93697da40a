// Built-in calibration files, compiled in from traces/calibration/*.json by CMake.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dtsim::detail {
/// (gpu preset name, JSON text) for every shipped calibration file.
const std::vector<std::pair<std::string, std::string>>& builtin_calibrations();
}  // namespace dtsim::detail
