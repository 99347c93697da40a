// dtsim pareto (studies/report/pareto.hpp): the hand-made fixture tests/data/sweep/pareto_handmade.jsonl, whose fronts
// are known (see tests/data/sweep/README.md), dominance invariants on the larger synthetic sweep, per model and GPU
// count grouping, deterministic ties, and the command line (table, pareto.json/csv, empty and front-less input).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "studies/report/pareto.hpp"
#include "traces/error.hpp"

using namespace dtsim;
using namespace dtsim::sim;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(DTSIM_SOURCE_DIR) + "/tests/data/sweep/";

const std::string& scratch() {
  static const std::string dir = [] {
    std::string d = (fs::path(::testing::TempDir()) / ("dtsim_pareto_" + std::to_string(getpid()))).string();
    fs::create_directories(d);
    return d;
  }();
  return dir;
}
struct RemoveScratch : ::testing::Environment {
  void TearDown() override { fs::remove_all(scratch()); }
};
const auto* const kRemoveScratch = ::testing::AddGlobalTestEnvironment(new RemoveScratch);

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct CliRun {
  int rc;
  std::string out, err;
};
CliRun dtsim_cli(const std::string& args) {
  const std::string o = scratch() + "/stdout", e = scratch() + "/stderr";
  const int status = std::system((std::string(DTSIM_BIN) + " " + args + " >" + o + " 2>" + e).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(o), slurp(e)};
}

std::vector<std::string> front_ids(const ParetoGroup& g) {
  std::vector<std::string> ids;
  for (const ParetoPoint& p : g.front) ids.push_back(p.row->id);
  return ids;
}

bool dominates(const SweepRow& a, const SweepRow& b) {
  return a.tokens_per_s >= b.tokens_per_s && a.peak_memory_bytes <= b.peak_memory_bytes &&
         (a.tokens_per_s > b.tokens_per_s || a.peak_memory_bytes < b.peak_memory_bytes);
}

}  // namespace

TEST(Pareto, HandMadeFrontsAreKnown) {
  const SweepResults res = load_sweep_results(kData + "pareto_handmade.jsonl");
  ASSERT_EQ(res.rows.size(), 21u);
  const auto groups = pareto_fronts(res.rows);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].gpus, 8);
  EXPECT_EQ(groups[1].gpus, 16);
  EXPECT_EQ(groups[2].gpus, 32);
  // 8 GPUs: s0001 (equal memory, slower), s0003 (dominated), s0004 (equal throughput, more memory), s0012
  // (dominated), s0008 (over capacity), s0009/10/11 (oom, failed, crashed) are off; s0006 is s0005's duplicate.
  EXPECT_EQ(front_ids(groups[0]), (std::vector<std::string>{"s0000", "s0002", "s0013", "s0005", "s0007"}));
  ASSERT_EQ(groups[0].front[3].duplicates.size(), 1u);
  EXPECT_EQ(groups[0].front[3].duplicates[0]->id, "s0006");
  EXPECT_EQ(groups[0].front[2].row->planner, "dapple");
  EXPECT_EQ(front_ids(groups[1]), (std::vector<std::string>{"s0014", "s0016"}));
  EXPECT_TRUE(groups[2].front.empty());
  const StatusCounts& c = groups[0].counts;
  EXPECT_EQ(c.total, 14);
  EXPECT_EQ(c.ok_fit, 10);
  EXPECT_EQ(c.ok_over, 1);
  EXPECT_EQ(c.oom, 1);
  EXPECT_EQ(c.failed, 1);
  EXPECT_EQ(c.crashed, 1);
  for (const SweepRow& r : res.rows) {
    const bool expect_on =
        std::set<std::string>{"s0000", "s0002", "s0013", "s0005", "s0006", "s0007", "s0014", "s0016"}.count(r.id) > 0;
    bool on = false;
    for (const auto& g : groups) on = on || g.on_front(r);
    EXPECT_EQ(on, expect_on) << r.id;
  }
}

TEST(Pareto, FrontDoesNotDependOnRowOrder) {
  SweepResults res = load_sweep_results(kData + "pareto_handmade.jsonl");
  std::mt19937 rng(7);
  for (int trial = 0; trial < 5; ++trial) {
    std::shuffle(res.rows.begin(), res.rows.end(), rng);
    const auto groups = pareto_fronts(res.rows);
    EXPECT_EQ(front_ids(groups[0]), (std::vector<std::string>{"s0000", "s0002", "s0013", "s0005", "s0007"}));
    EXPECT_EQ(groups[0].front[3].duplicates.at(0)->id, "s0006");  // the lower index stands, wherever it is
    EXPECT_EQ(pareto_csv(groups), pareto_csv(pareto_fronts(load_sweep_results(kData + "pareto_handmade.jsonl").rows)));
  }
}

TEST(Pareto, DominanceInvariantsOnSyntheticSweep) {
  const SweepResults res = load_sweep_results(kData + "sweep_small.jsonl");
  const auto groups = pareto_fronts(res.rows);
  EXPECT_EQ(groups.size(), 9u);  // two models on 8..64 GPUs, plus the crashed 128-GPU gpt3-1.3b row
  for (const ParetoGroup& g : groups) {
    for (std::size_t i = 0; i + 1 < g.front.size(); ++i) {  // sorted, strictly increasing in both
      EXPECT_LT(g.front[i].row->peak_memory_bytes, g.front[i + 1].row->peak_memory_bytes);
      EXPECT_LT(g.front[i].row->tokens_per_s, g.front[i + 1].row->tokens_per_s);
    }
    for (const SweepRow& r : res.rows) {
      if (r.model != g.model || r.gpus != g.gpus) continue;
      if (!r.usable()) {
        EXPECT_FALSE(g.on_front(r)) << r.id;
        continue;
      }
      bool dominated = false;
      for (const SweepRow& o : res.rows)
        dominated = dominated || (o.usable() && o.model == r.model && o.gpus == r.gpus && dominates(o, r));
      EXPECT_EQ(g.on_front(r), !dominated) << r.id;
    }
  }
}

