// Compute calibration fitting (validate/calibrate/compute_fit.hpp): the model is the simulator's, synthetic samples
// from known parameters are recovered, Kineto traces are turned into samples as documented, the fit runs on the real
// traces under DTSIM_SHARED_DIR/traces (skipped when absent), and bad inputs fail with one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "strategies/transformer_costs.hpp"
#include "traces/error.hpp"
#include "traces/kineto_import.hpp"
#include "validate/calibrate/compute_fit.hpp"

#ifndef DTSIM_SHARED_DIR
#define DTSIM_SHARED_DIR "../shared"
#endif

using namespace dtsim;
using sim::ComputeCategory;
using sim::ComputeSample;
using sim::ComputeSamples;
namespace fs = std::filesystem;

namespace {

std::string shared_trace(const std::string& rel) {
  return std::string(DTSIM_SHARED_DIR) + "/traces/HolisticTraceAnalysis/tests/data/" + rel;
}

Calibration known_calibration() {
  Calibration c = default_calibration("a100-sxm4-80gb");
  c.kernel_launch_s = 5e-6;
  c.memory_bandwidth_efficiency = 0.7;
  c.gemm_efficiency_max = 0.8;
  c.gemm_half_efficiency_flops = 3e9;
  c.gemm_efficiency_exponent = 1;  // the curve calibrate compute fits (the A100 preset's is sharper)
  return c;
}

ComputeSample memory_sample(double bytes) {
  ComputeSample s;
  s.source = "synthetic";
  s.op = "aten::add";
  s.op_class = "add";
  s.category = ComputeCategory::MEMORY;
  s.dtype = "fp16";
  s.bytes = bytes;
  return s;
}

ComputeSample gemm_sample(double m, double n, double k, const GpuSpec& gpu, const std::string& op_class = "mm") {
  ComputeSample s;
  s.source = "synthetic";
  s.op = "aten::" + op_class;
  s.op_class = op_class;
  s.category = ComputeCategory::GEMM;
  s.dtype = "fp16";
  s.peak_flops = gpu.peak_fp16_flops;
  s.flops = 2 * m * n * k;
  s.bytes = (m * k + k * n + m * n) * 2;
  return s;
}

/// Memory-bound samples over 1 KB .. 10 GB and fp16 GEMMs from tiny (memory-bound) to large, timed by `cal`.
ComputeSamples synthetic(const Calibration& cal, const GpuSpec& gpu) {
  ComputeSamples in;
  for (int i = 0; i <= 70; ++i) in.samples.push_back(memory_sample(1e3 * std::pow(10.0, i / 10.0)));
  const double sizes[] = {16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288};
  for (double m : sizes)
    for (double n : {64.0, 1024.0, 4096.0})
      for (double k : {32.0, 1024.0, 8192.0}) in.samples.push_back(gemm_sample(m, n, k, gpu));
  for (auto& s : in.samples) s.measured_s = sim::model_time_s(s, gpu.hbm_Bps, cal);
  return in;
}

/// Deterministic pseudo-random numbers in [0, 1).
struct Lcg {
  std::uint64_t x = 12345;
  double next() {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(x >> 11) / 9007199254740992.0;
  }
};

void expect_one_line(const std::exception& e) {
  EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
}

}  // namespace

// ------------------------------------------------------------------------------------------------------------
// The model is the simulator's
// ------------------------------------------------------------------------------------------------------------
// The GPU part of op_time_s: with host_issue_s = 0 the two agree exactly; the host floor is not a kernel duration.
TEST(ComputeModel, IsTheSimulatorsOpTime) {
  const GpuSpec gpu = gpu_preset("a100-sxm4-80gb");
  Calibration cal = known_calibration();
  cal.host_issue_s = 0;
  cal.pin("host_issue_s");
  for (double m : {8.0, 256.0, 4096.0}) {
    const ComputeSample s = gemm_sample(m, 1024, 2048, gpu);
    const cost::Op op{"g", true, s.flops, s.bytes, false};
    EXPECT_DOUBLE_EQ(sim::model_time_s(s, gpu.hbm_Bps, cal), cost::op_time_s(op, gpu, DType::FP16, cal));
  }
  for (double b : {10.0, 1e6, 1e9}) {
    const cost::Op op{"m", false, 0, b, false};
    EXPECT_DOUBLE_EQ(sim::model_time_s(memory_sample(b), gpu.hbm_Bps, cal), cost::op_time_s(op, gpu, DType::FP16, cal));
  }
}

