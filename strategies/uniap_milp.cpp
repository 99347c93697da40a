// UniAP MILP (see uniap_milp.hpp and shared/docs/seed-algorithms.md §3).
//
// Provenance tags as in seed-algorithms.md: [M] = the doc's reconstruction of the paper's MIQP (the paper body
// was not retrievable), [Δ] = our deviation / linearisation for an open-source MILP solver.
//
// ---------------------------------------------------------------------------------------------------------
// Formulation (chain of L layers, p stages, K strategies, m micro-batches). Indices l = layer, s, j = stage,
// k, k' = strategy. A = fwd_bwd_s, M = mem_bytes, R = resharding_s, C = cross_stage_s.
//
// Variables
//   x[l][s][k] in {0,1}   layer l on stage s with strategy k.                          [Δ] merged P_ls * S_lk
//                         (doc "Linearisation" item 1). Upper bound fixed to 0 unless s <= l and
//                         p-1-s <= L-1-l (a layer cannot sit where an earlier / later stage would stay empty);
//                         in particular layer 0 is on stage 0 and layer L-1 on stage p-1 (item 5).      [Δ]
//   f[l][s,k -> s',k'] >= 0, continuous, s' in {s, s+1}, l = 0..L-2: arc of a layered path graph whose nodes
//                         are (l, s, k); f = x[l][s][k] * x[l+1][s'][k'] at every integer point.           [Δ]
//                         Same-stage arcs (s' = s) are the doc's per-stage pair variables z_{uv,i,kl}
//                         (item 5); crossing arcs (s' = s+1) are the boundary indicator of item 3.
//   T >= 0                bottleneck: max over stage and link times (item 4).                          [Δ]
//   where P[l][s] = sum_k x[l][s][k] (an expression, not a column).
//
// Objective (GPipe fill-drain, [M]):
//   minimise  sum_{l,s,k} A[l][k] x[l][s][k] + sum_{l,s,k,k'} R[l][k][k'] f[l][s,k -> s,k']   (= sum_s p_s)
//           + sum_{l,s,k,k'} C[l] f[l][s,k -> s+1,k']                                        (= sum_j o_j)
//           + (m-1) T
//
// Constraints
//   (assign)     sum_{s,k} x[l][s][k] = 1                                                for every l
//   (out)        sum_{s',k'} f[l][s,k -> s',k'] = x[l][s][k]                             for l = 0..L-2
//   (in)         sum_{s,k}   f[l-1][s,k -> s',k'] = x[l][s'][k']                         for l = 1..L-1
//   (non-empty)  sum_{l,k} x[l][s][k] >= 1                                   for every s (redundant, kept)
//   (memory)     sum_{l,k} (M[l][k] / limit) x[l][s][k] <= 1        for every s ([M]; row scaled; omitted if
//                                                                   the limit is +inf)
//   (stage max)  sum_{l,k} A[l][k] x[l][s][k] + sum_{l,k,k'} R[l][k][k'] f[l][s,k -> s,k'] - T <= 0  every s
//   (link max)   sum_{l,k,k'} C[l] f[l][j,k -> j+1,k'] - T <= 0                            for j = 0..p-2
//   (the two max rows are only added when m > 1; with m = 1 T has no weight.)
//
// Exactness and contiguity [Δ]: with x integral, exactly one node per layer has x = 1; (out) sends one unit
// from it and (in) admits flow only into the one node of layer l+1 with x = 1, so that node must be an arc
// head, i.e. on stage s or s+1. Hence the stage index is non-decreasing in steps of at most 1 (with the
// first/last fixing: contiguous, ordered, every stage non-empty) and f equals the product of the two x
// exactly. No McCormick lower-bound argument (which needs non-negative costs) is required, and the
// strategy/placement part of the LP relaxation is a path polytope (integral) — only the memory and
// bottleneck rows make it fractional.
//   Why not the doc's literal item 2/3 (McCormick y >= S + S' - 1, sigma-difference, big-M R-bar): that
//   version is also exact here and was implemented first, but its LP relaxation is weak; on a 32-layer,
//   4-stage, 4-strategy instance with re-sharding CBC hit a 60 s time limit with a 0.2% worse incumbent,
//   while this path formulation proves optimality in ~5 s (same machine). Size: |V|*p*K binaries and
//   about 2*(|V|-1)*p*K^2 continuous arcs (96 layers, p = 8, K = 6: 4.6k binaries, ~55k arcs).
//
// Numerics [Δ]: all time coefficients are divided by the largest time entry (so the objective is O(1) for CBC's
// absolute tolerances) and multiplied back; memory rows are divided by the limit. The reported objective is
// CBC's objective value (unscaled); the placement is read by rounding x (argmax per layer).
// Difference to the paper [M]/[Δ]: R' (strategy-dependent cross-stage cost) is a scalar per boundary here;
// re-sharding is charged only between consecutive layers on the same stage (chain graphs only, no general DAG).
// ---------------------------------------------------------------------------------------------------------
#include "strategies/uniap_milp.hpp"

