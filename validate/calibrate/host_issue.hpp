// The host's issue time per GPU launch, measured from the CPU side of a Kineto trace: how long an eager framework
// (PyTorch, and the Python of the training script) spends on the CPU for each kernel, copy or memset it launches.
// This is the simulator's host_issue_s (traces/calibration.hpp): a pass whose kernels are shorter than it is bound
// by the host, not by the GPU (the "host floor" of small micro-batches and high tensor parallelism).
//
// Measurement. The issuing thread is the CPU thread with the most launch calls (runtime/driver calls named
// *Launch*, *Memcpy*, *Memset*: cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel, cudaGraphLaunch,
// cudaMemcpyAsync, cudaMemsetAsync, their HIP twins). On it:
//   busy     = the union of its CPU operators' intervals (cat "cpu_op": ATen operators, autograd nodes, and the
//              framework ops that enclose them);
//   blocked  = the part of busy spent inside calls that wait for the GPU: *Synchronize* (device, stream, event),
//              a synchronous cudaMemcpy, and an asynchronous copy whose GPU copy is device-to-host ("Memcpy DtoH":
//              PyTorch's .item() and .cpu(), which wait for the stream to drain);
//   host_issue_s = (busy - blocked) / launches.
// What it leaves out: Python time between operators (outside every cpu_op), so it is a floor of the host's cost
// per launch. Where the GPU is the bottleneck the launches are still the CPU's own work (a launch call that finds
// the queue full waits inside cudaLaunchKernel; that wait is counted: traces of GPU-bound runs overstate it).
//
// The measured development value (kEagerHostIssueS) is the median over the real training traces under
// ../shared/traces with at least kMinHostLaunches launches on their issuing thread; tests/unit/test_host_issue.cpp
// measures them again and checks it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/trace_events.hpp"

namespace dtsim::sim {

/// Launches on the issuing thread below which a trace does not measure the issue time (too few to average).
inline constexpr std::size_t kMinHostLaunches = 1000;

/// Host issue time per launch of eager PyTorch training, measured (see the header comment): the median of eight
/// real traces of single ranks (A100, V100, RTX 2080 Ti; PyTorch 1.x-2.x; HolisticTraceAnalysis and PARAM test
/// data), whose values span 28-113 us. The estimate for a stack nothing was measured on.
inline constexpr double kEagerHostIssueS = 72.8e-6;

/// The measurement on one trace.
struct HostIssueMeasurement {
  std::string source;
  std::int64_t pid = 0, tid = 0;  ///< the issuing thread (0, 0 when the trace has no launch call)
  std::size_t launches = 0;       ///< launch calls on it
  double busy_s = 0;              ///< union of its CPU operators
  double blocked_s = 0;           ///< of busy_s, inside calls that wait for the GPU
  double gpu_busy_fraction = 0;   ///< union of GPU kernels, copies and memsets over their span
  double host_issue_s = 0;        ///< (busy_s - blocked_s) / launches; 0 when not usable
  bool usable = false;            ///< at least kMinHostLaunches launches and some busy time
  std::string why_not;            ///< when not usable
};

/// Measures `trace` (named `source` in the result). Never throws: a trace without launches or CPU operators is
/// returned not usable, with the reason.
HostIssueMeasurement measure_host_issue(const ImportedTrace& trace, const std::string& source);

/// The median host_issue_s of the usable measurements; 0 when none is usable.
double median_host_issue_s(const std::vector<HostIssueMeasurement>& measurements);

/// The measurements as a calibration's provenance records them: {"method", "median_s", "traces": [{source,
/// launches, busy_s, blocked_s, gpu_busy_fraction, host_issue_s (null when not usable), not_measured}]}.
nlohmann::json host_issue_json(const std::vector<HostIssueMeasurement>& measurements);

/// One line per measurement ("host issue: SOURCE: N launches on thread P/T, busy B ms (blocked K ms), X us per
/// launch, GPU busy G%" or the reason it is not usable).
std::string host_issue_text(const std::vector<HostIssueMeasurement>& measurements);

}  // namespace dtsim::sim