// ------------------------------------------------------------------------------------------------------------
// Synthetic samples: the fit recovers the parameters they were made with
// ------------------------------------------------------------------------------------------------------------
TEST(ComputeFit, RecoversKnownParametersExactly) {
  const GpuSpec gpu = gpu_preset("a100-sxm4-80gb");
  const Calibration truth = known_calibration();
  Calibration base = default_calibration("a100-sxm4-80gb");
  base.gemm_efficiency_exponent = 1.5;  // a sharper base curve is replaced by the fitted hyperbola, and said so
  const auto fit = sim::fit_compute(synthetic(truth, gpu), gpu, base);
  ASSERT_TRUE(fit.memory.fitted);
  ASSERT_TRUE(fit.gemm.fitted);
  const Calibration& c = fit.calibration;
  EXPECT_EQ(c.gemm_efficiency_exponent, 1.0);
  EXPECT_TRUE(std::any_of(fit.notes.begin(), fit.notes.end(), [](const std::string& n) {
    return n.find("gemm_efficiency_exponent 1.5 of the base set to 1") != std::string::npos;
  }));
  EXPECT_NEAR(c.kernel_launch_s, truth.kernel_launch_s, 0.01 * truth.kernel_launch_s);
  EXPECT_NEAR(c.memory_bandwidth_efficiency, truth.memory_bandwidth_efficiency,
              0.01 * truth.memory_bandwidth_efficiency);
  EXPECT_NEAR(c.gemm_efficiency_max, truth.gemm_efficiency_max, 0.01 * truth.gemm_efficiency_max);
  EXPECT_NEAR(c.gemm_half_efficiency_flops, truth.gemm_half_efficiency_flops, 0.01 * truth.gemm_half_efficiency_flops);
  EXPECT_LT(fit.all_residuals.max, 1e-6);
  // Some tiny GEMMs are on the memory branch, and are predicted by it.
  std::size_t memory_branch = 0;
  for (const auto& p : fit.points) memory_branch += p.memory_branch;
  EXPECT_GT(memory_branch, 0u);
  EXPECT_EQ(fit.points.size(), 71u + 90u);
}

TEST(ComputeFit, RobustToNoiseAndOutliers) {
  const GpuSpec gpu = gpu_preset("h100-sxm5-80gb");
  Calibration truth = default_calibration("h100-sxm5-80gb");
  truth.kernel_launch_s = 3e-6;
  truth.memory_bandwidth_efficiency = 0.85;
  truth.gemm_efficiency_max = 0.65;
  truth.gemm_half_efficiency_flops = 5e9;
  ComputeSamples in = synthetic(truth, gpu);
  Lcg rng;
  std::size_t outliers = 0;
  for (auto& s : in.samples) {
    s.measured_s *= 1 + 0.02 * (2 * rng.next() - 1);  // +-2 % noise
    if (rng.next() < 0.1) {                           // 10 % of the samples 2-6 x slower (contention, clocks)
      s.measured_s *= 2 + 4 * rng.next();
      ++outliers;
    }
  }
  ASSERT_GE(outliers, 8u);
  const auto fit = sim::fit_compute(in, gpu, default_calibration("h100-sxm5-80gb"));
  const Calibration& c = fit.calibration;
  EXPECT_NEAR(c.kernel_launch_s, truth.kernel_launch_s, 0.03 * truth.kernel_launch_s);
  EXPECT_NEAR(c.memory_bandwidth_efficiency, truth.memory_bandwidth_efficiency,
              0.03 * truth.memory_bandwidth_efficiency);
  EXPECT_NEAR(c.gemm_efficiency_max, truth.gemm_efficiency_max, 0.03 * truth.gemm_efficiency_max);
  EXPECT_NEAR(c.gemm_half_efficiency_flops, truth.gemm_half_efficiency_flops, 0.05 * truth.gemm_half_efficiency_flops);
  EXPECT_GT(fit.memory.outliers + fit.gemm.outliers, 0u);
  EXPECT_LT(fit.all_residuals.median, 0.03);
}