#include <Cbc_C_Interface.h>

#include "traces/error.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtsim::uniap {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
/// Relative slack on the memory limit when evaluating an assignment (absorbs rounding of sums).
constexpr double kMemRelTol = 1e-9;

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("uniap: " + what); }

void check_value(double v, const char* what) {
  if (!std::isfinite(v) || v < 0) {
    std::ostringstream os;
    os << what << " must be finite and >= 0, got " << v;
    bad(os.str());
  }
}

/// Validates sizes and signs; throws std::invalid_argument.
void validate(const Problem& pb) {
  const int L = pb.num_layers, K = pb.num_strategies;
  if (L < 1) bad("num_layers must be >= 1");
  if (pb.num_stages < 1) bad("num_stages must be >= 1");
  if (pb.num_microbatches < 1) bad("num_microbatches must be >= 1");
  if (K < 1) bad("num_strategies must be >= 1");
  const auto ul = static_cast<std::size_t>(L), uk = static_cast<std::size_t>(K);
  if (pb.fwd_bwd_s.size() != ul) bad("fwd_bwd_s must have num_layers rows");
  if (pb.mem_bytes.size() != ul) bad("mem_bytes must have num_layers rows");
  for (std::size_t l = 0; l < ul; ++l) {
    if (pb.fwd_bwd_s[l].size() != uk) bad("fwd_bwd_s rows must have num_strategies entries");
    if (pb.mem_bytes[l].size() != uk) bad("mem_bytes rows must have num_strategies entries");
    for (std::size_t k = 0; k < uk; ++k) {
      check_value(pb.fwd_bwd_s[l][k], "fwd_bwd_s");
      check_value(pb.mem_bytes[l][k], "mem_bytes");
    }
  }
  if (!pb.resharding_s.empty()) {
    if (pb.resharding_s.size() + 1 < ul) bad("resharding_s must be empty or have >= num_layers-1 entries");
    for (std::size_t l = 0; l + 1 < ul; ++l) {
      if (pb.resharding_s[l].size() != uk) bad("resharding_s[l] must be K x K");
      for (const auto& row : pb.resharding_s[l]) {
        if (row.size() != uk) bad("resharding_s[l] must be K x K");
        for (double v : row) check_value(v, "resharding_s");
      }
    }
  }
  if (!pb.cross_stage_s.empty()) {
    if (pb.cross_stage_s.size() != ul - 1) bad("cross_stage_s must be empty or have num_layers-1 entries");
    for (double v : pb.cross_stage_s) check_value(v, "cross_stage_s");
  }
  if (!pb.act_bytes.empty()) {
    if (pb.act_bytes.size() != ul) bad("act_bytes must be empty or have num_layers rows");
    for (const auto& r : pb.act_bytes) {
      if (r.size() != uk) bad("act_bytes rows must have num_strategies entries");
      for (double v : r) check_value(v, "act_bytes");
    }
  }
  if (!pb.stage_act_factor.empty()) {
    if (pb.stage_act_factor.size() != static_cast<std::size_t>(pb.num_stages))
      bad("stage_act_factor must be empty or have num_stages entries");
    for (double v : pb.stage_act_factor) check_value(v, "stage_act_factor");
  }
  if (!pb.allowed.empty()) {
    if (pb.allowed.size() != static_cast<std::size_t>(pb.num_stages))
      bad("allowed must be empty or have num_stages rows");
    for (const auto& row : pb.allowed)
      if (row.size() != uk) bad("allowed rows must have num_strategies entries");
  }
  if (std::isnan(pb.memory_limit_bytes) || pb.memory_limit_bytes < 0) bad("memory_limit_bytes must be >= 0");
  if (!(pb.time_limit_s > 0)) bad("time_limit_s must be > 0");
}

