// The single-kernel grouped GEMM (issue "Fidelity", item 1: grouped expert GEMMs timed by their real shape, a
// tile/wave model): its closed form (waves of tiles over the SMs) and the measured H200 sweep it is judged on
// (tests/data/h200/moe_grouped_2026-12-04.csv, profiler/bench/moe_sweep.py: torch._grouped_mm over the expert shapes of
// five MoE models, 1-32 local experts, 32-4,096 tokens each). Nothing in the model is fitted on that file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "strategies/transformer_costs.hpp"
#include "traces/calibration.hpp"
#include "traces/cluster.hpp"
#include "traces/stack_profile.hpp"

using namespace dtsim;
using dtsim::cost::Op;

namespace {
// At the burst clock the eager sweep's calls ran at (each call between synchronisations): sustained_tensor_ratio 1.
Calibration torchtitan_h200() {
  Calibration c = with_stack(default_calibration("h200-sxm-141gb"), "torchtitan");
  c.sustained_tensor_ratio = 1;
  return c;
}

// A grouped GEMM as strategies/transformer_costs.cpp builds the experts' (tokens x k) * (k x n) per group.
Op grouped(double groups, double tokens, double k, double n) {
  const double total = groups * tokens;
  Op o{"expert-fc", true, 2 * total * k * n, (total * k + groups * k * n + total * n) * 2, false, tokens, k, n, groups};
  o.grouped = true;
  return o;
}

TEST(SingleKernelGroupedGemm, WavesOfTilesOverTheSms) {
  const Calibration cal = torchtitan_h200();
  const GpuSpec gpu = gpu_preset("h200-sxm-141gb");
  ASSERT_TRUE(cal.grouped_gemm_single_kernel);  // torchtitan's torch._grouped_mm
  ASSERT_EQ(gpu.sm_count, 132);
  const double per_sm = gpu.peak_bf16_flops / 132 * cal.gemm_efficiency_max, k = 4096;
  // 320 tokens per group (sd 17.9) lie 3.6 sd from the 256- and 384-row boundaries: three 128-row tiles; n = 256 is one
  // column of tiles. 44 groups are 132 tiles, one wave; 45 groups need a second.
  const double tile_s = 2 * 128 * 256 * k / per_sm;
  EXPECT_NEAR(dtsim::cost::single_kernel_grouped_s(grouped(44, 320, k, 256), gpu, gpu.peak_bf16_flops, cal), tile_s,
              1e-6 * tile_s);
  EXPECT_NEAR(dtsim::cost::single_kernel_grouped_s(grouped(45, 320, k, 256), gpu, gpu.peak_bf16_flops, cal), 2 * tile_s,
              1e-6 * tile_s);
  // One group of 64 tokens (8 sd from 128: one row of tiles) and 132 columns of tiles: the same 132 tiles, the same
  // time (it is the tiles that count, not the groups).
  EXPECT_NEAR(dtsim::cost::single_kernel_grouped_s(grouped(1, 64, k, 132 * 256), gpu, gpu.peak_bf16_flops, cal), tile_s,
              1e-6 * tile_s);
  // The weight gradient: output 256 x 512 per group (2 x 2 tiles), 32 tokens per group as its reduction, one 64-deep
  // tile (32 tokens lie 5.7 sd from 0 and from 64). 33 groups: 132 tiles, one wave of 2 x 128 x 256 x 64 FLOPs.
  Op w{"expert-fc-wgrad", true, 2 * 33 * 32 * 256 * 512, 1e3, true, 256, 32, 512, 33};
  w.grouped = true;
  const double wtile_s = 2 * 128 * 256 * 64 / per_sm;
  EXPECT_NEAR(dtsim::cost::single_kernel_grouped_s(w, gpu, gpu.peak_bf16_flops, cal), wtile_s, 1e-6 * wtile_s);
  // op_time_s takes it for a grouped GEMM of a single-kernel stack, adds the launch, and bounds it by its bytes.
  const Op big = grouped(44, 320, k, 256);
  EXPECT_NEAR(dtsim::cost::op_time_s(big, gpu, DType::BF16, cal),
              std::max(tile_s, big.bytes / (gpu.hbm_Bps * cal.memory_bandwidth_efficiency)) + cal.kernel_launch_s,
              1e-6 * tile_s);
  // Off (Megatron-Core's stack: one GEMM per group) or with no SM count: the per-group model.
  Calibration mcore = with_stack(default_calibration("h200-sxm-141gb"), "megatron-core");
  mcore.sustained_tensor_ratio = 1;
  EXPECT_FALSE(mcore.grouped_gemm_single_kernel);
  Calibration no_sms = cal;
  GpuSpec unknown = gpu;
  unknown.sm_count = 0;
  EXPECT_DOUBLE_EQ(dtsim::cost::op_time_s(big, unknown, DType::BF16, cal),
                   dtsim::cost::op_time_s(big, gpu, DType::BF16, mcore));
  EXPECT_NE(dtsim::cost::op_time_s(big, gpu, DType::BF16, cal), dtsim::cost::op_time_s(big, gpu, DType::BF16, mcore));
}

struct Row {
  std::string shape, gemm, dtype, pass;
  double hidden = 0, ffn = 0, groups = 0, tokens_mean = 0, ragged = 0, tokens_total = 0, time_s = 0;
};

std::vector<Row> read_sweep(const std::string& file = "moe_grouped_2026-12-04.csv") {
  std::ifstream f(std::string(DTSIM_SOURCE_DIR) + "/tests/data/h200/" + file);
  EXPECT_TRUE(f.good());
  std::string line;
  auto next = [&] {  // the csv module ends lines with \r\n
    if (!std::getline(f, line)) return false;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  };
  next();
  EXPECT_EQ(line, "shape,hidden,ffn,gemm,groups,tokens_mean,ragged,tokens_total,counts_max,dtype,pass,time_s,tflops");
  std::vector<Row> rows;
  while (next()) {
    std::vector<std::string> c;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) c.push_back(cell);
    if (c.size() != 13) continue;
    rows.push_back({c[0], c[3], c[9], c[10], std::stod(c[1]), std::stod(c[2]), std::stod(c[4]), std::stod(c[5]),
                    std::stod(c[6]), std::stod(c[7]), std::stod(c[11])});
  }
  return rows;
}

