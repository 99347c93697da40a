#include "sim/report/trace_select.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>

#include "traces/error.hpp"

namespace dtsim::sim {

namespace {

/// A non-negative decimal integer that fits an int, or -1.
int parse_count(std::string_view s) {
  if (s.empty() || s.size() > 9) return -1;
  int v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 0) return -1;
  return v;
}

std::string trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

void parse_trace_ranks(const std::string& text, int world_size, TraceRequest& req, const std::string& option) {
  const std::string all = trim(text);
  if (all == "auto") {
    req.ranks = TraceRequest::Ranks::AUTO;
    req.rank_list.clear();
    return;
  }
  if (all == "all") {
    req.ranks = TraceRequest::Ranks::ALL;
    req.rank_list.clear();
    return;
  }
  const std::string hint = " (expected auto, all, or global ranks and ranges such as 0-7,64)";
  if (all.empty()) throw ConfigError(option + ": empty list" + hint);
  std::vector<int> ranks;
  std::size_t pos = 0;
  while (pos <= all.size()) {
    const std::size_t comma = std::min(all.find(',', pos), all.size());
    const std::string item = trim(std::string_view(all).substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) throw ConfigError(option + ": empty entry in '" + all + "'" + hint);
    const std::size_t dash = item.find('-', 1);
    const int lo = parse_count(trim(std::string_view(item).substr(0, dash)));
    const int hi = dash == std::string::npos ? lo : parse_count(trim(std::string_view(item).substr(dash + 1)));
    if (lo < 0 || hi < 0) throw ConfigError(option + ": '" + item + "' is not a rank or a range of ranks" + hint);
    if (hi < lo) throw ConfigError(option + ": range '" + item + "' ends before it starts");
    if (hi >= world_size)
      throw ConfigError(option + ": rank " + std::to_string(hi) + " is outside the run's ranks 0-" +
                        std::to_string(world_size - 1));
    for (int r = lo; r <= hi; ++r) ranks.push_back(r);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  req.ranks = TraceRequest::Ranks::LIST;
  req.rank_list = std::move(ranks);
}

int parse_trace_link_count(const std::string& text, const std::string& option) {
  const std::string s = trim(text);
  if (s == "auto") return 0;
  if (s == "all") return -1;
  const int n = parse_count(s);
  if (n <= 0)
    throw ConfigError(option + ": '" + text + "' is not a number of links (expected a positive integer, all or auto)");
  return n;
}

namespace {

// The busiest `n` of the used links by bytes carried (ties: platform order), returned in platform order.
std::vector<int> busiest_links(const EngineResult& res, int n) {
  std::vector<int> used;
  for (std::size_t l = 0; l < res.link_stats.size(); ++l)
    if (res.link_stats[l].bytes > 0) used.push_back(static_cast<int>(l));
  if (n >= 0 && static_cast<std::size_t>(n) < used.size()) {
    std::stable_sort(used.begin(), used.end(),
                     [&](int a, int b) { return res.link_stats[a].bytes > res.link_stats[b].bytes; });
    used.resize(n);
    std::sort(used.begin(), used.end());
  }
  return used;
}

int used_links(const EngineResult& res) {
  return static_cast<int>(
      std::count_if(res.link_stats.begin(), res.link_stats.end(), [](const LinkStats& l) { return l.bytes > 0; }));
}

}  // namespace

TraceSelection select_all(const Lowered& low, const EngineResult& res, bool link_tracks) {
  TraceSelection sel;
  sel.ranks_total = static_cast<int>(low.ranks.size());
  sel.sim_ranks.resize(low.ranks.size());
  std::iota(sel.sim_ranks.begin(), sel.sim_ranks.end(), 0);
  sel.links_used = used_links(res);
  sel.link_tracks = link_tracks;
  if (link_tracks) sel.links = busiest_links(res, -1);
  sel.rule = "every simulated rank" + std::string(link_tracks ? ", every used link" : "");
  return sel;
}

TraceSelection select_trace(const Lowered& low, const Report& rep, const EngineResult& res, const TraceRequest& req) {
  TraceSelection sel;
  const int n = static_cast<int>(low.ranks.size());
  sel.ranks_total = n;
  sel.links_used = used_links(res);
  sel.link_tracks = req.link_tracks;
  bool every_rank = false;
  if (req.ranks == TraceRequest::Ranks::ALL || (req.ranks == TraceRequest::Ranks::AUTO && n <= kTraceAllRanksUpTo)) {
    sel.sim_ranks.resize(n);
    std::iota(sel.sim_ranks.begin(), sel.sim_ranks.end(), 0);
    every_rank = true;
    sel.rule = req.ranks == TraceRequest::Ranks::ALL
                   ? "every simulated rank (--trace-ranks all)"
                   : "every simulated rank (at most " + std::to_string(kTraceAllRanksUpTo) + ")";
  } else if (req.ranks == TraceRequest::Ranks::LIST) {
    for (int g : req.rank_list)
      if (g >= 0 && static_cast<std::size_t>(g) < low.sim_index_of.size()) sel.sim_ranks.push_back(low.sim_index_of[g]);
    sel.rule = "the ranks of --trace-ranks (a folded rank is shown by the simulated rank standing for it)";
  } else {
    // Per pipeline stage: the representative (coordinate 0 elsewhere), the busiest and the largest peak memory.
    int stages = 0;
    for (const auto& r : low.ranks) stages = std::max(stages, r.coord.pp + 1);
    std::vector<int> rep_of(stages, -1), busiest(stages, -1), fullest(stages, -1);
    for (int i = 0; i < n; ++i) {
      const auto& c = low.ranks[i].coord;
      const int s = c.pp;
      if (rep_of[s] < 0 && c.tp == 0 && c.dp == 0 && c.cp == 0 && c.rep == 0) rep_of[s] = i;
      const auto& rr = rep.ranks[i];
      const auto& rb = busiest[s] >= 0 ? rep.ranks[busiest[s]] : rr;
      if (busiest[s] < 0 || rr.compute_s + rr.exposed_comm_s > rb.compute_s + rb.exposed_comm_s) busiest[s] = i;
      if (fullest[s] < 0 || rr.peak_bytes > rep.ranks[fullest[s]].peak_bytes) fullest[s] = i;
    }
    for (int s = 0; s < stages; ++s)
      for (int i : {rep_of[s], busiest[s], fullest[s]})
        if (i >= 0) sel.sim_ranks.push_back(i);
    sel.rule =
        "per pipeline stage: its representative rank (coordinate 0 on every other axis), its busiest rank "
        "(largest compute + exposed communication) and its rank with the largest peak memory (more than " +
        std::to_string(kTraceAllRanksUpTo) + " simulated ranks; --trace-ranks all|LIST chooses)";
  }
  std::sort(sel.sim_ranks.begin(), sel.sim_ranks.end());
  sel.sim_ranks.erase(std::unique(sel.sim_ranks.begin(), sel.sim_ranks.end()), sel.sim_ranks.end());
  if (req.link_tracks) {
    const int max_links = req.max_links != 0 ? req.max_links : every_rank ? -1 : kTraceDefaultLinks;
    sel.links = busiest_links(res, max_links);
    sel.rule += max_links < 0 ? "; every used link"
                              : "; the " + std::to_string(max_links) + " links that carried the most bytes";
  }
  return sel;
}

nlohmann::json trace_selection_json(const TraceSelection& sel, const Lowered& low, const EngineResult& res) {
  nlohmann::json ranks = nlohmann::json::array();
  for (int i : sel.sim_ranks) ranks.push_back(low.ranks[i].global_rank);
  nlohmann::json j = {{"rule", sel.rule},
                      {"simulated_ranks", sel.ranks_total},
                      {"ranks", ranks},
                      {"ranks_left_out", sel.ranks_total - static_cast<int>(sel.sim_ranks.size())}};
  if (sel.link_tracks) {
    nlohmann::json links = nlohmann::json::array();
    for (int l : sel.links) links.push_back(res.link_stats[l].name);
    j["used_links"] = sel.links_used;
    j["links"] = links;
    j["links_left_out"] = sel.links_used - static_cast<int>(sel.links.size());
  }
  return j;
}

}  // namespace dtsim::sim
