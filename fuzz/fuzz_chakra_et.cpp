// Chakra protobuf execution traces (.et): the length-delimited stream reader the file importers run on a binary
// trace, then the dependency check and topological order every consumer runs.
#include "fuzz/fuzz_common.hpp"
#include "traces/exec_graph.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes = dtsim::fuzz::text_of(data, size);
  return dtsim::fuzz::only_errors([&] {
    dtsim::ExecGraph g = dtsim::parse_chakra_et(bytes, "fuzz.0.et");
    (void)dtsim::topological_order(g);
  });
}
