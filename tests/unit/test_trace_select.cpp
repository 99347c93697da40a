// Which ranks and links go into trace.json (sim/report/trace_select): --trace-ranks and --trace-links parsing and
// their one-line errors, the default bound (every rank up to 64 simulated ranks, else per pipeline stage the
// representative, busiest and largest-memory ranks; every used link, else the 32 busiest), folded ranks in a list,
// and the metadata that says what was kept and left out.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/report/trace_select.hpp"
#include "traces/error.hpp"

using namespace dtsim;
using namespace dtsim::sim;

namespace {

std::vector<int> ranks_of(const std::string& text, int world) {
  TraceRequest req;
  parse_trace_ranks(text, world, req);
  EXPECT_EQ(req.ranks, TraceRequest::Ranks::LIST) << text;
  return req.rank_list;
}

std::string rank_error(const std::string& text, int world) {
  TraceRequest req;
  try {
    parse_trace_ranks(text, world, req);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string link_error(const std::string& text) {
  try {
    parse_trace_link_count(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

// An unfolded run of tp x dp x pp ranks (rank order tp, dp, pp) with every rank alike, and `links` links, link l
// carrying l + 1 bytes.
struct FakeRun {
  Lowered low;
  Report rep;
  EngineResult res;
  FakeRun(int tp, int dp, int pp, int links) {
    const int n = tp * dp * pp;
    for (int g = 0; g < n; ++g) {
      SimRank r;
      r.global_rank = g;
      r.coord.tp = g % tp;
      r.coord.dp = (g / tp) % dp;
      r.coord.pp = g / (tp * dp);
      low.ranks.push_back(r);
      low.sim_index_of.push_back(g);
      RankReport rr;
      rr.sim_index = g;
      rr.global_rank = g;
      rr.coord = r.coord;
      rr.compute_s = 1.0;
      rr.exposed_comm_s = 0.5;
      rr.peak_bytes = 10e9;
      rep.ranks.push_back(rr);
    }
    for (int l = 0; l < links; ++l) res.link_stats.push_back({"link" + std::to_string(l), 1e9, l + 1.0, 0, 0});
  }
  std::vector<int> globals(const TraceSelection& sel) const {
    std::vector<int> g;
    for (int i : sel.sim_ranks) g.push_back(low.ranks[i].global_rank);
    return g;
  }
};

}  // namespace

TEST(TraceSelect, ParsesRankLists) {
  EXPECT_EQ(ranks_of("0-7,64", 128), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 64}));
  EXPECT_EQ(ranks_of("5", 8), (std::vector<int>{5}));
  EXPECT_EQ(ranks_of(" 3 , 1-3,2 ", 8), (std::vector<int>{1, 2, 3}));  // sorted, each once, spaces allowed
  EXPECT_EQ(ranks_of("7-7,0", 8), (std::vector<int>{0, 7}));
  TraceRequest req;
  parse_trace_ranks("all", 8, req);
  EXPECT_EQ(req.ranks, TraceRequest::Ranks::ALL);
  parse_trace_ranks("auto", 8, req);
  EXPECT_EQ(req.ranks, TraceRequest::Ranks::AUTO);
  EXPECT_TRUE(req.rank_list.empty());
}

TEST(TraceSelect, RankListErrorsNameTheBadPiece) {
  EXPECT_NE(rank_error("", 8).find("--trace-ranks: empty list"), std::string::npos);
  EXPECT_NE(rank_error("1,,2", 8).find("empty entry"), std::string::npos);
  EXPECT_NE(rank_error("two", 8).find("'two' is not a rank"), std::string::npos);
  EXPECT_NE(rank_error("-3", 8).find("'-3' is not a rank"), std::string::npos);
  EXPECT_NE(rank_error("1-", 8).find("'1-' is not a rank"), std::string::npos);
  EXPECT_NE(rank_error("1-x", 8).find("'1-x'"), std::string::npos);
  EXPECT_NE(rank_error("99999999999", 8).find("is not a rank"), std::string::npos);
  EXPECT_NE(rank_error("5-2", 8).find("range '5-2' ends before it starts"), std::string::npos);
  EXPECT_NE(rank_error("0-8", 8).find("rank 8 is outside the run's ranks 0-7"), std::string::npos);
  EXPECT_NE(rank_error("1024", 1024).find("rank 1024 is outside"), std::string::npos);
  for (const char* bad : {"", "x", "5-2", "8"}) {
    const std::string e = rank_error(bad, 8);
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;  // one line
    EXPECT_EQ(e.rfind("--trace-ranks: ", 0), 0u) << e;
  }
}

TEST(TraceSelect, ParsesLinkCounts) {
  EXPECT_EQ(parse_trace_link_count("auto"), 0);
  EXPECT_EQ(parse_trace_link_count("all"), -1);
  EXPECT_EQ(parse_trace_link_count("8"), 8);
  for (const char* bad : {"0", "-1", "x", "", "3.5", "1e3"})
    EXPECT_NE(link_error(bad).find("is not a number of links"), std::string::npos) << bad;
}

TEST(TraceSelect, SmallRunsKeepEveryRankAndLink) {
  FakeRun run(2, 4, 8, 100);  // 64 simulated ranks: the bound itself
  TraceRequest req;
  req.link_tracks = true;
  const TraceSelection sel = select_trace(run.low, run.rep, run.res, req);
  EXPECT_EQ(sel.sim_ranks.size(), 64u);
  EXPECT_EQ(sel.links.size(), 100u);
  const auto meta = trace_selection_json(sel, run.low, run.res);
  EXPECT_EQ(meta["ranks_left_out"], 0);
  EXPECT_EQ(meta["links_left_out"], 0);
  EXPECT_EQ(meta["simulated_ranks"], 64);
}

TEST(TraceSelect, LargeRunsKeepStageRepresentativesAndBusiestLinks) {
  FakeRun run(8, 4, 4, 600);  // 128 ranks, stages of 32
  TraceRequest req;
  TraceSelection sel = select_trace(run.low, run.rep, run.res, req);
  // All ranks alike: each stage's representative is also its busiest and largest-memory rank.
  EXPECT_EQ(run.globals(sel), (std::vector<int>{0, 32, 64, 96}));
  EXPECT_TRUE(sel.links.empty());  // no link tracks asked for
  // Stage 1's busiest rank and stage 2's largest peak memory join their representatives.
  run.rep.ranks[45].compute_s = 2.0;
  run.rep.ranks[70].peak_bytes = 20e9;
  run.rep.ranks[71].peak_bytes = 20e9;  // a tie keeps the first
  req.link_tracks = true;
  sel = select_trace(run.low, run.rep, run.res, req);
  EXPECT_EQ(run.globals(sel), (std::vector<int>{0, 32, 45, 64, 70, 96}));
  ASSERT_EQ(sel.links.size(), static_cast<std::size_t>(kTraceDefaultLinks));
  EXPECT_EQ(sel.links.front(), 600 - kTraceDefaultLinks);  // the busiest: the last 32, in platform order
  EXPECT_EQ(sel.links.back(), 599);
  const auto meta = trace_selection_json(sel, run.low, run.res);
  EXPECT_EQ(meta["ranks"], nlohmann::json({0, 32, 45, 64, 70, 96}));
  EXPECT_EQ(meta["ranks_left_out"], 122);
  EXPECT_EQ(meta["used_links"], 600);
  EXPECT_EQ(meta["links_left_out"], 600 - kTraceDefaultLinks);
  EXPECT_EQ(meta["links"][0], "link568");
  // --trace-links=5 and =all.
  req.max_links = 5;
  sel = select_trace(run.low, run.rep, run.res, req);
  EXPECT_EQ(sel.links, (std::vector<int>{595, 596, 597, 598, 599}));
  req.max_links = -1;
  EXPECT_EQ(select_trace(run.low, run.rep, run.res, req).links.size(), 600u);
  // --trace-ranks all on a large run: every rank, and then every link by default.
  req.max_links = 0;
  parse_trace_ranks("all", 128, req);
  sel = select_trace(run.low, run.rep, run.res, req);
  EXPECT_EQ(sel.sim_ranks.size(), 128u);
  EXPECT_EQ(sel.links.size(), 600u);
}

TEST(TraceSelect, UnusedLinksAreNeverTraced) {
  FakeRun run(1, 1, 2, 4);
  run.res.link_stats[1].bytes = 0;
  TraceRequest req;
  req.link_tracks = true;
  const TraceSelection sel = select_trace(run.low, run.rep, run.res, req);
  EXPECT_EQ(sel.links, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(sel.links_used, 3);
  EXPECT_EQ(select_all(run.low, run.res, true).links, (std::vector<int>{0, 2, 3}));
  EXPECT_TRUE(select_all(run.low, run.res, false).links.empty());
}

TEST(TraceSelect, ListedRanksMapToTheirSimulatedRank) {
  // Folded: 16 global ranks, tp folded (4 simulated ranks, one per tp group of 4).
  FakeRun run(1, 1, 4, 0);
  for (int i = 0; i < 4; ++i) run.low.ranks[i].global_rank = run.rep.ranks[i].global_rank = 4 * i;
  run.low.sim_index_of.clear();
  for (int g = 0; g < 16; ++g) run.low.sim_index_of.push_back(g / 4);
  TraceRequest req;
  parse_trace_ranks("1-2,13", 16, req);
  const TraceSelection sel = select_trace(run.low, run.rep, run.res, req);
  EXPECT_EQ(sel.sim_ranks, (std::vector<int>{0, 3}));
  EXPECT_EQ(run.globals(sel), (std::vector<int>{0, 12}));
  EXPECT_EQ(trace_selection_json(sel, run.low, run.res)["ranks_left_out"], 2);
}
