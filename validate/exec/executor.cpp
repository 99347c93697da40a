#include "validate/exec/executor.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <stdexcept>

#include "traces/error.hpp"

namespace dtsim::exec {
namespace {

/// A CUDA or cuBLAS failure inside one rank's run: reported for that rank, the others go on.
struct RankFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear a sticky-free error so the next rank can run
    throw RankFailure(what + ": " + (e == cudaErrorMemoryAllocation ? "out of memory" : cudaGetErrorString(e)));
  }
}
void check(cublasStatus_t s, const std::string& what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw RankFailure(what + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
}

std::int64_t dim(double x) { return std::max<std::int64_t>(1, std::llround(x)); }

/// Random 16-bit floats of magnitude 0.25..2 with random signs (fp16 or bf16 bit patterns): never zeros, never
/// denormals, finite after long fp32 accumulations.
void fill_random(void* dst, std::size_t bytes, bool bf16) {
  const std::size_t block = std::min<std::size_t>(bytes / 2, std::size_t{1} << 22);
  std::vector<std::uint16_t> h(block);
  std::mt19937 rng(20261123);
  for (auto& x : h) {
    const std::uint32_t r = rng(), sign = r >> 31, off = (r >> 28) % 3;
    x = bf16 ? static_cast<std::uint16_t>(sign << 15 | (125 + off) << 7 | (r & 0x7F))
             : static_cast<std::uint16_t>(sign << 15 | (13 + off) << 10 | (r & 0x3FF));
  }
  check(cudaMemcpy(dst, h.data(), block * 2, cudaMemcpyHostToDevice), "fill scratch");
  std::size_t done = block * 2;
  auto* base = static_cast<char*>(dst);
  while (done < bytes) {  // doubling device copies
    const std::size_t n = std::min(done, bytes - done);
    check(cudaMemcpy(base + done, base, n, cudaMemcpyDeviceToDevice), "fill scratch");
    done += n;
  }
}

constexpr std::size_t kCopyChunkBytes = std::size_t{256} << 20;  ///< memory-bound kernels copy in chunks of this

/// One rank's run: its own stream, pool, events.
class RankRun {
public:
  RankRun(const sim::Lowered& low, int si, const std::vector<std::int32_t>& order, DType dtype, void* scratch,
          std::size_t scratch_bytes, cublasHandle_t blas, cudaStream_t stream)
      : low_(low),
        si_(si),
        order_(order),
        dtype_(dtype),
        scratch_(scratch),
        scratch_bytes_(scratch_bytes),
        blas_(blas),
        stream_(stream) {
    for (const auto& e : low.graph.memory_events())
      if (low.graph.tasks()[e.task].rank == si) mem_of_task_[e.task].push_back(&e);
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    int dev = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice");
    props.location.id = dev;
    check(cudaMemPoolCreate(&pool_, &props), "cudaMemPoolCreate");
    std::uint64_t keep = UINT64_MAX;  // hold freed memory like a framework's caching allocator
    check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep), "pool release threshold");
  }
  ~RankRun() {
    for (auto& [cat, live] : live_)
      for (auto& [bytes, ptr] : live) cudaFreeAsync(ptr, stream_);
    for (void* p : static_) cudaFreeAsync(p, stream_);
    cudaStreamSynchronize(stream_);
    for (auto& [t, ev] : events_) {
      cudaEventDestroy(ev.first);
      cudaEventDestroy(ev.second);
    }
    cudaMemPoolTrimTo(pool_, 0);
    cudaMemPoolDestroy(pool_);
  }
  RankRun(const RankRun&) = delete;
  RankRun& operator=(const RankRun&) = delete;

  /// Weights, gradients and optimizer states: allocated once, before the iterations.
  void allocate_static() {
    const auto& sm = low_.ranks[si_].static_mem;
    for (double b : {sm.weight_bytes, sm.gradient_bytes, sm.optimizer_bytes})
      if (b > 0) static_.push_back(alloc(b, "static memory"));
  }

  /// One iteration; timed: per-task events recorded (read back by durations()).
  void iteration() {
    for (std::int32_t id : order_) {
      const sim::Task& t = low_.graph.tasks()[id];
      const std::string name = low_.graph.names()[t.name];
      apply_memory(id, false, name);
      if (t.kind == sim::TaskKind::COMPUTE) {
        // An NVTX range per task, so a profile of the run (our CUPTI profiler, Nsight) names every kernel's task.
        std::string range = std::string("task ") + std::to_string(id) + " " + name;
        if (t.layer >= 0) range += std::string(" layer ") + std::to_string(t.layer);
        if (t.microbatch >= 0) range += std::string(" mb ") + std::to_string(t.microbatch);
        nvtxRangePushA(range.c_str());
        auto& ev = event_pair(id);
        check(cudaEventRecord(ev.first, stream_), "cudaEventRecord");
        for (const auto& k : low_.graph.kernels(id)) launch(k, name);
        check(cudaEventRecord(ev.second, stream_), "cudaEventRecord");
        nvtxRangePop();
      }
      apply_memory(id, true, name);
    }
    // Whatever the memory model left allocated at the end of an iteration is freed (it balances normally).
    for (auto& [cat, live] : live_)
      for (auto& [bytes, ptr] : live) check(cudaFreeAsync(ptr, stream_), "cudaFreeAsync");
    live_.clear();
    check(cudaStreamSynchronize(stream_), "iteration");
  }

  /// Per compute task of the last iteration: duration; and the iteration span.
  double read_durations(std::map<std::int32_t, std::vector<double>>& out) {
    float first = -1, last = 0;
    const cudaEvent_t* origin = nullptr;
    for (std::int32_t id : order_) {
      auto it = events_.find(id);
      if (it == events_.end()) continue;
      if (!origin) origin = &it->second.first;
      float ms = 0, end_ms = 0;
      check(cudaEventElapsedTime(&ms, it->second.first, it->second.second), "cudaEventElapsedTime");
      check(cudaEventElapsedTime(&end_ms, *origin, it->second.second), "cudaEventElapsedTime");
      out[id].push_back(ms * 1e-3);
      if (first < 0) first = 0;
      last = std::max(last, end_ms);
    }
    return last * 1e-3;
  }

  double used_high() const { return attr(cudaMemPoolAttrUsedMemHigh); }
  double reserved_high() const { return attr(cudaMemPoolAttrReservedMemHigh); }

