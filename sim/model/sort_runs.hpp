// Sorting lists that come as a few ascending runs (a link's flows or a rank's intervals in task order, which is time
// order per stream): the runs are found in one pass and merged pairwise, O(n log runs) instead of O(n log n).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace dtsim::sim {

/// Sorts `v` ascending (operator<); the result is std::sort's (equal elements are equal values here). `runs` is
/// scratch space, kept by the caller so that a loop over many lists does not allocate.
template <class T>
void sort_runs(std::vector<T>& v, std::vector<std::size_t>& runs) {
  runs.assign(1, 0);
  for (std::size_t i = 1; i < v.size(); ++i)
    if (v[i] < v[i - 1]) runs.push_back(i);
  runs.push_back(v.size());
  // Each round merges runs 0+1, 2+3, ... in place; an odd last run is carried to the next round.
  while (runs.size() > 2) {
    std::size_t out = 1;
    for (std::size_t k = 0; k + 2 < runs.size(); k += 2) {
      const auto at = [&](std::size_t b) { return v.begin() + static_cast<std::ptrdiff_t>(runs[b]); };
      std::inplace_merge(at(k), at(k + 1), at(k + 2));
      runs[out++] = runs[k + 2];
    }
    if (runs[out - 1] != runs.back()) runs[out++] = runs.back();
    runs.resize(out);
  }
}

template <class T>
void sort_runs(std::vector<T>& v) {
  std::vector<std::size_t> runs;
  sort_runs(v, runs);
}

}  // namespace dtsim::sim
