// Oracle tests of the stacks' data-parallel gradient buckets (Calibration::dp_bucket_min_params,
// dp_bucket_params_per_dp, dp_buckets_first_chunk_only; traces/calibration.hpp dp_bucket_bytes): Megatron-Core sizes
// its buckets max(40 M, 1 M x DP) gradient elements, buckets only the first pipeline stage's first model chunk and
// reduces every other chunk's gradient buffer as one bucket (megatron/core/distributed/distributed_data_parallel.py);
// a plan's own size wins; other stacks take PyTorch DDP's 25 MiB. Checked against the closed form, with the footprint
// estimate following the lowering.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "sim/model/footprint.hpp"
#include "tests/support/sim_fixture.hpp"
#include "traces/stack_profile.hpp"

using namespace dtsim;
using namespace dtsim::testing;

namespace {

struct BucketCase {
  TransformerSpec m = model_preset("gpt3-1.3b");
  ClusterSpec c = load_cluster("dgx-a100:8");
  ParallelPlan plan;
  Calibration cal;
  SimOptions opt;
  explicit BucketCase(int virtual_stages = 1) {
    m.dtype = DType::BF16;
    plan.pp = 2;
    plan.dp = 4;
    plan.virtual_stages = virtual_stages;
    if (virtual_stages > 1) plan.schedule = Schedule::INTERLEAVED;
    plan.fp32_grads = true;  // Megatron's fp32 main_grad buffers: 4 bytes per gradient element
    plan.micro_batch_size = 1;
    plan.global_batch_size = 32;
    plan.stack = "megatron-core";
    plan.validate(m, c);
    cal = with_stack(default_calibration("a100-sxm4-80gb"), "megatron-core");
    opt.network = NetworkMode::ANALYTIC;
  }
  Lowered lowered() const { return lower(m, c, plan, cal, opt); }
};

// Flows of the gradient buckets lowered on simulated rank `si`.
int bucket_flows(const Lowered& low, int si) {
  int n = 0;
  for (const auto& t : low.graph.tasks())
    if (t.kind == TaskKind::FLOW && t.rank == si && t.name >= 0 &&
        low.graph.names()[static_cast<std::size_t>(t.name)] == "grad-bucket all-reduce")
      ++n;
  return n;
}

double bucket_bytes_total(const Lowered& low) {
  double b = 0;
  for (const auto& t : low.graph.tasks())
    if (t.kind == TaskKind::FLOW && t.name >= 0 &&
        low.graph.names()[static_cast<std::size_t>(t.name)] == "grad-bucket all-reduce")
      b += t.bytes;
  return b;
}

// A simulated rank of pipeline stage `stage`.
int rank_of_stage(const Lowered& low, int stage) {
  for (std::size_t si = 0; si < low.ranks.size(); ++si)
    if (low.ranks[si].coord.pp == stage) return static_cast<int>(si);
  ADD_FAILURE() << "no simulated rank of stage " << stage;
  return 0;
}

}  // namespace

TEST(DpBuckets, StackValuesAndClosedForm) {
  const StackProfile core = stack_profile("megatron-core");
  EXPECT_EQ(core.dp_bucket_min_params, 40e6);
  EXPECT_EQ(core.dp_bucket_params_per_dp, 1e6);
  EXPECT_TRUE(core.dp_buckets_first_chunk_only);
  EXPECT_TRUE(stack_profile("megatron-lm").dp_buckets_first_chunk_only);
  for (const char* s : {"torchtitan", "megatron-deepspeed"}) {
    EXPECT_EQ(stack_profile(s).dp_bucket_min_params, 0) << s;
    EXPECT_FALSE(stack_profile(s).dp_buckets_first_chunk_only) << s;
  }
  BucketCase st;
  const double inf = std::numeric_limits<double>::infinity();
  // max(40 M, 1 M x 4) = 40 M elements of 4 bytes on the first stage's first chunk; one bucket elsewhere.
  EXPECT_EQ(dp_bucket_bytes(st.cal, st.plan, 0, 0, 4.0), 160e6);
  EXPECT_EQ(dp_bucket_bytes(st.cal, st.plan, 1, 0, 4.0), inf);
  EXPECT_EQ(dp_bucket_bytes(st.cal, st.plan, 0, 1, 4.0), inf);
  st.plan.dp = 64;  // 1 M per DP rank past 40 ranks
  EXPECT_EQ(dp_bucket_bytes(st.cal, st.plan, 0, 0, 2.0), 128e6);
  st.plan.dp_overlap = false;  // no overlap: every chunk's buffer is one bucket
  EXPECT_EQ(dp_bucket_bytes(st.cal, st.plan, 0, 0, 4.0), inf);
  st.plan.dp_bucket_bytes = 1e6;  // the plan's own size wins
  EXPECT_EQ(dp_bucket_bytes(st.cal, st.plan, 1, 1, 4.0), 1e6);
  st.plan.dp_bucket_bytes = 0;
  const Calibration titan = with_stack(default_calibration("a100-sxm4-80gb"), "torchtitan");
  EXPECT_EQ(dp_bucket_bytes(titan, st.plan, 1, 0, 4.0), kPytorchDdpBucketBytes);
}