TEST(ComputeFit, BoundsHoldAndFewSamplesKeepTheBase) {
  const GpuSpec gpu = gpu_preset("a100-sxm4-80gb");
  const Calibration base = default_calibration("a100-sxm4-80gb");
  // Faster than HBM: the efficiency stops at 1.
  ComputeSamples fast;
  for (double b : {1e6, 1e7, 1e8, 1e9}) {
    ComputeSample s = memory_sample(b);
    s.measured_s = 1e-6 + b / (gpu.hbm_Bps * 1.5);
    fast.samples.push_back(s);
  }
  const auto f1 = sim::fit_compute(fast, gpu, base);
  EXPECT_TRUE(f1.memory.fitted);
  EXPECT_DOUBLE_EQ(f1.calibration.memory_bandwidth_efficiency, 1.0);
  EXPECT_GE(f1.calibration.kernel_launch_s, 0.0);
  EXPECT_FALSE(f1.gemm.fitted);  // no GEMMs: the base's GEMM values stay
  EXPECT_EQ(f1.calibration.gemm_efficiency_max, base.gemm_efficiency_max);
  EXPECT_EQ(f1.calibration.gemm_half_efficiency_flops, base.gemm_half_efficiency_flops);
  EXPECT_FALSE(f1.notes.empty());
  // Two memory samples only: nothing fitted, base kept, still a valid calibration and points.
  ComputeSamples two;
  for (double b : {1e6, 1e8}) {
    ComputeSample s = memory_sample(b);
    s.measured_s = 1e-5;
    two.samples.push_back(s);
  }
  const auto f2 = sim::fit_compute(two, gpu, base);
  EXPECT_FALSE(f2.memory.fitted);
  EXPECT_EQ(f2.calibration.kernel_launch_s, base.kernel_launch_s);
  EXPECT_EQ(f2.points.size(), 2u);
}

// ------------------------------------------------------------------------------------------------------------
// GEMM sweep CSVs
// ------------------------------------------------------------------------------------------------------------
TEST(GemmCsv, ParsesByColumnNameAndFits) {
  const GpuSpec gpu = gpu_preset("a100-sxm4-80gb");
  Calibration truth = known_calibration();
  const Calibration base = default_calibration("a100-sxm4-80gb");
  truth.kernel_launch_s = base.kernel_launch_s;  // a CSV has no memory-bound rows: the base's launch is used
  std::string csv = "# dtsim_gemm_sweep output\ndtype,k,m,n,time_s\n";
  for (double m : {256.0, 1024.0, 4096.0, 8192.0})
    for (double n : {1024.0, 4096.0, 12288.0})
      for (const char* dt : {"fp16", "bf16"}) {
        const double k = 4096;
        ComputeSample s = gemm_sample(m, n, k, gpu);
        const double t = sim::model_time_s(s, gpu.hbm_Bps, truth);
        char row[200];
        std::snprintf(row, sizeof row, "%s,%.0f,%.0f,%.0f,%.12g\n", dt, k, m, n, t);
        csv += row;
      }
  const ComputeSamples in = sim::samples_from_gemm_csv(csv, gpu, "sweep.csv");
  ASSERT_EQ(in.samples.size(), 24u);
  EXPECT_EQ(in.samples[0].op_class, "gemm-sweep");
  EXPECT_EQ(in.samples[0].flops, 2.0 * 256 * 1024 * 4096);
  EXPECT_EQ(in.samples[1].dtype, "bf16");
  const auto fit = sim::fit_compute(in, gpu, base);
  ASSERT_TRUE(fit.gemm.fitted);
  EXPECT_FALSE(fit.memory.fitted);
  EXPECT_EQ(fit.calibration.kernel_launch_s, base.kernel_launch_s);
  EXPECT_NEAR(fit.calibration.gemm_efficiency_max, truth.gemm_efficiency_max, 0.01 * truth.gemm_efficiency_max);
  EXPECT_NEAR(fit.calibration.gemm_half_efficiency_flops, truth.gemm_half_efficiency_flops,
              0.01 * truth.gemm_half_efficiency_flops);
}

