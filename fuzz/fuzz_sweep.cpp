// Sweep spec (dtsim sweep SPEC.json): parse and expand (models, clusters, knob grid, filters, ids, the analytic
// memory pre-filter) and build every scenario's row skeleton; no scenario is simulated. Inputs naming files
// (a '/' or ".json" anywhere) are skipped so that the target only reads presets.
// Harness bound: at most 256 combinations of list values and global batches of at most 4096 (the expansion's cost
// is linear in both: a large grid is a slow sweep, not a bug).
#include <cstdint>

#include "fuzz/fuzz_common.hpp"
#include "studies/sweep/sweep.hpp"
#include "traces/json_util.hpp"

namespace {
bool small_enough(const nlohmann::json& spec) {
  if (!spec.is_object()) return true;  // refused by expand
  std::uint64_t combinations = 1;
  for (const auto& [key, value] : spec.items()) {
    if (value.is_array()) combinations *= std::max<std::size_t>(1, value.size());
    if (combinations > 256) return false;
  }
  if (spec.contains("gbs"))
    for (const auto& v : spec["gbs"].is_array() ? spec["gbs"] : nlohmann::json::array({spec["gbs"]}))
      if (v.is_number() && v.get<double>() > 4096) return false;
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = dtsim::fuzz::text_of(data, size);
  if (text.find('/') != std::string::npos || text.find(".json") != std::string::npos) return 0;
  return dtsim::fuzz::only_errors([&] {
    auto j = dtsim::json_util::parse_text(text, "sweep.json");
    if (!small_enough(j)) return;
    const auto ex = dtsim::sim::sweep::expand(j, "/nonexistent-dtsim-fuzz");
    for (const auto& s : ex.scenarios) (void)dtsim::sim::sweep::row_skeleton(ex, s, "pending", "");
  });
}
