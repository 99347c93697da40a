#include "traces/accuracy_bands.hpp"

#include <nlohmann/json.hpp>

#include "traces/json_util.hpp"
#include "traces/stack_data.hpp"
#include "traces/stack_profile.hpp"

namespace dtsim {

std::vector<std::string> band_keys(const std::string& gpu, const std::string& stack, const std::string& scale) {
  const std::string s = stack.empty() ? kDefaultStack : stack;
  // The GPU before the stack: a GPU's calibration moves errors more than its stack does (the development sources'
  // errors cluster by GPU).
  return {gpu + "|" + s + "|" + scale, gpu + "|" + s, gpu, s + "|" + scale, s, "all"};
}

const std::vector<AccuracyBand>& shipped_bands() {
  static const std::vector<AccuracyBand> bands = [] {
    std::vector<AccuracyBand> out;
    const auto j = nlohmann::json::parse(detail::builtin_bands_json());
    const std::string ctx = "built-in traces/accuracy/bands.json";
    for (const auto& b : json_util::get<nlohmann::json>(j, ctx, "bands"))
      out.push_back({json_util::get<std::string>(b, ctx, "key"), json_util::get<int>(b, ctx, "rows"),
                     json_util::get<double>(b, ctx, "q05"), json_util::get<double>(b, ctx, "q95"),
                     json_util::get_or<int>(b, ctx, "sources", 0)});
    return out;
  }();
  return bands;
}

std::optional<AccuracyBand> accuracy_band(const std::string& gpu, const std::string& stack, bool multi_node) {
  for (const auto& k : band_keys(gpu, stack, multi_node ? "multi-node" : "1-node"))
    for (const auto& b : shipped_bands())
      if (b.key == k) return b;
  return std::nullopt;
}

}  // namespace dtsim
