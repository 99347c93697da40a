// The collection session behind both entry points of libdtsim_cupti.so (the injection hook and the C++ API): CUPTI
// activity buffers in, interpretation-layer records accumulated in memory, a Kineto-vocabulary JSON file out.
//
// Environment (read when collection starts):
//   DTSIM_PROFILE_OUT      output path; "%p" -> process id, "%r" -> rank; default dtsim_profile.<pid>.json
//   DTSIM_PROFILE_DRIVER   0: do not record driver API calls (cu*), only runtime ones (cuda*)
//   DTSIM_PROFILE_MEMORY   0: do not record allocations (no "GPU Memory" counter)
//   DTSIM_PROFILE_NVTX     0: leave NVTX_INJECTION64_PATH alone (by default it is pointed at libcupti when unset)
//   DTSIM_PROFILE_BUFFER_MB  size of each activity buffer handed to CUPTI (default 8)
//   DTSIM_PROFILE_QUIET    1: no summary line on stderr
//   RANK/WORLD_SIZE/LOCAL_RANK or OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK: "distributedInfo" and "%r"
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <cupti.h>

#include "profiler/interpret/records.hpp"

namespace dtsim::profiler::cupti {

/// NVTX reaches CUPTI only if NVTX_INJECTION64_PATH names libcupti when NVTX initializes (at the first NVTX call
/// of each module). Points it at the libcupti this library uses, unless it is set or DTSIM_PROFILE_NVTX=0.
void point_nvtx_at_cupti();

/// How collection was started: injected into an unmodified program, or by the C++ API.
enum class Mode { INJECTION, API };

class Session {
public:
  /// The process-wide session; never destroyed, so that exit handlers may still use it.
  static Session& instance();

  /// Registers the buffer callbacks (once) and enables the activity kinds. Idempotent. False, with a message on
  /// stderr, when CUPTI refuses to collect.
  bool start(Mode mode);
  /// Disables the activity kinds and moves CUPTI's pending records into memory. Call after synchronizing the
  /// device, or the kernels still running are reported without timestamps.
  void stop();
  /// Forces CUPTI to deliver every buffer, writes everything collected so far to `path` (empty: the
  /// DTSIM_PROFILE_OUT / default path) and forgets those records. False, with a message on stderr, on failure.
  bool write(const std::string& path);
  /// The exit handler's work: writes what was collected (always in injection mode, so that a run leaves a file).
  void finish();

private:
  Session() = default;
  static void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records);
  static void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer,
                                        std::size_t size, std::size_t valid_size);
  void enable_kinds();
  void report(const std::string& message) const;

  std::mutex control_mu_;  ///< start/stop/write, one at a time
  bool registered_ = false;
  bool enabled_ = false;
  bool ever_enabled_ = false;  ///< some activity kind was enabled at some point
  Mode mode_ = Mode::API;
  bool quiet_ = false;
  std::vector<CUpti_ActivityKind> enabled_kinds_;

  std::mutex data_mu_;  ///< guards profile_ (buffer callbacks run on CUPTI's threads)
  Profile profile_;
  std::atomic<std::size_t> buffer_bytes_{8u << 20};
  std::atomic<std::uint64_t> buffers_requested_{0};
};

}  // namespace dtsim::profiler::cupti