TEST(GemmCsv, BadInputsAreOneLineFormatErrors) {
  const GpuSpec gpu = gpu_preset("a100-sxm4-80gb");
  auto fails_with = [&](const std::string& text, const std::string& needle) {
    try {
      sim::samples_from_gemm_csv(text, gpu, "bad.csv");
      ADD_FAILURE() << "no error for: " << text;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.csv"), std::string::npos) << e.what();
      expect_one_line(e);
    }
  };
  fails_with("m,n,k,dtype,tflops\n1,2,3,fp16,1\n", "missing column 'time_s'");
  fails_with("m,n,dtype,time_s\n1,2,fp16,1e-3\n", "missing column 'k'");
  fails_with("m,n,k,dtype,time_s,tflops\n1,2,3,fp16,1e-5,1\n4,5,6,fp16\n", "line 3");
  fails_with("m,n,k,dtype,time_s\n1,2,x,fp16,1e-5\n", "k 'x' is not a positive integer");
  fails_with("m,n,k,dtype,time_s\n1,2,3,fp16,-1\n", "time_s '-1'");
  fails_with("m,n,k,dtype,time_s\n1,2,3,int8,1e-5\n", "dtype 'int8'");
  fails_with("m,n,k,dtype,time_s,tflops\n", "no data rows");
  fails_with("", "empty GEMM CSV");
  EXPECT_THROW(sim::load_gemm_csv("/nonexistent/gemm.csv", gpu), ConfigError);
}

// ------------------------------------------------------------------------------------------------------------
// GPUs
// ------------------------------------------------------------------------------------------------------------
TEST(ComputeGpu, DeviceNamesMapToPresets) {
  EXPECT_EQ(sim::gpu_preset_for_device("NVIDIA A100-SXM4-80GB"), "a100-sxm4-80gb");
  EXPECT_EQ(sim::gpu_preset_for_device("NVIDIA A100-PG509-200"), "a100-sxm4-80gb");
  EXPECT_EQ(sim::gpu_preset_for_device("NVIDIA A100 80GB PCIe"), "a100-pcie-80gb");
  EXPECT_EQ(sim::gpu_preset_for_device("Tesla V100-SXM2-16GB"), "v100-sxm2-32gb");
  EXPECT_EQ(sim::gpu_preset_for_device("NVIDIA H100 80GB HBM3"), "h100-sxm5-80gb");
  EXPECT_EQ(sim::gpu_preset_for_device("NVIDIA GeForce RTX 2080 Ti"), "");
  EXPECT_EQ(sim::gpu_preset_for_device("AMD Instinct MI250X / MI250"), "");
  EXPECT_EQ(sim::gpu_preset_for_device("Tesla V100-PCIE-32GB"), "");
}

TEST(ComputeGpu, UnknownGpuIsAOneLineConfigError) {
  const std::string kernel =
      R"({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":2,"args":{"device":0}})";
  const ImportedTrace rtx = parse_kineto(
      R"({"deviceProperties":[{"id":0,"name":"NVIDIA GeForce RTX 2080 Ti"}],"traceEvents":[)" + kernel + "]}",
      "rtx.json");
  try {
    sim::trace_gpu(rtx, "rtx.json");
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("RTX 2080 Ti' has no preset"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--gpu"), std::string::npos) << e.what();
    expect_one_line(e);
  }
  const ImportedTrace anonymous = parse_kineto(R"({"traceEvents":[)" + kernel + "]}", "anon.json");
  EXPECT_THROW(sim::trace_gpu(anonymous, "anon.json"), ConfigError);
  EXPECT_THROW(sim::load_gpu("rtx-2080-ti"), ConfigError);
  EXPECT_EQ(sim::load_gpu("v100-sxm2-32gb").name, "v100-sxm2-32gb");
  // A GPU file with its peaks.
  const fs::path file = fs::temp_directory_path() /
                        ("dtsim_gpu_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + ".json");
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(R"({"name": "rtx-2080-ti", "peak_fp16_flops": 53.8e12, "peak_bf16_flops": 0,
                   "peak_fp32_flops": 13.4e12, "hbm_Bps": 616e9, "memory_bytes": 11e9})",
               f);
    std::fclose(f);
  }
  const GpuSpec g = sim::load_gpu(file.string());
  EXPECT_EQ(g.name, "rtx-2080-ti");
  EXPECT_EQ(g.hbm_Bps, 616e9);
  fs::remove(file);
}

