// Oracle tests of optimizer-state offloading (issue "Workloads"; Megatron-Core's --optimizer-cpu-offload
// --optimizer-offload-fraction, HybridDeviceOptimizer): the device memory it frees, the host memory it takes, and its
// step time against the closed form (the GPU's share as a memory-bound pass beside the CPU's AdamW at the host's
// memory bandwidth, with the fp32 copies over the host link before and after it, or overlapped); the host figures
// of the presets; refusals.
#include <gtest/gtest.h>

#include "strategies/estimator.hpp"
#include "strategies/memory_model.hpp"
#include "tests/support/sim_fixture.hpp"
#include "traces/error.hpp"

using namespace dtsim;
using namespace dtsim::testing;

namespace {
// validate()'s message for `p`, or "" when it is accepted.
std::string refusal(const TransformerSpec& m, const ParallelPlan& p, const ClusterSpec& c) {
  try {
    p.validate(m, c);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
ParallelPlan plan_of(double fraction, bool overlap) {
  ParallelPlan p;
  p.tp = 8;
  p.sequence_parallel = true;
  p.global_batch_size = 8;
  p.zero_stage = 1;
  p.fp32_grads = true;
  p.optimizer_offload_fraction = fraction;
  p.overlap_optimizer_offload = overlap;
  return p;
}
}  // namespace

TEST(OptimizerOffload, HostFiguresOfThePresets) {
  // PCIe Gen5 x16 64 GB/s per direction, 2 TB and 2 x 8 DDR5-4800 channels shared by 8 GPUs (DGX H100 datasheet);
  // NVLink-C2C 450 GB/s per direction, one Grace (480 GB, 512 GB/s) per two GPUs (GB200 NVL72).
  const HostSpec h = load_cluster("dgx-h100:8").host;
  EXPECT_DOUBLE_EQ(h.link_Bps, 64e9);
  EXPECT_DOUBLE_EQ(h.memory_bytes, 2048.0 * 1024 * 1024 * 1024 / 8);
  EXPECT_DOUBLE_EQ(h.memory_Bps, 2 * 8 * 4800e6 * 8 / 8);
  const HostSpec g = load_cluster("gb200-nvl72:72").host;
  EXPECT_DOUBLE_EQ(g.link_Bps, 450e9);
  EXPECT_DOUBLE_EQ(g.memory_bytes, 240e9);
  EXPECT_DOUBLE_EQ(g.memory_Bps, 256e9);
  for (const auto& name : cluster_preset_names()) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(load_cluster(name).host.known());
  }
}

TEST(OptimizerOffload, MemoryMovesToTheHost) {
  const TransformerSpec m = model_preset("llama3-8b");
  const auto none = memory::static_memory(m, plan_of(0, false), 0);
  const auto half = memory::static_memory(m, plan_of(0.5, false), 0);
  EXPECT_EQ(none.host_bytes, 0);
  EXPECT_NEAR(half.optimizer_bytes, none.optimizer_bytes / 2, 1e-6 * none.optimizer_bytes);
  // The offloaded master copies and moments (12 bytes per step parameter) and the pinned fp32 gradients (4).
  EXPECT_NEAR(half.host_bytes, 0.5 * 16 * none.step_params, 1e-6 * half.host_bytes);
  EXPECT_EQ(half.weight_bytes, none.weight_bytes);
  EXPECT_EQ(half.gradient_bytes, none.gradient_bytes);
}

TEST(OptimizerOffload, StepTimeMatchesClosedForm) {
  const HostSpec h = load_cluster("dgx-h100:8").host;
  const double P = 1e9, gpu_bytes = 16, gpu_Bps = 2e12;
  const double gpu_all = P * gpu_bytes / gpu_Bps;
  EXPECT_DOUBLE_EQ(memory::optimizer_step_s(plan_of(0, false), h, P, gpu_bytes, gpu_Bps), gpu_all);
  for (double f : {0.25, 1.0}) {
    const double cpu = f * P * 80 / h.memory_Bps, copies = f * P * 8 / h.link_Bps;
    EXPECT_NEAR(memory::optimizer_step_s(plan_of(f, false), h, P, gpu_bytes, gpu_Bps),
                std::max((1 - f) * gpu_all, cpu + copies), 1e-12);
    EXPECT_NEAR(memory::optimizer_step_s(plan_of(f, true), h, P, gpu_bytes, gpu_Bps),
                std::max((1 - f) * gpu_all, std::max(cpu, copies)), 1e-12);
  }
  // The CPU's step is the slower one: an 8-GPU DGX H100 host steps ~1 G parameters per GPU in about a second.
  EXPECT_GT(memory::optimizer_step_s(plan_of(1, true), h, P, gpu_bytes, gpu_Bps), 100 * gpu_all);
}

// The simulator and the estimator both add the CPU step: a full offload of Llama 3 8B on one DGX H100 (TP 8, ~1 G
// parameters per GPU) slows the iteration by the closed form's step less the GPU step it replaces.
TEST(OptimizerOffload, SimulationAddsTheCpuStep) {
  const TransformerSpec m = model_preset("llama3-8b");
  const ClusterSpec c = load_cluster("dgx-h100:8");
  const Calibration cal = default_calibration("h100-sxm5-80gb");
  auto run = [&](const ParallelPlan& p) {
    SimOptions opt;
    opt.engine = FlowEngine::MAXMIN;
    Inputs in{&m, &c, &p, &cal, &opt};
    return simulate(in).report.iteration_time_s;
  };
  const ParallelPlan base = plan_of(0, false), off = plan_of(1, false);
  const double shard = memory::static_memory(m, base, 0).step_params;
  const double gpu_Bps = c.gpu.hbm_Bps * cal.memory_bandwidth_efficiency;
  const double added = memory::optimizer_step_s(off, c.host, shard, cal.optimizer_bytes_per_param, gpu_Bps) -
                       memory::optimizer_step_s(base, c.host, shard, cal.optimizer_bytes_per_param, gpu_Bps);
  EXPECT_NEAR(run(off) - run(base), added, 1e-6 * added);
  const double est = estimate::estimate(m, c, cal, off).iteration_s - estimate::estimate(m, c, cal, base).iteration_s;
  EXPECT_NEAR(est, added, 1e-6 * added);
}

TEST(OptimizerOffload, Refusals) {
  const TransformerSpec m = model_preset("llama3-8b");
  const ClusterSpec c = load_cluster("dgx-h100:8");
  auto message = [&](const ParallelPlan& p, const ClusterSpec& cl) { return refusal(m, p, cl); };
  EXPECT_NE(message(plan_of(1.5, false), c).find("optimizer offload fraction must be between 0 and 1"),
            std::string::npos);
  ParallelPlan given = plan_of(0, true);
  given.given_options.emplace_back("overlap_optimizer_offload");
  EXPECT_NE(message(given, c).find("overlap_optimizer_offload (--overlap-optimizer-offload) has no effect"),
            std::string::npos);
  ClusterSpec no_host = c;
  no_host.host = {};
  EXPECT_NE(message(plan_of(0.5, false), no_host).find("optimizer offload needs the cluster's host"),
            std::string::npos);
  // Host memory: Llama 3 70B unsharded on one GPU's share of a GH200 node's 128 GB does not fit.
  const TransformerSpec big = model_preset("llama3-70b");
  ParallelPlan p = plan_of(1, false);
  p.zero_stage = 0;
  const ClusterSpec gh = load_cluster("clariden:4");
  p.tp = 4;
  p.global_batch_size = 4;
  const Calibration cal = default_calibration("h100-sxm5-80gb");
  SimOptions opt;
  opt.engine = FlowEngine::MAXMIN;
  Inputs in{&big, &gh, &p, &cal, &opt};
  try {
    (void)simulate(in);
    ADD_FAILURE() << "a host that cannot hold the offloaded states was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("GiB of host memory per GPU"), std::string::npos) << e.what();
  }
}

// ---- Activation offloading (Megatron-Core --cpu-offloading --cpu-offloading-num-layers; cpu_offload.py).
namespace {
Simulation simulate_plan(const TransformerSpec& m, const ClusterSpec& c, const ParallelPlan& p, FoldMode fold) {
  const Calibration cal = default_calibration("h100-sxm5-80gb");
  SimOptions opt;
  opt.engine = FlowEngine::MAXMIN;
  opt.fold = fold;
  Inputs in{&m, &c, &p, &cal, &opt};
  return simulate(in);
}
ParallelPlan activation_plan(int offload, int pp, int dp) {
  ParallelPlan p;
  p.tp = 2;
  p.pp = pp;
  p.dp = dp;
  p.sequence_parallel = true;
  p.global_batch_size = 4 * dp;
  p.offload_activation_layers = offload;
  return p;
}
}  // namespace

// Every offloaded layer copies its stored activations to the host once per micro-batch and back once, each taking
// bytes / link (PCIe Gen5 x16: 64 GB/s per direction on DGX H100), on the rank's two copy streams.
TEST(ActivationOffload, CopiesAreTheLayersActivationsOverTheHostLink) {
  const TransformerSpec m = model_preset("llama3-8b");
  const ClusterSpec c = load_cluster("dgx-h100:16");
  const ParallelPlan p = activation_plan(3, 2, 4);
  const Simulation sim = simulate_plan(m, c, p, FoldMode::AUTO);
  const double stored = cost::layer_activation_bytes(m, cost::shape_of(p, p.micro_batch_size)).stored;
  int to_host = 0, from_host = 0;
  const auto& g = sim.lowered.graph;
  for (const auto& t : g.tasks()) {
    const std::string& name = g.names()[static_cast<std::size_t>(t.name)];
    if (name != "activation-offload" && name != "activation-reload") continue;
    EXPECT_NEAR(t.duration_s, stored / 64e9, 1e-12);
    (name == "activation-offload" ? to_host : from_host) += 1;
    EXPECT_EQ(t.stream, name == "activation-offload" ? Stream::TO_HOST : Stream::FROM_HOST);
  }
  // Folded to one rank per stage: 2 stages x 4 micro-batches x 3 layers each way.
  EXPECT_EQ(sim.lowered.ranks.size(), 2U);
  EXPECT_EQ(to_host, 2 * 4 * 3);
  EXPECT_EQ(from_host, 2 * 4 * 3);
  // Folded = unfolded.
  const Simulation unfolded = simulate_plan(m, c, p, FoldMode::NONE);
  EXPECT_NEAR(unfolded.report.iteration_time_s, sim.report.iteration_time_s, 1e-9 * sim.report.iteration_time_s);
}

// The device's peak activation memory falls by the offloaded layers' activations of the micro-batches in flight, less
// the two layers the double buffer keeps; the copies hide behind the next layers' compute where the link is fast.
TEST(ActivationOffload, FreesDeviceMemoryAndHidesBehindComputeOnFastLinks) {
  const TransformerSpec m = model_preset("llama3-8b");
  const ClusterSpec c = load_cluster("dgx-h100:16");
  const Simulation base = simulate_plan(m, c, activation_plan(0, 2, 4), FoldMode::AUTO);
  const Simulation off = simulate_plan(m, c, activation_plan(12, 2, 4), FoldMode::AUTO);
  const ParallelPlan p = activation_plan(12, 2, 4);
  const double stored = cost::layer_activation_bytes(m, cost::shape_of(p, p.micro_batch_size)).stored;
  // Stage 0 of a 2-stage 1F1B pipeline holds 2 micro-batches: 12 layers of each leave, two layers' buffer stays.
  const double drop = base.report.ranks[0].peak_bytes - off.report.ranks[0].peak_bytes;
  EXPECT_GT(drop, (2 * 12 - 2) * stored * 0.99);
  EXPECT_LT(drop, 2 * 12 * stored * 1.01);
  // On PCIe (64 GB/s) a Llama 3 8B layer's ~0.6 GB of activations (8K tokens, TP 2) take ~9 ms to copy, three
  // times the layer's forward: exposed. Over NVLink-C2C (450 GB/s, GB200) the copies hide behind the next layer.
  EXPECT_GT(off.report.iteration_time_s, base.report.iteration_time_s * 1.1);
  const ClusterSpec gb = load_cluster("gb200-nvl72:16");
  const double gb_base = simulate_plan(m, gb, activation_plan(0, 2, 4), FoldMode::AUTO).report.iteration_time_s;
  EXPECT_LT(simulate_plan(m, gb, p, FoldMode::AUTO).report.iteration_time_s, gb_base * 1.01);
  // The analytic memory model agrees on the stage's peak to within a layer.
  EXPECT_NEAR(memory::analytic_peak_bytes(m, activation_plan(0, 2, 4), 0, 0) - memory::analytic_peak_bytes(m, p, 0, 0),
              drop, 2.5 * stored);
}

// Over a slow host link (4 GB/s) the copies cannot hide: the iteration slows by at least what each copy exceeds
// the layer it hides behind, and the estimator follows the simulator.
TEST(ActivationOffload, SlowHostLinkIsExposed) {
  const TransformerSpec m = model_preset("llama3-8b");
  ClusterSpec c = load_cluster("dgx-h100:16");
  c.host.link_Bps = 4e9;
  const ParallelPlan base = activation_plan(0, 2, 4), off = activation_plan(8, 2, 4);
  const double t0 = simulate_plan(m, c, base, FoldMode::AUTO).report.iteration_time_s;
  const double t1 = simulate_plan(m, c, off, FoldMode::AUTO).report.iteration_time_s;
  const double stored = cost::layer_activation_bytes(m, cost::shape_of(off, off.micro_batch_size)).stored;
  EXPECT_GT(t1 - t0, 8 * 4 * (stored / 4e9) * 0.5);
  const Calibration cal = default_calibration("h100-sxm5-80gb");
  const double e0 = estimate::estimate(m, c, cal, base).iteration_s,
               e1 = estimate::estimate(m, c, cal, off).iteration_s;
  EXPECT_NEAR(e1 - e0, t1 - t0, 0.35 * (t1 - t0));
}

TEST(ActivationOffload, Refusals) {
  const TransformerSpec m = model_preset("llama3-8b");
  const ClusterSpec c = load_cluster("dgx-h100:16");
  auto message = [&](const ParallelPlan& p, const ClusterSpec& cl) { return refusal(m, p, cl); };
  EXPECT_NE(message(activation_plan(16, 2, 4), c).find("must be fewer than the layers of every chunk"),
            std::string::npos);
  EXPECT_TRUE(message(activation_plan(15, 2, 4), c).empty());
  ClusterSpec no_host = c;
  no_host.host = {};
  EXPECT_NE(message(activation_plan(4, 2, 4), no_host).find("activation offload needs the cluster's host"),
            std::string::npos);
  ClusterSpec small = c;
  small.host.memory_bytes = 1e9;
  try {
    (void)simulate_plan(m, small, activation_plan(8, 2, 4), FoldMode::AUTO);
    ADD_FAILURE() << "a host that cannot hold the offloaded activations was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("GiB of host memory per GPU"), std::string::npos) << e.what();
  }
}
