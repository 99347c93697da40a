// Sustained tensor-core throughput (issue "Fidelity", item 2: a device model; power- and clock-capped parts): the
// measurement the shipped compute.sustained_tensor_ratio comes from (tests/data/h200/sustained_2026-12-04_*,
// profiler/bench/sustained.py on one 700 W H200: five GEMMs enqueued back to back for 8 s), the closed form of its use
// in op_time_s (compute time of GEMMs and fused attention / ratio; memory-bound time unchanged), and its passage
// through the device model to the GPUs nothing was measured on.
#include <gtest/gtest.h>

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
#include "traces/device_model.hpp"
#include "traces/model.hpp"

using namespace dtsim;
using dtsim::cost::Op;

namespace {

// The rows of a CSV file of tests/data/h200/ (the csv module's \r\n endings), after checking its header.
std::vector<std::vector<std::string>> csv_rows(const std::string& file, const std::string& header) {
  std::ifstream f(std::string(DTSIM_SOURCE_DIR) + "/tests/data/h200/" + file);
  EXPECT_TRUE(f.good()) << file;
  std::vector<std::vector<std::string>> rows;
  bool first = true;
  for (std::string line; std::getline(f, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (first) {
      EXPECT_EQ(line, header) << file;
      first = false;
      continue;
    }
    std::vector<std::string> c;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) c.push_back(cell);
    rows.push_back(std::move(c));
  }
  return rows;
}

// Per case: the mean TFLOP/s of the windows ending in the first 20 ms of back-to-back load, and of the last second.
std::map<std::string, std::pair<double, double>> burst_and_sustained() {
  struct W {
    double t_s, tflops;
  };
  std::map<std::string, std::vector<W>> by_case;
  for (const auto& c : csv_rows("sustained_2026-12-04_windows.csv", "case,dtype,m,k,n,t_s,window_s,calls,tflops"))
    if (c.size() == 9) by_case[c[0]].push_back({std::stod(c[5]), std::stod(c[8])});
  std::map<std::string, std::pair<double, double>> out;
  for (const auto& [name, ws] : by_case) {
    const double end_s = ws.back().t_s;
    double b = 0, s = 0;
    int nb = 0, ns = 0;
    for (const auto& w : ws) {
      if (w.t_s <= 0.020) b += w.tflops, ++nb;
      if (w.t_s >= end_s - 1.0) s += w.tflops, ++ns;
    }
    EXPECT_GT(nb, 0) << name;
    EXPECT_GT(ns, 10) << name;
    out[name] = {b / nb, s / ns};
  }
  return out;
}

TEST(SustainedClock, TheShippedRatioIsTheMeasuredOne) {
  const auto m = burst_and_sustained();
  ASSERT_EQ(m.size(), 5u);
  double sum = 0;
  for (const auto& [name, v] : m) {
    const double ratio = v.second / v.first;
    // every shape alike, bf16 and FP8: a property of the board's power limit, not of the GEMM
    EXPECT_GT(ratio, 0.82) << name;
    EXPECT_LT(ratio, 0.87) << name;
    sum += ratio;
  }
  const double mean = sum / static_cast<double>(m.size());
  EXPECT_NEAR(default_calibration("h200-sxm-141gb").sustained_tensor_ratio, mean, 0.005);
  // The burst figures are the ones the GEMM curve was fitted on (0.785 of 989 TFLOP/s = 776 at large sizes).
  EXPECT_NEAR(m.at("square-8192").first / 989.0, default_calibration("h200-sxm-141gb").gemm_efficiency_max, 0.03);
  // Calibrations fitted on end-to-end runs already hold it (A100: vTrain and Megatron iteration times; H100: kernels of
  // multi-second training steps, checked by the executor's runs).
  EXPECT_EQ(default_calibration("a100-sxm4-80gb").sustained_tensor_ratio, 1.0);
  EXPECT_EQ(default_calibration("h100-sxm5-80gb").sustained_tensor_ratio, 1.0);
}

TEST(SustainedClock, DividesTensorCoreTimeOnly) {
  const GpuSpec gpu = gpu_preset("h200-sxm-141gb");
  Calibration burst = default_calibration("h200-sxm-141gb");
  burst.sustained_tensor_ratio = 1;
  Calibration sustained = burst;
  sustained.sustained_tensor_ratio = 0.8;
  const double launch = burst.kernel_launch_s;
  auto t = [&](const Op& o, const Calibration& c) { return cost::op_time_s(o, gpu, DType::BF16, c) - launch; };
  // A large GEMM: compute-bound, its time / 0.8.
  const Op gemm{"fc1", true, 2.0 * 8192 * 8192 * 8192, 3 * 8192.0 * 8192 * 2, false, 8192, 8192, 8192};
  EXPECT_NEAR(t(gemm, sustained), t(gemm, burst) / 0.8, 1e-12);
  // Fused attention: the same.
  Op flash{"attn", false, 1e13, 1e8};
  flash.flash = true;
  EXPECT_NEAR(t(flash, sustained), t(flash, burst) / 0.8, 1e-12);
  // A memory-bound kernel: unchanged (HBM speed does not follow the SM clock in this model).
  const Op ew{"gelu", false, 1e9, 4e9};
  EXPECT_EQ(t(ew, sustained), t(ew, burst));
  // A GEMM on its memory roofline (a matrix-vector product) stays there.
  const Op gemv{"gemv", true, 2.0 * 8192 * 8192, 8192.0 * 8192 * 2, false, 1, 8192, 8192};
  EXPECT_EQ(t(gemv, sustained), t(gemv, burst));
}

// The device model scales sustained throughput by board power: the ratio is copied, so a B200's sustained BF16 is the
// reference's burst x ratio x 1,000 / 700 W (here an H100 calibration given the H200's measured ratio; the shipped H100
// holds 1: its curve already holds sustained load).
TEST(SustainedClock, PassesThroughTheDeviceModel) {
  auto h100 = default_calibration("h100-sxm5-80gb");
  EXPECT_EQ(h100.sustained_tensor_ratio, 1.0);
  h100.sustained_tensor_ratio = default_calibration("h200-sxm-141gb").sustained_tensor_ratio;
  const GpuSpec ref = gpu_preset("h100-sxm5-80gb"), b200 = gpu_preset("b200");
  ASSERT_LT(h100.sustained_tensor_ratio, 1.0);
  const auto s = device_model_scaling(h100, ref, b200);
  EXPECT_NEAR(s.reference_sustained_flops, h100.gemm_efficiency_max * h100.sustained_tensor_ratio * 989e12, 1e3);
  const auto c = device_model_calibration(h100, ref, b200, "x");
  EXPECT_EQ(c.sustained_tensor_ratio, h100.sustained_tensor_ratio);
  EXPECT_NEAR(c.gemm_efficiency_max * c.sustained_tensor_ratio * 2250e12, s.reference_sustained_flops * 1000.0 / 700.0,
              1e3);
  // The same burst throughput as without the ratio on the reference: the target's sustained figure falls by it.
  const auto plain = device_model_calibration(default_calibration("h100-sxm5-80gb"), ref, b200, "x");
  EXPECT_NEAR(c.gemm_efficiency_max, plain.gemm_efficiency_max, 1e-12);
  for (const char* g : {"b200-sxm-180gb", "b300", "gb200", "gb300", "h100-96gb-500w", "gh200", "h800-sxm5-80gb"})
    EXPECT_EQ(default_calibration(g).sustained_tensor_ratio, 1.0) << g;
}

// A step is not all GEMMs: with idle gaps or HBM copies between them the board stays under its limit for longer. The
// mixes (sustained.py --mixes: the 8192^3 GEMM alternating with idle time or 1 GiB copies, each GEMM between its own
// events) against the line sustained_ratio_at_share draws from half the time in GEMMs (1) to all of it (0.847): the
// GEMM's speed over the last second of each mix over the back-to-back burst speed of the same GEMM.
TEST(SustainedClock, TheShareLineFollowsTheMixes) {
  EXPECT_EQ(cost::sustained_ratio_at_share(0.847, 1.0), 0.847);
  EXPECT_EQ(cost::sustained_ratio_at_share(0.847, 0.5), 1.0);
  EXPECT_EQ(cost::sustained_ratio_at_share(0.847, 0.2), 1.0);
  EXPECT_NEAR(cost::sustained_ratio_at_share(0.847, 0.75), 0.9235, 1e-12);
  const double burst_tflops = burst_and_sustained().at("square-8192").first;
  struct G {
    double t_s, gemm_s;
  };
  std::map<std::string, std::vector<G>> by_case;
  for (const auto& c : csv_rows("sustained_mixes_2026-12-04.csv", "case,t_s,gemm_s,period_s,tflops"))
    if (c.size() == 5) by_case[c[0]].push_back({std::stod(c[1]), std::stod(c[2])});
  ASSERT_EQ(by_case.size(), 3u);
  const double flops = 2.0 * 8192 * 8192 * 8192;
  for (const auto& [name, gs] : by_case) {
    const double end_s = gs.back().t_s;
    double busy_s = 0, tf = 0;
    int n = 0;
    for (const auto& g : gs)
      if (g.t_s >= end_s - 1.0) busy_s += g.gemm_s, tf += flops / g.gemm_s / 1e12, ++n;
    ASSERT_GT(n, 100) << name;
    const double share = busy_s / 1.0, measured = tf / n / burst_tflops;
    const double model = cost::sustained_ratio_at_share(0.847, share);
    std::cout << name << ": GEMM share " << share << ", measured " << measured << ", line " << model << "\n";
    EXPECT_NEAR(model, measured, 0.03) << name;
  }
}

// A training step's tensor-core share: a Llama-3-70B layer spends most of its kernel time in GEMMs and
// attention, so it holds a ratio between the full-load one and 1; an A100 calibration (ratio 1) is left alone.
TEST(SustainedClock, ARunHoldsTheRatioOfItsShare) {
  const TransformerSpec m = model_preset("llama3-70b");
  const GpuSpec gpu = gpu_preset("h200-sxm-141gb");
  const Calibration cal = default_calibration("h200-sxm-141gb");
  const double share = cost::tensor_time_share(m, gpu, cal);
  EXPECT_GT(share, 0.6);
  EXPECT_LT(share, 0.98);
  const Calibration run = cost::at_tensor_share(cal, m, gpu);
  EXPECT_DOUBLE_EQ(run.sustained_tensor_ratio, cost::sustained_ratio_at_share(cal.sustained_tensor_ratio, share));
  EXPECT_GT(run.sustained_tensor_ratio, cal.sustained_tensor_ratio);
  EXPECT_LT(run.sustained_tensor_ratio, 1.0);
  const Calibration a100 = default_calibration("a100-sxm4-80gb");
  EXPECT_EQ(cost::at_tensor_share(a100, m, gpu_preset("a100-sxm4-80gb")).sustained_tensor_ratio, 1.0);
}

}  // namespace