// ------------------------------------------------------------------------------------------------------------
// Samples from a (synthetic) Kineto trace
// ------------------------------------------------------------------------------------------------------------
TEST(ComputeTrace, KernelsAreLinkedClassifiedAndMeasured) {
  // Thread 1: aten::linear > aten::addmm (equal intervals: the larger External id is inner), launched with the
  // runtime's External id = correlation (old traces): found by enclosure. Split-K: two kernels summed.
  // Thread 2: MmBackward0 > aten::mm, found by the runtime call's External id (new traces); TF32 kernel name.
  // Also: an add_ (memory-bound), a fill_ (write only), a collective, a kernel without launch, a convolution.
  const std::string text = R"J({
    "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85899345920}],
    "traceEvents": [
      {"ph":"X","cat":"cpu_op","name":"aten::linear","pid":1,"tid":1,"ts":100,"dur":50,"args":{"External id":10,
       "Input Dims":[[64,1024],[512,1024],[512]],"Input type":["c10::Half","c10::Half","c10::Half"]}},
      {"ph":"X","cat":"cpu_op","name":"aten::addmm","pid":1,"tid":1,"ts":100,"dur":50,"args":{"External id":11,
       "Input Dims":[[512],[64,1024],[1024,512],[],[]],"Input type":["c10::Half","c10::Half","c10::Half","Scalar","Scalar"]}},
      {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":110,"dur":5,"args":{"correlation":900,"External id":900}},
      {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":120,"dur":5,"args":{"correlation":901,"External id":901}},
      {"ph":"X","cat":"kernel","name":"ampere_fp16_s16816gemm_fp16_64x64","pid":0,"tid":7,"ts":200,"dur":10,"args":{"correlation":900,"device":0}},
      {"ph":"X","cat":"kernel","name":"splitKreduce_kernel","pid":0,"tid":7,"ts":210,"dur":3,"args":{"correlation":901,"device":0}},
      {"ph":"X","cat":"cpu_op","name":"MmBackward0","pid":1,"tid":2,"ts":300,"dur":40,"args":{"External id":20}},
      {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":2,"ts":305,"dur":30,"args":{"External id":21,
       "Input Dims":[[8,16,32],[32,48]],"Input type":["float","float"]}},
      {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":2,"ts":350,"dur":30,"args":{"External id":22,
       "Input Dims":[[128,256],[256,64]],"Input type":["float","float"]}},
      {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":2,"ts":355,"dur":5,"args":{"correlation":902,"External id":22}},
      {"ph":"X","cat":"kernel","name":"sm80_xmma_gemm_f32f32_tf32f32_f32_nn","pid":0,"tid":7,"ts":400,"dur":20,"args":{"correlation":902,"device":0}},
      {"ph":"X","cat":"cpu_op","name":"aten::add_","pid":1,"tid":1,"ts":500,"dur":20,"args":{"External id":30,
       "Input Dims":[[1000,1000],[1000,1000],[]],"Input type":["float","float","Scalar"]}},
      {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":505,"dur":5,"args":{"correlation":903,"External id":30}},
      {"ph":"X","cat":"kernel","name":"vectorized_elementwise_kernel","pid":0,"tid":7,"ts":600,"dur":8.5,"args":{"correlation":903,"device":0}},
      {"ph":"X","cat":"cpu_op","name":"aten::fill_","pid":1,"tid":1,"ts":700,"dur":20,"args":{"External id":31,
       "Input Dims":[[256,256],[]],"Input type":["c10::BFloat16","Scalar"]}},
      {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":705,"dur":5,"args":{"correlation":904,"External id":31}},
      {"ph":"X","cat":"kernel","name":"fill_kernel","pid":0,"tid":7,"ts":800,"dur":2,"args":{"correlation":904,"device":0}},
      {"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL","pid":0,"tid":9,"ts":900,"dur":50,"args":{"correlation":905,"device":0}},
      {"ph":"X","cat":"kernel","name":"orphan_kernel","pid":0,"tid":7,"ts":1000,"dur":4,"args":{"correlation":999,"device":0}},
      {"ph":"X","cat":"cpu_op","name":"aten::cudnn_convolution","pid":1,"tid":1,"ts":1100,"dur":20,"args":{"External id":40}},
      {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1105,"dur":5,"args":{"correlation":906,"External id":40}},
      {"ph":"X","cat":"kernel","name":"implicit_convolve_sgemm","pid":0,"tid":7,"ts":1200,"dur":30,"args":{"correlation":906,"device":0}}
    ]})J";
  const ImportedTrace t = parse_kineto(text, "synthetic.json");
  const GpuSpec gpu = sim::trace_gpu(t, "synthetic.json");
  EXPECT_EQ(gpu.name, "a100-sxm4-80gb");
  const ComputeSamples in = sim::samples_from_trace(t, gpu, "synthetic.json");
  EXPECT_EQ(in.kernels, 8u);
  ASSERT_EQ(in.samples.size(), 4u);
  const ComputeSample& addmm = in.samples[0];  // by operator start
  EXPECT_EQ(addmm.op, "aten::addmm");
  EXPECT_EQ(addmm.category, ComputeCategory::GEMM);
  EXPECT_EQ(addmm.kernels, 2);
  EXPECT_DOUBLE_EQ(addmm.measured_s, 13e-6);
  EXPECT_EQ(addmm.dtype, "fp16");
  EXPECT_EQ(addmm.peak_flops, gpu.peak_fp16_flops);
  EXPECT_EQ(addmm.flops, 2.0 * 64 * 512 * 1024);
  EXPECT_EQ(addmm.bytes, (64.0 * 1024 + 1024 * 512 + 64 * 512) * 2);
  const ComputeSample& mm = in.samples[1];
  EXPECT_EQ(mm.op, "aten::mm");
  EXPECT_EQ(mm.dtype, "tf32");
  EXPECT_EQ(mm.peak_flops, gpu.peak_fp16_flops / 2);
  EXPECT_EQ(mm.flops, 2.0 * 128 * 64 * 256);
  const ComputeSample& add = in.samples[2];
  EXPECT_EQ(add.op_class, "add");
  EXPECT_EQ(add.category, ComputeCategory::MEMORY);
  EXPECT_EQ(add.bytes, 3 * 1000.0 * 1000 * 4);  // two inputs + one output
  EXPECT_DOUBLE_EQ(add.measured_s, 8.5e-6);
  const ComputeSample& fill = in.samples[3];
  EXPECT_EQ(fill.bytes, 256.0 * 256 * 2);  // write only
  EXPECT_EQ(fill.dtype, "bf16");
  ASSERT_EQ(in.skipped.size(), 3u);
  EXPECT_EQ(in.skipped.at("collective kernel (NCCL/RCCL): excluded").kernels, 1u);
  EXPECT_EQ(in.skipped.at("no launching runtime call in the trace (correlation id)").kernels, 1u);
  EXPECT_DOUBLE_EQ(in.skipped.at("convolution: reported, not fitted").seconds, 30e-6);
  ASSERT_EQ(in.sources.size(), 1u);
  EXPECT_EQ(in.sources[0]["device"], "NVIDIA A100-SXM4-80GB");
  EXPECT_TRUE(in.notes.empty());
}

TEST(ComputeTrace, TraceWithoutKernelsIsAOneLineConfigError) {
  const ImportedTrace t = parse_kineto(
      R"({"deviceProperties":[{"id":0,"name":"NVIDIA A100-SXM4-80GB"}],
          "traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":2}]})",
      "empty.json");
  const GpuSpec gpu = gpu_preset("a100-sxm4-80gb");
  try {
    sim::fit_compute(sim::samples_from_trace(t, gpu, "empty.json"), gpu, default_calibration(gpu.name));
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no GPU kernel"), std::string::npos) << e.what();
    expect_one_line(e);
  }
}

