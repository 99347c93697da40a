// Imported-trace vocabulary: what a real GPU run recorded (Kineto / PyTorch profiler traces, our own CUPTI
// profiler's output), reduced to the events dtsim replays and calibrates on. Times are int64 nanoseconds
// relative to the earliest event of the trace.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dtsim {

/// What an event is. GPU-side kinds run on a (device, stream); CPU-side kinds on a (process, thread).
enum class TraceEventKind {
  CPU_OP,           ///< framework operator (cat "cpu_op", "operator")
  USER_ANNOTATION,  ///< user range / NVTX range on the CPU (cat "user_annotation", "python_function" excluded)
  RUNTIME,          ///< CUDA/HIP runtime or driver call (cudaLaunchKernel, cudaMemcpyAsync, ...)
  KERNEL,           ///< GPU kernel (cat "kernel"); collective kernels have `collective` set
  MEMCPY,           ///< GPU memcpy (cat "gpu_memcpy")
  MEMSET,           ///< GPU memset (cat "gpu_memset")
  GPU_ANNOTATION,   ///< range on a GPU stream (cat "gpu_user_annotation")
};
const char* to_string(TraceEventKind kind);

/// Collective metadata when the trace carries it (Kineto's "record_param_comms" / NCCL kernel args).
struct CollectiveInfo {
  std::string op;             ///< normalised: "all-reduce", "all-gather", "reduce-scatter", "broadcast",
                              ///< "send", "recv", "all-to-all", "reduce", or "" when unknown
  double bytes = 0;           ///< message size in bytes (input size for all-reduce), 0 when unknown
  int group_size = 0;         ///< ranks in the process group, 0 when unknown
  std::string process_group;  ///< process-group name/description when given
};

struct TraceEvent {
  TraceEventKind kind = TraceEventKind::CPU_OP;
  std::string name;
  std::int64_t start_ns = 0;  ///< relative to ImportedTrace::origin
  std::int64_t dur_ns = 0;
  std::int64_t pid = 0;           ///< process id (CPU) or device index (GPU), as recorded
  std::int64_t tid = 0;           ///< thread id (CPU) or stream id (GPU), as recorded
  int device = -1;                ///< GPU index for GPU-side events, -1 on the CPU
  std::int64_t correlation = -1;  ///< links a RUNTIME launch to its GPU event (CUPTI correlation id), -1 if none
  std::int64_t external_id = -1;  ///< links a CPU_OP to the runtime calls it made (Kineto "External id"), -1 if none
  bool collective = false;        ///< NCCL/RCCL kernel or a communication op
  CollectiveInfo comm;            ///< meaningful when `collective`
  // Kernel launch shape when recorded (0 when not).
  int grid[3] = {0, 0, 0};
  int block[3] = {0, 0, 0};
  /// CPU ops recorded with shapes (Kineto args "Input Dims" / "Input type", PyTorch profiler record_shapes=True):
  /// one entry per operator argument, in argument order. A tensor argument has its sizes ([] for a 0-dim tensor);
  /// a non-tensor argument (scalar, None, list) has [] and its type says what it is ("Scalar", "", "int", ...); a
  /// TensorList argument (nested lists in newer traces) is kept as [] too. Empty when the trace has no shapes.
  std::vector<std::vector<std::int64_t>> input_dims;
  /// Argument types as recorded: "float", "c10::Half", "c10::BFloat16", "long", "Scalar", "TensorList", "" ...
  std::vector<std::string> input_types;
  bool is_gpu() const {
    return kind == TraceEventKind::KERNEL || kind == TraceEventKind::MEMCPY || kind == TraceEventKind::MEMSET ||
           kind == TraceEventKind::GPU_ANNOTATION;
  }
};

/// Properties of a device the trace ran on (Kineto "deviceProperties").
struct TraceDevice {
  int id = 0;
  std::string name;  ///< e.g. "NVIDIA A100-SXM4-80GB", "AMD Instinct MI250X / MI250"
  double total_memory_bytes = 0;
  int sm_count = 0;  ///< "numSms" (compute units on AMD), 0 when unknown
  int compute_major = 0, compute_minor = 0;
};

struct ImportedTrace {
  std::string source;          ///< path it was read from
  std::string format;          ///< "kineto", "dtsim-cupti", ...
  std::string vendor;          ///< "nvidia", "amd" or "" when the trace does not say
  int rank = -1;               ///< distributed rank when recorded ("distributedInfo"), else -1
  int world_size = 0;          ///< 0 when not recorded
  std::int64_t origin_ns = 0;  ///< absolute timestamp of the earliest event (ns); event times are relative to it
  std::vector<TraceDevice> devices;
  std::vector<TraceEvent> events;               ///< sorted by (start_ns, kind, pid, tid, name)
  std::map<std::string, std::string> metadata;  ///< other top-level scalars (schemaVersion, ...)
};

}  // namespace dtsim
