// Calibration JSON (--calibration FILE.json): parse, read (validates), write back and re-read.
#include "fuzz/fuzz_common.hpp"
#include "traces/calibration.hpp"
#include "traces/json_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dtsim::fuzz::only_errors([&] {
    auto j = dtsim::json_util::parse_text(dtsim::fuzz::text_of(data, size), "fuzz.json");
    dtsim::Calibration c = dtsim::calibration_from_json(j, "calibration file 'fuzz.json'");
    (void)dtsim::calibration_from_json(dtsim::to_json(c), "round trip");
  });
}
