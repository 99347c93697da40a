// Chakra protobuf execution traces (.et): the length-delimited stream reader the file importers run on a binary
// trace, the writer (traces/chakra_et_writer.hpp) whose output must read back with the same ids, kinds and
// dependencies, the dependency check and topological order every consumer runs, and the Chakra replay
// (sim/replay/et_replay.hpp) of what was read, as one rank.
#include "fuzz/fuzz_common.hpp"
#include "sim/replay/et_replay.hpp"
#include "traces/chakra_et_writer.hpp"
#include "traces/exec_graph.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes = dtsim::fuzz::text_of(data, size);
  return dtsim::fuzz::only_errors([&] {
    dtsim::ExecGraph g = dtsim::parse_chakra_et(bytes, "fuzz.0.et");
    const dtsim::ExecGraph back = dtsim::parse_chakra_et(dtsim::chakra_et_bytes(g), "back.0.et");
    if (back.nodes.size() != g.nodes.size()) __builtin_trap();
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
      if (back.nodes[i].id != g.nodes[i].id || back.nodes[i].kind != g.nodes[i].kind ||
          back.nodes[i].data_deps != g.nodes[i].data_deps || back.nodes[i].ctrl_deps != g.nodes[i].ctrl_deps)
        __builtin_trap();
    (void)dtsim::topological_order(g);
    dtsim::sim::EtWorkload w;
    g.rank = 0;
    w.ranks.push_back(std::move(g));
    (void)dtsim::sim::run_et_replay(w, dtsim::sim::ReplayOptions{});
  });
}
