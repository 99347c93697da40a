#include "traces/trace_events.hpp"

namespace dtsim {

const char* to_string(TraceEventKind kind) {
  switch (kind) {
    case TraceEventKind::CPU_OP: return "cpu_op";
    case TraceEventKind::USER_ANNOTATION: return "user_annotation";
    case TraceEventKind::RUNTIME: return "runtime";
    case TraceEventKind::KERNEL: return "kernel";
    case TraceEventKind::MEMCPY: return "gpu_memcpy";
    case TraceEventKind::MEMSET: return "gpu_memset";
    case TraceEventKind::GPU_ANNOTATION: return "gpu_user_annotation";
  }
  return "unknown";
}

}  // namespace dtsim
