// dtsim's CUPTI profiler, as a library: link libdtsim_cupti.so and bracket the region of interest.
//
//   dtsim::profiler::start();
//   { dtsim::profiler::ScopedRange step("step 3"); train_step(); }
//   cudaDeviceSynchronize();
//   dtsim::profiler::stop();
//   dtsim::profiler::flush("step3.json");   // Kineto-vocabulary Chrome trace (see interpret/profile_writer.hpp)
//
// The same library is also an injection library for unmodified programs:
//   CUDA_INJECTION64_PATH=/path/to/libdtsim_cupti.so DTSIM_PROFILE_OUT=trace.%p.json ./program
// which profiles the whole run and writes the file at exit. Environment variables: see cupti/session.hpp.
#pragma once
#include <string>

#define DTSIM_PROFILER_API __attribute__((visibility("default")))

namespace dtsim::profiler {

/// Starts collecting (idempotent). Call before the program's first NVTX call if NVTX ranges are wanted (NVTX binds
/// to its collector on first use). Returns false, with a message on stderr, if CUPTI cannot collect.
DTSIM_PROFILER_API bool start();
/// Stops collecting and moves CUPTI's pending records into memory. Synchronize the devices first: work still
/// running is reported without timestamps.
DTSIM_PROFILER_API void stop();
/// Writes everything collected since the last flush to `path` (empty: $DTSIM_PROFILE_OUT, else
/// dtsim_profile.<pid>.json; "%p" and "%r" expand to the process id and rank), then forgets it. Returns false, with
/// a message on stderr, if the file cannot be written. Whatever is collected after the last flush is written at
/// exit.
DTSIM_PROFILER_API bool flush(const std::string& path = "");
/// Opens an NVTX range on the calling thread (nvtxRangePushA): a "user_annotation" in the trace, and the
/// "External id" of the CUDA calls made inside it.
DTSIM_PROFILER_API void push_range(const char* name);
DTSIM_PROFILER_API void push_range(const std::string& name);
/// Closes the innermost NVTX range of the calling thread (nvtxRangePop).
DTSIM_PROFILER_API void pop_range();

/// push_range on construction, pop_range on destruction.
class ScopedRange {
public:
  explicit ScopedRange(const char* name) { push_range(name); }
  explicit ScopedRange(const std::string& name) { push_range(name); }
  ~ScopedRange() { pop_range(); }
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;
};

}  // namespace dtsim::profiler

/// The hook the CUDA driver calls in a library named by CUDA_INJECTION64_PATH, once, while it initializes.
/// Returns 1 (success) even if CUPTI cannot collect, so that the program runs unprofiled rather than failing.
extern "C" DTSIM_PROFILER_API int InitializeInjection(void);