TEST(Pareto, GroupsByModelAndGpuCount) {
  SweepResults res = load_sweep_results(kData + "pareto_handmade.jsonl");
  SweepRow other = res.rows[0];
  other.id = "other";
  other.model = "another-model";
  other.tokens_per_s = 1e9;  // would dominate everything if models were mixed
  res.rows.push_back(other);
  const auto groups = pareto_fronts(res.rows);
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[0].model, "another-model");
  EXPECT_EQ(front_ids(groups[0]), std::vector<std::string>{"other"});
  EXPECT_EQ(front_ids(groups[1]).size(), 5u);
}

TEST(Pareto, JsonAndCsv) {
  const SweepResults res = load_sweep_results(kData + "pareto_handmade.jsonl");
  const auto groups = pareto_fronts(res.rows);
  const nlohmann::json j = pareto_json(groups, res.path);
  ASSERT_EQ(j["groups"].size(), 3u);
  EXPECT_EQ(j["counts"]["total"], 21);
  EXPECT_EQ(j["counts"]["ok_fit"], 13);
  EXPECT_EQ(j["groups"][0]["front"].size(), 5u);
  EXPECT_EQ(j["groups"][0]["front"][3]["id"], "s0005");
  EXPECT_EQ(j["groups"][0]["front"][3]["duplicates"], nlohmann::json::array({"s0006"}));
  EXPECT_EQ(j["groups"][0]["front"][2]["strategy"],
            "planner dapple: tp2 pp2 dp2 vp1 mbs1 zero0 recompute=none layout=1d");
  const std::string csv = pareto_csv(groups);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 7);
  EXPECT_NE(
      csv.find("\ntiny-gpt,8,4,s0005,tp1 pp2 dp4 vp1 mbs2 zero0 recompute=none layout=1d,,dgx-a100:8,1,2,4,1,2,64,0,"
               "none,1d,false,3000,"),
      std::string::npos)
      << csv;
  EXPECT_NE(csv.find(",40000000000,80000000000,s0006\n"), std::string::npos) << csv;
}

TEST(ParetoCli, PrintsTablesAndWritesFiles) {
  const std::string out = scratch() + "/cli";
  const CliRun r = dtsim_cli("pareto " + kData + "pareto_handmade.jsonl --out " + out);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("tiny-gpt on 8 GPUs (dgx-a100:8): 14 scenarios, 10 ran and fit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("s0005 (same as s0006)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("planner dapple: tp2 pp2 dp2"), std::string::npos) << r.out;
  EXPECT_NE(
      r.out.find("tiny-gpt on 32 GPUs (dgx-a100:32): 2 scenarios, 0 ran and fit, 0 over capacity, 1 oom, 0 failed, 1 "
                 "crashed\n  no Pareto front"),
      std::string::npos)
      << r.out;
  const auto j = nlohmann::json::parse(slurp(out + "/pareto.json"));
  EXPECT_EQ(j["groups"][1]["front"][1]["id"], "s0016");
  EXPECT_EQ(slurp(out + "/pareto.csv"),
            pareto_csv(pareto_fronts(load_sweep_results(kData + "pareto_handmade.jsonl").rows)));
  // A sweep output directory works as well, and -q prints nothing.
  fs::create_directories(scratch() + "/sweepdir");
  fs::copy_file(kData + "pareto_handmade.jsonl", scratch() + "/sweepdir/results.jsonl");
  const CliRun q = dtsim_cli("pareto " + scratch() + "/sweepdir -q");
  EXPECT_EQ(q.rc, 0) << q.err;
  EXPECT_EQ(q.out, "");
}

TEST(ParetoCli, EmptyInputIsAClearError) {
  const std::string empty = scratch() + "/empty.jsonl";
  std::ofstream(empty) << "\n";
  const CliRun r = dtsim_cli("pareto " + empty + " --out " + scratch() + "/empty_out");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "dtsim: error: pareto: '" + empty + "' holds no scenario yet (empty results)\n");
  EXPECT_FALSE(fs::exists(scratch() + "/empty_out"));
  const CliRun none = dtsim_cli("pareto");
  EXPECT_EQ(none.rc, 2);
  EXPECT_NE(none.err.find("give the sweep's results.jsonl"), std::string::npos) << none.err;
}

TEST(ParetoCli, NoCandidateSaysSo) {
  const std::string path = scratch() + "/failed.jsonl";
  {
    const SweepResults res = load_sweep_results(kData + "pareto_handmade.jsonl");
    std::ofstream out(path);
    for (const SweepRow& row : res.rows)
      if (!row.ok()) out << to_json(row).dump() << "\n";
  }
  const CliRun r = dtsim_cli("pareto " + path);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("6 scenarios in " + path + ": 0 ran and fit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no Pareto front: no scenario of this group ran and fit in memory"), std::string::npos) << r.out;
}
