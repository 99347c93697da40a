#include "strategies/flex_dispatch.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <vector>

#include "traces/error.hpp"

namespace dtsim::cost {

namespace {
/// C(a, k) / C(b, k) for a <= b: the chance that k distinct draws from b items all miss b - a of them.
double choose_ratio(int a, int b, int k) {
  if (a < k) return 0.0;
  double r = 1.0;
  for (int i = 0; i < k; ++i) r *= static_cast<double>(a - i) / static_cast<double>(b - i);
  return r;
}
}  // namespace

namespace {
/// Group-limited routing sampled as Megatron-Core routes under --moe-router-force-load-balancing (router.py: random
/// scores; moe_utils.py group_limited_topk: a group scores the sum of its top_k / group_topk best experts, the
/// token keeps its group_topk best groups and takes its top_k experts among them). The chosen groups' experts are
/// not a uniform pool: a group is chosen for its best scores, which then tend to be among the token's top_k, so the
/// picks spread over more of the chosen groups than uniform draws would (the closed form without groups does not
/// apply). Averaged over every aligned block of the size asked, from a fixed seed: the same value on every run.
double sampled_group_limited(const FlexDispatch& f, int block_experts) {
  constexpr int kTokens = 20000;
  const int E = f.experts, G = f.groups, M = f.group_topk, gs = E / G, per_group = std::max(1, f.top_k / M);
  std::mt19937_64 rng(0x64656570);  // "deep"
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> score(static_cast<std::size_t>(E)), best(static_cast<std::size_t>(gs));
  std::vector<std::pair<double, int>> groups(static_cast<std::size_t>(G));
  std::vector<int> pool, block_hit(static_cast<std::size_t>(E / block_experts));
  double hits = 0;
  for (int t = 0; t < kTokens; ++t) {
    for (double& x : score) x = u(rng);
    for (int g = 0; g < G; ++g) {
      const auto first = static_cast<std::ptrdiff_t>(g) * gs;
      std::copy(score.begin() + first, score.begin() + first + gs, best.begin());
      std::partial_sort(best.begin(), best.begin() + std::min(per_group, gs), best.end(), std::greater<>());
      groups[static_cast<std::size_t>(g)] = {std::accumulate(best.begin(), best.begin() + std::min(per_group, gs), 0.0),
                                             g};
    }
    std::partial_sort(groups.begin(), groups.begin() + M, groups.end(), std::greater<>());
    pool.clear();
    for (int i = 0; i < M; ++i)
      for (int e = groups[static_cast<std::size_t>(i)].second * gs;
           e < (groups[static_cast<std::size_t>(i)].second + 1) * gs; ++e)
        pool.push_back(e);
    std::partial_sort(pool.begin(), pool.begin() + f.top_k, pool.end(), [&](int a, int b) {
      return score[static_cast<std::size_t>(a)] > score[static_cast<std::size_t>(b)];
    });
    std::fill(block_hit.begin(), block_hit.end(), 0);
    for (int i = 0; i < f.top_k; ++i)
      block_hit[static_cast<std::size_t>(pool[static_cast<std::size_t>(i)] / block_experts)] = 1;
    hits += std::accumulate(block_hit.begin(), block_hit.end(), 0);
  }
  return hits / (static_cast<double>(kTokens) * static_cast<double>(block_hit.size()));
}
}  // namespace

double flex_hit_probability(const FlexDispatch& f, int block_experts) {
  DTSIM_ASSERT(f.enabled() && f.top_k >= 1 && block_experts >= 1 && f.experts % block_experts == 0,
               "block of " << block_experts << " experts of " << f.experts);
  const bool limited = f.groups > 1 && f.group_topk >= 1 && f.group_topk < f.groups;
  // Without a group limit the top_k of random scores are a uniform draw of top_k experts: 1 - C(E - B, k) / C(E, k).
  if (!limited) return 1.0 - choose_ratio(f.experts - block_experts, f.experts, f.top_k);
  static std::mutex mu;
  static std::map<std::array<int, 5>, double> cache;
  const std::array<int, 5> key{f.experts, f.top_k, f.groups, f.group_topk, block_experts};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, sampled_group_limited(f, block_experts)).first;
  return it->second;
}

int flex_domain_gpus(const FlexDispatch& f, int gpus_per_node) {
  return f.hybrid ? gpus_per_node : std::min(gpus_per_node, 8);
}

FlexPieces flex_pieces(const FlexDispatch& f, int ep, int per_domain, double token_bytes) {
  DTSIM_ASSERT(per_domain >= 1 && ep % per_domain == 0, ep << " EP ranks, " << per_domain << " per domain");
  DTSIM_ASSERT(f.experts % ep == 0, f.experts << " experts over " << ep << " EP ranks");
  FlexPieces p;
  p.per_domain = per_domain;
  p.domains = ep / per_domain;
  const int per_rank = f.experts / ep;
  const double q_rank = flex_hit_probability(f, per_rank);
  const double q_domain = flex_hit_probability(f, per_rank * per_domain);
  // One copy per other domain the token is routed to, to the rank at the sender's position there.
  p.rdma_piece_bytes = p.domains > 1 ? token_bytes * q_domain : 0.0;
  // To another rank j of its own domain: its own tokens routed to j, and the tokens that arrived from the other
  // domains' ranks at its position (token_bytes x q_domain from each) routed to j (q_rank / q_domain of them).
  p.nvlink_piece_bytes = per_domain > 1 ? token_bytes * q_rank * p.domains : 0.0;
  return p;
}

}  // namespace dtsim::cost
