// dtsim compare (validate/compare): a predicted run directory written by the real simulator, against measured
// directories synthesised from it by editing its JSON: identical, scaled tasks, a missing task, a memory
// change, a uniformly faster run; the outputs are deterministic and bad directories are one-line errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "sim/simulate.hpp"
#include "traces/error.hpp"
#include "traces/json_util.hpp"
#include "traces/output.hpp"
#include "validate/compare/compare.hpp"

using namespace dtsim;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Every test case runs in its own process (gtest_discover_tests), possibly in parallel: one scratch directory
// per process, removed at the end.
const std::string& scratch() {
  static const std::string dir =
      (fs::path(::testing::TempDir()) / (std::string("dtsim_compare_") + std::to_string(getpid()))).string();
  return dir;
}
struct RemoveScratch : ::testing::Environment {
  void TearDown() override { fs::remove_all(scratch()); }
};
const auto* const kRemoveScratch = ::testing::AddGlobalTestEnvironment(new RemoveScratch);

// `dtsim simulate --model gpt3-1.3b --cluster dgx-h100:4 --tp 2 --pp 2 --mbs 1 --gbs 4 --out DIR`, once per process.
const std::string& predicted_dir() {
  static const std::string dir = [] {
    TransformerSpec model = model_preset("gpt3-1.3b");
    ClusterSpec cluster = load_cluster("dgx-h100:4");
    ParallelPlan plan;
    plan.tp = 2;
    plan.pp = 2;
    plan.dp = 1;
    plan.micro_batch_size = 1;
    plan.global_batch_size = 4;
    Calibration cal = default_calibration(cluster.gpu.name);
    sim::SimOptions opt;
    const sim::Inputs in{&model, &cluster, &plan, &cal, &opt};
    const sim::Simulation s = sim::simulate(in);
    std::string out = scratch() + "/predicted";
    write_outputs(out, {{"summary.json", sim::summary_json(in, s.lowered, s.engine, s.report).dump(2) + "\n"},
                        {"trace.json", sim::trace_json(in, s.lowered, s.engine, s.report)}});
    return out;
  }();
  return dir;
}

struct RunDir {
  json trace, summary;
};
RunDir read_run(const std::string& dir) {
  return {json_util::read_file(dir + "/trace.json"), json_util::read_file(dir + "/summary.json")};
}
std::string write_run(const std::string& name, const RunDir& run) {
  std::string dir = scratch() + "/" + name;
  write_outputs(dir, {{"trace.json", run.trace.dump()}, {"summary.json", run.summary.dump(2)}});
  return dir;
}
// Applies f to every complete event of the trace.
template <typename F>
void for_each_task(RunDir& run, F f) {
  for (json& e : run.trace["traceEvents"])
    if (e["ph"] == "X") f(e);
}

validate::CompareReport compare_with(const std::string& measured_dir) {
  return validate::compare(validate::load_timeline(predicted_dir()), validate::load_timeline(measured_dir));
}

// The message of the error E that loading `dir` throws ("" and a failure otherwise).
template <typename E>
std::string load_error(const std::string& dir) {
  try {
    validate::load_timeline(dir);
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error loading " << dir;
  return "";
}

}  // namespace

TEST(Compare, IdenticalRunsHaveNoError) {
  const auto r = compare_with(write_run("same", read_run(predicted_dir())));
  EXPECT_GT(r.tasks.size(), 1000u);
  EXPECT_EQ(r.only_predicted.count, 0u);
  EXPECT_EQ(r.only_measured.count, 0u);
  for (const auto& t : r.tasks) EXPECT_EQ(t.dur_s.error, 0.0) << validate::describe(t.key);
  EXPECT_EQ(r.ranks.size(), 2u);  // simulated ranks 0 and 2 (TP folded)
  for (const auto& [pid, d] : r.ranks) {
    EXPECT_EQ(d.compute_s.error, 0.0);
    EXPECT_EQ(d.exposed_comm_s.error, 0.0);
    EXPECT_EQ(d.bubble_s.error, 0.0);
    EXPECT_GT(d.compute_s.predicted, 0);
  }
  for (const auto& [phase, m] : r.phase_compute_s) EXPECT_EQ(m.error, 0.0) << phase;
  EXPECT_EQ(r.peak_memory_bytes.size(), 4u);
  for (const auto& [rank, m] : r.peak_memory_bytes) EXPECT_EQ(m.error, 0.0) << rank;
  EXPECT_EQ(r.iteration_time_s.error, 0.0);
  EXPECT_GT(r.iteration_time_s.predicted, 0);
  EXPECT_EQ(r.compute_tasks.mape, 0.0);
  EXPECT_EQ(r.compute_tasks.weighted_mape, 0.0);
  EXPECT_EQ(r.compute_tasks.max_abs_error, 0.0);
  EXPECT_EQ(r.compute_tasks.worst, "");
}

