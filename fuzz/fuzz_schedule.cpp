// Custom schedule order (--schedule custom:FILE.json): parse and read the order, then the checks the simulator
// runs on it (complete, no duplicates, no deadlock) with pp = the number of stages listed and m = the number of
// forward passes of stage 0 per chunk, and the in-flight count of every stage.
#include <algorithm>
#include <cstdint>

#include "fuzz/fuzz_common.hpp"
#include "strategies/schedule.hpp"
#include "traces/json_util.hpp"
#include "traces/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dtsim::fuzz::only_errors([&] {
    auto j = dtsim::json_util::parse_text(dtsim::fuzz::text_of(data, size), "fuzz.json");
    dtsim::ParallelPlan p;
    dtsim::custom_schedule_from_json(p, j, "fuzz.json");
    const int stages = static_cast<int>(p.custom_order.size());
    // ParallelPlan::validate refuses these before any order check: no stages, v < 1, pp * v > the layers (a
    // model of at most 4096 layers here).
    if (stages == 0 || p.virtual_stages < 1 || static_cast<std::int64_t>(stages) * p.virtual_stages > 4096) return;
    const auto forwards = std::count_if(p.custom_order[0].begin(), p.custom_order[0].end(),
                                        [](const dtsim::PipeOp& op) { return op.kind == dtsim::PipeOp::Kind::F; });
    const int m = std::max<int>(1, static_cast<int>(forwards / p.virtual_stages));
    p.pp = stages;
    dtsim::sched::validate_orders(p.custom_order, stages, m, p.virtual_stages, p.split_backward(), "fuzz.json");
    for (const auto& o : p.custom_order) (void)dtsim::sched::max_in_flight(o, p.split_backward());
    (void)p.schedule_name();
  });
}