// The three GEMMs of a row, as the cost model builds them: forward (tokens x k) * (k x n), activation gradient
// (tokens x n) * (n x k), weight gradient with the tokens as reduction (dtsim::cost::gemm_bwd). fc1 is gated (n = 2
// ffn). The mean count per group stands for the routed counts (the model spreads them binomially).
std::vector<Op> passes(const Row& r) {
  const double k = r.gemm == "fc1" ? r.hidden : r.ffn, n = r.gemm == "fc1" ? 2 * r.ffn : r.hidden;
  const double mean = r.tokens_total / r.groups;
  Op f = grouped(r.groups, mean, k, n);
  auto bwd = dtsim::cost::gemm_bwd(f);
  return {f, bwd[0], bwd[1]};
}

struct Score {
  int n = 0;
  double abs_sum = 0, sum = 0;
  void add(double predicted, double measured) {
    ++n;
    abs_sum += std::abs(predicted / measured - 1);
    sum += predicted / measured - 1;
  }
  double mape() const { return n ? abs_sum / n : 0; }
  double bias() const { return n ? sum / n : 0; }
};

TEST(SingleKernelGroupedGemm, PredictsTheMeasuredH200Sweep) {
  const auto rows = read_sweep();
  ASSERT_GT(rows.size(), 2000u);
  const GpuSpec gpu = gpu_preset("h200-sxm-141gb");
  const Calibration single = torchtitan_h200();
  Calibration per_group = single;
  per_group.grouped_gemm_single_kernel = false;
  // An eager call is timed from the host's dispatch: the GPU idles until the kernel arrives. The sweep's shortest
  // call (tiny GEMMs) bounds that host part from above; it is added to every prediction of a call.
  double host_s = 1;
  for (const auto& r : rows)
    if (r.dtype == "bf16" && r.pass == "fwd") host_s = std::min(host_s, r.time_s);
  ASSERT_GT(host_s, 5e-6);
  ASSERT_LT(host_s, 60e-6);
  std::map<std::string, Score> s;
  // One cuBLAS GEMM per group (an eager loop of torch.mm: Megatron's SequentialMLP, and what the per-group model
  // times for Transformer Engine's GroupedLinear), balanced counts of whole 128-row tiles (so no tile padding: tile_m
  // 0), where each call's GPU time dwarfs its 22 us host dispatch.
  Calibration exact_counts = per_group;
  exact_counts.gemm_tile_m = 0;
  for (const auto& r : rows)
    if (r.pass == "fwd-sequential" && r.time_s / r.groups >= 150e-6 && std::fmod(r.tokens_mean, 128) == 0) {
      const Op one = grouped(1, r.tokens_mean, passes(r)[0].k, passes(r)[0].n);
      s["sequential per-group"].add(r.groups * dtsim::cost::op_time_s(one, gpu, DType::BF16, exact_counts), r.time_s);
    }
  for (const auto& r : rows) {
    if (r.ragged != 1 || r.dtype != "bf16") continue;  // routed (multinomial) counts, as the model spreads them
    const auto ops = passes(r);
    auto t = [&](const Op& o, const Calibration& c) { return dtsim::cost::op_time_s(o, gpu, DType::BF16, c); };
    if (r.pass == "fwd" && r.time_s >= 200e-6) {  // the host's part at most 15%
      s["fwd single"].add(t(ops[0], single) + host_s, r.time_s);
      s["fwd per-group"].add(t(ops[0], per_group) + host_s, r.time_s);
    }
    if (r.pass == "fwd+bwd" && r.time_s >= 600e-6) {
      // forward, both gradients, and autograd's accumulation of the weight and input gradients into .grad (the
      // sweep repeats the call: read both, write one, bf16)
      const double k = ops[0].k, n = ops[0].n;
      const double acc_s =
          3 * 2 * (r.groups * n * k + r.tokens_total * k) / (gpu.hbm_Bps * single.memory_bandwidth_efficiency);
      s["fwd+bwd single"].add(t(ops[0], single) + t(ops[1], single) + t(ops[2], single) + acc_s + 3 * host_s, r.time_s);
    }
  }
  for (const auto& [k, v] : s)
    std::cout << k << ": " << v.n << " rows, MAPE " << 100 * v.mape() << "%, bias " << 100 * v.bias() << "%\n";
  ASSERT_GT(s["fwd single"].n, 150);
  ASSERT_GT(s["fwd+bwd single"].n, 150);
  ASSERT_GT(s["sequential per-group"].n, 50);
  EXPECT_LT(s["sequential per-group"].mape(), 0.10);
  EXPECT_LT(s["fwd single"].mape(), 0.15);
  EXPECT_LT(s["fwd+bwd single"].mape(), 0.10);
  // The per-group model (each expert a GEMM of its own size) misses what one kernel over all groups does.
  EXPECT_GT(s["fwd per-group"].mape(), 0.35);
}

