// nccl-tests output (dtsim calibrate --nccl-tests): text or JSON (-J), chosen by the first character as
// load_nccl_tests does.
#include "fuzz/fuzz_common.hpp"
#include "traces/nccl_tests.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dtsim::fuzz::only_errors([&] {
    const std::string text = dtsim::fuzz::text_of(data, size);
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '{')
      (void)dtsim::parse_nccl_tests_json(text, "nccl-tests output 'fuzz.json'");
    else (void)dtsim::parse_nccl_tests(text, "nccl-tests output 'fuzz.txt'");
  });
}
