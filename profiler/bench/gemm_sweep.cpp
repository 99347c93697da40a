// dtsim_gemm_sweep: cuBLAS GEMM throughput over the shapes of transformer layers, fp16 and bf16 inputs with fp32
// accumulation, timed with CUDA events after warm-up. Prints CSV on stdout:
//   m,n,k,dtype,time_s,tflops
// (time_s: mean seconds per GEMM; tflops: 2*m*n*k / time_s / 1e12). Progress and errors go to stderr.
//
// Usage: dtsim_gemm_sweep [--dtype fp16|bf16|both] [--warmup N] [--reps N] [--shapes MxNxK,MxNxK,...]
//                         [--tokens T] [--device D]
// Default shapes: for hidden sizes 4096, 8192, 12288 and T tokens (default 4096 = micro-batch x sequence), the
// four GEMMs of a layer (QKV projection, attention output, MLP up, MLP down) unsharded and with tensor parallelism
// 8 (column-parallel N/8, row-parallel K/8). C = A*B, column-major, A: m x k, B: k x n.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace {

struct Shape {
  std::int64_t m, n, k;
  auto key() const { return std::tie(m, n, k); }
  bool operator<(const Shape& o) const { return key() < o.key(); }
};

struct Options {
  std::vector<std::string> dtypes = {"fp16", "bf16"};
  int warmup = 5;
  int reps = 20;
  std::int64_t tokens = 4096;
  int device = 0;
  std::vector<Shape> shapes;
};

/// A CUDA or cuBLAS failure, with the call that failed.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Failure(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw Failure(std::string(what) + ": cuBLAS status " + std::to_string(s));
}

std::vector<Shape> transformer_shapes(std::int64_t tokens) {
  std::set<Shape> shapes;
  for (std::int64_t h : {4096, 8192, 12288})
    for (std::int64_t tp : {1, 8}) {
      shapes.insert({tokens, 3 * h / tp, h});  // QKV projection (column parallel)
      shapes.insert({tokens, h, h / tp});      // attention output (row parallel)
      shapes.insert({tokens, 4 * h / tp, h});  // MLP up (column parallel)
      shapes.insert({tokens, h, 4 * h / tp});  // MLP down (row parallel)
    }
  return {shapes.begin(), shapes.end()};
}

Shape parse_shape(const std::string& s) {
  Shape sh{};
  char x1 = 0, x2 = 0;
  std::istringstream in(s);
  if (!(in >> sh.m >> x1 >> sh.n >> x2 >> sh.k) || x1 != 'x' || x2 != 'x' || sh.m <= 0 || sh.n <= 0 || sh.k <= 0)
    throw std::invalid_argument("bad shape '" + s + "' (expected MxNxK)");
  return sh;
}

Options parse_args(int argc, char** argv) {
  Options o;
  std::string shapes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--dtype") {
      const std::string v = value();
      if (v == "both") o.dtypes = {"fp16", "bf16"};
      else if (v == "fp16" || v == "bf16") o.dtypes = {v};
      else throw std::invalid_argument("--dtype must be fp16, bf16 or both");
    } else if (a == "--warmup") {
      o.warmup = std::stoi(value());
    } else if (a == "--reps") {
      o.reps = std::stoi(value());
    } else if (a == "--tokens") {
      o.tokens = std::stoll(value());
    } else if (a == "--device") {
      o.device = std::stoi(value());
    } else if (a == "--shapes") {
      shapes = value();
    } else if (a == "-h" || a == "--help") {
      throw std::invalid_argument("");
    } else {
      throw std::invalid_argument("unknown argument '" + a + "'");
    }
  }
  if (o.warmup < 0 || o.reps < 1 || o.tokens < 1) throw std::invalid_argument("bad --warmup/--reps/--tokens");
  if (!shapes.empty()) {
    std::istringstream in(shapes);
    std::string s;
    while (std::getline(in, s, ','))
      if (!s.empty()) o.shapes.push_back(parse_shape(s));
  } else {
    o.shapes = transformer_shapes(o.tokens);
  }
  return o;
}

/// Random 16-bit floats of magnitude 0.25..2 with random signs, as fp16 or bf16 bit patterns: finite, and far from
/// both overflow and denormals even after K-long fp32 accumulations.
std::vector<std::uint16_t> random_halves(std::size_t n, bool bf16, std::uint32_t seed) {
  std::vector<std::uint16_t> v(n);
  std::mt19937 rng(seed);
  for (auto& x : v) {
    const std::uint32_t r = rng();
    const std::uint32_t sign = r >> 31;
    const std::uint32_t exp_off = (r >> 28) % 3;  // 2^-2 .. 2^0
    if (bf16) x = static_cast<std::uint16_t>(sign << 15 | (125 + exp_off) << 7 | (r & 0x7F));
    else x = static_cast<std::uint16_t>(sign << 15 | (13 + exp_off) << 10 | (r & 0x3FF));
  }
  return v;
}

