// Parallel plan: degrees, batch, schedule, ZeRO, recompute and rank order (schema_version 1).
#pragma once
#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "traces/cluster.hpp"
#include "traces/model.hpp"

namespace dtsim {

enum class Schedule { GPIPE, ONE_F_ONE_B };
enum class Recompute { NONE, SELECTIVE, FULL };
enum class Axis { TP = 0, DP = 1, PP = 2 };

std::string to_string(Schedule s);
std::string to_string(Recompute r);
std::string to_string(Axis a);
Schedule schedule_from_string(const std::string& s, const std::string& ctx);
Recompute recompute_from_string(const std::string& s, const std::string& ctx);

/// Coordinates of a rank on the three parallel axes.
struct RankCoord {
  int tp = 0, dp = 0, pp = 0;
  int get(Axis a) const { return a == Axis::TP ? tp : a == Axis::DP ? dp : pp; }
  void set(Axis a, int v) { (a == Axis::TP ? tp : a == Axis::DP ? dp : pp) = v; }
};

struct ParallelPlan {
  int tp = 1, pp = 1, dp = 1;
  int micro_batch_size = 1;
  int global_batch_size = 1;
  std::vector<int> layers_per_stage;  ///< empty = uniform split
  Schedule schedule = Schedule::ONE_F_ONE_B;
  int zero_stage = 0;                 ///< 0 or 1 in this version
  Recompute recompute = Recompute::NONE;
  bool sequence_parallel = false;
  /// Innermost axis first; default TP innermost (inside a node), then DP, then PP.
  std::array<Axis, 3> rank_order = {Axis::TP, Axis::DP, Axis::PP};
  bool dp_overlap = true;             ///< overlap gradient all-reduce buckets with the last backward
  double dp_bucket_bytes = 25.0 * 1048576.0;  ///< PyTorch DDP default bucket size (25 MiB)

  int world_size() const { return tp * pp * dp; }
  int num_microbatches() const { return global_batch_size / (micro_batch_size * dp); }
  int degree(Axis a) const { return a == Axis::TP ? tp : a == Axis::DP ? dp : pp; }
  int rank_of(const RankCoord& c) const;
  RankCoord coord_of(int rank) const;
  /// Layers of each stage after applying the default uniform split.
  std::vector<int> stage_layers(int num_layers) const;
  /// Throws ConfigError with one line naming the inconsistency.
  void validate(const TransformerSpec& model, const ClusterSpec& cluster) const;
};

std::string rank_order_string(const std::array<Axis, 3>& order);
std::array<Axis, 3> rank_order_from_string(const std::string& s, const std::string& ctx);

nlohmann::json to_json(const ParallelPlan& p, int num_layers);
ParallelPlan plan_from_json(const nlohmann::json& j, const std::string& ctx);
ParallelPlan load_plan(const std::string& path);

}  // namespace dtsim