TEST(Compare, ScaledLayerTasksAreExactlyThoseOff) {
  RunDir run = read_run(predicted_dir());
  int scaled = 0;
  for_each_task(run, [&](json& e) {
    if (e["cat"] == "compute" && e["args"].value("layer", -1) == 3) {
      e["dur"] = e["dur"].get<double>() * 1.2;
      ++scaled;
    }
  });
  EXPECT_EQ(scaled, 16);  // attention, mlp and their backward for 4 micro-batches
  const auto r = compare_with(write_run("layer3", run));
  int off = 0;
  for (const auto& t : r.tasks) {
    if (t.key.tid == 0 && t.key.layer == 3) {
      EXPECT_NEAR(t.dur_s.error, 0.2, 1e-12) << validate::describe(t.key);
      ++off;
    } else {
      EXPECT_EQ(t.dur_s.error, 0.0) << validate::describe(t.key);
    }
  }
  EXPECT_EQ(off, scaled);
  EXPECT_EQ(r.only_predicted.count + r.only_measured.count, 0u);
  EXPECT_NEAR(r.compute_tasks.max_abs_error, 0.2, 1e-12);
  EXPECT_NE(r.compute_tasks.worst.find("layer 3"), std::string::npos) << r.compute_tasks.worst;
  EXPECT_GT(r.ranks.at(0).compute_s.error, 0);  // layer 3 lives on stage 0
  EXPECT_EQ(r.ranks.at(2).compute_s.error, 0.0);
  EXPECT_NE(validate::report_text(r).find("+20.00%"), std::string::npos);
}

TEST(Compare, MissingTaskIsCountedAndNamed) {
  RunDir run = read_run(predicted_dir());
  auto& events = run.trace["traceEvents"];
  const auto it = std::find_if(events.begin(), events.end(), [](const json& e) {
    return e["ph"] == "X" && e["pid"] == 0 && e["name"] == "attention" && e["args"].value("layer", -1) == 0 &&
           e["args"].value("microbatch", -1) == 1;
  });
  ASSERT_NE(it, events.end());
  events.erase(it);
  const auto same = compare_with(predicted_dir());
  const auto r = compare_with(write_run("missing", run));
  EXPECT_EQ(r.tasks.size() + 1, same.tasks.size());
  EXPECT_EQ(r.only_measured.count, 0u);
  EXPECT_EQ(r.only_predicted.count, 1u);
  EXPECT_EQ(r.only_predicted.first, std::vector<std::string>{"rank 0 compute attention forward layer 0 mb 1"});
  EXPECT_NE(validate::report_text(r).find("only predicted: rank 0 compute attention forward layer 0 mb 1"),
            std::string::npos);
  EXPECT_LT(r.phase_compute_s.at("forward").error, 0);
}

TEST(Compare, PeakMemoryErrorOfOneRank) {
  RunDir run = read_run(predicted_dir());
  run.summary["ranks"][1]["peak_memory_bytes"] = run.summary["ranks"][1]["peak_memory_bytes"].get<double>() * 1.1;
  const auto r = compare_with(write_run("memory", run));
  for (const auto& [rank, m] : r.peak_memory_bytes) {
    if (rank == 1) {
      EXPECT_NEAR(m.error, 0.1, 1e-12);
    } else {
      EXPECT_EQ(m.error, 0.0) << rank;
    }
  }
  EXPECT_EQ(r.compute_tasks.max_abs_error, 0.0);
}

