// Model JSON (--model FILE.json): parse, read, validate, derive the parameter counts, write back and re-read.
#include "fuzz/fuzz_common.hpp"
#include "traces/json_util.hpp"
#include "traces/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dtsim::fuzz::only_errors([&] {
    auto j = dtsim::json_util::parse_text(dtsim::fuzz::text_of(data, size), "fuzz.json");
    dtsim::TransformerSpec m = dtsim::model_from_json(j, "model file 'fuzz.json'");
    m.validate();
    (void)m.total_params();
    dtsim::TransformerSpec back = dtsim::model_from_json(dtsim::to_json(m), "round trip");
    back.validate();
  });
}
