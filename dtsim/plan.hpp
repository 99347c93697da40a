// Public API, planners (included by dtsim/dtsim.hpp): search a plan, compare every planner, the largest model each
// fits, the GPUs a deadline needs. Same conventions as dtsim.hpp: plain structs, `text` and `files`, ConfigError.
#pragma once
#include <string>
#include <vector>

#include "dtsim/common.hpp"
#include "traces/plan.hpp"

namespace dtsim {

/// What `dtsim plan` and `dtsim bakeoff` take.
struct PlanRequest {
  std::string model;
  std::string cluster;
  std::string calibration;  ///< "" = the built-in one of the cluster's GPU
  /// Software stack every candidate runs with: name or profile .json (e.g. `calibrate runs`' stack.json); "" = the
  /// default stack.
  std::string stack;
  int global_batch_size = 0;      ///< required
  double memory_limit_bytes = 0;  ///< 0 = the device's
  int tensor_parallel = 1;        ///< pipedream, dapple: GPUs of one node acting as one device
  std::string planner = "grid";   ///< grid | pipedream | dapple | rannc | rannc-paper | rannc-layers | uniap | uniap-k1
                                  ///< | luo (plan() only)
  int top = 5;                    ///< the planner's best candidates simulated (1..100)
  std::string network = "flow";   ///< flow | analytic, for the simulations
  /// Precision of the linear layers' GEMMs in every candidate (precision_from_string: bf16, fp8, fp8-current, ...);
  /// the grid planner estimates with it, the other planners' candidates are simulated with it.
  std::string precision = "bf16";
  int seq_len = 0;               ///< > 0: overrides the model's sequence length (as simulate --seq-len)
  bool simulate_chosen = false;  ///< plan(): also simulate the chosen plan here (its summary.json, trace.json)
  std::string command = "plan";  ///< names the caller in error messages
};

struct PlanCandidate {
  ParallelPlan plan;
  std::string description;                           ///< "tp 8 pp 8 dp 16 mbs 1 1f1b ..."
  double predicted_s = 0, predicted_peak_bytes = 0;  ///< the planner's own cost model
  double simulated_s = 0, simulated_peak_bytes = 0;  ///< dtsim
  bool fits = false;                                 ///< fits memory in simulation
};

struct PlanResult {
  std::string planner;
  std::size_t considered = 0, invalid = 0, over_memory = 0, pruned = 0, feasible = 0;
  double search_s = 0;                    ///< the planner's search wall time
  double simulate_s = 0;                  ///< wall time of the simulations
  std::vector<PlanCandidate> candidates;  ///< the simulated ones, in the planner's order
  int chosen = -1;                        ///< index into candidates; -1 if none fits
  std::string text;
  Files files;  ///< candidates.json; with simulate_chosen and a chosen plan also plan.json, summary.json, trace.json
};
/// The planner ranks plans by its own prediction; the best `top` are simulated (each in its own process) and the
/// fastest that fits memory is chosen.
PlanResult plan(const PlanRequest& req);

struct BakeoffResult {
  std::vector<PlanResult> planners;  ///< one per planner, in planner order (text and files left empty)
  std::string text;
  Files files;  ///< bakeoff.json
};
/// Every planner on the same request (req.planner is ignored), each one's best `top` simulated.
BakeoffResult bakeoff(const PlanRequest& req);

/// What `dtsim capacity` takes: the largest model of a ladder each planner fits.
struct CapacityRequest {
  std::string cluster;
  std::string calibration;
  std::string stack;  ///< as PlanRequest::stack
  int global_batch_size = 0;
  double memory_limit_bytes = 0;
  std::vector<std::string> models;    ///< the ladder, smallest first ({} = the megatron-* presets by size)
  std::vector<std::string> planners;  ///< {} = every planner and the megatron-tp baseline
};
struct CapacityResult {
  struct Row {
    std::string planner;
    std::string largest_model;  ///< "" when none fits
    double largest_params = 0;
    ParallelPlan plan;
    std::vector<std::string> fits;
  };
  std::vector<std::string> ladder;
  std::vector<Row> rows;
  std::string text;
  Files files;  ///< capacity.json
};
CapacityResult capacity(const CapacityRequest& req);

/// What `dtsim capacity --tokens T --days D` takes: the smallest GPU count (powers of two up to one node, then whole
/// nodes, doubling) whose best strategy trains `tokens` tokens within `days` (grid planner per count, its best `top`
/// simulated).
struct DeadlineRequest {
  std::string model;
  std::string gpu;          ///< GPU preset or alias (a100-sxm4-80gb, b200, ...) or cluster preset (dgx-h100, ...)
  std::string calibration;  ///< "" = the GPU's built-in one
  std::string stack;        ///< as PlanRequest::stack
  double tokens = 0;
  double days = 0;
  double price_per_gpu_hour = 0;  ///< 0: no cost column
  int global_batch_size = 0;  ///< sequences; 0 = about 4M tokens: a power of two x the node size's odd part (NVL72: 9)
  int max_gpus = 16384;
  int top = 3;
  std::string network = "analytic";  ///< analytic | flow
  double memory_limit_bytes = 0;     ///< 0 = the device's
};
struct DeadlineResult {
  struct Step {
    int gpus = 0;
    bool found = false;  ///< a plan fits memory
    ParallelPlan plan;
    std::string description;
    double iteration_s = 0, tokens_per_s = 0, days = 0, cost = 0, mfu = 0;
    bool meets = false;
  };
  double required_tokens_per_s = 0;
  double bound_gpus = 0;    ///< hardware bound: no strategy needs fewer GPUs
  std::vector<Step> steps;  ///< in the order tried
  int answer = -1;          ///< index into steps; -1: not met up to max_gpus
  std::string text;
  Files files;  ///< capacity.json
};
DeadlineResult deadline(const DeadlineRequest& req);

}  // namespace dtsim