// The first stage is reduced in buckets of the closed form's size (as a plan naming that size reduces it); the second
// stage's whole gradient is one bucket (as without overlap); the bytes reduced do not depend on the bucketing.
TEST(DpBuckets, LoweringBucketsOnlyTheFirstStage) {
  BucketCase st;
  const Lowered rule = st.lowered();
  const int s0 = rank_of_stage(rule, 0), s1 = rank_of_stage(rule, 1);
  BucketCase whole;
  whole.plan.dp_overlap = false;
  const Lowered one = whole.lowered();
  const int per_bucket = bucket_flows(one, s1);
  ASSERT_GT(per_bucket, 0);
  EXPECT_EQ(bucket_flows(one, s0), per_bucket);
  EXPECT_EQ(bucket_flows(rule, s1), per_bucket);
  BucketCase sized;
  sized.plan.dp_bucket_bytes = 40e6 * 4;
  const Lowered named = sized.lowered();
  EXPECT_EQ(bucket_flows(rule, s0), bucket_flows(named, s0));
  EXPECT_GE(bucket_flows(rule, s0), 2 * per_bucket);  // 1.3 B parameters over 2 stages: several 40 M buckets
  EXPECT_GT(bucket_flows(named, s1), per_bucket);
  EXPECT_NEAR(bucket_bytes_total(rule), bucket_bytes_total(one), 1e-9 * bucket_bytes_total(one));
}

// Interleaved (2 chunks per stage): the second chunk of every stage is one bucket of its own, never merged with the
// first chunk's; without overlap each chunk's buffer is one bucket.
TEST(DpBuckets, ChunksKeepTheirOwnBuffers) {
  BucketCase st(2);
  BucketCase whole(2);
  whole.plan.dp_overlap = false;
  const Lowered rule = st.lowered(), one = whole.lowered();
  const int s1 = rank_of_stage(rule, 1);
  const int per_two = bucket_flows(one, s1);  // two chunks, one bucket each
  ASSERT_GT(per_two, 0);
  ASSERT_EQ(per_two % 2, 0);
  EXPECT_EQ(bucket_flows(rule, s1), per_two);
  BucketCase merged(2);  // PyTorch's rule with a bucket larger than the stage: one bucket for both chunks
  merged.plan.dp_bucket_bytes = 1e15;
  merged.cal.dp_buckets_first_chunk_only = false;
  merged.cal.pin("dp_buckets_first_chunk_only");
  EXPECT_EQ(bucket_flows(merged.lowered(), s1), per_two / 2);
}

// The footprint estimate counts the buckets' tasks and edges as the lowering makes them.
TEST(DpBuckets, FootprintFollowsTheLowering) {
  for (int v : {1, 2})
    for (bool overlap : {true, false}) {
      BucketCase rule(v), pytorch(v);
      rule.plan.dp_overlap = pytorch.plan.dp_overlap = overlap;
      pytorch.plan.dp_bucket_bytes = kPytorchDdpBucketBytes;
      pytorch.cal.dp_buckets_first_chunk_only = false;
      pytorch.cal.pin("dp_buckets_first_chunk_only");
      const Lowered a = rule.lowered(), b = pytorch.lowered();
      const auto fa = estimate_footprint(rule.m, rule.c, rule.plan, rule.cal, rule.opt, {});
      const auto fb = estimate_footprint(pytorch.m, pytorch.c, pytorch.plan, pytorch.cal, pytorch.opt, {});
      EXPECT_DOUBLE_EQ(fa.tasks - fb.tasks, static_cast<double>(a.graph.size()) - static_cast<double>(b.graph.size()))
          << "v " << v << " overlap " << overlap;
      EXPECT_DOUBLE_EQ(fa.edges - fb.edges,
                       static_cast<double>(a.graph.edge_count()) - static_cast<double>(b.graph.edge_count()))
          << "v " << v << " overlap " << overlap;
    }
}