// The second run of the sweep (tests/data/h200/moe_graph_2026-12-04.csv): each GEMM captured in a CUDA graph and
// replayed, so the time is the GPU's alone and calls of any size can be scored; forward, activation gradient and weight
// gradient apart; cuBLAS per group (torch.mm, Megatron's SequentialMLP) and FP8 rowwise grouped.
TEST(SingleKernelGroupedGemm, PredictsTheGpuTimeOfEachPass) {
  const auto rows = read_sweep("moe_graph_2026-12-04.csv");
  ASSERT_GT(rows.size(), 4000u);
  const GpuSpec gpu = gpu_preset("h200-sxm-141gb");
  // A replay of up to ten large calls, five times over, keeps the GPU busy long enough (>= 0.1 s) to reach its power
  // cap (tests/data/h200/sustained_*): the large calls are scored at the calibration's sustained ratio.
  Calibration single = torchtitan_h200();
  single.sustained_tensor_ratio = default_calibration("h200-sxm-141gb").sustained_tensor_ratio;
  Calibration per_group = single;
  per_group.grouped_gemm_single_kernel = false;
  per_group.gemm_tile_m = 0;  // balanced counts of whole tiles below
  // A graph replays kernels back to back: no launch gap is paid per call.
  auto t = [&](const Op& o, const Calibration& c) {
    return dtsim::cost::op_time_s(o, gpu, DType::BF16, c) - c.kernel_launch_s;
  };
  std::map<std::string, Score> s;
  for (const auto& r : rows) {
    const auto ops = passes(r);
    const std::string size = r.tokens_total * ops[0].k * ops[0].n * 2 >= 2e11 ? " large" : " small";
    if (r.ragged == 1 && r.dtype == "bf16") {
      if (r.pass == "fwd-graph") s["fwd" + size].add(t(ops[0], single), r.time_s);
      if (r.pass == "dgrad-graph") s["dgrad" + size].add(t(ops[1], single), r.time_s);
      if (r.pass == "wgrad-graph") s["wgrad" + size].add(t(ops[2], single), r.time_s);
    }
    if (r.ragged == 1 && r.dtype == "fp8-rowwise" && r.pass == "fwd-graph") {
      Op f8 = ops[0];
      f8.precision = Precision::FP8_ROWWISE;
      s["fp8 fwd" + size].add(t(f8, single), r.time_s);
    }
    if (r.pass == "fwd-sequential-graph" && std::fmod(r.tokens_mean, 128) == 0) {
      const Op one = grouped(1, r.tokens_mean, ops[0].k, ops[0].n);
      s["sequential per-group" + size].add(r.groups * t(one, per_group), r.time_s);
    }
  }
  for (const auto& [k, v] : s)
    std::cout << k << ": " << v.n << " rows, MAPE " << 100 * v.mape() << "%, bias " << 100 * v.bias() << "%\n";
  // Held: the large forward and activation-gradient GEMMs (7% at the writing). Left visible, printed above: the
  // weight gradient (11% fast), FP8 (11% fast), small calls (a replay too short to reach the cap: part burst, part
  // capped), and cuBLAS per group under graphs (slower predicted than measured).
  ASSERT_GT(s["fwd large"].n, 100);
  ASSERT_GT(s["dgrad large"].n, 100);
  EXPECT_LT(s["fwd large"].mape(), 0.10);
  EXPECT_LT(s["dgrad large"].mape(), 0.10);
}

