// Unit tests of sweeps (studies/sweep/sweep.hpp): spec checking, expansion and filtering counts on hand-counted specs,
// deterministic ids and random samples, the memory pre-filter, rows of analytic scenarios (run in-process: the
// analytic engine does not use SimGrid) and the CSV form. Process handling, resume and MPI are tested by
// tests/cli/sweep_resume.sh and sweep_mpi.sh.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "strategies/memory_model.hpp"
#include "strategies/planner.hpp"
#include "studies/sweep/sweep.hpp"
#include "traces/error.hpp"
#include "traces/stack_profile.hpp"

namespace sw = dtsim::sim::sweep;
using nlohmann::json;

namespace {
std::size_t skipped(const sw::Expansion& ex, const std::string& reason) {
  auto it = ex.skipped.find(reason);
  return it == ex.skipped.end() ? 0 : it->second;
}
std::size_t total_skipped(const sw::Expansion& ex) {
  std::size_t n = 0;
  for (const auto& [r, c] : ex.skipped) n += c;
  return n;
}
}  // namespace

// gpt3-1.3b (24 layers, 16 heads) on 24 GPUs, gbs 48 and 40, tp {1,3,8} x pp {1,2} x dp {auto,6} x mbs {1,2}:
// 48 points. Per gbs: dp 6 never gives tp*pp*dp = 24 (12 points); tp 3 with dp auto has dp 8 or 4 but 3 does not
// divide 16 heads (4); tp 8 pp 2 needs 16 | 24 (2, dp auto). Left: (tp,pp,dp) = (1,1,24), (1,2,12), (8,1,3) x mbs
// 1, 2: all 6 valid for gbs 48 (48 % (mbs dp) = 0), none for gbs 40 (40 % 24, 48, 12, 24, 3, 6 != 0: 6 skipped).
TEST(SweepExpansion, DivisibilityCountsByHand) {
  const json spec = {{"schema_version", 1},
                     {"models", {"gpt3-1.3b"}},
                     {"clusters", {"dgx-a100:24"}},
                     {"gbs", {48, 40}},
                     {"tp", {1, 3, 8}},
                     {"pp", {1, 2}},
                     {"dp", {"auto", 6}},
                     {"mbs", {1, 2}}};
  const auto ex = sw::expand(spec);
  EXPECT_EQ(ex.grid_points, 48u);
  EXPECT_EQ(ex.scenarios.size(), 6u);
  EXPECT_EQ(skipped(ex, "divisibility: tp*cp*pp*dp != gpus"), 24u);
  EXPECT_EQ(skipped(ex, "divisibility: heads % tp != 0"), 8u);
  EXPECT_EQ(skipped(ex, "divisibility: tp*cp*pp does not divide gpus (dp auto)"), 4u);
  EXPECT_EQ(skipped(ex, "divisibility: gbs % (mbs*dp) != 0"), 6u);
  EXPECT_EQ(total_skipped(ex), 42u);
  for (std::size_t i = 0; i < ex.scenarios.size(); ++i) {
    const auto& s = ex.scenarios[i];
    EXPECT_EQ(s.index, static_cast<int>(i));
    EXPECT_EQ(s.plan.global_batch_size, 48);
    EXPECT_EQ(s.plan.tp * s.plan.pp * s.plan.dp, 24);
  }
  // Grid order: tp, then pp, then dp, then mbs.
  EXPECT_EQ(ex.scenarios[0].plan.tp, 1);
  EXPECT_EQ(ex.scenarios[0].plan.micro_batch_size, 1);
  EXPECT_EQ(ex.scenarios[1].plan.micro_batch_size, 2);
  EXPECT_EQ(ex.scenarios[2].plan.pp, 2);
  EXPECT_EQ(ex.scenarios[5].plan.tp, 8);
}

