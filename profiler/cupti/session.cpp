#include "profiler/cupti/session.hpp"

#include <cupti.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>

#include "profiler/cupti/convert.hpp"
#include "profiler/interpret/analysis.hpp"
#include "profiler/interpret/profile_writer.hpp"

namespace dtsim::profiler::cupti {

namespace {

std::string cupti_error(CUptiResult r) {
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) return "CUPTI error " + std::to_string(static_cast<int>(r));
  return s;
}

bool env_is_false(const char* name) {
  const char* v = std::getenv(name);
  return v && (std::string(v) == "0" || std::string(v) == "false" || std::string(v) == "off");
}

bool env_is_true(const char* name) {
  const char* v = std::getenv(name);
  return v && (std::string(v) == "1" || std::string(v) == "true" || std::string(v) == "on");
}

void at_exit_handler() {
  try {
    Session::instance().finish();
  } catch (...) {
    std::fputs("dtsim_cupti: could not write the profile at exit\n", stderr);
  }
}

/// The kinds collected, in enabling order. DEVICE first, so that device records reach the trace's header.
struct Kind {
  CUpti_ActivityKind kind;
  const char* name;
  const char* disable_env;  ///< environment variable that turns the kind off ("0"), or null
  bool required;            ///< collection is pointless without it
};
constexpr Kind kKinds[] = {
    {CUPTI_ACTIVITY_KIND_DEVICE, "DEVICE", nullptr, false},
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL", nullptr, true},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY", nullptr, false},
    {CUPTI_ACTIVITY_KIND_MEMCPY2, "MEMCPY2", nullptr, false},
    {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET", nullptr, false},
    {CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME", nullptr, false},
    {CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER", "DTSIM_PROFILE_DRIVER", false},
    {CUPTI_ACTIVITY_KIND_NAME, "NAME", nullptr, false},
    {CUPTI_ACTIVITY_KIND_MARKER, "MARKER", nullptr, false},
    {CUPTI_ACTIVITY_KIND_MEMORY2, "MEMORY2", "DTSIM_PROFILE_MEMORY", false},
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION", nullptr, false},
};

}  // namespace

void point_nvtx_at_cupti() {
  if (env_is_false("DTSIM_PROFILE_NVTX") || std::getenv("NVTX_INJECTION64_PATH")) return;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiActivityRegisterCallbacks), &info) != 0 && info.dli_fname)
    setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0);
}

Session& Session::instance() {
  static Session* session = new Session();  // leaked on purpose: exit handlers and CUPTI threads outlive statics
  return *session;
}

void Session::report(const std::string& message) const { std::fprintf(stderr, "dtsim_cupti: %s\n", message.c_str()); }

void CUPTIAPI Session::buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  Session& s = instance();
  const std::size_t bytes = s.buffer_bytes_.load();
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, bytes));
  *size = *buffer ? bytes : 0;  // a null buffer makes CUPTI drop records, which it then counts
  *max_records = 0;             // as many as fit
  s.buffers_requested_.fetch_add(1);
}

void CUPTIAPI Session::buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer,
                                        std::size_t size, std::size_t valid_size) {
  Session& s = instance();
  // Nothing may escape into CUPTI's C frames: a failure here loses this buffer's records, reported as dropped.
  try {
    const auto t0 = std::chrono::steady_clock::now();
    Profile local;  // converted outside the lock, appended under it
    local.stats.buffers_completed = 1;
    local.stats.buffer_bytes = size;
    CUpti_Activity* record = nullptr;
    while (buffer && cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
      ++local.stats.records;
      switch (convert_record(*record, local)) {
        case Converted::YES: break;
        case Converted::UNSUPPORTED_KIND: ++local.stats.unsupported_records; break;
        case Converted::UNTIMED: ++local.stats.records_without_timestamps; break;
      }
    }
    std::size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS)
      local.stats.dropped_records = dropped;
    local.stats.conversion_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard lock(s.data_mu_);
    s.profile_.append(std::move(local));
  } catch (const std::exception& e) {
    s.report(std::string("lost an activity buffer: ") + e.what());
  } catch (...) {
    s.report("lost an activity buffer");
  }
  std::free(buffer);
}

