// Shared helpers for tests that run the simulator on idealised inputs: nominal link speeds, free or uniform
// networks, and layers with fixed pass times injected through PassCosts.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <functional>
#include <stdexcept>
#include <vector>

#include "sim/model/exchange_timing.hpp"
#include "sim/simulate.hpp"

namespace dtsim::testing {
using namespace dtsim::sim;

// A calibration with no efficiency losses or software overheads: link speeds are the nominal ones.
inline Calibration ideal_calibration() {
  Calibration c = default_calibration("a100-sxm4-80gb");
  c.gemm_efficiency_max = 1.0;
  c.gemm_half_efficiency_flops = 0;
  c.memory_bandwidth_efficiency = 1.0;
  c.kernel_launch_s = 0;
  c.gemm_tile_m = c.gemm_tile_k = 0;  // no tile quantisation of grouped GEMMs
  c.host_issue_s = 0;
  c.host_sync_each_pass = false;
  c.moe_dispatch_sync = false;
  c.host_collective_issue_s = 0;
  c.optimizer_bytes_per_param = 0;
  c.intra_bandwidth_efficiency = 1.0;
  c.inter_bandwidth_efficiency = 1.0;
  c.collective_step_overhead_s = 0;
  c.nccl_protocol = "off";  // NCCL's modelled latencies are software overheads too
  c.gpu_speed_cv = 0;       // every GPU runs at the nominal speed
  c.gpu_speed_reference_gpus = 1;
  c.p2p_overhead_s = 0;
  c.p2p_sync = "none";
  c.reserved_memory_bytes = 0;
  c.interference_gemm_slowdown = c.interference_memory_slowdown = c.interference_flash_slowdown = 0;
  c.interference_collective_slowdown = 0;
  c.grad_clip = false;
  c.per_iteration_s = 0;
  c.fa2_attention = false;
  for (const auto& f : kSoftwareFields) c.pin(f);  // no software stack fills these in
  return c;
}

// nodes x gpus_per_node GPUs; every port (NVSwitch and NIC) has bandwidth bw_Bps and one-way latency alpha_s.
inline ClusterSpec uniform_cluster(int nodes, int gpus_per_node, double bw_Bps, double alpha_s) {
  ClusterSpec c = load_cluster("dgx-a100:8");
  c.name = "uniform";
  c.num_nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.intra.bandwidth_Bps = bw_Bps;
  c.intra.latency_s = alpha_s;
  c.inter.nics_per_node = gpus_per_node;
  c.inter.nic_bandwidth_Bps = bw_Bps;
  c.inter.latency_s = alpha_s;
  return c;
}

/// A small flash-attention MoE model (1024 wide, 1,024-token sequences, experts of 2048) for the MoE oracle tests.
inline TransformerSpec tiny_moe(int layers, int experts, int top_k) {
  TransformerSpec m = model_preset("llama2-7b");
  m.name = "tiny-moe";
  m.num_layers = layers;
  m.hidden = 1024;
  m.heads = 8;
  m.kv_heads = 8;
  m.ffn_hidden = 4096;
  m.seq_len = 1024;
  m.vocab = 32000;
  m.attention = AttentionKind::FLASH;
  m.moe.experts = experts;
  m.moe.top_k = top_k;
  m.moe.expert_ffn_hidden = 2048;
  return m;
}

inline TransformerSpec tiny_model(int layers) {
  TransformerSpec m = model_preset("gpt3-1.3b");
  m.name = "tiny";
  m.num_layers = layers;
  m.tied_embeddings = false;
  return m;
}

// Every layer: forward tf, backward = input gradient tb + weight gradient tw (split for zero-bubble schedules);
// act_bytes of stored activations per micro-batch; no embedding or head work.
inline PassCosts fixed_costs(double tf, double tb, double tw, double peak_flops, double act_bytes) {
  PassCosts pc;
  cost::Step f;
  f.kind = cost::Step::Kind::COMPUTE;
  f.name = "layer";
  f.ops.push_back({"fwd", true, tf * peak_flops, 0, false});
  cost::Step b;
  b.kind = cost::Step::Kind::COMPUTE;
  b.name = "layer-bwd";
  b.ops.push_back({"dgrad", true, tb * peak_flops, 0, false});
  if (tw > 0) b.ops.push_back({"wgrad", true, tw * peak_flops, 0, true});
  pc.layer.forward = {f};
  pc.layer.backward = {b};
  cost::split_backward(pc.layer);
  pc.layer_act.stored = act_bytes;
  return pc;
}

struct PipelineRun {
  TransformerSpec model;
  ClusterSpec cluster;
  ParallelPlan plan;
  Calibration cal;
  SimOptions opt;
  Lowered low;
  EngineResult res;
  Report rep;
};

// A pipeline on one node of p GPUs with free communication; the plan's schedule and layers are the caller's.
inline PipelineRun run_fixed_pipeline(const ParallelPlan& plan, int layers, double tf, double tb, double tw,
                                      double act_bytes) {
  PipelineRun r;
  r.model = tiny_model(layers);
  r.cluster = uniform_cluster(1, plan.pp, 1e20, 0.0);
  r.plan = plan;
  r.cal = ideal_calibration();
  PassCosts pc = fixed_costs(tf, tb, tw, r.cluster.gpu.peak_flops(r.model.dtype), act_bytes);
  r.low = lower(r.model, r.cluster, r.plan, r.cal, r.opt, pc);
  std::vector<int> gpus;
  for (const auto& rank : r.low.ranks) gpus.push_back(rank.global_rank);
  r.res = run_on_simgrid(r.low.graph, r.cluster, r.cal, gpus);
  Inputs in{&r.model, &r.cluster, &r.plan, &r.cal, &r.opt};
  r.rep = analyze(in, r.low, r.res);
  return r;
}

inline ParallelPlan pipeline_plan(Schedule sched, int p, int m, int v = 1) {
  ParallelPlan plan;
  plan.pp = p;
  plan.micro_batch_size = 1;
  plan.global_batch_size = m;
  plan.schedule = sched;
  plan.virtual_stages = v;
  return plan;
}

// Runs fn in a child process and returns the double it produced (SimGrid: one engine per process).
inline double in_child(const std::function<double()>& fn) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    double v = std::nan("");
    try {
      v = fn();
    } catch (...) {}
    if (write(fds[1], &v, sizeof v) != sizeof v) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  double v = std::nan("");
  if (read(fds[0], &v, sizeof v) != sizeof v) v = std::nan("");
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return v;
}

/// Every FLOW task of `g` and every piece of its all-to-alls lowered as one task per member (Exchange, the analytic
/// network), each piece as the FLOW task it stands for.
inline std::vector<sim::Task> flows_and_pieces(const sim::TaskGraph& g) {
  std::vector<sim::Task> out;
  for (const auto& t : g.tasks())
    if (t.kind == sim::TaskKind::FLOW) out.push_back(t);
  for (const auto& x : g.exchanges())
    for (int j = 0; j < x.n(); ++j)
      for (int i = 0; i < x.n(); ++i)
        if (i != j && x.has_piece(j, i)) out.push_back(sim::exchange_piece(x, g.tasks(), j, i));
  return out;
}

}  // namespace dtsim::testing
