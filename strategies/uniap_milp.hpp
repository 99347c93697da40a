// Solver core of the UniAP planner (Lin et al., arXiv 2307.16375 / CVPR 2025; see
// shared/docs/seed-algorithms.md §3): one mixed-integer linear program that jointly places the layers of a
// chain model on `num_stages` contiguous pipeline stages and picks one intra-layer strategy per layer,
// minimising the GPipe fill-drain latency of one iteration under a per-device memory limit. Solved with
// COIN-OR CBC (C API). The pipeline degree and the number of micro-batches are fixed for one solve; the outer
// (deg, c) enumeration and the construction of the cost tables from a model belong to the planner.
//
// Generic on purpose: the cost tables are plain numbers, nothing here depends on dtsim's model types.
//
// Objective (the same one is used by solve(), brute_force() and evaluate()):
//   p_s   = sum_{l on s} fwd_bwd_s[l][k_l] + sum_{l, l+1 both on s} resharding_s[l][k_l][k_{l+1}]   (stage time)
//   o_j   = cross_stage_s[l] for the one boundary l whose layer l is the last of stage j, j = 0..p-2
//   tpi   = sum_s p_s + sum_j o_j + (m - 1) * max( max_s p_s, max_j o_j )
// Constraints: stages are contiguous, ordered, non-empty; per stage
//   sum_{l on s} (mem_bytes[l][k_l] + act_bytes[l][k_l] * stage_act_factor[s]) <= limit
// (activations held in proportion to the micro-batches a stage keeps in flight; without act_bytes, mem_bytes alone);
// with one_strategy_per_stage, every layer of a stage has the same strategy (heterogeneous plans whose strategy is
// per stage: the simulator re-shards only between stages).
// The exact MILP is documented in uniap_milp.cpp.
#pragma once
#include <string>
#include <vector>

namespace dtsim::uniap {

struct Problem {
  int num_layers = 0;        ///< L; layers in order, stages are contiguous ranges of them
  int num_stages = 1;        ///< p (pipeline degree), fixed for this solve
  int num_microbatches = 1;  ///< m (>= 1)
  int num_strategies = 1;    ///< K intra-layer strategies, the same set for every layer
  /// [layer][strategy]: forward + backward compute and intra-layer communication time of one micro-batch (s).
  std::vector<std::vector<double>> fwd_bwd_s;
  /// [layer][strategy]: bytes that the layer occupies on one device of its stage.
  std::vector<std::vector<double>> mem_bytes;
  /// [layer l][strategy k of l][strategy k' of l+1]: re-sharding time between consecutive layers on the same
  /// stage. Empty = no re-sharding cost; otherwise at least L-1 entries (an L-th entry is ignored), each K x K.
  std::vector<std::vector<std::vector<double>>> resharding_s;
  /// [boundary l]: point-to-point time when layers l and l+1 are on different stages. Size L-1 (empty = 0).
  std::vector<double> cross_stage_s;
  double memory_limit_bytes = 0;  ///< per device
  double time_limit_s = 60;       ///< CBC wall-clock limit
  /// [layer][strategy]: activation bytes per micro-batch in flight (empty = none), scaled per stage by
  /// stage_act_factor (num_stages entries, e.g. min(m, p - s) under 1F1B; empty = 1 for every stage).
  std::vector<std::vector<double>> act_bytes;
  std::vector<double> stage_act_factor;
  /// Every layer of a stage takes the same strategy (re-sharding inside a stage is not allowed).
  bool one_strategy_per_stage = false;
  /// [stage][strategy]: whether the stage may use the strategy (empty = every strategy on every stage), e.g. tied
  /// embeddings needing the same TP degree on the first and last stages. solve_per_stage, brute_force and evaluate
  /// honour it; solve() (the MILP) rejects a non-empty mask.
  std::vector<std::vector<char>> allowed;
};

struct Solution {
  bool feasible = false;               ///< an assignment satisfying every constraint was found
  bool optimal = false;                ///< ... and proven optimal (CBC: gap closed; brute force: always)
  std::vector<int> stage_of_layer;     ///< [layer] -> stage in 0..p-1 (empty when !feasible)
  std::vector<int> strategy_of_layer;  ///< [layer] -> strategy in 0..K-1 (empty when !feasible)
  double objective_s = 0;              ///< tpi as defined above (the solver's objective value for solve())
  double solve_s = 0;                  ///< wall-clock time of the solve / enumeration
  std::string status;                  ///< human-readable outcome ("optimal", "infeasible: ...", ...)
};

/// Builds and solves the MILP with CBC (log level 0, single thread, deterministic).
/// Throws std::invalid_argument for malformed problems (sizes, negative or non-finite costs, m < 1, K < 1).
/// num_stages > num_layers, or a memory limit that no placement meets, gives feasible == false.
Solution solve(const Problem& problem);

/// The same problem when every stage takes one strategy (problem.one_strategy_per_stage, required; re-sharding then
/// only counts resharding_s[l][k][k]), solved exactly by dynamic programming instead of CBC: for a cap T on the
/// stage and link times, D_T = min sum_s p_s + sum_j o_j over placements and per-stage strategies that fit memory
/// with every time <= T (O(p L^2 K) with prefix sums); the optimum is min_T D_T + (m - 1) T over the distinct
/// stage and link times T, scanned upwards from the smallest feasible one until D_inf + (m - 1) T cannot beat
/// the best so far. Same objective and result conventions as solve() (optimal is always true when feasible).
Solution solve_per_stage(const Problem& problem);

/// Enumerates every contiguous partition into num_stages non-empty stages and every strategy assignment,
/// evaluating the same objective; for tiny instances (oracle tests). Throws std::length_error when the
/// search space C(L-1, p-1) * K^L exceeds 1e7, std::invalid_argument for malformed problems.
Solution brute_force(const Problem& problem);

/// The objective tpi of one assignment, or +infinity when the assignment is infeasible (a stage over the
/// memory limit, or a placement that is not contiguous / ordered / covering every stage exactly once).
/// Throws std::invalid_argument for malformed problems or vectors of the wrong size / out-of-range indices.
double evaluate(const Problem& problem, const std::vector<int>& stage_of_layer,
                const std::vector<int>& strategy_of_layer);

}  // namespace dtsim::uniap
