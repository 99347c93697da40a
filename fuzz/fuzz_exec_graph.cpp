// PyTorch execution trace (ET) and Chakra JSON (feeder and chakra_jsonizer forms): the in-memory parsers the
// file importers run, then the dependency check and topological order every consumer runs.
#include "fuzz/fuzz_common.hpp"
#include "traces/exec_graph.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = dtsim::fuzz::text_of(data, size);
  dtsim::fuzz::only_errors([&] {
    dtsim::ExecGraph g = dtsim::parse_pytorch_et(text, "fuzz_et.json");
    (void)dtsim::topological_order(g);
  });
  return dtsim::fuzz::only_errors([&] {
    dtsim::ExecGraph g = dtsim::parse_chakra_json(text, "fuzz_chakra.json");
    (void)dtsim::topological_order(g);
  });
}