// gpt3-1.3b on 16 GPUs, gbs 32, tp {1,2} x pp {1,2,4} x vp {1,5} x schedule {1f1b, interleaved} x sp {no, yes}:
// 48 points. For each (tp, sp) pair, 12 points: 1f1b with vp 5 (3 pp: "vp > 1 needs interleaved"), interleaved
// with vp 1 (3: "interleaved needs vp > 1"), interleaved vp 5 at pp 1 (1: "needs pp > 1") and at pp 2, 4 (2:
// 24 % 10 and 24 % 20, "layers"), 1f1b vp 1 (3 valid). With tp 1 and sp the 5 points that pass the schedule
// rules are no-ops (sequence parallelism without tp). Totals: 12, 12, 4, 6 (layers: tp 1 sp loses 2 to the
// no-op rule), 5 no-ops, 9 valid.
TEST(SweepExpansion, ScheduleRulesCountsByHand) {
  const json spec = {{"schema_version", 1},
                     {"models", {"gpt3-1.3b"}},
                     {"gpus", {16}},
                     {"cluster_preset", "dgx-a100"},
                     {"gbs", 32},
                     {"tp", {1, 2}},
                     {"pp", {1, 2, 4}},
                     {"vp", {1, 5}},
                     {"schedule", {"1f1b", "interleaved"}},
                     {"sequence_parallel", {false, true}}};
  const auto ex = sw::expand(spec);
  EXPECT_EQ(ex.grid_points, 48u);
  EXPECT_EQ(ex.scenarios.size(), 9u);
  EXPECT_EQ(skipped(ex, "schedule: vp > 1 needs the interleaved schedule"), 12u);
  EXPECT_EQ(skipped(ex, "schedule: interleaved needs vp > 1"), 12u);
  EXPECT_EQ(skipped(ex, "schedule: interleaved needs pp > 1"), 4u);
  EXPECT_EQ(skipped(ex, "divisibility: layers % (pp*vp) != 0"), 6u);
  EXPECT_EQ(skipped(ex, "no-op: sequence_parallel with tp 1"), 5u);
  EXPECT_EQ(total_skipped(ex), 39u);
  for (const auto& s : ex.scenarios) EXPECT_EQ(s.plan.schedule_name(), "1f1b");
}

TEST(SweepExpansion, PlanValidationDuplicatesAndPlanners) {
  // 2-D TP needs tp = q^2: tp 2 fails ParallelPlan::validate, tp 4 (q = 2) is valid. The second cluster is the
  // first one again (same contents, same ids): every point is a duplicate. Two planners x one model, two
  // clusters (the second a duplicate again), one gbs: 2 planner scenarios after the grid points.
  const json spec = {{"schema_version", 1},
                     {"models", {"gpt3-1.3b"}},
                     {"clusters", {"dgx-a100:16"}},
                     {"gpus", {16}},
                     {"gbs", {32}},
                     {"tp", {2, 4}},
                     {"tp_layout", {"2d"}},
                     {"planners", {"grid", "dapple:8"}}};
  const auto ex = sw::expand(spec);
  EXPECT_EQ(ex.grid_points, 4u);
  EXPECT_EQ(skipped(ex,
                    "plan validation: tensor-parallel layout 2d cannot arrange tp N (2d: tp = q^2; 2.5d: tp = "
                    "q^2 * depth; 3d: tp = q^3)"),
            2u);
  EXPECT_EQ(skipped(ex, "duplicate (the same scenario listed twice)"), 1u + 2u);
  ASSERT_EQ(ex.scenarios.size(), 3u);
  EXPECT_EQ(ex.scenarios[0].plan.tp, 4);
  EXPECT_EQ(ex.scenarios[1].planner, "grid");
  EXPECT_EQ(ex.scenarios[2].planner, "dapple:8");
  EXPECT_EQ(ex.scenarios[2].index, 2);
  const auto row = sw::row_skeleton(ex, ex.scenarios[1], "crashed", "x");
  EXPECT_EQ(row["planner"], "grid");
  EXPECT_EQ(row["tp"], 0);  // a planner's plan is only known once it ran
  EXPECT_EQ(row["gbs"], 32);
  EXPECT_EQ(row["tp_layout"], "");
}

TEST(SweepExpansion, IdsAreDeterministicAndContentBased) {
  EXPECT_EQ(sw::fnv1a_hex(""), "cbf29ce484222325");
  EXPECT_EQ(sw::fnv1a_hex("a"), "af63dc4c8601ec8c");
  json spec = {{"schema_version", 1}, {"models", {"gpt3-1.3b"}},
               {"gpus", {16, 32}},    {"gbs", {64}},
               {"tp", {1, 2, 4}},     {"pp", {1, 2}},
               {"mbs", {1, 2}},       {"network", {"analytic", "flow"}}};
  const auto a = sw::expand(spec), b = sw::expand(spec);
  ASSERT_EQ(a.scenarios.size(), b.scenarios.size());
  std::set<std::string> ids;
  for (std::size_t i = 0; i < a.scenarios.size(); ++i) {
    EXPECT_EQ(a.scenarios[i].id, b.scenarios[i].id);
    EXPECT_EQ(a.scenarios[i].id.size(), 16u);
    ids.insert(a.scenarios[i].id);
  }
  EXPECT_EQ(ids.size(), a.scenarios.size());
  // An id depends on the scenario, not on its position: adding a gbs keeps the existing ids.
  spec["gbs"] = {32, 64};
  const auto c = sw::expand(spec);
  std::set<std::string> cids;
  for (const auto& s : c.scenarios) cids.insert(s.id);
  for (const auto& id : ids) EXPECT_TRUE(cids.count(id)) << id;
  // A stack ("stack": name or profile file) pins its software values into every scenario's calibration: other ids.
  spec["gbs"] = {64};
  spec["stack"] = "torchtitan";
  const auto d = sw::expand(spec);
  ASSERT_EQ(d.scenarios.size(), a.scenarios.size());
  for (std::size_t i = 0; i < d.scenarios.size(); ++i) EXPECT_NE(d.scenarios[i].id, a.scenarios[i].id);
  for (const auto& cal : d.calibrations) {
    EXPECT_TRUE(cal.pinned("host_issue_s"));
    EXPECT_DOUBLE_EQ(cal.host_issue_s, dtsim::stack_profile("torchtitan").host_issue_s);
  }
  spec["stack"] = "no-such-stack";
  EXPECT_THROW(sw::expand(spec), dtsim::ConfigError);
}

