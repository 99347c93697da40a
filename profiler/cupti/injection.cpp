// Entry point for CUDA_INJECTION64_PATH: the driver dlopens this library and calls InitializeInjection once,
// during cuInit, before any kernel can run. Collection then lasts until the process ends, when the exit handler
// flushes CUPTI and writes the trace.
#include <cstdio>

#include "profiler/cupti/dtsim_profiler.hpp"
#include "profiler/cupti/session.hpp"

extern "C" int InitializeInjection(void) {
  try {
    dtsim::profiler::cupti::Session::instance().start(dtsim::profiler::cupti::Mode::INJECTION);
  } catch (...) {  // never unwind into the CUDA driver
    std::fputs("dtsim_cupti: initialization failed, not profiling\n", stderr);
  }
  return 1;
}
