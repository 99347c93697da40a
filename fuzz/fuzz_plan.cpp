// Plan JSON (--plan FILE.json): parse, read, validate against GPT-3 1.3B on a DGX-A100 cluster of the plan's
// size (so that validation gets past the GPU-count check), then what the lowering derives from a valid plan:
// stage and chunk layers, rank coordinates, the per-stage pass orders (checked), and a write/re-read round trip.
#include <algorithm>
#include <cstdint>

#include "fuzz/fuzz_common.hpp"
#include "strategies/schedule.hpp"
#include "traces/cluster.hpp"
#include "traces/json_util.hpp"
#include "traces/model.hpp"
#include "traces/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const dtsim::TransformerSpec model = dtsim::model_preset("gpt3-1.3b");
  return dtsim::fuzz::only_errors([&] {
    auto j = dtsim::json_util::parse_text(dtsim::fuzz::text_of(data, size), "fuzz.json");
    dtsim::ParallelPlan p = dtsim::plan_from_json(j, "plan file 'fuzz.json'");
    // The cluster: as many GPUs as the plan asks for when a DGX-A100 cluster of that size exists (harness choice).
    std::int64_t ws = static_cast<std::int64_t>(p.tp) * p.pp * p.dp;
    const auto sized = [&](std::size_t n) { return n == 0 || n == static_cast<std::size_t>(p.pp); };
    if (p.uses_stage_layout() && p.pp > 0 && p.dp > 0 && sized(p.stage_replicas.size()) &&
        sized(p.stage_strategies.size())) {
      std::int64_t per_copy = 0;  // the stage layout: sum over the stages of tp_s x replicas_s (in 64 bits)
      for (int s = 0; s < p.pp; ++s)
        per_copy += static_cast<std::int64_t>(std::max(0, p.stage_tp(s))) * std::max(0, p.replicas(s));
      ws = per_copy * p.dp;
    }
    const bool exists = ws >= 1 && ws <= 4096 && (ws <= 8 || ws % 8 == 0);
    const dtsim::ClusterSpec cluster = dtsim::load_cluster("dgx-a100:" + std::to_string(exists ? ws : 8));
    p.validate(model, cluster);
    (void)p.stage_layers(model.num_layers);
    (void)p.chunk_layers(model.num_layers);
    for (int r = 0; r < p.world_size(); r += 1 + p.world_size() / 64) (void)p.rank_of(p.coord_of(r));
    // Harness bound: the pass orders of at most 100k passes (larger ones only cost time).
    if (static_cast<std::int64_t>(p.num_microbatches()) * p.pp * p.virtual_stages <= 100000) {
      const auto orders = dtsim::sched::plan_orders(p);
      dtsim::sched::validate_orders(orders, p);
      for (const auto& o : orders) (void)dtsim::sched::max_in_flight(o, p.split_backward());
    }
    dtsim::ParallelPlan back = dtsim::plan_from_json(dtsim::to_json(p, model.num_layers), "round trip");
    back.validate(model, cluster);
  });
}