TEST(SweepExpansion, RandomSamplesAreDeterministicSubsetsInGridOrder) {
  json spec = {{"schema_version", 1}, {"models", {"gpt3-1.3b"}},      {"gpus", {16, 32, 64}},
               {"gbs", {64, 128}},    {"tp", {1, 2, 4, 8}},           {"pp", {1, 2, 4}},
               {"mbs", {1, 2}},       {"recompute", {"none", "full"}}};
  const auto all = sw::expand(spec);
  spec["random"] = {{"samples", 20}, {"seed", 7}};
  const auto a = sw::expand(spec), b = sw::expand(spec);
  ASSERT_EQ(a.scenarios.size(), 20u);
  EXPECT_EQ(a.skipped.at("not sampled (random)"), all.scenarios.size() - 20);
  std::set<std::string> every;
  for (const auto& s : all.scenarios) every.insert(s.id);
  std::vector<int> order;
  for (std::size_t i = 0; i < a.scenarios.size(); ++i) {
    EXPECT_EQ(a.scenarios[i].id, b.scenarios[i].id);
    EXPECT_TRUE(every.count(a.scenarios[i].id));
    for (std::size_t k = 0; k < all.scenarios.size(); ++k)
      if (all.scenarios[k].id == a.scenarios[i].id) order.push_back(static_cast<int>(k));
  }
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
  spec["random"]["seed"] = 8;
  const auto c = sw::expand(spec);
  int same = 0;
  for (std::size_t i = 0; i < 20; ++i) same += c.scenarios[i].id == a.scenarios[i].id;
  EXPECT_LT(same, 20);
  spec["random"]["samples"] = 100000;  // more than there are: all of them
  EXPECT_EQ(sw::expand(spec).scenarios.size(), all.scenarios.size());
}

TEST(SweepExpansion, MemoryPrefilter) {
  // GPT-3 175B on one DGX node: 175e9 x 16 B / 8 GPUs = 350 GB per GPU of static memory, never fits 80 GB.
  // GPT-3 1.3B on the same node fits easily.
  const json spec = {{"schema_version", 1},
                     {"models", {"gpt3-175b", "gpt3-1.3b"}},
                     {"clusters", {"dgx-a100:8"}},
                     {"gbs", {8}},
                     {"tp", {8}}};
  const auto on = sw::expand(spec, ".", true);
  ASSERT_EQ(on.scenarios.size(), 2u);
  EXPECT_EQ(on.prefiltered, 1u);
  EXPECT_TRUE(on.scenarios[0].prefiltered);
  EXPECT_FALSE(on.scenarios[1].prefiltered);
  const auto off = sw::expand(spec, ".", false);
  EXPECT_EQ(off.prefiltered, 0u);
  EXPECT_EQ(off.scenarios[0].id, on.scenarios[0].id);
}

TEST(SweepExpansion, PrefilterPeakEqualsTheMemoryModel) {
  // The pre-filter's one-pass version equals memory::analytic_peak_bytes maximised over the stages, for every
  // schedule, recompute mode, ZeRO stage and a few shapes.
  const auto m = dtsim::model_preset("gpt3-1.3b");
  int checked = 0;
  for (const char* sched : {"gpipe", "1f1b", "1f1b:dapple", "interleaved:2", "zb-h1", "zb-h2"})
    for (int pp : {2, 4})
      for (int mbs : {1, 2})
        for (auto rc : {dtsim::Recompute::NONE, dtsim::Recompute::SELECTIVE, dtsim::Recompute::FULL})
          for (int zero : {0, 3}) {
            dtsim::ParallelPlan p;
            p.tp = 2, p.pp = pp, p.dp = 4, p.micro_batch_size = mbs, p.global_batch_size = 64;
            dtsim::set_schedule(p, sched, "test");
            p.recompute = rc, p.zero_stage = zero, p.sequence_parallel = zero == 3;
            double expect = 0;
            for (int st = 0; st < pp; ++st)
              expect = std::max(expect, dtsim::memory::analytic_peak_bytes(m, p, st, 2e9));
            EXPECT_DOUBLE_EQ(sw::analytic_peak_bytes(m, p, 2e9), expect) << dtsim::planning::describe(p);
            ++checked;
          }
  EXPECT_EQ(checked, 144);
}