TEST(Compare, HalvedRunIsMinusFiftyPercentEverywhere) {
  RunDir run = read_run(predicted_dir());
  for_each_task(run, [](json& e) {
    e["ts"] = e["ts"].get<double>() * 0.5;
    e["dur"] = e["dur"].get<double>() * 0.5;
  });
  auto& t = run.summary["results"]["iteration_time_s"];
  t = t.get<double>() * 0.5;
  const auto r = compare_with(write_run("halved", run));
  EXPECT_EQ(r.phase_compute_s.size(), 3u);  // forward, backward, optimizer
  for (const auto& [phase, m] : r.phase_compute_s) EXPECT_DOUBLE_EQ(m.error, -0.5) << phase;
  for (const auto& [pid, d] : r.ranks) {
    EXPECT_DOUBLE_EQ(d.compute_s.error, -0.5);
    EXPECT_DOUBLE_EQ(d.exposed_comm_s.error, -0.5);
    EXPECT_DOUBLE_EQ(d.bubble_s.error, -0.5);
  }
  EXPECT_DOUBLE_EQ(r.iteration_time_s.error, -0.5);
  EXPECT_DOUBLE_EQ(r.compute_tasks.mape, 0.5);
  EXPECT_DOUBLE_EQ(r.compute_tasks.weighted_mape, 0.5);
}

TEST(Compare, OutputsAreDeterministic) {
  RunDir run = read_run(predicted_dir());
  for_each_task(run, [](json& e) {
    if (e["tid"] == 0) e["dur"] = e["dur"].get<double>() * (1 + 0.01 * e["args"].value("microbatch", 0));
  });
  const std::string measured = write_run("determinism", run);
  const auto outputs = [&] {
    const auto p = validate::load_timeline(predicted_dir()), m = validate::load_timeline(measured);
    const auto r = validate::compare(p, m);
    return std::vector<std::string>{validate::report_json(r).dump(2), validate::report_text(r),
                                    validate::compare_trace_json(p, m)};
  };
  const auto first = outputs();
  EXPECT_EQ(first, outputs());
  // The side-by-side trace: both sides as processes, every task once per side.
  const json trace = json::parse(first[2]);
  std::set<std::pair<int, std::string>> names;
  std::size_t tasks = 0;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name")
      names.emplace(e["pid"].get<int>(), e["args"]["name"].get<std::string>());
    if (e["ph"] == "X") ++tasks;
  }
  EXPECT_TRUE(names.count({0, "predicted rank 0"}));
  EXPECT_TRUE(names.count({10000, "measured rank 0"}));
  EXPECT_TRUE(names.count({10002, "measured rank 2"}));
  EXPECT_EQ(tasks, 2 * validate::load_timeline(measured).events.size());
}

TEST(Compare, BadDirectoriesAreOneLineErrors) {
  const auto one_line = [](const std::string& msg, const std::string& want) {
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  };
  one_line(load_error<ConfigError>(scratch() + "/nowhere"), "nowhere");

  const RunDir good = read_run(predicted_dir());
  const std::string no_trace = write_run("no_trace", good);
  fs::remove(no_trace + "/trace.json");
  one_line(load_error<ConfigError>(no_trace), "trace.json");

  for (const char* file : {"trace.json", "summary.json"}) {
    const std::string dir = write_run(std::string("truncated_") + file, good);
    fs::resize_file(dir + "/" + file, 1000);
    one_line(load_error<FormatError>(dir), std::string(file) + "' is not valid JSON");
  }

  RunDir bad = good;
  for_each_task(bad, [](json& e) { e.erase("ts"); });
  one_line(load_error<ConfigError>(write_run("no_ts", bad)), "trace.json: traceEvents[14]: missing field 'ts'");

  bad = good;
  for_each_task(bad, [](json& e) { e["args"]["layer"] = "three"; });
  one_line(load_error<ConfigError>(write_run("layer_type", bad)), "field 'layer' has the wrong type");

  bad = good;
  bad.summary["ranks"][2].erase("peak_memory_bytes");
  one_line(load_error<ConfigError>(write_run("no_peak", bad)),
           "summary.json: ranks[2]: missing field 'peak_memory_bytes'");

  bad = good;
  bad.trace = json::array();
  one_line(load_error<ConfigError>(write_run("no_events", bad)), "'traceEvents'");
}