private:
  double attr(cudaMemPoolAttr a) const {
    std::uint64_t v = 0;
    check(cudaMemPoolGetAttribute(pool_, a, &v), "cudaMemPoolGetAttribute");
    return static_cast<double>(v);
  }
  void* alloc(double bytes, const std::string& what) {
    void* p = nullptr;
    check(cudaMallocFromPoolAsync(&p, static_cast<std::size_t>(std::ceil(bytes)), pool_, stream_),
          "allocating " + std::to_string(static_cast<long long>(bytes)) + " bytes for " + what);
    return p;
  }
  std::pair<cudaEvent_t, cudaEvent_t>& event_pair(std::int32_t id) {
    auto it = events_.find(id);
    if (it != events_.end()) return it->second;
    std::pair<cudaEvent_t, cudaEvent_t> ev{};
    check(cudaEventCreate(&ev.first), "cudaEventCreate");
    check(cudaEventCreate(&ev.second), "cudaEventCreate");
    return events_.emplace(id, ev).first->second;
  }
  /// The memory model's changes at the task's start or end: positive bytes allocate, negative free allocations
  /// of the same category (the most recent one of that size first, else the most recent ones until covered).
  void apply_memory(std::int32_t id, bool at_end, const std::string& task_name) {
    auto it = mem_of_task_.find(id);
    if (it == mem_of_task_.end()) return;
    for (const sim::MemEvent* e : it->second) {
      if (e->at_end != at_end || e->bytes == 0) continue;
      auto& live = live_[static_cast<int>(e->category)];
      if (e->bytes > 0) {
        live.emplace_back(e->bytes,
                          alloc(e->bytes, std::string(sim::mem_category_name(e->category)) + " at " + task_name));
        continue;
      }
      double need = -e->bytes;
      auto same =
          std::find_if(live.rbegin(), live.rend(), [&](const auto& a) { return std::fabs(a.first - need) < 0.5; });
      if (same != live.rend()) {
        check(cudaFreeAsync(same->second, stream_), "cudaFreeAsync");
        live.erase(std::next(same).base());
        continue;
      }
      while (need > 0.5 && !live.empty()) {
        auto [bytes, ptr] = live.back();
        live.pop_back();
        check(cudaFreeAsync(ptr, stream_), "cudaFreeAsync");
        if (bytes > need + 0.5) live.emplace_back(bytes - need, alloc(bytes - need, "remainder"));
        need -= bytes;
      }
    }
  }
  void launch(const sim::KernelSpec& k, const std::string& task_name) {
    const std::size_t esize = 2;  // fp16 / bf16 (fp32 models run as fp16-sized operands with fp32 accumulation)
    if (!k.gemm) {
      // A memory-bound kernel moving `bytes` (read + write): copies of bytes/2, chunked beyond the scratch.
      std::size_t left = static_cast<std::size_t>(std::max(2.0, k.bytes) / 2);
      const std::size_t half = std::min(scratch_bytes_ / 2, kCopyChunkBytes);
      auto* base = static_cast<char*>(scratch_);
      while (left > 0) {
        const std::size_t n = std::min(left, half);
        check(cudaMemcpyAsync(base + half, base, n, cudaMemcpyDeviceToDevice, stream_), task_name + "/" + k.name);
        left -= n;
      }
      return;
    }
    const std::int64_t m = dim(k.m), n = dim(k.n), kk = dim(k.k);
    std::int64_t batch = dim(k.batch);
    const std::size_t per = static_cast<std::size_t>(m * kk + kk * n + m * n) * esize;
    // Batches beyond the scratch run as several calls (same total work).
    const std::int64_t fit = std::max<std::int64_t>(1, static_cast<std::int64_t>(scratch_bytes_ / per));
    auto* a = static_cast<char*>(scratch_);
    const cudaDataType_t type = dtype_ == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const float alpha = 1, beta = 0;
    while (batch > 0) {
      const std::int64_t b = std::min(batch, fit);
      char* bp = a + static_cast<std::size_t>(b * m * kk) * esize;
      char* cp = bp + static_cast<std::size_t>(b * kk * n) * esize;
      check(cublasGemmStridedBatchedEx(blas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(n),
                                       static_cast<int>(kk), &alpha, a, type, static_cast<int>(m), m * kk, bp, type,
                                       static_cast<int>(kk), kk * n, &beta, cp, type, static_cast<int>(m), m * n,
                                       static_cast<int>(b), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            task_name + "/" + k.name);
      batch -= b;
    }
  }

  const sim::Lowered& low_;
  int si_;
  const std::vector<std::int32_t>& order_;
  DType dtype_;
  void* scratch_;
  std::size_t scratch_bytes_;
  cublasHandle_t blas_;
  cudaStream_t stream_;
  cudaMemPool_t pool_{};
  std::map<std::int32_t, std::vector<const sim::MemEvent*>> mem_of_task_;
  std::map<int, std::vector<std::pair<double, void*>>> live_;  ///< by category: (bytes, pointer), oldest first
  std::vector<void*> static_;
  std::map<std::int32_t, std::pair<cudaEvent_t, cudaEvent_t>> events_;
};

