#include "sim/engine/simgrid_runtime.hpp"

namespace dtsim::sim {

std::vector<LinkStats> initial_link_stats(const Platform& pf) {
  std::vector<LinkStats> out;
  out.reserve(pf.links.size());
  for (const auto& l : pf.links) out.push_back({l.name, l.bandwidth_Bps * l.multiplicity, 0, 0, 0, l.multiplicity});
  return out;
}

void count_folded_copies(const Platform& pf, EngineResult* res) {
  DTSIM_ASSERT(res->link_stats.size() == pf.links.size(), "one LinkStats per platform link");
  for (std::size_t l = 0; l < pf.links.size(); ++l) res->link_stats[l].bytes *= pf.links[l].multiplicity;
}

}  // namespace dtsim::sim
