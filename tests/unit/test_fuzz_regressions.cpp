// Regression tests for the fuzzing findings (fuzz/README.md, docs/testing.md "Reliability"): each minimised input,
// inline, must now end in a one-line dtsim::ConfigError / FormatError (or, for valid inputs, the right value) instead
// of an escaping library exception or undefined behaviour (which the sanitizer build of this test would report).
#include <gtest/gtest.h>

#include <climits>
#include <string>

#include "tests/support/error_of.hpp"
#include "traces/cluster.hpp"
#include "traces/error.hpp"
#include "traces/json_util.hpp"
#include "traces/model.hpp"
#include "traces/nccl_tests.hpp"
#include "traces/plan.hpp"

namespace {

using dtsim::json_util::parse_text;

using dtsim::testing::contains;
using dtsim::testing::error_of;

dtsim::TransformerSpec model_of(const std::string& text) {
  dtsim::TransformerSpec m = dtsim::model_from_json(parse_text(text, "m.json"), "model file 'm.json'");
  m.validate();
  return m;
}

dtsim::ParallelPlan plan_of(const std::string& text, const dtsim::ClusterSpec& cluster) {
  dtsim::ParallelPlan p = dtsim::plan_from_json(parse_text(text, "p.json"), "plan file 'p.json'");
  p.validate(dtsim::model_preset("gpt3-1.3b"), cluster);
  return p;
}

// fuzz_model, fuzz_cluster (any JSON file): a number beyond double made nlohmann throw out_of_range.406, which
// escaped read_file (dtsim exited with "internal error", code 3).
TEST(FuzzRegression, JsonNumberOverflowIsAFormatError) {
  const auto msg = error_of<dtsim::FormatError>([] { parse_text(R"({"num_layers": 777e777744})", "m.json"); });
  EXPECT_TRUE(contains(msg, "'m.json' is not valid JSON: number overflow")) << msg;
}

// fuzz_nccl_tests: the same through the nccl-tests JSON reader.
TEST(FuzzRegression, NcclTestsJsonNumberOverflowIsAFormatError) {
  const auto msg = error_of<dtsim::FormatError>([] { dtsim::parse_nccl_tests_json(R"({"results": [-1e400]})", "n"); });
  EXPECT_TRUE(contains(msg, "not valid JSON")) << msg;
}

// fuzz_model: an int field given as a double out of range was converted with undefined behaviour; an integer beyond
// int was silently wrapped (4294967297 read as 1); 2.5 was truncated.
TEST(FuzzRegression, IntFieldsMustBeIntegersInRange) {
  const std::string rest = R"(, "hidden": 8, "heads": 1, "seq_len": 1, "vocab": 1})";
  for (const std::string v : {"1e10", "4294967297", "2.5", "-2147483649", "18446744073709551615"}) {
    const auto msg = error_of<dtsim::ConfigError>([&] { model_of(R"({"num_layers": )" + v + rest); });
    EXPECT_TRUE(contains(msg, "field 'num_layers' = ")) << msg;
    EXPECT_TRUE(contains(msg, "is not an integer from -2147483648 to 2147483647")) << msg;
  }
  EXPECT_EQ(model_of(R"({"num_layers": 2.0)" + rest).num_layers, 2);  // an integral double is fine
  // Elements of integer lists likewise.
  const auto msg = error_of<dtsim::ConfigError>([] {
    dtsim::plan_from_json(
        parse_text(R"({"micro_batch_size": 1, "global_batch_size": 1, "device_map": [0, 1e10]})", "p.json"), "plan");
  });
  EXPECT_TRUE(contains(msg, "field 'device_map' = 10000000000.0 is not an integer")) << msg;
}

// fuzz_model: the default ffn_hidden 4 * hidden overflowed int; the parameter count overflowed int64.
TEST(FuzzRegression, ModelSizesAreBounded) {
  auto msg = error_of<dtsim::ConfigError>(
      [] { model_of(R"({"num_layers": 1, "hidden": 2000000000, "heads": 1, "seq_len": 1, "vocab": 1})"); });
  EXPECT_TRUE(contains(msg, "make more than 10^15 parameters")) << msg;
  msg = error_of<dtsim::ConfigError>([] {
    model_of(
        R"({"num_layers": 1000000000, "hidden": 2000000000, "heads": 1, "ffn_hidden": 1, "seq_len": 1, "vocab": 1})");
  });
  EXPECT_TRUE(contains(msg, "make more than 10^15 parameters")) << msg;
  EXPECT_GT(dtsim::model_preset("megatron-1t").total_params(), 1e12);  // the largest preset is far inside
}

// fuzz_plan: products of valid ints overflowed int inside ParallelPlan::validate and plan_from_json.
TEST(FuzzRegression, PlanProductsDoNotOverflow) {
  const dtsim::ClusterSpec c8 = dtsim::load_cluster("dgx-a100:8");
  auto msg = error_of<dtsim::ConfigError>(
      [&] { plan_of(R"({"tp": 65536, "pp": 65536, "dp": 1, "micro_batch_size": 1, "global_batch_size": 1})", c8); });
  EXPECT_TRUE(contains(msg, "tp*pp*dp = 65536*65536*1 = 4294967296 does not match the 8 GPUs")) << msg;
  msg = error_of<dtsim::ConfigError>(
      [&] { plan_of(R"({"dp": 8, "micro_batch_size": 1000000000, "global_batch_size": 8})", c8); });
  EXPECT_TRUE(contains(msg, "not divisible by micro batch * dp = 8000000000")) << msg;
  const dtsim::ClusterSpec c2 = dtsim::load_cluster("dgx-a100:2");
  msg = error_of<dtsim::ConfigError>([&] {
    plan_of(R"({"pp": 2, "micro_batch_size": 1, "global_batch_size": 2, "schedule": "custom",
                "custom_order": [["F0"], ["F0"]], "virtual_stages": 2000000000})",
            c2);
  });
  EXPECT_TRUE(contains(msg, "pp * virtual stages = 4000000000 exceeds")) << msg;
  msg = error_of<dtsim::ConfigError>([&] {
    plan_of(R"({"pp": 2, "micro_batch_size": 1, "global_batch_size": 2, "layers_per_stage": [2000000000, 2000000000]})",
            c2);
  });
  EXPECT_TRUE(contains(msg, "layers_per_stage sums to 4000000000")) << msg;
  msg = error_of<dtsim::ConfigError>([&] {
    dtsim::plan_from_json(parse_text(R"({"dp": 65536, "micro_batch_size": 65536, "global_batch_size": 8,
                                        "num_microbatches": 1})",
                                     "p.json"),
                          "plan");
  });
  EXPECT_TRUE(contains(msg, "num_microbatches 1 disagrees with global_batch_size / (micro_batch_size * dp) = 0"))
      << msg;
}

