// Plain records mirroring what CUPTI's activity API reports, with no CUDA type in sight: the CUPTI plumbing
// (profiler/cupti/convert.cpp) fills them from CUpti_Activity* records, tests fill them by hand. Timestamps are
// CUPTI's nanosecond clock (one clock for CPU and GPU records); ids are CUPTI's (device ordinal, context id,
// stream id, correlation id).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dtsim::profiler {

/// Grid or block dimensions of a kernel launch.
struct Dim3 {
  std::int64_t x = 1;
  std::int64_t y = 1;
  std::int64_t z = 1;
  std::int64_t volume() const { return x * y * z; }
};

/// A kernel execution (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).
struct KernelRecord {
  std::string name;  ///< as CUPTI reports it (usually mangled); the writer demangles it
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t device_id = 0;
  std::uint32_t context_id = 0;
  std::uint32_t stream_id = 0;
  std::uint32_t correlation_id = 0;  ///< equals the correlation id of the API call that launched it
  Dim3 grid;
  Dim3 block;
  std::uint32_t registers_per_thread = 0;
  std::int64_t static_shared_memory_bytes = 0;
  std::int64_t dynamic_shared_memory_bytes = 0;
  std::uint32_t graph_id = 0;  ///< 0 unless launched from a CUDA graph
};

/// CUPTI's CUpti_ActivityMemcpyKind, same numbering.
enum class MemcpyKind : std::uint8_t {
  UNKNOWN = 0,
  HTOD = 1,
  DTOH = 2,
  HTOA = 3,
  ATOH = 4,
  ATOA = 5,
  ATOD = 6,
  DTOA = 7,
  DTOD = 8,
  HTOH = 9,
  PTOP = 10
};

/// CUPTI's CUpti_ActivityMemoryKind, same numbering.
enum class MemoryKind : std::uint8_t {
  UNKNOWN = 0,
  PAGEABLE = 1,
  PINNED = 2,
  DEVICE = 3,
  ARRAY = 4,
  MANAGED = 5,
  DEVICE_STATIC = 6,
  MANAGED_STATIC = 7
};

/// A memory copy (CUPTI_ACTIVITY_KIND_MEMCPY, or MEMCPY2 for peer-to-peer copies).
struct MemcpyRecord {
  MemcpyKind kind = MemcpyKind::UNKNOWN;
  MemoryKind src_kind = MemoryKind::UNKNOWN;
  MemoryKind dst_kind = MemoryKind::UNKNOWN;
  std::uint64_t bytes = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t device_id = 0;
  std::uint32_t context_id = 0;
  std::uint32_t stream_id = 0;
  std::uint32_t correlation_id = 0;          ///< the driver call's correlation id
  std::uint32_t runtime_correlation_id = 0;  ///< the runtime call's correlation id (0 if unknown)
  /// Peer-to-peer copies only (CUPTI_ACTIVITY_KIND_MEMCPY2): source and destination devices and contexts.
  bool peer_to_peer = false;
  std::uint32_t src_device_id = 0;
  std::uint32_t dst_device_id = 0;
  std::uint32_t src_context_id = 0;
  std::uint32_t dst_context_id = 0;
};

/// A memory set (CUPTI_ACTIVITY_KIND_MEMSET).
struct MemsetRecord {
  MemoryKind memory_kind = MemoryKind::UNKNOWN;
  std::uint64_t bytes = 0;
  std::uint32_t value = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t device_id = 0;
  std::uint32_t context_id = 0;
  std::uint32_t stream_id = 0;
  std::uint32_t correlation_id = 0;
};

/// Which API a call belongs to.
enum class ApiDomain : std::uint8_t { RUNTIME, DRIVER };

/// A CUDA runtime or driver API call (CUPTI_ACTIVITY_KIND_RUNTIME / DRIVER).
struct ApiRecord {
  ApiDomain domain = ApiDomain::RUNTIME;
  std::uint32_t cbid = 0;  ///< CUPTI callback id; names come from `name` or Profile::api_names
  std::string name;        ///< optional; empty: looked up in Profile::api_names by (domain, cbid)
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t process_id = 0;
  std::uint32_t thread_id = 0;  ///< system thread id (gettid)
  std::uint32_t correlation_id = 0;
  std::uint32_t return_value = 0;
};

/// One NVTX marker record (CUPTI_ACTIVITY_KIND_MARKER): a range start, a range end (same id) or an instant.
struct MarkerRecord {
  enum class Kind : std::uint8_t { INSTANT, START, END };
  Kind kind = Kind::INSTANT;
  std::uint32_t id = 0;
  std::int64_t timestamp_ns = 0;
  std::string name;    ///< empty on END records
  std::string domain;  ///< empty for NVTX's default domain
  std::uint32_t process_id = 0;
  std::uint32_t thread_id = 0;
};

