// Built-in software-stack profiles and accuracy bands, compiled in from traces/stacks/*.json and
// traces/accuracy/bands.json by CMake.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dtsim::detail {
/// (profile name, JSON text) for every shipped stack profile.
const std::vector<std::pair<std::string, std::string>>& builtin_stacks();
/// traces/accuracy/bands.json (the prediction intervals' bands).
const char* builtin_bands_json();
}  // namespace dtsim::detail
