// dtsim_gpu_smoke: a tiny CUDA program for the profiler's GPU smoke test (tests/gpu_smoke.sh). Inside one NVTX
// range "smoke": a device allocation, a host-to-device copy, a memset, three kernel launches (two kernels), a
// device-to-host copy; then it checks the arithmetic. Exit codes: 0 ok, 1 wrong result or CUDA error, 77 no GPU
// (ctest's SKIP_RETURN_CODE).
//
// Built twice: dtsim_gpu_smoke (profiled from outside, through CUDA_INJECTION64_PATH) and, with
// DTSIM_SMOKE_API, dtsim_gpu_smoke_api (linked with libdtsim_cupti.so, profiling itself through
// dtsim::profiler::start/stop/flush and ScopedRange; argv[1] is the output file).
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <vector>

#ifdef DTSIM_SMOKE_API
#include "dtsim_profiler.hpp"
#endif

__global__ void scale(float* x, int n, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

__global__ void add_one(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

#define SMOKE_CHECK(call)                                                                     \
  do {                                                                                        \
    const cudaError_t smoke_err_ = (call);                                                    \
    if (smoke_err_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "dtsim_gpu_smoke: %s: %s\n", #call, cudaGetErrorString(smoke_err_)); \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

namespace {

/// The GPU work: x = ((0 + 1) * 3 + 1) = 4 everywhere, with the memset zeroing the buffer first.
int work(std::vector<float>& host) {
  const int n = static_cast<int>(host.size());
  float* dev = nullptr;
  SMOKE_CHECK(cudaMalloc(&dev, host.size() * sizeof(float)));
  SMOKE_CHECK(cudaMemcpy(dev, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  SMOKE_CHECK(cudaMemset(dev, 0, host.size() * sizeof(float)));
  const int block = 256, grid = (n + block - 1) / block;
  add_one<<<grid, block>>>(dev, n);
  SMOKE_CHECK(cudaGetLastError());
  scale<<<grid, block>>>(dev, n, 3.0f);
  SMOKE_CHECK(cudaGetLastError());
  add_one<<<grid, block>>>(dev, n);
  SMOKE_CHECK(cudaGetLastError());
  SMOKE_CHECK(cudaMemcpy(host.data(), dev, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  SMOKE_CHECK(cudaFree(dev));
  for (float v : host)
    if (v != 4.0f) {
      std::fprintf(stderr, "dtsim_gpu_smoke: wrong result %g (expected 4)\n", v);
      return 1;
    }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "dtsim_gpu_smoke: no CUDA device (%s): skipped\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "count is 0");
    return 77;
  }
#ifdef DTSIM_SMOKE_API
  if (argc < 2) {
    std::fprintf(stderr, "usage: dtsim_gpu_smoke_api OUTPUT.json\n");
    return 2;
  }
  if (!dtsim::profiler::start()) return 1;
#else
  (void)argc;
  (void)argv;
  // Initialize CUDA before the first NVTX call: the injected profiler is loaded during CUDA's initialization and
  // must have pointed NVTX at CUPTI by the time NVTX initializes.
  SMOKE_CHECK(cudaFree(nullptr));
#endif
  std::vector<float> host(1 << 20, 7.0f);
  int rc = 0;
  {
#ifdef DTSIM_SMOKE_API
    dtsim::profiler::ScopedRange range("smoke");
#else
    nvtxRangePushA("smoke");
#endif
    rc = work(host);
#ifndef DTSIM_SMOKE_API
    nvtxRangePop();
#endif
  }
  SMOKE_CHECK(cudaDeviceSynchronize());
#ifdef DTSIM_SMOKE_API
  dtsim::profiler::stop();
  if (!dtsim::profiler::flush(argv[1])) return 1;
#endif
  if (rc == 0) std::printf("dtsim_gpu_smoke: ok (%d device%s)\n", devices, devices == 1 ? "" : "s");
  return rc;
}
