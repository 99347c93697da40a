#include "sim/model/groups.hpp"

#include <algorithm>
#include <array>

namespace dtsim::sim {

int block_index(const ParallelPlan& p, const RankCoord& c) { return c.tp + p.tp * (c.cp + p.cp * c.dp); }

RankCoord block_coord(const ParallelPlan& p, int j, int pp) {
  RankCoord c;
  c.tp = j % p.tp;
  c.cp = (j / p.tp) % p.cp;
  c.dp = j / (p.tp * p.cp);
  c.pp = pp;
  return c;
}

std::vector<int> group_members(const ParallelPlan& p, int rank, GroupAxis ax) {
  const RankCoord c = p.coord_of(rank);
  std::vector<int> out;
  auto add = [&](RankCoord x) { out.push_back(p.rank_of(x)); };
  switch (ax) {
    case GroupAxis::TP:
      for (int i = 0; i < p.stage_tp(c.pp); ++i) {
        RankCoord x = c;
        x.tp = i;
        add(x);
      }
      break;
    case GroupAxis::DP:  // every replica of the stage in every pipeline copy, and every cp rank
      for (int d = 0; d < p.dp; ++d)
        for (int j = 0; j < p.replicas(c.pp); ++j)
          for (int k = 0; k < p.cp; ++k) {
            RankCoord x = c;
            x.dp = d;
            x.rep = j;
            x.cp = k;
            add(x);
          }
      break;
    case GroupAxis::PP:
      for (int st = 0; st < p.pp; ++st) {
        RankCoord x = c;
        x.pp = st;
        x.rep = std::min(c.rep, p.replicas(st) - 1);
        x.tp = c.tp * p.stage_tp(st) / p.stage_tp(c.pp);  // the first TP rank its pipeline transfer reaches
        add(x);
      }
      break;
    case GroupAxis::CP:
      for (int i = 0; i < p.cp; ++i) {
        RankCoord x = c;
        x.cp = i;
        add(x);
      }
      break;
    case GroupAxis::EP:
    case GroupAxis::ETP:
    case GroupAxis::EDP: {
      const int etp = p.expert_tp(), ep = p.ep, j = block_index(p, c);
      const int my_t = j % etp, my_e = (j / etp) % ep, my_d = j / (etp * ep);
      for (int k = 0; k < p.tp * p.cp * p.dp; ++k) {
        const int t = k % etp, e = (k / etp) % ep, d = k / (etp * ep);
        const bool in = ax == GroupAxis::EP    ? (t == my_t && d == my_d)
                        : ax == GroupAxis::ETP ? (e == my_e && d == my_d)
                                               : (t == my_t && e == my_e);
        if (in) add(block_coord(p, k, c.pp));
      }
      break;
    }
    case GroupAxis::EMB:  // every replica of the first stage and of the head's stage of this pipeline copy; under
                          // DualPipe the stage and its mirror, which hold copies of each other's layers
    {
      const std::array<int, 2> stages =
          p.bidirectional() ? std::array<int, 2>{c.pp, p.pp - 1 - c.pp} : std::array<int, 2>{0, p.head_stage()};
      for (int st : stages)
        for (int j = 0; j < p.replicas(st); ++j) {
          RankCoord x = c;
          x.pp = st;
          x.rep = j;
          x.tp = std::min(c.tp, p.stage_tp(st) - 1);  // tied embeddings: validate() keeps the end stages' tp equal
          add(x);
        }
      break;
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace dtsim::sim