double reshard(const Problem& pb, int l, int k, int k2) {
  if (pb.resharding_s.empty()) return 0;
  return pb.resharding_s[static_cast<std::size_t>(l)][static_cast<std::size_t>(k)][static_cast<std::size_t>(k2)];
}

/// Bytes layer l with strategy k occupies on a device of stage s.
double mem_of(const Problem& pb, int l, int k, int s) {
  const auto ul = static_cast<std::size_t>(l), uk = static_cast<std::size_t>(k);
  double b = pb.mem_bytes[ul][uk];
  if (!pb.act_bytes.empty())
    b += pb.act_bytes[ul][uk] * (pb.stage_act_factor.empty() ? 1.0 : pb.stage_act_factor[static_cast<std::size_t>(s)]);
  return b;
}

double cross(const Problem& pb, int l) {
  return pb.cross_stage_s.empty() ? 0.0 : pb.cross_stage_s[static_cast<std::size_t>(l)];
}

/// Objective of an assignment already known to be contiguous/ordered/covering (no validation).
double objective_unchecked(const Problem& pb, const std::vector<int>& st, const std::vector<int>& kk,
                           std::vector<double>& stage_t, std::vector<double>& stage_mem) {
  const int L = pb.num_layers, p = pb.num_stages;
  stage_t.assign(static_cast<std::size_t>(p), 0.0);
  stage_mem.assign(static_cast<std::size_t>(p), 0.0);
  double links = 0, max_t = 0;
  for (int l = 0; l < L; ++l) {
    const auto ul = static_cast<std::size_t>(l);
    const auto s = static_cast<std::size_t>(st[ul]);
    const auto k = static_cast<std::size_t>(kk[ul]);
    if (!pb.allowed.empty() && !pb.allowed[s][k]) return kInf;
    stage_t[s] += pb.fwd_bwd_s[ul][k];
    stage_mem[s] += mem_of(pb, l, kk[ul], st[ul]);
    if (l + 1 < L) {
      if (st[ul + 1] == st[ul]) {
        if (pb.one_strategy_per_stage && kk[ul + 1] != kk[ul]) return kInf;
        stage_t[s] += reshard(pb, l, kk[ul], kk[ul + 1]);
      } else {
        const double c = cross(pb, l);
        links += c;
        max_t = std::max(max_t, c);
      }
    }
  }
  const double limit = pb.memory_limit_bytes * (1 + kMemRelTol);
  double sum_t = 0;
  for (int s = 0; s < p; ++s) {
    const auto us = static_cast<std::size_t>(s);
    if (stage_mem[us] > limit) return kInf;
    sum_t += stage_t[us];
    max_t = std::max(max_t, stage_t[us]);
  }
  return sum_t + links + (pb.num_microbatches - 1) * max_t;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct CbcDeleter {
  void operator()(Cbc_Model* m) const { Cbc_deleteModel(m); }
};

/// The start every solver shares: `pb` validated, and the infeasible answer when there are more stages than layers.
std::optional<Solution> more_stages_than_layers(const Problem& pb, std::chrono::steady_clock::time_point t0) {
  validate(pb);
  if (pb.num_stages <= pb.num_layers) return std::nullopt;
  Solution sol;
  sol.status = "infeasible: more stages than layers";
  sol.solve_s = seconds_since(t0);
  return sol;
}

}  // namespace