// ------------------------------------------------------------------------------------------------------------
// Real traces
// ------------------------------------------------------------------------------------------------------------
struct RealTrace {
  const char* path;
  const char* gpu;
  std::size_t min_gemms;  ///< GEMM samples expected at least
};

class RealTraceFit : public ::testing::TestWithParam<RealTrace> {};

TEST_P(RealTraceFit, FitsWithSaneValues) {
  const RealTrace& r = GetParam();
  const std::string path = shared_trace(r.path);
  if (!fs::exists(path)) GTEST_SKIP() << "shared trace absent: " << path;
  const ImportedTrace t = import_kineto(path);
  const GpuSpec gpu = sim::trace_gpu(t, "trace");
  EXPECT_EQ(gpu.name, r.gpu);
  const auto fit = sim::fit_compute(sim::samples_from_trace(t, gpu, "trace"), gpu, default_calibration(gpu.name));
  std::size_t gemms = 0;
  for (const auto& p : fit.points) gemms += p.category == ComputeCategory::GEMM;
  const Calibration& c = fit.calibration;
  RecordProperty("gemm_samples", static_cast<int>(gemms));
  std::printf(
      "%s: %zu samples (%zu GEMM); launch %.3g us, eff_mem %.3f, eff_max %.3f, f_half %.3g; "
      "residuals median %.1f%% mean %.1f%% max %.1f%%\n",
      r.path, fit.points.size(), gemms, c.kernel_launch_s * 1e6, c.memory_bandwidth_efficiency, c.gemm_efficiency_max,
      c.gemm_half_efficiency_flops, 100 * fit.all_residuals.median, 100 * fit.all_residuals.mean,
      100 * fit.all_residuals.max);
  EXPECT_GE(gemms, r.min_gemms);
  EXPECT_TRUE(fit.memory.fitted);
  EXPECT_TRUE(fit.gemm.fitted);
  EXPECT_GT(c.gemm_efficiency_max, 0.0);
  EXPECT_LE(c.gemm_efficiency_max, 1.0);
  EXPECT_GT(c.memory_bandwidth_efficiency, 0.0);
  EXPECT_LE(c.memory_bandwidth_efficiency, 1.0);
  EXPECT_GE(c.kernel_launch_s, 0.5e-6);  // measured kernel times are a few microseconds at the least
  EXPECT_LE(c.kernel_launch_s, 20e-6);
  EXPECT_LT(fit.all_residuals.median, 0.5);
  EXPECT_GT(fit.inputs.skipped.count("collective kernel (NCCL/RCCL): excluded"), 0u);
  // The output is a calibration the simulator loads, with the fit in its provenance.
  const Calibration again = calibration_from_json(to_json(c), "fitted");
  EXPECT_EQ(again.gemm_efficiency_max, c.gemm_efficiency_max);
  EXPECT_TRUE(c.provenance.contains("compute_fit"));
  EXPECT_TRUE(c.provenance.contains("base_provenance"));
  EXPECT_EQ(c.host_issue_s, default_calibration(gpu.name).host_issue_s);  // not a kernel-time parameter: kept
  EXPECT_EQ(c.provenance["compute_fit"]["sources"][0]["file"], "trace");
  // Deterministic.
  const auto fit2 = sim::fit_compute(sim::samples_from_trace(t, gpu, "trace"), gpu, default_calibration(gpu.name));
  EXPECT_EQ(to_json(fit2.calibration).dump(), to_json(c).dump());
  EXPECT_EQ(sim::points_csv(fit2), sim::points_csv(fit));
}

