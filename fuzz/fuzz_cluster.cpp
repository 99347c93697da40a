// Cluster JSON (--cluster FILE.json), two-level and graph clusters: parse, read, validate, write back and re-read;
// then what the lowering asks of a cluster (NIC, leaf and pod of a GPU; pairwise links, which on a graph cluster
// are Dijkstra routes) for the first and last 32 GPUs. An input that does not start with '{' is a cluster preset
// string instead (--cluster NAME:GPUS[:FABRIC:ARGS...]), as load_cluster reads it.
#include <algorithm>
#include <vector>

#include "fuzz/fuzz_common.hpp"
#include "traces/calibration.hpp"
#include "traces/cluster.hpp"
#include "traces/json_util.hpp"
#include "traces/routing.hpp"

namespace {
void exercise(const dtsim::ClusterSpec& c, const dtsim::Calibration& cal) {
  std::vector<int> gpus;
  for (int g = 0; g < c.total_gpus(); ++g) {
    gpus.push_back(g);
    if (g == 31 && c.total_gpus() > 64) g = c.total_gpus() - 33;
  }
  for (int g : gpus) (void)c.nic_of(g), (void)c.leaf_of(g), (void)c.pod_of(g), (void)c.node_of(g);
  (void)c.num_leaves();
  dtsim::PairLinks links(c, cal);
  for (int a : gpus)
    for (int b : gpus)
      if (a != b && (a < 4 || b < 4)) (void)links.get(a, b).time_s(1e6);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const dtsim::Calibration cal = dtsim::default_calibration("a100-sxm4-80gb");
  const std::string text = dtsim::fuzz::text_of(data, size);
  if (text.empty() || text[0] != '{') {
    // Preset strings only: a '/' or a ".json" suffix would make load_cluster open a file.
    if (text.find('/') != std::string::npos || text.find('\0') != std::string::npos ||
        (text.size() > 5 && text.ends_with(".json")))
      return 0;
    return dtsim::fuzz::only_errors([&] { exercise(dtsim::load_cluster(text), cal); });
  }
  return dtsim::fuzz::only_errors([&] {
    auto j = dtsim::json_util::parse_text(text, "fuzz.json");
    dtsim::ClusterSpec c = dtsim::cluster_from_json(j, "cluster file 'fuzz.json'");
    c.validate();
    dtsim::ClusterSpec back = dtsim::cluster_from_json(dtsim::to_json(c), "round trip");
    back.validate();
    exercise(c, cal);
  });
}