double evaluate(const Problem& pb, const std::vector<int>& stage_of_layer, const std::vector<int>& strategy_of_layer) {
  validate(pb);
  const int L = pb.num_layers, p = pb.num_stages, K = pb.num_strategies;
  if (stage_of_layer.size() != static_cast<std::size_t>(L) || strategy_of_layer.size() != static_cast<std::size_t>(L))
    bad("evaluate: stage_of_layer and strategy_of_layer must have num_layers entries");
  for (int l = 0; l < L; ++l) {
    const auto ul = static_cast<std::size_t>(l);
    if (stage_of_layer[ul] < 0 || stage_of_layer[ul] >= p) bad("evaluate: stage index out of range");
    if (strategy_of_layer[ul] < 0 || strategy_of_layer[ul] >= K) bad("evaluate: strategy index out of range");
  }
  // Contiguous, ordered, every stage non-empty <=> starts at 0, steps of 0 or 1, ends at p-1.
  if (stage_of_layer.front() != 0 || stage_of_layer.back() != p - 1) return kInf;
  for (std::size_t l = 0; l + 1 < stage_of_layer.size(); ++l) {
    const int d = stage_of_layer[l + 1] - stage_of_layer[l];
    if (d != 0 && d != 1) return kInf;
  }
  std::vector<double> t, mem;
  return objective_unchecked(pb, stage_of_layer, strategy_of_layer, t, mem);
}

Solution brute_force(const Problem& pb) {
  const auto t0 = std::chrono::steady_clock::now();
  if (auto none = more_stages_than_layers(pb, t0)) return *none;
  const int L = pb.num_layers, p = pb.num_stages, K = pb.num_strategies;
  Solution sol;
  // |space| = C(L-1, p-1) * K^L
  double space = 1;
  for (int i = 1; i <= p - 1; ++i) space = space * (L - p + i) / i;
  for (int l = 0; l < L; ++l) space *= K;
  if (space > 1e7) {
    std::ostringstream os;
    os << "uniap::brute_force: search space " << space << " exceeds 1e7";
    throw std::length_error(os.str());
  }
  // Placements as "cut after layer l" bitmasks with exactly p-1 cuts among the L-1 boundaries.
  std::vector<int> st(static_cast<std::size_t>(L)), kk(static_cast<std::size_t>(L));
  std::vector<double> t, mem;
  double best = kInf;
  const unsigned nb = static_cast<unsigned>(L - 1);
  for (unsigned long mask = 0; mask < (1ul << nb); ++mask) {
    if (__builtin_popcountl(mask) != p - 1) continue;
    int s = 0;
    for (int l = 0; l < L; ++l) {
      st[static_cast<std::size_t>(l)] = s;
      if (l + 1 < L && ((mask >> l) & 1ul)) ++s;
    }
    std::fill(kk.begin(), kk.end(), 0);
    while (true) {
      const double v = objective_unchecked(pb, st, kk, t, mem);
      if (v < best) {
        best = v;
        sol.stage_of_layer = st;
        sol.strategy_of_layer = kk;
      }
      int i = 0;  // odometer over strategies
      while (i < L && ++kk[static_cast<std::size_t>(i)] == K) kk[static_cast<std::size_t>(i++)] = 0;
      if (i == L) break;
    }
  }
  sol.solve_s = seconds_since(t0);
  if (best == kInf) {
    sol.stage_of_layer.clear();
    sol.strategy_of_layer.clear();
    sol.status = "infeasible: no placement meets the memory limit";
    return sol;
  }
  sol.feasible = sol.optimal = true;
  sol.objective_s = best;
  sol.status = "optimal (enumeration)";
  return sol;
}

