// `dtsim report`: one self-contained HTML page of sweep results (no scripts, fonts, images or links; the same bytes
// for the same input). Inline SVG plots (studies/report/svg.hpp):
//   (a) best throughput against GPU count, one line per model;
//   (b) memory of the top strategies, stacked by weights / gradients / optimizer / activations / reserved, with
//       the memory capacity;
//   (c) the Pareto fronts of tokens/s against peak memory (studies/report/pareto.hpp), every scenario that ran faint
//   behind; (d) compute / exposed communication / pipeline bubble of the top strategies;
// then a table of the top strategies per model and GPU count, and the skip/failure counts with the errors seen.
// "Top" = the rows that ran and fit, by tokens/s (ties: lower index, then id).
#pragma once
#include <string>
#include <vector>

#include "studies/report/pareto.hpp"
#include "studies/sweep/sweep_results.hpp"

namespace dtsim::sim {

/// The `top` best rows of group `g` (which must come from pareto_fronts(rows)).
std::vector<const SweepRow*> top_strategies(const std::vector<SweepRow>& rows, const ParetoGroup& g, int top);

/// The HTML page; `top` strategies per group in the table and the bar charts.
std::string sweep_html(const SweepResults& results, int top);

}  // namespace dtsim::sim
