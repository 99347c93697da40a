// Which simulated ranks and which network links a bounded trace (trace.json) shows, so that a large unfolded run
// still gives a file a browser trace viewer opens; trace.pftrace (Perfetto's protobuf format) always holds them all.
//
// Default (--trace-ranks auto): every simulated rank when there are at most kTraceAllRanksUpTo (folded runs and
// small clusters: trace.json as before); otherwise, for each pipeline stage, its representative rank (coordinates
// 0 on every axis but the stage: the rank the human summary reports for the stage), the stage's busiest rank
// (largest compute + exposed communication time, the rank that sets the stage's pace) and the stage's rank with the
// largest peak memory, each once. Link load tracks (--trace-links) show every used link when every simulated rank
// is traced, else the kTraceDefaultLinks links that carried the most bytes; `--trace-links N|all` overrides.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/report/report.hpp"

namespace dtsim::sim {

/// Runs with at most this many simulated ranks trace every rank by default.
inline constexpr int kTraceAllRanksUpTo = 64;
/// Link load tracks kept by default when the ranks are bounded: the busiest links by bytes carried.
inline constexpr int kTraceDefaultLinks = 32;

/// What to put in the trace, as the user asked (dtsim simulate --trace-ranks, --trace-links).
struct TraceRequest {
  enum class Ranks { AUTO, ALL, LIST };
  Ranks ranks = Ranks::AUTO;
  std::vector<int> rank_list;  ///< LIST: global ranks, ascending, each once
  bool link_tracks = false;    ///< one load counter track per link
  int max_links = 0;           ///< 0: the default above; -1: every used link; N > 0: the N busiest
};

/// Parses a --trace-ranks value into `req`: "auto", "all", or a comma list of global ranks and inclusive ranges
/// ("0-7,64"), every rank below `world_size`. Throws ConfigError naming `option` and the bad piece.
void parse_trace_ranks(const std::string& text, int world_size, TraceRequest& req,
                       const std::string& option = "--trace-ranks");
/// Parses a --trace-links count: "auto" (0), "all" (-1) or a positive integer. Throws ConfigError naming `option`.
int parse_trace_link_count(const std::string& text, const std::string& option = "--trace-links");

struct TraceSelection {
  std::vector<int> sim_ranks;  ///< indices into Lowered::ranks, ascending
  std::vector<int> links;      ///< indices into EngineResult::link_stats (platform order), ascending
  int ranks_total = 0;         ///< simulated ranks
  int links_used = 0;          ///< links that carried any bytes
  bool link_tracks = false;
  std::string rule;  ///< how the ranks and links were chosen, in words (the trace's metadata)
};

/// The ranks and links of the trace for `req` (a LIST names global ranks: a folded rank stands for its class).
TraceSelection select_trace(const Lowered& low, const Report& rep, const EngineResult& res, const TraceRequest& req);
/// Everything: every simulated rank and, with `link_tracks`, every used link.
TraceSelection select_all(const Lowered& low, const EngineResult& res, bool link_tracks);
/// The selection as the trace's metadata: the rule, the global ranks and link names kept, and how many were left out.
nlohmann::json trace_selection_json(const TraceSelection& sel, const Lowered& low, const EngineResult& res);

}  // namespace dtsim::sim