/// Fills `elems` 16-bit values at `dst` with random_halves: one 16 Mi-element block generated on the host, then
/// replicated on the device by doubling copies (generating a 1 GiB operand on the host would take seconds).
void fill_random(void* dst, std::int64_t elems, bool bf16, std::uint32_t seed) {
  const std::int64_t block = std::min<std::int64_t>(elems, std::int64_t{1} << 24);
  const auto host = random_halves(static_cast<std::size_t>(block), bf16, seed);
  auto* base = static_cast<std::uint16_t*>(dst);
  check(cudaMemcpy(base, host.data(), static_cast<std::size_t>(block) * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  for (std::int64_t filled = block; filled < elems;) {
    const std::int64_t n = std::min(filled, elems - filled);
    check(cudaMemcpy(base + filled, base, static_cast<std::size_t>(n) * 2, cudaMemcpyDeviceToDevice), "cudaMemcpy");
    filled += n;
  }
}

int run(const Options& o) {
  check(cudaSetDevice(o.device), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, o.device), "cudaGetDeviceProperties");
  std::fprintf(stderr, "dtsim_gemm_sweep: device %d: %s, %zu shapes x %zu dtypes, %d warm-up + %d timed reps\n",
               o.device, prop.name, o.shapes.size(), o.dtypes.size(), o.warmup, o.reps);

  std::int64_t max_a = 0, max_b = 0, max_c = 0;
  for (const auto& s : o.shapes) {
    max_a = std::max(max_a, s.m * s.k);
    max_b = std::max(max_b, s.k * s.n);
    max_c = std::max(max_c, s.m * s.n);
  }
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  check(cudaMalloc(&a, static_cast<std::size_t>(max_a) * 2), "cudaMalloc A");
  check(cudaMalloc(&b, static_cast<std::size_t>(max_b) * 2), "cudaMalloc B");
  check(cudaMalloc(&c, static_cast<std::size_t>(max_c) * 2), "cudaMalloc C");
  cublasHandle_t handle = nullptr;
  check(cublasCreate(&handle), "cublasCreate");
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");

  std::printf("m,n,k,dtype,time_s,tflops\n");
  for (const std::string& dtype : o.dtypes) {
    const bool bf16 = dtype == "bf16";
    const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    // Fill A and B with this dtype's random values (zeros would flatter the hardware: less switching power).
    fill_random(a, max_a, bf16, 1);
    fill_random(b, max_b, bf16, 2);
    for (const Shape& s : o.shapes) {
      const float alpha = 1.0f, beta = 0.0f;
      auto gemm = [&] {
        check(
            cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(s.m), static_cast<int>(s.n),
                         static_cast<int>(s.k), &alpha, a, type, static_cast<int>(s.m), b, type, static_cast<int>(s.k),
                         &beta, c, type, static_cast<int>(s.m), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
      };
      for (int i = 0; i < o.warmup; ++i) gemm();
      check(cudaDeviceSynchronize(), "warm-up");
      check(cudaEventRecord(start), "cudaEventRecord");
      for (int i = 0; i < o.reps; ++i) gemm();
      check(cudaEventRecord(stop), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      const double time_s = static_cast<double>(ms) / 1e3 / o.reps;
      const double tflops =
          2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) / time_s / 1e12;
      std::printf("%lld,%lld,%lld,%s,%.9g,%.6g\n", static_cast<long long>(s.m), static_cast<long long>(s.n),
                  static_cast<long long>(s.k), dtype.c_str(), time_s, tflops);
      std::fflush(stdout);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cublasDestroy(handle);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse_args(argc, argv);
  } catch (const std::exception& e) {
    if (*e.what()) std::fprintf(stderr, "dtsim_gemm_sweep: %s\n", e.what());
    std::fprintf(stderr,
                 "usage: dtsim_gemm_sweep [--dtype fp16|bf16|both] [--warmup N] [--reps N] [--tokens T]\n"
                 "                        [--shapes MxNxK,...] [--device D]\n");
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtsim_gemm_sweep: error: %s\n", e.what());
    return 1;
  }
}
