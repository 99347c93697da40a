// Several training jobs sharing one cluster: each job's plan is lowered on its own GPUs (a contiguous range),
// the task graphs are merged and simulated together on one platform, so jobs slow each other down wherever
// they share links (NICs shared by GPUs of different jobs, oversubscribed leaf uplinks). Each job is also
// simulated alone (in its own process) to report the slowdown.
#pragma once
#include <string>
#include <vector>

#include "sim/simulate.hpp"

namespace dtsim::sim {

struct Job {
  std::string name;
  TransformerSpec model;
  ParallelPlan plan;
  int first_gpu = 0;
};

/// Reads {"schema_version": 1, "jobs": [{"name": ..., "model": PRESET or FILE or {...}, "first_gpu": N,
/// "plan": {plan JSON}}, ...]}. Throws ConfigError naming the job and field at fault.
std::vector<Job> load_jobs(const std::string& path);

struct JobResult {
  Lowered lowered;
  EngineResult engine;  ///< this job's tasks (start/end) and the shared links
  Report report;
  SimOptions options;            ///< with first_gpu set
  double alone_iteration_s = 0;  ///< the same job alone on the cluster (0 when not compared)
};

struct MultiJobResult {
  std::vector<JobResult> jobs;
  EngineResult combined;
};

/// Validates the jobs (disjoint GPU ranges inside the cluster, each plan consistent), simulates them together
/// and, when `compare_alone`, each alone.
MultiJobResult simulate_jobs(const std::vector<Job>& jobs, const ClusterSpec& cluster, const Calibration& cal,
                             const SimOptions& options, bool compare_alone);

}  // namespace dtsim::sim
