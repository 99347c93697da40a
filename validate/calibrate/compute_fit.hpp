// Fitting the calibration's compute fields to measured kernel times: Kineto traces recorded with operator shapes
// (PyTorch profiler, record_shapes=True) and GEMM sweep CSVs (profiler/bench/gemm_sweep.cpp).
//
// Model: exactly the simulator's (strategies/transformer_costs.cpp, op_time_s). One operator takes on the GPU
//   T = L + max(bytes / (H eff_mem), flops / (P eff(flops))),   eff(f) = eff_max f / (f + f_half)
// with L = kernel_launch_s, H the GPU's HBM bandwidth, P its peak for the operator's dtype; the flops term
// exists for GEMMs only. op_time_s also floors an operator at host_issue_s (the host's issue rate): that floor
// bounds how fast the CPU feeds kernels, not how long a kernel runs, so it is neither applied to the measured
// kernel durations nor fitted here; the output keeps the base's host_issue_s (the host's own time per launch is
// measured from the traces' CPU side by validate/calibrate/host_issue.hpp and reported beside the fit). Since f / (P
// eff(f)) = (f + f_half) / (P eff_max), the compute branch is linear in the unknowns: T = L + (u f + v) / P with u =
// 1/eff_max, v = f_half/eff_max; the memory branch is T = L + w bytes/H with w = 1/eff_mem.
//
// Fit (deterministic; every residual is relative, (T_model - T) / T):
//  1. memory-bound operators -> L (intercept) and eff_mem (slope), bounds L >= 0, eff_mem <= 1;
//  2. GEMMs, with L and eff_mem from step 1 -> eff_max and f_half, bounds eff_max <= 1, f_half >= 0. A GEMM
//     whose memory branch is the larger one at the current parameters does not depend on (u, v) and leaves the
//     fit; the branch of every GEMM is re-evaluated at each iteration. The global GEMM values come from the
//     tensor-core GEMMs (fp16, bf16, tf32) when there are at least kMinTensorCoreGemms of them, else from all;
//  3. per operator class (add, mul, layer_norm, mm, addmm, ...; and per GEMM dtype): the same fits restricted to
//     the class, reported in the provenance only.
// Each fit is iteratively reweighted least squares with Huber weights (k = 1.345 times the residuals' scale
// 1.4826 * median |r|), solved exactly under the bounds (every set of active bounds is tried). A fit needs at
// least 3 samples of 2 distinct sizes; otherwise the base calibration's values are kept and a note says so.
//
// Samples from a trace: each GPU kernel is linked to its launching runtime call (correlation id) and that call
// to its CPU operator (the runtime call's "External id" when it names a CPU op on the same thread that encloses
// the call, else the innermost CPU op enclosing the call on its thread; ties of equal intervals: the larger
// External id is inner). One sample = one operator instance: the sum of its kernels' durations (a split-K GEMM
// and its reduction kernel, layer_norm_backward's two kernels), because the simulator models an operator as one
// kernel with one launch overhead. Backward GEMMs are attributed through the aten::mm/bmm the autograd node
// (MmBackward0, AddmmBackward0, ...) calls; kernels launched directly by an autograd node or a compiled graph
// (CompiledFunction) have no shapes and are skipped with a reason. Approximations:
//  - GEMM FLOPs: 2 M N K per batch (bias additions of addmm/baddbmm ignored); bytes (M K + K N + M N) x element
//    size per batch, as the simulator's own GEMMs;
//  - memory-bound bytes: tensor arguments (numel x element size; a 0-dim tensor is one element) plus one output
//    the size of the largest tensor argument; fill_/zero_ write their tensor only; copy_ moves its two tensors
//    (no extra output); reductions (sum, mean, ...) read their inputs (output ignored). Outputs of other shapes
//    (layer_norm's mean/rstd, dropout masks) and L2-cache hits are ignored;
//  - dtype of an operator = the type of its first tensor argument. fp32 GEMMs that ran on TF32 tensor cores (a
//    kernel named *tf32*, *s1688gemm*, *s16816gemm*) use the TF32 peak, taken as peak_fp16 / 2 (A100, H100);
//    other fp32 GEMMs use peak_fp32 (V100 and 2080 Ti have no TF32); fp64 GEMMs are skipped (no peak);
//  - measured time is GPU kernel time: the fitted L is the fixed GPU-side cost per operator (ramp-up, tail,
//    short kernels), not the CPU launch gap, which the simulator does not model either.
#pragma once
#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "traces/calibration.hpp"
#include "traces/cluster.hpp"
#include "traces/trace_events.hpp"

