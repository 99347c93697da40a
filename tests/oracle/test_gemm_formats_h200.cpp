// GEMMs of every format the cost model times, against one H200's measurements (tests/data/h200/
// gemm_sweep_2026-11-26.csv, profiler/bench/hw_sweep.py: torch.mm in bf16 and fp32 without TF32, torch._scaled_mm in
// FP8 with tensorwise and rowwise scales, over the transformer-layer shapes of Llama 3 and GPT models). The efficiency
// curve is the H200 calibration's (fitted on bf16 GEMMs); the other formats read it at the size of the BF16 GEMM of the
// same duration (cost::gemm_curve_flops). Nothing here is fitted on the fp32 or FP8 rows.
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

using namespace dtsim;
using dtsim::cost::Op;

namespace {
struct Gemm {
  double m = 0, n = 0, k = 0, time_s = 0;
  std::string dtype;
};

std::vector<Gemm> read_sweep() {
  std::ifstream f(std::string(DTSIM_SOURCE_DIR) + "/tests/data/h200/gemm_sweep_2026-11-26.csv");
  EXPECT_TRUE(f.good());
  std::string line;
  std::getline(f, line);
  EXPECT_EQ(line, "m,n,k,dtype,time_s,tflops");
  std::vector<Gemm> rows;
  while (std::getline(f, line)) {
    std::vector<std::string> c;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) c.push_back(cell);
    if (c.size() != 6) continue;
    rows.push_back({std::stod(c[0]), std::stod(c[1]), std::stod(c[2]), std::stod(c[4]), c[3]});
  }
  return rows;
}

// The model's time of one sweep row (a (m x k) * (k x n) GEMM) in its format, at the burst clock the sweep ran at.
double model_s(const Gemm& g, const GpuSpec& gpu, const Calibration& cal) {
  const bool fp32 = g.dtype == "fp32";
  const double in = fp32 ? 4 : g.dtype == "bf16" ? 2 : 1, out = fp32 ? 4 : 2;
  Op o{"fc1", true, 2 * g.m * g.n * g.k, (g.m * g.k + g.k * g.n) * in + g.m * g.n * out, false, g.m, g.k, g.n, 1};
  if (g.dtype == "fp8-tensorwise") o.precision = Precision::FP8_CURRENT;
  if (g.dtype == "fp8-rowwise") o.precision = Precision::FP8_ROWWISE;
  return cost::op_time_s(o, gpu, fp32 ? DType::FP32 : DType::BF16, cal);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
}  // namespace

TEST(GemmFormats, CurveFlopsIsTheBf16GemmOfTheSameDuration) {
  const GpuSpec h200 = gpu_preset("h200-sxm-141gb"), v100 = gpu_preset("v100-sxm2-32gb");
  EXPECT_DOUBLE_EQ(cost::gemm_curve_flops(1e9, h200.peak_bf16_flops, h200), 1e9);
  EXPECT_DOUBLE_EQ(cost::gemm_curve_flops(1e9, h200.peak_fp32_flops, h200),
                   1e9 * h200.peak_bf16_flops / h200.peak_fp32_flops);
  EXPECT_DOUBLE_EQ(cost::gemm_curve_flops(1e9, h200.peak_fp8_flops, h200),
                   1e9 * h200.peak_bf16_flops / h200.peak_fp8_flops);  // about half
  EXPECT_DOUBLE_EQ(cost::gemm_curve_flops(1e9, v100.peak_fp32_flops, v100),
                   1e9 * v100.peak_fp16_flops / v100.peak_fp32_flops);
  // Closed form: an fp32 GEMM at the curve's half-efficiency size / 14.8 runs at half the maximum of the fp32 peak.
  Calibration cal = default_calibration("h200-sxm-141gb");
  cal.sustained_tensor_ratio = 1;
  cal.gemm_efficiency_exponent = 1;
  const double f = cal.gemm_half_efficiency_flops * h200.peak_fp32_flops / h200.peak_bf16_flops;
  const Op o{"fc1", true, f, 0, false, 0, 0, 0, 1};  // no shape: aligned, no bytes
  EXPECT_NEAR(cost::op_time_s(o, h200, DType::FP32, cal),
              f / (h200.peak_fp32_flops * cal.gemm_efficiency_max / 2) + cal.kernel_launch_s, 1e-9);
}

TEST(GemmFormats, PredictsTheMeasuredH200SweepInEveryFormat) {
  const auto rows = read_sweep();
  ASSERT_GT(rows.size(), 400u);
  const GpuSpec gpu = gpu_preset("h200-sxm-141gb");
  Calibration cal = default_calibration("h200-sxm-141gb");
  cal.sustained_tensor_ratio = 1;  // each call between synchronisations: the burst clock
  std::map<std::string, std::vector<double>> err;
  std::map<std::string, double> bias;
  for (const auto& g : rows) {
    if (g.time_s < 100e-6) continue;  // eager calls: below this the host's dispatch shows
    const double e = model_s(g, gpu, cal) / g.time_s - 1;
    err[g.dtype].push_back(std::abs(e));
    bias[g.dtype] += e;
  }
  for (const auto& [dtype, v] : err)
    std::cout << dtype << ": " << v.size() << " GEMMs, median |error| " << 100 * median(v) << "%, bias "
              << 100 * bias[dtype] / v.size() << "%\n";
  for (const char* dtype : {"bf16", "fp8-tensorwise", "fp8-rowwise", "fp32"}) {
    ASSERT_GT(err[dtype].size(), 40u) << dtype;
    EXPECT_LT(median(err[dtype]), 0.10) << dtype;
  }
  // Read at its own size, an fp32 GEMM on the CUDA cores would pay the BF16 curve's fixed cost in FP32 time: small
  // shapes several times too slow (the model before 2026-12-05).
  GpuSpec no_shift = gpu;
  no_shift.peak_bf16_flops = no_shift.peak_fp32_flops;  // gemm_curve_flops then returns the flops unchanged
  double worst = 0;
  for (const auto& g : rows)
    if (g.dtype == "fp32" && g.time_s >= 100e-6) worst = std::max(worst, model_s(g, no_shift, cal) / g.time_s - 1);
  EXPECT_GT(worst, 2.0);
}
