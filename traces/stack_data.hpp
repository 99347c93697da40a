// Built-in software-stack profiles, compiled in from traces/stacks/*.json by CMake.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dtsim::detail {
/// (profile name, JSON text) for every shipped stack profile.
const std::vector<std::pair<std::string, std::string>>& builtin_stacks();
}  // namespace dtsim::detail