/// An NVTX range, from a START and an END marker with the same id (push/pop or start/end ranges alike).
struct NvtxRange {
  std::uint32_t id = 0;
  std::string name;
  std::string domain;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t process_id = 0;
  std::uint32_t thread_id = 0;  ///< the thread that opened the range
  bool complete = true;         ///< false: never closed; end_ns is the end of the profile
};

/// A device memory allocation or release (CUPTI_ACTIVITY_KIND_MEMORY2).
struct MemoryRecord {
  enum class Op : std::uint8_t { ALLOCATION, RELEASE };
  Op op = Op::ALLOCATION;
  MemoryKind memory_kind = MemoryKind::DEVICE;
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
  std::int64_t timestamp_ns = 0;
  std::uint32_t device_id = 0;
  std::uint32_t context_id = 0;
  std::uint32_t process_id = 0;
  std::uint32_t correlation_id = 0;
  bool is_async = false;  ///< cudaMallocAsync / cudaFreeAsync (stream-ordered pool allocations)
};

/// One point of a device's "bytes in use" curve.
struct MemorySample {
  std::int64_t timestamp_ns = 0;
  std::uint32_t device_id = 0;
  std::uint64_t bytes_in_use = 0;
};

/// Static properties of a device (CUPTI_ACTIVITY_KIND_DEVICE). Zero means "not reported".
struct DeviceInfo {
  std::uint32_t id = 0;
  std::string name;
  std::uint64_t total_memory_bytes = 0;
  std::uint32_t sm_count = 0;
  std::uint32_t compute_major = 0;
  std::uint32_t compute_minor = 0;
  std::uint32_t core_clock_khz = 0;
  std::uint64_t memory_bandwidth_kBps = 0;  ///< global memory bandwidth, KB/s as CUPTI reports it
  std::uint32_t l2_cache_bytes = 0;
  std::uint32_t warp_size = 0;
  std::uint32_t max_threads_per_block = 0;
  std::uint32_t max_warps_per_sm = 0;
  std::uint32_t max_blocks_per_sm = 0;
  std::uint32_t registers_per_block = 0;
  std::uint32_t registers_per_sm = 0;
  std::uint32_t shared_memory_per_block_bytes = 0;
  std::uint32_t shared_memory_per_sm_bytes = 0;
};

/// A name given to an OS thread or a CUDA object (CUPTI_ACTIVITY_KIND_NAME, from nvtxNameOsThread,
/// nvtxNameCudaStream, ...).
struct NameRecord {
  enum class Object : std::uint8_t { PROCESS, THREAD, DEVICE, CONTEXT, STREAM };
  Object object = Object::THREAD;
  std::uint32_t process_id = 0;
  std::uint32_t thread_id = 0;
  std::uint32_t device_id = 0;
  std::uint32_t context_id = 0;
  std::uint32_t stream_id = 0;
  std::string name;
};

/// A link from a CUPTI correlation id to an id pushed by the application
/// (cuptiActivityPushExternalCorrelationId; CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION).
struct ExternalCorrelationRecord {
  std::uint32_t correlation_id = 0;
  std::uint64_t external_id = 0;
  std::uint32_t external_kind = 0;
};

/// What collecting cost and what was lost, as counted by the plumbing.
struct CollectionStats {
  std::uint64_t records = 0;                     ///< activity records read from CUPTI buffers
  std::uint64_t unsupported_records = 0;         ///< records of kinds the converter ignores
  std::uint64_t records_without_timestamps = 0;  ///< GPU records CUPTI could not time (start = end = 0)
  std::uint64_t buffers_requested = 0;
  std::uint64_t buffers_completed = 0;
  std::uint64_t buffer_bytes = 0;     ///< total size of the buffers handed to CUPTI
  std::uint64_t dropped_records = 0;  ///< cuptiActivityGetNumDroppedRecords, summed
  std::int64_t conversion_ns = 0;     ///< time spent converting records in buffer callbacks
};

/// Rank and world size of a distributed job, from the launcher's environment (see parse_distributed_env).
struct DistributedInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = -1;  ///< -1: unknown
  std::string backend;  ///< e.g. "nccl"; empty: not written
};

/// Everything one process collected: the input of ProfileWriter.
struct Profile {
  std::uint32_t process_id = 0;
  std::string process_name;
  std::vector<DeviceInfo> devices;
  std::vector<KernelRecord> kernels;
  std::vector<MemcpyRecord> memcpys;
  std::vector<MemsetRecord> memsets;
  std::vector<ApiRecord> api_calls;
  std::vector<MarkerRecord> markers;
  std::vector<MemoryRecord> memory;
  std::vector<NameRecord> names;
  std::vector<ExternalCorrelationRecord> external_correlations;
  /// Names of API calls by (domain, cbid), for ApiRecords whose own name is empty.
  std::map<std::pair<ApiDomain, std::uint32_t>, std::string> api_names;
  std::optional<DistributedInfo> distributed;
  CollectionStats stats;

  /// Appends everything of `other` (records, names, stats) to this profile.
  void append(Profile&& other);
  /// True when no record of any kind was collected.
  bool empty() const;
};

}  // namespace dtsim::profiler
