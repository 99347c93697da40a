// The communication groups of a parallel plan: which global ranks a rank's collectives (or its pipeline and
// tied-embedding transfers) run over. One definition for the lowering and for the footprint estimate, which must
// count the same groups.
#pragma once
#include <vector>

#include "traces/plan.hpp"

namespace dtsim::sim {

/// The three plan axes plus the tied-embedding pair {first stage, last stage}, the context-parallel group and the
/// expert groups (expert parallel, expert tensor parallel, expert data parallel). DP spans dp x cp (the ranks that
/// reduce dense gradients) and every replica of the stage.
enum class GroupAxis { TP, DP, PP, EMB, CP, EP, ETP, EDP };
inline constexpr int kNumGroupAxes = 8;

/// Index j = tp + tp (cp + cp dp) of a rank inside its stage's tp x cp x dp block (Megatron-Core's expert grid).
int block_index(const ParallelPlan& p, const RankCoord& c);
/// The coordinate of block index j on stage pp (replica 0).
RankCoord block_coord(const ParallelPlan& p, int j, int pp);

/// Members of `rank`'s group on `ax`, ascending and without duplicates. PP and EMB groups overlap (a rank's group
/// depends on its replica index); a rank need not be a member of the PP group it uses.
std::vector<int> group_members(const ParallelPlan& p, int rank, GroupAxis ax);

}  // namespace dtsim::sim