Solution solve_per_stage(const Problem& pb) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!pb.one_strategy_per_stage) bad("solve_per_stage needs one_strategy_per_stage");
  if (auto none = more_stages_than_layers(pb, t0)) return *none;
  const int L = pb.num_layers, p = pb.num_stages, K = pb.num_strategies, m = pb.num_microbatches;
  Solution sol;
  const auto ul = static_cast<std::size_t>(L) + 1;
  // Prefix sums per strategy: time (compute + same-strategy re-sharding inside the stage), static and activation
  // memory.
  std::vector<std::vector<double>> pa(static_cast<std::size_t>(K), std::vector<double>(ul, 0.0)), pr = pa, pm = pa,
                                                                                                  pact = pa;
  for (int k = 0; k < K; ++k) {
    const auto uk = static_cast<std::size_t>(k);
    for (int l = 0; l < L; ++l) {
      const auto i = static_cast<std::size_t>(l);
      pa[uk][i + 1] = pa[uk][i] + pb.fwd_bwd_s[i][uk];
      pr[uk][i + 1] = pr[uk][i] + (l + 1 < L ? reshard(pb, l, k, k) : 0.0);
      pm[uk][i + 1] = pm[uk][i] + pb.mem_bytes[i][uk];
      pact[uk][i + 1] = pact[uk][i] + (pb.act_bytes.empty() ? 0.0 : pb.act_bytes[i][uk]);
    }
  }
  // Stage time of layers [i, j) with strategy k: their times and the re-sharding between them (j - 1 boundaries).
  auto stage_time = [&](int i, int j, int k) {
    const auto uk = static_cast<std::size_t>(k);
    return pa[uk][static_cast<std::size_t>(j)] - pa[uk][static_cast<std::size_t>(i)] +
           pr[uk][static_cast<std::size_t>(j - 1)] - pr[uk][static_cast<std::size_t>(i)];
  };
  const double limit = pb.memory_limit_bytes * (1 + kMemRelTol);
  auto fits = [&](int i, int j, int k, int st) {
    const auto uk = static_cast<std::size_t>(k);
    const double f = pb.stage_act_factor.empty() ? 1.0 : pb.stage_act_factor[static_cast<std::size_t>(st)];
    const double bytes = pm[uk][static_cast<std::size_t>(j)] - pm[uk][static_cast<std::size_t>(i)] +
                         f * (pact[uk][static_cast<std::size_t>(j)] - pact[uk][static_cast<std::size_t>(i)]);
    return bytes <= limit;
  };
  // D[s][j]: best sum of stage times and link times for layers [0, j) on stages 0..s with every time <= cap.
  const auto np = static_cast<std::size_t>(p);
  std::vector<std::vector<double>> D(np, std::vector<double>(ul, kInf));
  std::vector<std::vector<std::pair<int, int>>> from(np, std::vector<std::pair<int, int>>(ul, {-1, -1}));
  auto run = [&](double cap) {
    for (auto& row : D) std::fill(row.begin(), row.end(), kInf);
    for (int st = 0; st < p; ++st)
      for (int j = st + 1; j <= L - (p - 1 - st); ++j) {
        // The link after this stage (its last layer is j - 1) when a stage follows.
        const double link = st + 1 < p ? cross(pb, j - 1) : 0.0;
        if (link > cap) continue;
        double& best = D[static_cast<std::size_t>(st)][static_cast<std::size_t>(j)];
        for (int i = st; i < j; ++i) {
          const double before =
              st == 0 ? (i == 0 ? 0.0 : kInf) : D[static_cast<std::size_t>(st - 1)][static_cast<std::size_t>(i)];
          if (before == kInf) continue;
          for (int k = 0; k < K; ++k) {
            if (!pb.allowed.empty() && !pb.allowed[static_cast<std::size_t>(st)][static_cast<std::size_t>(k)]) continue;
            const double t = stage_time(i, j, k);
            if (t > cap || !fits(i, j, k, st)) continue;
            if (before + t + link < best) {
              best = before + t + link;
              from[static_cast<std::size_t>(st)][static_cast<std::size_t>(j)] = {i, k};
            }
          }
        }
      }
    return D[np - 1][static_cast<std::size_t>(L)];
  };
  // Candidate caps: every stage time and link time, ascending.
  std::vector<double> caps;
  for (int i = 0; i < L; ++i)
    for (int j = i + 1; j <= L; ++j)
      for (int k = 0; k < K; ++k) caps.push_back(stage_time(i, j, k));
  for (int l = 0; l + 1 < L; ++l) caps.push_back(cross(pb, l));
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  const double d_inf = run(kInf);
  if (d_inf == kInf) {
    sol.status = "infeasible: no placement meets the memory limit";
    sol.solve_s = seconds_since(t0);
    return sol;
  }
  double best = kInf, best_cap = kInf;
  if (m == 1) {
    best = d_inf;
  } else {
    // The smallest feasible cap (feasibility is monotone in the cap), then upwards while a better total is possible.
    std::size_t lo = 0, hi = caps.size() - 1;
    while (lo < hi) {
      const std::size_t mid = (lo + hi) / 2;
      if (run(caps[mid]) < kInf) hi = mid;
      else lo = mid + 1;
    }
    for (std::size_t c = lo; c < caps.size(); ++c) {
      if (d_inf + (m - 1) * caps[c] >= best) break;
      const double d = run(caps[c]);
      if (d < kInf && d + (m - 1) * caps[c] < best) {
        best = d + (m - 1) * caps[c];
        best_cap = caps[c];
      }
    }
  }
  run(best_cap);
  sol.stage_of_layer.assign(static_cast<std::size_t>(L), 0);
  sol.strategy_of_layer.assign(static_cast<std::size_t>(L), 0);
  for (int st = p - 1, j = L; st >= 0; --st) {
    const auto [i, k] = from[static_cast<std::size_t>(st)][static_cast<std::size_t>(j)];
    DTSIM_ASSERT(i >= 0, "uniap: no predecessor for stage " << st << " ending at layer " << j);
    for (int l = i; l < j; ++l) {
      sol.stage_of_layer[static_cast<std::size_t>(l)] = st;
      sol.strategy_of_layer[static_cast<std::size_t>(l)] = k;
    }
    j = i;
  }
  sol.objective_s = evaluate(pb, sol.stage_of_layer, sol.strategy_of_layer);
  DTSIM_ASSERT(std::isfinite(sol.objective_s) && sol.objective_s <= best * (1 + 1e-9) + 1e-15,
               "uniap: DP solution " << sol.objective_s << " above its bound " << best);
  sol.feasible = sol.optimal = true;
  sol.status = "optimal (per-stage dynamic program)";
  sol.solve_s = seconds_since(t0);
  return sol;
}