INSTANTIATE_TEST_SUITE_P(SharedTraces, RealTraceFit,
                         ::testing::Values(RealTrace{"trace_diff/control/control.json.gz", "a100-sxm4-80gb", 1000},
                                           RealTrace{"negative_queue_length_values_check/rank0.json.gz",
                                                     "a100-sxm4-80gb", 20},
                                           RealTrace{"trace_diff/test/test.json.gz", "v100-sxm2-32gb", 300}),
                         [](const ::testing::TestParamInfo<RealTrace>& p) {
                           return std::string(p.param.gpu).substr(0, 4) + "_" + std::to_string(p.index);
                         });

// Traces recorded without shapes (record_shapes=False) cannot be fitted: a one-line error says why.
TEST(RealTraceFit, TracesWithoutShapesSayWhy) {
  for (const char* rel : {"df_index_resolver/df_index_resolver.json.gz", "nccl_parser_config/nccl_data.json.gz"}) {
    const std::string path = shared_trace(rel);
    if (!fs::exists(path)) GTEST_SKIP() << "shared trace absent: " << path;
    const ImportedTrace t = import_kineto(path);
    const GpuSpec gpu = sim::trace_gpu(t, rel);
    const auto in = sim::samples_from_trace(t, gpu, rel);
    EXPECT_GT(in.skipped.at("operator recorded without shapes (profile with record_shapes=True)").kernels, 1000u);
    try {
      sim::fit_compute(in, gpu, default_calibration(gpu.name));
      ADD_FAILURE() << rel << ": no error";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("record_shapes=True"), std::string::npos) << e.what();
      expect_one_line(e);
    }
  }
}

