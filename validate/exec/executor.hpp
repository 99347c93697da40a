// dtsim's hardware executor: runs the simulator's own per-rank task graph on a real GPU.
//
// The graph is the one `dtsim simulate` lowers (sim/model/lowering, with SimOptions::record_kernels), so the
// executor runs exactly the kernels the cost model sized, in the order the simulator scheduled them:
//  - every COMPUTE task's kernels: GEMMs as cuBLAS strided-batched GEMMs of the recorded shapes in the model's
//    dtype with fp32 accumulation, memory-bound kernels as device-to-device copies moving the recorded bytes
//    (half read, half written), on one stream, bracketed by CUDA events;
//  - the memory model's allocations really allocated: weights, gradients and optimizer states at the start,
//    every MemEvent (activations, recompute buffers, gathered parameters...) allocated and freed stream-ordered
//    (cudaMallocFromPoolAsync / cudaFreeAsync) at its task's start or end, from a pool of its own, so the peak
//    is measured (pool reserved high-water mark + what the CUDA context and cuBLAS took), not assumed;
//  - warm-up iterations, then timed ones (per-task and per-iteration samples).
// GEMM operands live in one scratch buffer (random data, never zeros) that is outside the memory model and
// reported separately.
//
// Ex-situ mode (after Echo): each simulated rank of the plan runs alone on one GPU; its communication is not
// executed (the caller re-times the graph with the measured compute durations and the simulator's
// communication, see sim/exec_measured.hpp). A plan of one rank is a full run in the same way.
// OOM, CUDA and cuBLAS errors become a reported result for that rank, not a crash.
#pragma once
#include <string>
#include <vector>

#include "sim/model/lowering.hpp"
#include "traces/model.hpp"
#include "validate/compare/measurements.hpp"

namespace dtsim::exec {

struct ExecOptions {
  int warmup = 2;
  int iterations = 5;
  int device = 0;
  std::vector<int> ranks;  ///< simulated ranks to run (indexes into Lowered::ranks); empty: all
  bool quiet = false;
};

/// Runs the selected ranks of `low` (lowered with record_kernels) one after the other on one GPU.
/// `predicted_start_s` (per task, from an engine run of the same graph) orders each rank's tasks.
/// ConfigError when there is no usable GPU or the graph has no recorded kernels.
Measurements execute(const sim::Lowered& low, const std::vector<double>& predicted_start_s, DType dtype,
                     const ExecOptions& opt);

}  // namespace dtsim::exec