TEST(SweepExpansion, SpecErrors) {
  const json good = {{"schema_version", 1}, {"models", {"gpt3-1.3b"}}, {"gpus", {16}}, {"gbs", {32}}};
  EXPECT_NO_THROW(sw::expand(good));
  auto bad = [&](const char* key, const json& value, const std::string& expect) {
    json s = good;
    if (value.is_null()) s.erase(key);
    else s[key] = value;
    try {
      sw::expand(s);
      ADD_FAILURE() << key << ": no error";
    } catch (const dtsim::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  };
  bad("tpp", json::array({2}), "unknown field 'tpp'");
  bad("gbs", nullptr, "'gbs'");
  bad("schema_version", nullptr, "schema_version");
  bad("schema_version", 2, "schema_version 2");
  bad("schedule", json::array({"interleaved:2"}), "'vp'");
  bad("schedule", json::array({"2f2b"}), "unknown schedule");
  bad("tp", json::array({0}), "'tp' value 0");
  bad("dp", json::array({"all"}), "\"auto\"");
  bad("network", json::array({"packet"}), "network 'packet'");
  bad("planners", json::array({"nope"}), "nope");
  bad("models", json::array(), "empty list");
  bad("random", json{{"samples", 0}}, "samples");
  bad("random", json{{"n", 3}}, "unknown field 'n'");
  bad("recompute", json::array({"full:0"}), "needs a positive layer count");
  bad("recompute", json::array({"full:x"}), "needs a positive layer count");
}

// "full:N" recomputes the first N layers of every chunk (Megatron's block method): gpt3-1.3b (24 layers) on 8 GPUs with
// pp 2 (12 layers per stage): full:3 and full:6 are two plans with their own ids, full:12 is refused by the plan's
// check (every layer of every chunk: plain full), and the rows name the knob as given.
TEST(SweepExpansion, RecomputeLayersKnob) {
  const json spec = {{"schema_version", 1}, {"models", {"gpt3-1.3b"}},
                     {"gpus", {8}},         {"gbs", {16}},
                     {"pp", {2}},           {"recompute", {"full", "full:3", "full:6", "full:12"}}};
  const auto ex = sw::expand(spec);
  std::set<int> layers;
  std::set<std::string> ids;
  for (const auto& s : ex.scenarios) {
    EXPECT_EQ(s.plan.recompute, dtsim::Recompute::FULL);
    layers.insert(s.plan.recompute_num_layers);
    ids.insert(s.id);
  }
  EXPECT_EQ(layers, (std::set<int>{0, 3, 6}));
  EXPECT_EQ(ids.size(), ex.scenarios.size());
  std::size_t refused = 0;
  for (const auto& [reason, n] : ex.skipped)
    if (reason.find("recomputes every layer of every model chunk") != std::string::npos) refused += n;
  EXPECT_EQ(refused, ex.scenarios.size() / 3);
}

TEST(SweepRows, AnalyticScenarioRowSchemaAndMetrics) {
  // Ran in this process: analytic network only (no SimGrid).
  const json spec = {{"schema_version", 1},
                     {"models", {"gpt3-1.3b", "gpt3-175b"}},
                     {"clusters", {"dgx-a100:8"}},
                     {"gbs", {8}},
                     {"tp", {8}},
                     {"network", "analytic"}};
  const auto ex = sw::expand(spec, ".", false);
  ASSERT_EQ(ex.scenarios.size(), 2u);
  const auto ok = sw::run_scenario(ex, ex.scenarios[0]);
  const std::vector<std::string> keys = {"id",
                                         "index",
                                         "model",
                                         "params",
                                         "cluster",
                                         "gpu",
                                         "gpus",
                                         "nodes",
                                         "network",
                                         "planner",
                                         "tp",
                                         "pp",
                                         "dp",
                                         "cp",
                                         "ep",
                                         "vp",
                                         "mbs",
                                         "gbs",
                                         "schedule",
                                         "zero",
                                         "recompute",
                                         "tp_layout",
                                         "sequence_parallel",
                                         "precision",
                                         "tp_comm_overlap",
                                         "overlap_param_gather",
                                         "cuda_graphs",
                                         "dispatcher",
                                         "overlap_moe_comm",
                                         "megatron_fsdp",
                                         "stage_replicas",
                                         "stage_strategies",
                                         "status",
                                         "error",
                                         "iteration_time_s",
                                         "tokens_per_s",
                                         "samples_per_s",
                                         "mfu",
                                         "model_tflops_per_gpu",
                                         "peak_memory_bytes",
                                         "memory_capacity_bytes",
                                         "fits",
                                         "memory_bytes",
                                         "compute_s",
                                         "exposed_comm_s",
                                         "bubble_s",
                                         "sim_wall_s"};
  std::vector<std::string> got;
  for (const auto& [k, v] : ok.items()) got.push_back(k);
  EXPECT_EQ(got, keys);
  EXPECT_EQ(ok["status"], "ok") << ok["error"];
  EXPECT_EQ(ok["error"], "");
  EXPECT_EQ(ok["model"], "gpt3-1.3b");
  EXPECT_EQ(ok["cluster"], "dgx-a100:8");
  EXPECT_EQ(ok["gpus"], 8);
  EXPECT_EQ(ok["nodes"], 1);
  EXPECT_EQ(ok["network"], "analytic");
  EXPECT_EQ(ok["schedule"], "1f1b");
  EXPECT_EQ(ok["tp_layout"], "1d");
  EXPECT_EQ(ok["fits"], true);
  const double t = ok["iteration_time_s"];
  EXPECT_GT(t, 0);
  EXPECT_NEAR(ok["samples_per_s"].get<double>(), 8 / t, 1e-9 * 8 / t);
  EXPECT_NEAR(ok["tokens_per_s"].get<double>(), 8 * 2048 / t, 1e-6 * 8 * 2048 / t);
  EXPECT_GT(ok["mfu"].get<double>(), 0);
  EXPECT_LT(ok["mfu"].get<double>(), 1);
  double mem = 0;
  for (const auto& [k, v] : ok["memory_bytes"].items()) mem += v.get<double>();
  EXPECT_NEAR(mem, ok["peak_memory_bytes"].get<double>(), 1.0);
  EXPECT_LT(ok["peak_memory_bytes"].get<double>(), ok["memory_capacity_bytes"].get<double>());
  // One rank's time splits into compute, exposed communication and bubble: their sum is the iteration.
  EXPECT_NEAR(ok["compute_s"].get<double>() + ok["exposed_comm_s"].get<double>() + ok["bubble_s"].get<double>(), t,
              1e-9 * t);
  EXPECT_GE(ok["sim_wall_s"].get<double>(), 0);

  const auto oom = sw::run_scenario(ex, ex.scenarios[1]);
  EXPECT_EQ(oom["status"], "oom");
  EXPECT_NE(oom["error"].get<std::string>().find("out of memory on 8 of 8 ranks"), std::string::npos) << oom["error"];
  EXPECT_TRUE(oom["iteration_time_s"].is_null());
  EXPECT_TRUE(oom["tokens_per_s"].is_null());
  EXPECT_TRUE(oom["compute_s"].is_null());
  EXPECT_EQ(oom["fits"], false);
  EXPECT_GT(oom["peak_memory_bytes"].get<double>(), oom["memory_capacity_bytes"].get<double>());
}

TEST(SweepRows, SpecFileErrorAndCsv) {
  // A schedule file that does not exist is an error of the spec, found before anything runs.
  const json spec = {{"schema_version", 1},
                     {"models", {"gpt3-1.3b"}},
                     {"clusters", {"dgx-a100:8"}},
                     {"gbs", {8}},
                     {"schedule", {"custom:/nonexistent/order.json"}}};
  EXPECT_THROW(sw::expand(spec), dtsim::ConfigError);

  const json ok_spec = {{"schema_version", 1}, {"models", {"gpt3-1.3b"}}, {"clusters", {"dgx-a100:8"}}, {"gbs", {8}}};
  const auto ex = sw::expand(ok_spec);
  auto row = sw::row_skeleton(ex, ex.scenarios[0], "failed", "a \"quoted\", comma");
  const std::string header = sw::csv_header(), line = sw::csv_line(row);
  EXPECT_EQ(header.substr(0, 20), "id,index,model,param");
  EXPECT_NE(header.find(",memory_bytes.weights,memory_bytes.gradients,memory_bytes.optimizer,"
                        "memory_bytes.activations,memory_bytes.reserved,"),
            std::string::npos);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_NE(line.find(",failed,\"a \"\"quoted\"\", comma\",,,"), std::string::npos) << line;
  auto count = [](const std::string& s) {  // fields outside quotes
    std::size_t n = 1;
    bool q = false;
    for (char c : s) {
      if (c == '"') q = !q;
      if (c == ',' && !q) ++n;
    }
    return n;
  };
  EXPECT_EQ(count(header), count(line));
  EXPECT_EQ(count(header), 51u);  // 47 keys, memory_bytes as 5 columns
}

// Expert and context parallelism as sweep knobs: mixtral-8x7b (8 experts, 32 heads, seq 4096) on 8 H100s, gbs 8,
// tp 1, ep {1, 2, 3, 8} x cp {1, 2} x cp_kind {ring, a2a}: 16 points. cp_kind a2a with cp 1 is a no-op (4); ep 3 does
// not divide 8 experts (plan validation: 3 left after the no-op rule); the rest run: ep {1, 2, 8} x (cp 1, cp 2 ring,
// cp 2 a2a) = 9, dp = 8 / cp. A plan without cp or ep keeps the id it had before these knobs existed.
TEST(SweepExpansion, ExpertAndContextParallelKnobs) {
  const json spec = {{"schema_version", 1},        {"models", {"mixtral-8x7b"}},
                     {"clusters", {"dgx-h100:8"}}, {"gbs", {8}},
                     {"ep", {1, 2, 3, 8}},         {"cp", {1, 2}},
                     {"cp_kind", {"ring", "a2a"}}};
  const auto ex = sw::expand(spec, ".", false);
  EXPECT_EQ(ex.grid_points, 16u);
  EXPECT_EQ(skipped(ex, "no-op: cp_kind with cp 1"), 4u);
  EXPECT_EQ(total_skipped(ex), 7u);
  ASSERT_EQ(ex.scenarios.size(), 9u);
  std::set<std::tuple<int, int, int>> seen;
  for (const auto& s : ex.scenarios) {
    EXPECT_EQ(s.plan.tp * s.plan.cp * s.plan.dp, 8);
    seen.insert({s.plan.ep, s.plan.cp, static_cast<int>(s.plan.cp_kind)});
  }
  EXPECT_EQ(seen.size(), 9u);
  EXPECT_TRUE(seen.count({8, 2, static_cast<int>(dtsim::CpKind::ALL_TO_ALL)}));
  const json plain = {{"schema_version", 1}, {"models", {"mixtral-8x7b"}}, {"clusters", {"dgx-h100:8"}}, {"gbs", {8}}};
  const auto ex1 = sw::expand(plain, ".", false);
  ASSERT_EQ(ex1.scenarios.size(), 1u);
  EXPECT_EQ(ex1.scenarios[0].id, ex.scenarios[0].id);
}

// Precision and the overlap options as sweep knobs: llama3-8b on one DGX H100 (tp 1, dp 8, ZeRO-1 and full recompute
// so that its 8K-token sequences fit 80 GB), gbs 8, precision {bf16, fp8}: fp8 runs the GEMM-heavy layers on the FP8
// tensor cores and is faster. The same precisions on an A100 (no FP8 tensor cores): fp8 is skipped by plan validation.
// tp_comm_overlap true without sequence parallelism is refused by plan validation (tp 2); with tp 1 it is a no-op. A
// plan with the defaults keeps the id it had before.
TEST(SweepExpansion, PrecisionAndOverlapKnobs) {
  const json plain = {{"schema_version", 1}, {"models", {"llama3-8b"}}, {"clusters", {"dgx-h100:8"}}, {"gbs", {8}},
                      {"zero", {1}},         {"recompute", {"full"}}};
  json spec = plain;
  spec["precision"] = {"bf16", "fp8"};
  const auto ex = sw::expand(spec, ".", false);
  EXPECT_EQ(ex.grid_points, 2u);
  ASSERT_EQ(ex.scenarios.size(), 2u);
  EXPECT_EQ(ex.scenarios[0].plan.precision, dtsim::Precision::BF16);
  EXPECT_EQ(ex.scenarios[1].plan.precision, dtsim::Precision::FP8_DELAYED);
  EXPECT_NE(ex.scenarios[0].id, ex.scenarios[1].id);
  const auto bf16 = sw::run_scenario(ex, ex.scenarios[0]);
  const auto fp8 = sw::run_scenario(ex, ex.scenarios[1]);
  ASSERT_EQ(bf16["status"], "ok") << bf16["error"];
  ASSERT_EQ(fp8["status"], "ok") << fp8["error"];
  EXPECT_EQ(bf16["precision"], "bf16");
  EXPECT_EQ(fp8["precision"], "fp8-delayed");
  EXPECT_EQ(fp8["tp_comm_overlap"], false);
  EXPECT_LT(fp8["iteration_time_s"].get<double>(), 0.95 * bf16["iteration_time_s"].get<double>());
  EXPECT_LT(fp8["compute_s"].get<double>(), bf16["compute_s"].get<double>());
  EXPECT_NE(sw::csv_line(fp8).find(",fp8-delayed,false,false,false,alltoall,false,false,,,ok,"), std::string::npos)
      << sw::csv_line(fp8);
  EXPECT_EQ(sw::expand(plain, ".", false).scenarios.at(0).id, ex.scenarios[0].id);

  json a100 = spec;
  a100["clusters"] = {"dgx-a100:8"};
  const auto ex_a100 = sw::expand(a100, ".", false);
  ASSERT_EQ(ex_a100.scenarios.size(), 1u);
  EXPECT_EQ(ex_a100.scenarios[0].plan.precision, dtsim::Precision::BF16);
  EXPECT_EQ(skipped(ex_a100,
                    "plan validation: precision fp8-delayed needs FP8 tensor cores, and gpu '...' has none "
                    "(peak_fp8_flops is N)"),
            1u);

  // tp {1, 2} x sequence_parallel {false, true} x tp_comm_overlap {false, true}: 8 points. tp 1: sp is a no-op (2),
  // then tp_comm_overlap is a no-op (1); tp 2: overlap without sp fails validation (1); 4 left.
  const json overlap = {{"schema_version", 1},
                        {"models", {"llama3-8b"}},
                        {"clusters", {"dgx-h100:8"}},
                        {"gbs", {8}},
                        {"tp", {1, 2}},
                        {"sequence_parallel", {false, true}},
                        {"tp_comm_overlap", {false, true}},
                        {"cuda_graphs", {true}}};
  const auto ex_overlap = sw::expand(overlap, ".", false);
  EXPECT_EQ(ex_overlap.grid_points, 8u);
  EXPECT_EQ(skipped(ex_overlap, "no-op: sequence_parallel with tp 1"), 2u);
  EXPECT_EQ(skipped(ex_overlap, "no-op: tp_comm_overlap with tp 1"), 1u);
  EXPECT_EQ(skipped(ex_overlap,
                    "plan validation: tp-comm-overlap needs sequence parallelism (Megatron-Core and async TP overlap "
                    "the all-gather and reduce-scatter of sequence-parallel layers)"),
            1u);
  EXPECT_EQ(total_skipped(ex_overlap), 4u);
  ASSERT_EQ(ex_overlap.scenarios.size(), 4u);
  const auto& last = ex_overlap.scenarios.back().plan;
  EXPECT_TRUE(last.tp == 2 && last.sequence_parallel && last.tp_comm_overlap && last.cuda_graphs);
  for (const auto& s : ex_overlap.scenarios) EXPECT_TRUE(s.plan.cuda_graphs);

  // overlap_param_gather needs ZeRO 1 or 2: zero {0, 1} x overlap_param_gather {false, true}: one point refused.
  json opg = plain;
  opg["zero"] = {0, 1};
  opg["recompute"] = {"none"};
  opg["overlap_param_gather"] = {false, true};
  const auto ex_opg = sw::expand(opg, ".", false);
  EXPECT_EQ(
      skipped(ex_opg, "plan validation: overlap-param-gather needs the distributed optimizer (zero stage N or N)"), 1u);
  EXPECT_EQ(ex_opg.scenarios.size(), 3u);

  // megatron_fsdp needs ZeRO 2 or 3: zero {1, 2, 3} x megatron_fsdp {false, true}: the ZeRO-1 point refused, the
  // others distinct scenarios (the id covers the knob; without it the id is what a spec without the knob gives).
  json mf = plain;
  mf["zero"] = {1, 2, 3};
  mf["recompute"] = {"none"};
  mf["megatron_fsdp"] = {false, true};
  const auto ex_mf = sw::expand(mf, ".", false);
  EXPECT_EQ(skipped(ex_mf,
                    "plan validation: megatron-fsdp needs zero stage N (optim_grads) or N (optim_grads_params); "
                    "at N and N Megatron-FSDP runs as DDP and the distributed optimizer (no --megatron-fsdp)"),
            1u);
  ASSERT_EQ(ex_mf.scenarios.size(), 5u);
  std::set<std::string> mf_ids;
  int megatron = 0;
  for (const auto& s : ex_mf.scenarios) {
    mf_ids.insert(s.id);
    megatron += s.plan.megatron_fsdp ? 1 : 0;
  }
  EXPECT_EQ(mf_ids.size(), 5u);
  EXPECT_EQ(megatron, 2);
  json mf_off = plain;
  mf_off["zero"] = {1, 2, 3};
  mf_off["recompute"] = {"none"};
  EXPECT_EQ(sw::expand(mf_off, ".", false).scenarios[0].id, ex_mf.scenarios[0].id);

  json bad = spec;
  bad["precision"] = {"fp9"};
  EXPECT_THROW(sw::expand(bad, ".", false), dtsim::ConfigError);
  bad = spec;
  bad["cuda_graphs"] = {"yes"};
  EXPECT_THROW(sw::expand(bad, ".", false), dtsim::ConfigError);
}

// The MoE dispatcher and the 1F1B all-to-all overlap as sweep knobs: a small MoE model (tiny-moe.json: 8 experts top-2,
// 4 layers of 1024) on one DGX H100, gbs 8, ep {1, 8} x
// dispatcher {alltoall, deepep} x overlap_moe_comm {false, true}: 8 points. ep 1: deepep needs EP ranks (2 refused),
// the overlap needs ep >= 2 (1 refused); ep 8: all 4 valid. On a dense model a dispatcher other than alltoall is a
// no-op, skipped, and the defaults keep the id a spec without the knobs gives.
TEST(SweepExpansion, DispatcherAndMoeOverlapKnobs) {
  const auto dir = std::filesystem::temp_directory_path() / ("dtsim_sweep_moe_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tiny-moe.json")
      << R"({"schema_version": 1, "name": "tiny-moe", "num_layers": 4, "hidden": 1024, "heads": 16, "seq_len": 1024,
             "vocab": 32000, "attention": "flash", "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 2048}})";
  const json spec = {{"schema_version", 1},
                     {"models", {(dir / "tiny-moe.json").string()}},
                     {"clusters", {"dgx-h100:8"}},
                     {"gbs", {8}},
                     {"ep", {1, 8}},
                     {"dispatcher", {"alltoall", "deepep"}},
                     {"overlap_moe_comm", {false, true}}};
  const auto ex = sw::expand(spec, ".", false);
  EXPECT_EQ(ex.grid_points, 8u);
  EXPECT_EQ(total_skipped(ex), 3u);
  ASSERT_EQ(ex.scenarios.size(), 5u);
  EXPECT_EQ(ex.scenarios[0].plan.ep, 1);
  std::set<std::string> ids;
  for (const auto& s : ex.scenarios) ids.insert(s.id);
  EXPECT_EQ(ids.size(), 5u);
  const auto& deep = ex.scenarios[3];
  EXPECT_EQ(deep.plan.dispatcher, dtsim::Dispatcher::DEEPEP);
  EXPECT_FALSE(deep.plan.overlap_moe_comm);
  const auto a2a_row = sw::run_scenario(ex, ex.scenarios[1]);
  const auto deep_row = sw::run_scenario(ex, deep);
  ASSERT_EQ(deep_row["status"], "ok") << deep_row["error"];
  EXPECT_EQ(deep_row["dispatcher"], "deepep");
  // EP 8 inside one node, top-2 of 8 experts: a rank is reached by 1 - C(7, 2) / C(8, 2) = 1/4 of the tokens, the
  // all-to-all's k / ep: the same bytes, the same time.
  EXPECT_NEAR(deep_row["iteration_time_s"].get<double>(), a2a_row["iteration_time_s"].get<double>(),
              1e-9 * a2a_row["iteration_time_s"].get<double>());
  EXPECT_NE(sw::csv_line(deep_row).find(",deepep,false,"), std::string::npos) << sw::csv_line(deep_row);

  const json plain = {{"schema_version", 1}, {"models", {"gpt3-1.3b"}}, {"clusters", {"dgx-h100:8"}}, {"gbs", {8}}};
  json dense = plain;
  dense["dispatcher"] = {"alltoall", "hybridep"};
  const auto ex_dense = sw::expand(dense, ".", false);
  EXPECT_EQ(skipped(ex_dense, "no-op: dispatcher on a dense model"), 1u);
  ASSERT_EQ(ex_dense.scenarios.size(), 1u);
  EXPECT_EQ(ex_dense.scenarios[0].id, sw::expand(plain, ".", false).scenarios.at(0).id);
  json bad = spec;
  bad["dispatcher"] = {"ncclep"};
  EXPECT_THROW(sw::expand(bad, ".", false), dtsim::ConfigError);
  std::filesystem::remove_all(dir);
}