void Session::enable_kinds() {
  enabled_kinds_.clear();
  for (const Kind& k : kKinds) {
    if (k.disable_env && env_is_false(k.disable_env)) continue;
    CUptiResult r = CUPTI_SUCCESS;
#if CUPTI_API_VERSION >= 130000
    // Device records are emitted when the driver initializes; EnableAndDump also reports devices that already are.
    if (k.kind == CUPTI_ACTIVITY_KIND_DEVICE) r = cuptiActivityEnableAndDump(k.kind);
    else
#endif
      r = cuptiActivityEnable(k.kind);
    if (r == CUPTI_SUCCESS) {
      enabled_kinds_.push_back(k.kind);
    } else if (k.required || !quiet_) {
      report(std::string("cannot enable ") + k.name + " activity: " + cupti_error(r));
    }
  }
}

bool Session::start(Mode mode) {
  std::lock_guard lock(control_mu_);
  if (enabled_) return true;
  quiet_ = env_is_true("DTSIM_PROFILE_QUIET");
  mode_ = mode == Mode::INJECTION || mode_ == Mode::INJECTION ? Mode::INJECTION : Mode::API;
  if (!registered_) {
    point_nvtx_at_cupti();
    if (const char* mb = std::getenv("DTSIM_PROFILE_BUFFER_MB")) {
      const long v = std::strtol(mb, nullptr, 10);
      if (v > 0 && v <= 1024) buffer_bytes_ = static_cast<std::size_t>(v) << 20;
    }
    // Kineto's convention: thread ids are the system's (gettid), as the OS and other tools show them.
    if (const CUptiResult r = cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM); r != CUPTI_SUCCESS)
      report("cannot use system thread ids: " + cupti_error(r));
    if (const CUptiResult r = cuptiActivityRegisterCallbacks(&Session::buffer_requested, &Session::buffer_completed);
        r != CUPTI_SUCCESS) {
      report("cannot register activity buffers, not profiling: " + cupti_error(r));
      return false;
    }
    registered_ = true;
    std::atexit(&at_exit_handler);
  }
  enable_kinds();
  enabled_ = !enabled_kinds_.empty();
  if (!enabled_) report("no activity kind could be enabled, not profiling");
  ever_enabled_ = ever_enabled_ || enabled_;
  return enabled_;
}

void Session::stop() {
  std::lock_guard lock(control_mu_);
  if (!enabled_) return;
  for (const CUpti_ActivityKind k : enabled_kinds_) cuptiActivityDisable(k);
  enabled_ = false;
  if (const CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); r != CUPTI_SUCCESS)
    report("flushing activity buffers failed: " + cupti_error(r));
}

bool Session::write(const std::string& path) {
  std::lock_guard lock(control_mu_);
  if (registered_)
    if (const CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); r != CUPTI_SUCCESS)
      report("flushing activity buffers failed: " + cupti_error(r));
  Profile p;
  {
    std::lock_guard data(data_mu_);
    p = std::move(profile_);
    profile_ = Profile{};
    profile_.devices = p.devices;  // reported once per process: keep them for later files
    profile_.names = p.names;
  }
  p.stats.buffers_requested = buffers_requested_.exchange(0);
  p.process_id = static_cast<std::uint32_t>(getpid());
  p.process_name = program_invocation_short_name;
  p.distributed = parse_distributed_env([](const char* k) { return std::getenv(k); });
  const char* pattern = std::getenv("DTSIM_PROFILE_OUT");
  const std::string out = expand_output_path(path.empty() ? (pattern ? pattern : "") : path, p.process_id,
                                             p.distributed ? std::optional<int>(p.distributed->rank) : std::nullopt);
  try {
    const WriteSummary summary = ProfileWriter().write_file(p, out);
    if (!quiet_) report("wrote " + out + ": " + format_overhead(p.stats, summary));
    if (p.stats.dropped_records > 0)
      report(std::to_string(p.stats.dropped_records) +
             " activity records were dropped (buffers full); raise DTSIM_PROFILE_BUFFER_MB");
    return true;
  } catch (const std::exception& e) {
    report(std::string("cannot write the profile: ") + e.what());
    return false;
  }
}

void Session::finish() {
  bool injected = false;
  {
    std::lock_guard lock(control_mu_);
    if (!registered_ || !ever_enabled_) return;  // never collected: leave no (empty) file behind
    injected = mode_ == Mode::INJECTION;
    // Deliver what CUPTI still holds before deciding whether there is anything to write.
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  bool pending = false;
  {
    std::lock_guard data(data_mu_);
    pending = !profile_.kernels.empty() || !profile_.memcpys.empty() || !profile_.memsets.empty() ||
              !profile_.api_calls.empty() || !profile_.markers.empty() || !profile_.memory.empty();
  }
  // Injected: always leave a file. API: write what was collected after the last flush(), if anything.
  if (injected || pending) write("");
}

}  // namespace dtsim::profiler::cupti
