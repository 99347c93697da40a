// Pareto fronts of sweep results: throughput (tokens_per_s, higher is better) against peak memory
// (peak_memory_bytes, max over ranks, lower is better), one front per model and GPU count.
//
// Candidates are the rows with status "ok" that fit in memory. Row a dominates row b when a.tokens_per_s >=
// b.tokens_per_s and a.peak_memory_bytes <= b.peak_memory_bytes with at least one strict (exact comparison of the
// numbers as read). Hence of two rows with equal throughput only the lower-memory one can be on the front, and of
// two with equal memory only the faster. Rows with exactly the same (throughput, memory) are one point: the row
// with the lowest index (then id) stands on the front and the others are listed as its duplicates. Fronts are
// ordered by increasing memory (so increasing throughput); groups by model, then GPU count.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "studies/sweep/sweep_results.hpp"

namespace dtsim::sim {

struct ParetoPoint {
  const SweepRow* row = nullptr;
  std::vector<const SweepRow*> duplicates;  ///< rows with the same throughput and memory, by index
};

struct ParetoGroup {
  std::string model;
  int gpus = 0;
  std::vector<std::string> clusters;  ///< distinct, sorted
  StatusCounts counts;                ///< of all the group's rows
  std::vector<ParetoPoint> front;
  bool on_front(const SweepRow& r) const;  ///< r is a front point or one of their duplicates
};

/// One group per (model, GPU count) present in `rows`, even when no row of it is a candidate (empty front).
/// The points refer into `rows`, which must outlive the result.
std::vector<ParetoGroup> pareto_fronts(const std::vector<SweepRow>& rows);

/// Printed tables, one per group: strategy (planner, or tp/pp/dp/vp/mbs/zero/recompute/layout), tokens/s, MFU, peak GB.
std::string pareto_table(const std::vector<ParetoGroup>& groups);
/// pareto.json: the source, the status counts and per group the front points (full rows plus strategy and duplicates).
nlohmann::json pareto_json(const std::vector<ParetoGroup>& groups, const std::string& source);
/// pareto.csv: one line per front point.
std::string pareto_csv(const std::vector<ParetoGroup>& groups);

}  // namespace dtsim::sim
