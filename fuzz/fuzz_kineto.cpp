// Kineto / PyTorch-profiler Chrome trace (dtsim import, replay, calibrate): the in-memory parser that
// import_kineto runs on a file's (decompressed) text.
#include "fuzz/fuzz_common.hpp"
#include "traces/kineto_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dtsim::fuzz::only_errors([&] {
    dtsim::ImportedTrace t = dtsim::parse_kineto(dtsim::fuzz::text_of(data, size), "fuzz.json");
    (void)t;
  });
}