TEST(RealTraceFit, GpusWithoutPresetAreRefused) {
  const std::string path = shared_trace("amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz");
  if (!fs::exists(path)) GTEST_SKIP() << "shared trace absent: " << path;
  EXPECT_THROW(sim::trace_gpu(import_kineto(path), "mi250"), ConfigError);
}

// The shipped H100 calibration's compute fields are the fit of the measurements committed under tests/data/h100
// (profiler/bench/gpu_campaign.sh on an H100 SXM5): re-fitting them gives the same values, and the file says so.
TEST(ShippedH100, RefitReproducesThePreset) {
  const std::string dir = std::string(DTSIM_SOURCE_DIR) + "/tests/data/h100/";
  const Calibration shipped = default_calibration("h100-sxm5-80gb");
  const GpuSpec gpu = gpu_preset("h100-sxm5-80gb");
  sim::ComputeSamples in;
  for (const char* t : {"torch_h2048_mbs2.json.gz", "torch_h4096_mbs1.json.gz"}) {
    const ImportedTrace tr = import_kineto(dir + t);
    EXPECT_EQ(sim::trace_gpu(tr, t).name, gpu.name);  // "NVIDIA H100 80GB HBM3" maps to the SXM5 preset
    in.append(sim::samples_from_trace(tr, gpu, t));
  }
  for (const char* c : {"gemm_t4096.csv", "gemm_t1024.csv", "gemm_t16384.csv", "gemm_small.csv"})
    in.append(sim::load_gemm_csv(dir + c, gpu));
  const auto fit = sim::fit_compute(in, gpu, shipped);
  EXPECT_TRUE(fit.memory.fitted);
  EXPECT_TRUE(fit.gemm.fitted);
  auto near = [](double a, double b) { return std::fabs(a - b) <= 1e-9 * std::fabs(b); };
  EXPECT_TRUE(near(fit.calibration.gemm_efficiency_max, shipped.gemm_efficiency_max));
  EXPECT_TRUE(near(fit.calibration.gemm_half_efficiency_flops, shipped.gemm_half_efficiency_flops));
  EXPECT_TRUE(near(fit.calibration.memory_bandwidth_efficiency, shipped.memory_bandwidth_efficiency));
  EXPECT_TRUE(near(fit.calibration.kernel_launch_s, shipped.kernel_launch_s));
  // The measured H100 is far from the spec estimates it replaced in places (GEMMs reach 81 % of peak, not 70 %).
  EXPECT_GT(shipped.gemm_efficiency_max, 0.75);
  EXPECT_LT(shipped.gemm_efficiency_max, 0.9);
  EXPECT_LT(fit.gemm_residuals.median, 0.1);
  EXPECT_EQ(shipped.provenance["compute_fit"]["sources"].size(), 6u);
}
