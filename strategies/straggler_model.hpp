// Per-GPU speed variability: a synchronous training step runs at the pace of its slowest GPU.
//
// Mechanism. GPUs of one SKU do not run equally fast: manufacturing variation and power management give each GPU
// its own sustained clock under load (Sinha et al., "Not All GPUs Are Created Equal: Characterizing Variability in
// Large-Scale, Accelerator-Rich Systems", SC'22, arXiv:2208.11035: over 90% of the GPUs of five clusters, 8% average
// performance variation between GPUs of the same SKU, outliers up to 1.5x slower than the median). Model: each GPU's
// kernels take (1 + cv Z_g) times their nominal time, Z_g independent standard normal, the same on every kernel of
// the GPU (the variation is persistent, not jitter). Every rank of a data-, tensor- and pipeline-parallel job waits
// for the others at least once per step (tensor-parallel collectives every layer, the pipeline's sends, the gradient
// reduction at the end), so to first order in cv the step's compute is paced by the slowest of the job's N GPUs:
//   extra time of a rank = cv x E[max of N standard normals] x the rank's compute time.
// A calibration fitted to measured runs already holds the slowest of the GPUs those runs used: its reference count
// N_ref (Calibration::gpu_speed_reference_gpus; 1 for kernel sweeps on one GPU and for specification-based values)
// is subtracted, so the charge is cv x max(0, e(N) - e(N_ref)) x compute.
//
// Where it applies: the simulator's lowering adds one wait per rank (task "gpu-variability-wait") after the rank's
// last backward pass, before its last gradient bucket and optimizer step (the slowest rank's last gradients arrive
// late); the estimator adds the same to its iteration time. Summary.json reports it per rank and stage
// (gpu_variability_wait_s). cv = 0 turns it off (--gpu-speed-cv 0, or compute.gpu_speed_cv in a calibration).
//
// Not modelled: transient jitter (OS noise, thermal swings: Llama 3's 1-2% diurnal throughput variation is the
// whole job's, not a GPU's), correlation between GPUs of one node, single slow-GPU stragglers (a heavy tail rather
// than a normal spread), and the second-order pipeline effect of a slow stage on its neighbours' bubbles.
#pragma once
#include <cstdint>

#include "traces/calibration.hpp"

namespace dtsim::straggler {

/// E[max of n independent standard normal variables] (0 for n <= 1): the integral of x n phi(x) Phi(x)^(n-1) over
/// x, by composite Simpson quadrature (error below 1e-9 for n up to 2^31).
double expected_max_standard_normal(std::int64_t n);

/// The fraction of a rank's compute time it waits for the slowest GPU of a job of `world_gpus` GPUs under `cal`:
/// cv x max(0, e(world_gpus) - e(reference GPUs)); 0 when cv = 0.
double pace_fraction(const Calibration& cal, std::int64_t world_gpus);

}  // namespace dtsim::straggler