// The MoE unpermute (issue Fidelity, item 1: permute / unpermute as memory-bound kernels with their real bytes). Eager
// (the torchtitan stack: moe_permute_fusion false) it is the probability multiply (two streaming passes over the routed
// tokens) and an atomic bf16 scatter-add at compute.scatter_add_bandwidth_efficiency; fused (megatron-core: Transformer
// Engine's moe_unpermute) one streaming pass. Judged on the measured H200 rows (tests/data/h200/
// moe_memory_2026-12-04.csv: y * p then index_add_, the weighted scatter-add of T k routed tokens of `hidden` bf16
// values into T tokens), from which the efficiency is the median: every top-8 row within 6% of the model, top-4 rows
// 14% and top-2 rows 35% faster than it (fewer atomic adds per token contend less; left visible).
TEST(MoeUnpermute, EagerScatterAddAsMeasuredOnOneH200) {
  std::ifstream f(std::string(DTSIM_SOURCE_DIR) + "/tests/data/h200/moe_memory_2026-12-04.csv");
  ASSERT_TRUE(f.good());
  std::string line;
  auto next = [&] {  // the csv module ends lines with \r\n
    if (!std::getline(f, line)) return false;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  };
  ASSERT_TRUE(next());
  ASSERT_EQ(line, "shape,kernel,tokens,hidden,experts,topk,bytes,time_s,Bps");
  const GpuSpec gpu = gpu_preset("h200-sxm-141gb");
  const Calibration eager = with_stack(default_calibration("h200-sxm-141gb"), "torchtitan");
  const Calibration fused = with_stack(default_calibration("h200-sxm-141gb"), "megatron-core");
  ASSERT_FALSE(eager.moe_permute_fusion);
  ASSERT_TRUE(fused.moe_permute_fusion);
  int rows = 0;
  std::vector<double> ratios;
  while (next()) {
    std::vector<std::string> c;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) c.push_back(cell);
    if (c.size() != 9 || c[1] != "unpermute") continue;
    const double T = std::stod(c[2]), h = std::stod(c[3]), k = std::stod(c[5]), measured = std::stod(c[7]);
    const double src = T * k * h * 2;
    // As transformer_costs.cpp's moe_block builds it: the routed tokens read twice, the output written once.
    Op un{"moe-unpermute", false, 0, 2 * src + T * h * 2};
    un.scatter_src_bytes = src;
    const double t_eager = cost::op_time_s(un, gpu, DType::BF16, eager);
    const double t_fused = cost::op_time_s(un, gpu, DType::BF16, fused);
    // Closed forms of both.
    const double H = gpu.hbm_Bps;
    EXPECT_NEAR(t_fused, un.bytes / (H * fused.memory_bandwidth_efficiency) + fused.kernel_launch_s, 1e-12);
    EXPECT_NEAR(t_eager,
                2 * src / (H * eager.memory_bandwidth_efficiency) +
                    (src + 2 * T * h * 2) / (H * eager.scatter_add_bandwidth_efficiency) + 2 * eager.kernel_launch_s,
                1e-12);
    EXPECT_GT(t_eager, 5 * t_fused) << c[0] << " " << T;
    const double ratio = t_eager / measured;
    ratios.push_back(ratio);
    if (k == 8) {
      EXPECT_NEAR(ratio, 1.0, 0.06) << c[0] << " " << T;
    }
    EXPECT_GT(ratio, 0.95) << c[0] << " " << T;  // never much faster than measured
    EXPECT_LT(ratio, 1.6) << c[0] << " " << T;
    ++rows;
  }
  EXPECT_EQ(rows, 10);
  std::sort(ratios.begin(), ratios.end());
  EXPECT_NEAR(0.5 * (ratios[4] + ratios[5]), 1.0, 0.03);  // the median row: the efficiency is the rows' median
}
}  // namespace
