// Planner interface: every planner takes the model, the cluster and constraints and returns candidate plans
// ranked by its own prediction, with what it considered and how long it searched. The simulator then decides
// (studies/plan/plan_search.hpp). Planners depend on traces and strategies only.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "strategies/estimator.hpp"
#include "traces/calibration.hpp"
#include "traces/cluster.hpp"
#include "traces/model.hpp"
#include "traces/plan.hpp"

namespace dtsim::planning {

struct PlannerInput {
  TransformerSpec model;
  ClusterSpec cluster;
  Calibration calibration;
  int global_batch_size = 0;
  double memory_limit_bytes = 0;  ///< 0 = the device memory
  /// Pipeline planners that do not choose tensor parallelism (PipeDream, DAPPLE) treat a group of this many GPUs
  /// of one node as one device (1 = plain GPUs, as in their papers).
  int tensor_parallel = 1;
  /// Precision of the linear layers' GEMMs in every candidate. The grid planner estimates its candidates with it;
  /// the pipeline planners (PipeDream, DAPPLE, RaNNC, UniAP, after Luo et al.) search with their bf16 layer costs,
  /// and sim::search_plan sets it on their candidates before simulating them.
  Precision precision = Precision::BF16;
};

struct Candidate {
  ParallelPlan plan;
  estimate::Estimate estimate;  ///< the planner's own prediction
};

struct PlannerResult {
  std::string planner;
  std::vector<Candidate> ranked;  ///< feasible candidates, best predicted first
  std::size_t considered = 0;     ///< plans generated
  std::size_t invalid = 0;        ///< rejected by plan validation (divisibility, batch)
  std::size_t over_memory = 0;    ///< valid but predicted over the memory limit
  std::size_t pruned = 0;         ///< not evaluated: dominated by a bound, or the search ran out of time
  double search_s = 0;            ///< wall time of the search
};

class Planner {
public:
  virtual ~Planner() = default;
  virtual std::string name() const = 0;
  virtual PlannerResult plan(const PlannerInput& in) const = 0;
};

/// Known planners: planner_names(). Throws ConfigError for other names.
std::unique_ptr<Planner> make_planner(const std::string& name);
std::vector<std::string> planner_names();

/// One-line description of a plan ("tp 8 pp 8 dp 16 mbs 1 1f1b recompute full zero 0 sp").
std::string describe(const ParallelPlan& p);

}  // namespace dtsim::planning
