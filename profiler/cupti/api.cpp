// The C++ API of libdtsim_cupti.so (dtsim_profiler.hpp).
#include <mutex>

#include <nvtx3/nvToolsExt.h>

#include "profiler/cupti/dtsim_profiler.hpp"
#include "profiler/cupti/session.hpp"

namespace dtsim::profiler {

namespace {
/// NVTX binds to its collector on its first call in this library: make sure that collector is CUPTI.
void before_first_nvtx_call() {
  static std::once_flag once;
  std::call_once(once, [] { cupti::point_nvtx_at_cupti(); });
}
}  // namespace

bool start() { return cupti::Session::instance().start(cupti::Mode::API); }

void stop() { cupti::Session::instance().stop(); }

bool flush(const std::string& path) { return cupti::Session::instance().write(path); }

void push_range(const char* name) {
  before_first_nvtx_call();
  nvtxRangePushA(name ? name : "");
}

void push_range(const std::string& name) { push_range(name.c_str()); }

void pop_range() {
  before_first_nvtx_call();
  nvtxRangePop();
}

}  // namespace dtsim::profiler