// fuzz_cluster, preset strings: "1e20" nodes per leaf was cast to int (undefined behaviour).
TEST(FuzzRegression, ClusterPresetIntegerFields) {
  for (const std::string spec : {"dgx-a100:16:fat-tree:1e20:1", "dgx-a100:16:fat-tree:nan", "dgx-a100:16:rail:1.5",
                                 "dgx-a100:64:fat-tree:2:1:1e300"}) {
    const auto msg = error_of<dtsim::ConfigError>([&] { dtsim::load_cluster(spec); });
    EXPECT_TRUE(contains(msg, "is not an integer from 0 to 1048576")) << spec << ": " << msg;
  }
  EXPECT_EQ(dtsim::load_cluster("dgx-a100:64:fat-tree:2:1").inter.nodes_per_leaf, 2);
}

// fuzz_cluster: NIC and leaf arithmetic of valid clusters overflowed int.
TEST(FuzzRegression, ClusterIndexArithmetic) {
  const dtsim::ClusterSpec wide = dtsim::cluster_from_json(parse_text(R"({"gpu": "a100-sxm4-80gb", "num_nodes": 1,
      "gpus_per_node": 65536, "intra_node": {"bandwidth_Bps": 1e9, "latency_s": 0},
      "inter_node": {"nics_per_node": 65536, "nic_bandwidth_Bps": 1e9, "latency_s": 0}})",
                                                                      "c.json"),
                                                           "c");
  wide.validate();
  EXPECT_EQ(wide.nic_of(65535), 65535);
  const dtsim::ClusterSpec leafy = dtsim::cluster_from_json(parse_text(R"({"gpu": "a100-sxm4-80gb", "num_nodes": 2,
      "gpus_per_node": 8, "intra_node": {"bandwidth_Bps": 1e9, "latency_s": 0},
      "inter_node": {"nics_per_node": 8, "nic_bandwidth_Bps": 1e9, "latency_s": 0, "topology": "fat-tree",
                     "nodes_per_leaf": 2147483647}})",
                                                                       "c.json"),
                                                            "c");
  leafy.validate();
  EXPECT_EQ(leafy.num_leaves(), 1);
}

}  // namespace