Solution solve(const Problem& pb) {
  const auto t0 = std::chrono::steady_clock::now();
  if (auto none = more_stages_than_layers(pb, t0)) return *none;
  const int L = pb.num_layers, p = pb.num_stages, K = pb.num_strategies, m = pb.num_microbatches;
  Solution sol;
  if (!pb.allowed.empty()) bad("solve: a per-stage strategy mask (allowed) needs solve_per_stage");

  // Scales: times by the largest entry, memory rows by the limit.
  double ts = 0;
  for (const auto& row : pb.fwd_bwd_s)
    for (double v : row) ts = std::max(ts, v);
  for (const auto& mat : pb.resharding_s)
    for (const auto& row : mat)
      for (double v : row) ts = std::max(ts, v);
  for (double v : pb.cross_stage_s) ts = std::max(ts, v);
  if (ts <= 0) ts = 1;
  const bool mem_limited = std::isfinite(pb.memory_limit_bytes);
  const double ms = (mem_limited && pb.memory_limit_bytes > 0) ? 1.0 / pb.memory_limit_bytes : 1.0;
  const double mem_rhs = (mem_limited && pb.memory_limit_bytes > 0) ? 1.0 : 0.0;

  std::unique_ptr<Cbc_Model, CbcDeleter> owner(Cbc_newModel());
  Cbc_Model* model = owner.get();
  Cbc_setLogLevel(model, 0);
  Cbc_setParameter(model, "log", "0");
  Cbc_setParameter(model, "slog", "0");
  Cbc_setParameter(model, "threads", "0");  // serial branch-and-cut: deterministic
  Cbc_setMaximumSeconds(model, pb.time_limit_s);
  Cbc_setAllowableGap(model, 1e-10);
  Cbc_setAllowableFractionGap(model, 1e-9);
  Cbc_setObjSense(model, 1.0);

  int ncols = 0;
  auto add_col = [&](double ub, double obj, bool integer) {
    Cbc_addCol(model, "", 0.0, ub, obj, integer ? 1 : 0, 0, nullptr, nullptr);
    return ncols++;
  };
  auto allowed = [&](int l, int s) { return s <= l && (p - 1 - s) <= (L - 1 - l); };

  // x[l][s][k]
  std::vector<int> x(static_cast<std::size_t>(L * p * K));
  auto X = [&](int l, int s, int k) -> int& { return x[(static_cast<std::size_t>(l) * p + s) * K + k]; };
  for (int l = 0; l < L; ++l)
    for (int s = 0; s < p; ++s)
      for (int k = 0; k < K; ++k)
        X(l, s, k) = add_col(allowed(l, s) ? 1.0 : 0.0,
                             pb.fwd_bwd_s[static_cast<std::size_t>(l)][static_cast<std::size_t>(k)] / ts, true);
  const int T = add_col(kInf, static_cast<double>(m - 1), false);

  std::vector<int> idx;
  std::vector<double> val;
  auto row = [&](char sense, double rhs) {
    Cbc_addRow(model, "", static_cast<int>(idx.size()), idx.data(), val.data(), sense, rhs);
    idx.clear();
    val.clear();
  };
  auto term = [&](int col, double coef) {
    idx.push_back(col);
    val.push_back(coef);
  };

  // (assign)
  for (int l = 0; l < L; ++l) {
    for (int s = 0; s < p; ++s)
      for (int k = 0; k < K; ++k) term(X(l, s, k), 1.0);
    row('E', 1.0);
  }
  // (non-empty) and (memory)
  for (int s = 0; s < p; ++s) {
    for (int l = 0; l < L; ++l)
      for (int k = 0; k < K; ++k) term(X(l, s, k), 1.0);
    row('G', 1.0);
    if (mem_limited) {
      for (int l = 0; l < L; ++l)
        for (int k = 0; k < K; ++k) {
          const double c = mem_of(pb, l, k, s) * ms;
          if (c != 0) term(X(l, s, k), c);
        }
      if (!idx.empty()) row('L', mem_rhs);
    }
  }
  // (flow) f[l][s,k -> s',k'] for s' in {s, s+1}: arcs of the layered path graph. Same-stage arcs carry the
  // re-sharding cost (stage s), crossing arcs the p2p cost (link j = s).
  std::vector<std::vector<std::pair<int, double>>> stage_arcs(static_cast<std::size_t>(p));
  std::vector<std::vector<std::pair<int, double>>> link_arcs(static_cast<std::size_t>(p > 1 ? p - 1 : 0));
  std::vector<std::vector<int>> out_arcs(x.size()), in_arcs(x.size());
  for (int l = 0; l + 1 < L; ++l)
    for (int s = 0; s < p; ++s) {
      if (!allowed(l, s)) continue;
      for (int s2 = s; s2 <= s + 1 && s2 < p; ++s2) {
        if (!allowed(l + 1, s2)) continue;
        for (int k = 0; k < K; ++k)
          for (int k2 = 0; k2 < K; ++k2) {
            if (s2 == s && k2 != k && pb.one_strategy_per_stage) continue;  // no arc: one strategy per stage
            const double cost = (s2 == s ? reshard(pb, l, k, k2) : cross(pb, l)) / ts;
            const int f = add_col(kInf, cost, false);
            out_arcs[static_cast<std::size_t>(&X(l, s, k) - x.data())].push_back(f);
            in_arcs[static_cast<std::size_t>(&X(l + 1, s2, k2) - x.data())].push_back(f);
            if (cost > 0) {
              if (s2 == s) stage_arcs[static_cast<std::size_t>(s)].emplace_back(f, cost);
              else link_arcs[static_cast<std::size_t>(s)].emplace_back(f, cost);
            }
          }
      }
    }
  // (out) sum of arcs leaving (l,s,k) = x[l][s][k] for l < L-1;  (in) arcs entering = x[l][s][k] for l > 0.
  for (int l = 0; l < L; ++l)
    for (int s = 0; s < p; ++s) {
      if (!allowed(l, s)) continue;
      for (int k = 0; k < K; ++k) {
        const auto n = static_cast<std::size_t>(&X(l, s, k) - x.data());
        if (l + 1 < L) {
          for (int f : out_arcs[n]) term(f, 1.0);
          term(X(l, s, k), -1.0);
          row('E', 0.0);
        }
        if (l > 0) {
          for (int f : in_arcs[n]) term(f, 1.0);
          term(X(l, s, k), -1.0);
          row('E', 0.0);
        }
      }
    }
  // (stage max) and (link max); only needed when T carries weight.
  if (m > 1) {
    for (int s = 0; s < p; ++s) {
      for (int l = 0; l < L; ++l)
        for (int k = 0; k < K; ++k) {
          const double a = pb.fwd_bwd_s[static_cast<std::size_t>(l)][static_cast<std::size_t>(k)] / ts;
          if (a != 0 && allowed(l, s)) term(X(l, s, k), a);
        }
      for (const auto& [f, r] : stage_arcs[static_cast<std::size_t>(s)]) term(f, r);
      term(T, -1.0);
      row('L', 0.0);
    }
    for (const auto& links : link_arcs) {
      if (links.empty()) continue;
      for (const auto& [c, cc] : links) term(c, cc);
      term(T, -1.0);
      row('L', 0.0);
    }
  }

  Cbc_solve(model);
  sol.solve_s = seconds_since(t0);

  const double* best = Cbc_bestSolution(model);
  if (Cbc_isProvenInfeasible(model) || best == nullptr) {
    if (Cbc_isProvenInfeasible(model)) sol.status = "infeasible: no placement meets the memory limit";
    else if (Cbc_isSecondsLimitReached(model)) sol.status = "no feasible solution found within the time limit";
    else {
      std::ostringstream os;
      os << "no solution (CBC status " << Cbc_status(model) << ", secondary " << Cbc_secondaryStatus(model) << ")";
      sol.status = os.str();
    }
    return sol;
  }

  sol.stage_of_layer.assign(static_cast<std::size_t>(L), 0);
  sol.strategy_of_layer.assign(static_cast<std::size_t>(L), 0);
  for (int l = 0; l < L; ++l) {
    double bv = -1;
    for (int s = 0; s < p; ++s)
      for (int k = 0; k < K; ++k) {
        const double v = best[X(l, s, k)];
        if (v > bv) {
          bv = v;
          sol.stage_of_layer[static_cast<std::size_t>(l)] = s;
          sol.strategy_of_layer[static_cast<std::size_t>(l)] = k;
        }
      }
  }
  sol.objective_s = Cbc_getObjValue(model) * ts;
  if (!std::isfinite(evaluate(pb, sol.stage_of_layer, sol.strategy_of_layer))) {
    // Only reachable through solver tolerances (a stage within CBC's feasibility tolerance of the limit).
    sol.status = "numerical: CBC solution violates the memory limit after rounding";
    sol.stage_of_layer.clear();
    sol.strategy_of_layer.clear();
    return sol;
  }
  sol.feasible = true;
  sol.optimal = Cbc_isProvenOptimal(model) != 0;
  sol.status = sol.optimal ? "optimal" : (Cbc_isSecondsLimitReached(model) ? "feasible (time limit)" : "feasible");
  return sol;
}

}  // namespace dtsim::uniap