/// Scratch for GEMM operands and copies: the largest single GEMM of any rank (one batch element at least), at
/// least 2 x the copy chunk, at most 4 GiB or half the free memory.
std::size_t scratch_size(const sim::Lowered& low, std::size_t free_bytes) {
  double need = 2.0 * kCopyChunkBytes;
  for (std::int32_t i = 0; i < static_cast<std::int32_t>(low.graph.size()); ++i)
    for (const auto& k : low.graph.kernels(i))
      if (k.gemm)
        need = std::max(need, 2.0 * static_cast<double>(dim(k.batch)) *
                                  (dim(k.m) * dim(k.k) + dim(k.k) * dim(k.n) + dim(k.m) * dim(k.n)));
  const double cap = std::min(4.0 * (1ull << 30), 0.5 * static_cast<double>(free_bytes));
  return static_cast<std::size_t>(std::min(need, cap));
}

}  // namespace

Measurements execute(const sim::Lowered& low, const std::vector<double>& predicted_start_s, DType dtype,
                     const ExecOptions& opt) {
  const auto& g = low.graph;
  DTSIM_ASSERT(predicted_start_s.size() == g.size(), "predicted start times do not match the graph");
  bool any = false;
  for (std::int32_t i = 0; i < static_cast<std::int32_t>(g.size()) && !any; ++i) any = !g.kernels(i).empty();
  if (!any) throw ConfigError("executor: the task graph has no recorded kernels (lower with record_kernels)");
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) throw ConfigError("executor: no CUDA device found");
  if (opt.device < 0 || opt.device >= count)
    throw ConfigError("executor: device " + std::to_string(opt.device) + " does not exist (" + std::to_string(count) +
                      " found)");
  if (opt.iterations < 1 || opt.warmup < 0) throw ConfigError("executor: iterations must be >= 1 and warm-up >= 0");
  check(cudaSetDevice(opt.device), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, opt.device), "cudaGetDeviceProperties");

  Measurements out;
  out.device_name = prop.name;
  out.warmup = opt.warmup;
  out.iterations = opt.iterations;

  cudaStream_t stream{};
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cublasHandle_t blas{};
  check(cublasCreate(&blas), "cublasCreate");
  check(cublasSetStream(blas, stream), "cublasSetStream");
  std::size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  const std::size_t scratch_bytes = scratch_size(low, free_b);
  void* scratch = nullptr;
  check(cudaMalloc(&scratch, scratch_bytes), "allocating the GEMM scratch");
  fill_random(scratch, scratch_bytes, dtype == DType::BF16);

  std::vector<int> ranks = opt.ranks;
  if (ranks.empty())
    for (int i = 0; i < static_cast<int>(low.ranks.size()); ++i) ranks.push_back(i);
  std::map<std::int32_t, std::vector<double>> durations;
  for (int si : ranks) {
    if (si < 0 || si >= static_cast<int>(low.ranks.size()))
      throw ConfigError("executor: simulated rank " + std::to_string(si) + " does not exist");
    // The rank's tasks in the simulator's order (start time, then id).
    std::vector<std::int32_t> order;
    for (std::int32_t i = 0; i < static_cast<std::int32_t>(g.size()); ++i)
      if (g.tasks()[i].rank == si) order.push_back(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int32_t a, std::int32_t b) { return predicted_start_s[a] < predicted_start_s[b]; });
    RankMeasurement rm;
    rm.sim_rank = si;
    rm.global_rank = low.ranks[si].global_rank;
    rm.scratch_bytes = static_cast<double>(scratch_bytes);
    // The context, cuBLAS (warmed by the first rank's GEMMs when it ran) and the scratch: what this process holds
    // before the model's memory, less the scratch.
    check(cudaDeviceSynchronize(), "synchronize");
    check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    rm.context_bytes = static_cast<double>(total_b - free_b) - static_cast<double>(scratch_bytes);
    if (!opt.quiet)
      std::fprintf(stderr, "dtsim-exec: rank %d (global %d): %zu tasks, %d warm-up + %d timed iterations\n", si,
                   rm.global_rank, order.size(), opt.warmup, opt.iterations);
    std::map<std::int32_t, std::vector<double>> mine;
    try {
      RankRun run(low, si, order, dtype, scratch, scratch_bytes, blas, stream);
      run.allocate_static();
      for (int it = 0; it < opt.warmup + opt.iterations; ++it) {
        run.iteration();
        std::map<std::int32_t, std::vector<double>> d;
        const double span = run.read_durations(d);
        if (it < opt.warmup) continue;
        rm.iteration_s.push_back(span);
        for (auto& [id, v] : d) mine[id].push_back(v.front());
      }
      rm.pool_used_high_bytes = run.used_high();
      rm.pool_reserved_high_bytes = run.reserved_high();
      rm.peak_memory_bytes = rm.context_bytes + rm.pool_reserved_high_bytes;
    } catch (const RankFailure& e) {
      rm.ok = false;
      rm.error = e.what();
      if (!opt.quiet) std::fprintf(stderr, "dtsim-exec: rank %d failed: %s\n", si, e.what());
      cudaDeviceSynchronize();
      cudaGetLastError();
    }
    if (rm.ok)
      for (auto& [id, v] : mine) durations[id] = std::move(v);
    out.ranks.push_back(std::move(rm));
  }
  cudaFree(scratch);
  cublasDestroy(blas);
  cudaStreamDestroy(stream);
  for (auto& [id, v] : durations) out.tasks.push_back({id, std::move(v)});
  return out;
}

}  // namespace dtsim::exec