namespace dtsim::sim {

/// Tensor-core GEMMs needed for the global GEMM values to come from them alone.
inline constexpr std::size_t kMinTensorCoreGemms = 8;

enum class ComputeCategory {
  GEMM,         ///< mm, addmm, bmm, baddbmm, addbmm, matmul, linear, _addmm_activation; GEMM sweep rows
  MEMORY,       ///< element-wise, normalisation, dropout, copies, fills, reductions
  CONVOLUTION,  ///< reported (count, time), not fitted
  COLLECTIVE,   ///< NCCL/RCCL kernels: excluded
  OTHER,        ///< everything else: reported in the skip counts
};
const char* to_string(ComputeCategory c);

/// One measured operator instance (a trace's operator with its kernels, or one GEMM sweep row).
struct ComputeSample {
  std::string source;    ///< file name (no directory) of the input
  std::string op;        ///< operator name as recorded ("aten::addmm"), "gemm" for sweep rows
  std::string op_class;  ///< op without "aten::" and a trailing '_' ("add" for aten::add_), "gemm-sweep"
  ComputeCategory category = ComputeCategory::OTHER;
  std::string dtype;      ///< "fp16", "bf16", "tf32", "fp32", "fp64", "int64", ... (first tensor argument)
  double peak_flops = 0;  ///< FLOP/s the GPU offers this GEMM's dtype (GEMMs only)
  /// GEMMs: the efficiency curve reads this GEMM at flops x curve_scale (cost::gemm_curve_flops: 1 for FP16 and BF16,
  /// 2 for TF32, ~15 for FP32 on Hopper's CUDA cores).
  double curve_scale = 1;
  double flops = 0;       ///< GEMMs: 2 M N K x batch
  double bytes = 0;       ///< HBM traffic estimate (see the header comment)
  double measured_s = 0;  ///< summed duration of the operator's kernels
  int kernels = 1;        ///< kernels summed into measured_s
  // Filled by fit_compute:
  double predicted_s = 0;      ///< the fitted calibration's time for this sample
  double weight = 0;           ///< final Huber weight in the fit that used it (1 = inlier), 0 = in no fit
  bool memory_branch = false;  ///< GEMMs: the memory term is the larger one under the fitted calibration
};

/// Kernels (or CSV rows) left out, and the GPU time they account for.
struct SkipTally {
  std::size_t kernels = 0;
  double seconds = 0;
};

/// Samples gathered from one or several inputs.
struct ComputeSamples {
  std::vector<ComputeSample> samples;
  std::map<std::string, SkipTally> skipped;          ///< reason -> kernels (CSV: rows) and their time
  std::size_t kernels = 0;                           ///< GPU kernels seen in traces (used + skipped)
  nlohmann::json sources = nlohmann::json::array();  ///< one object per input: file, kind, device, counts
  std::vector<std::string> notes;                    ///< caveats met while reading (e.g. the preset's memory differs)
  /// Appends `other` (its samples after ours).
  void append(ComputeSamples other);
};

/// GPU time of `s` under calibration `cal` on a GPU with HBM bandwidth `hbm_Bps`: the simulator's op_time_s
/// without its host floor (host_issue_s), with the sample's own peak (a TF32 GEMM uses peak_fp16 / 2, which
/// op_time_s has no dtype for).
double model_time_s(const ComputeSample& s, double hbm_Bps, const Calibration& cal);

/// GPU preset of a device name as traces record it ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-PG509-200",
/// "Tesla V100-SXM2-32GB", "NVIDIA H100 80GB HBM3"); "" when no preset matches (RTX 2080 Ti, MI250, V100 PCIe).
std::string gpu_preset_for_device(std::string_view device_name);

/// Name of the GPU the trace's kernels ran on (from deviceProperties); "" when the trace does not say.
/// ConfigError if its kernels ran on GPUs of different names.
std::string trace_device_name(const ImportedTrace& trace);

/// The preset for the trace's GPU. ConfigError (one line, naming `source`) when the trace names no GPU or its
/// GPU has no preset: pass --gpu.
GpuSpec trace_gpu(const ImportedTrace& trace, const std::string& source);

/// A GPU given on the command line: a preset name, or a JSON file {"name", "preset" (optional starting point),
/// "peak_fp16_flops", "peak_bf16_flops", "peak_fp32_flops", "hbm_Bps", "memory_bytes"}. ConfigError if unknown
/// or incomplete.
GpuSpec load_gpu(const std::string& preset_or_file);

/// Samples of a trace's kernels on `gpu`; `source` names the input in the samples and notes. Never throws for
/// unusable kernels: they are counted in `skipped` by reason.
ComputeSamples samples_from_trace(const ImportedTrace& trace, const GpuSpec& gpu, const std::string& source);

/// Samples of a GEMM sweep CSV (header "m,n,k,dtype,time_s,tflops"; columns found by name, tflops optional;
/// dtype fp16, bf16, fp32 or tf32). FormatError naming `source` and the line for a missing column, a short row
/// or a bad value, and for a file without data rows.
ComputeSamples samples_from_gemm_csv(const std::string& text, const GpuSpec& gpu, const std::string& source);
ComputeSamples load_gemm_csv(const std::string& path, const GpuSpec& gpu);

/// |relative residual| statistics.
struct ResidualStats {
  std::size_t count = 0;
  double median = 0, mean = 0, max = 0;
};

/// One robust fit's result: the memory-bound pair or the GEMM pair is set, as the fit was.
struct LineFit {
  bool fitted = false;
  double launch_s = 0, memory_efficiency = 0;            ///< memory-bound fits
  double efficiency_max = 0, half_efficiency_flops = 0;  ///< GEMM fits
  std::size_t samples = 0;                               ///< samples in the fit (GEMMs on the memory branch excluded)
  std::size_t outliers = 0;                              ///< samples with Huber weight < 1 at the end
  ResidualStats residuals;  ///< of the samples the fit was made on, under its own parameters
};

/// Per operator class (or GEMM dtype): counts, its own fit and its residuals under the global calibration.
struct ClassResult {
  std::string name;  ///< "add", "mm", ...; "dtype:fp16" for the per-dtype GEMM fits
  ComputeCategory category = ComputeCategory::OTHER;
  std::size_t samples = 0;
  std::size_t kernels = 0;
  double measured_s = 0;  ///< total time of its samples
  LineFit own;            ///< fit restricted to the class (not fitted when too few samples)
  ResidualStats global;   ///< residuals under the fitted global calibration
};

struct ComputeFit {
  /// The base with the fitted compute fields; provenance = {status, base_calibration, base_provenance (the
  /// base's provenance verbatim), compute_fit (sources, method, fits, residuals, per class, skip counts, notes)}.
  Calibration calibration;
  GpuSpec gpu;
  std::vector<ComputeSample> points;  ///< every GEMM and memory-bound sample, predicted_s filled
  LineFit memory;                     ///< step 1
  LineFit gemm;                       ///< step 2 (global)
  std::string gemm_fit_set;           ///< "tensor-core (fp16, bf16, tf32)" or "all"
  ResidualStats memory_residuals, gemm_residuals, all_residuals;  ///< under the fitted calibration
  std::vector<ClassResult> classes;  ///< memory classes, GEMM classes, then GEMM dtypes; by name within each
  ComputeSamples inputs;             ///< what was read (samples moved into points)
  std::vector<std::string> notes;    ///< inputs' notes plus the fit's (kept base values, ...)
};

/// Fits the compute fields of `base` to `in` (see the header comment) on `gpu`. ConfigError (one line, with the
/// main skip reasons) when no sample is usable.
ComputeFit fit_compute(ComputeSamples in, const GpuSpec& gpu, const Calibration& base);

/// points.csv, one row per sample: source,op,class,category,dtype,kernels,flops,bytes,peak_flops,measured_s,
/// predicted_s,rel_error ((predicted - measured) / measured),weight (final Huber weight, 0 = in no global fit),
/// bound ("compute" or "memory": the branch of the max() that predicts it).
std::string points_csv(const ComputeFit& fit);

/// Human-readable summary (fitted values, residuals overall and per class, skip reasons, notes).
std::string summary_text(const ComputeFit& fit);

}  // namespace dtsim::sim
