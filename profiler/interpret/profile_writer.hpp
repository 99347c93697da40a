// ProfileWriter: turns a Profile (records of one process) into a Chrome-trace JSON document in Kineto's
// vocabulary, the format torch.profiler writes, so that tools reading Kineto traces (and traces/kineto_import)
// read ours unchanged.
//
// Document layout (keys in this order):
//   "schemaVersion": 1,
//   "deviceProperties": [{"id","name","totalGlobalMem","computeMajor","computeMinor","maxThreadsPerBlock",
//                          "maxThreadsPerMultiprocessor","regsPerBlock","warpSize","sharedMemPerBlock","numSms",
//                          "regsPerMultiprocessor","sharedMemPerMultiprocessor","clockRate" (kHz),
//                          "l2CacheSize","memoryBandwidth" (bytes/s)}, ...]   (fields CUPTI did not report omitted)
//   "distributedInfo": {"backend"?, "rank", "world_size", "local_rank"?}        (only when known)
//   "dtsimProfiler": {"version", "overhead": {...}, "interpretation": {...}}   (what collecting cost and lost)
//   "displayTimeUnit": "ms",
//   "baseTimeNanoseconds": B,
//   "traceEvents": [...]
// Every "ts" is (CUPTI ns - B) / 1000 written with exactly three decimals, every "dur" likewise: microseconds with
// nanosecond precision that a double reads back exactly. B is the earliest timestamp rounded down to a second.
//
// Events (Kineto's categories and argument names):
//   "ph":"X" "cat":"kernel"        pid = device, tid = stream; args "External id"?, "device", "context", "stream",
//                                  "correlation", "registers per thread", "shared memory", "blocks per SM"?,
//                                  "warps per SM"?, "grid":[x,y,z], "block":[x,y,z], "nccl":1 for NCCL kernels
//   "ph":"X" "cat":"gpu_memcpy"    name "Memcpy HtoD (Pageable -> Device)"; args "device", "context", "stream",
//                                  "correlation", "bytes", "memory bandwidth (GB/s)" (peer copies: "fromDevice",
//                                  "inDevice", "toDevice", "fromContext", "inContext", "toContext" instead of
//                                  "device"/"context")
//   "ph":"X" "cat":"gpu_memset"    name "Memset (Device)"; args as memcpy
//   "ph":"X" "cat":"cuda_runtime" / "cuda_driver"  pid = process, tid = thread; args "External id"?, "cbid",
//                                  "correlation"
//   "ph":"X" "cat":"user_annotation"      an NVTX range on its thread; args "External id" (the range id),
//                                  "domain"?, "incomplete":1 if never closed
//   "ph":"X" "cat":"gpu_user_annotation"  per NVTX range and (device, stream): the span of the GPU work launched
//                                  inside the range from its thread; args "External id" (the range id)
//   "ph":"i" "cat":"cpu_instant_event"    an NVTX mark ("s":"t")
//   "ph":"s"/"f" "cat":"ac2g" "name":"ac2g"  flow from an API call (at its start) to each GPU activity it
//                                  launched (at its start, "bp":"e"); "id" = the call's correlation id, which is
//                                  also the "correlation" arg of both ends
//   "ph":"C" "cat":"gpu_memory" "name":"GPU Memory"  pid = device; args {"Bytes In Use": bytes}
//   "ph":"M" process_name / process_labels / process_sort_index / thread_name, first, for every lane used.
// "External id" of an API call: the id pushed with cuptiActivityPushExternalCorrelationId if any, else the id of
// the innermost NVTX range open on its thread at its start; GPU activities inherit their launching call's.
// Events are sorted by (ts, pid, tid, name, phase, text): the same Profile always gives the same bytes.
#pragma once
#include <cstdint>
#include <string>

#include "profiler/interpret/analysis.hpp"
#include "profiler/interpret/records.hpp"

namespace dtsim::profiler {

/// Choices of the writer.
struct WriterOptions {
  Demangler demangle = cxa_demangle;  ///< empty: kernel names are written as CUPTI reported them
  bool flows = true;                  ///< "ac2g" flow events
  bool gpu_user_annotations = true;   ///< "gpu_user_annotation" events derived from NVTX ranges
  bool memory_counters = true;        ///< "GPU Memory" counter events
};

/// What the writer produced and what it could not interpret.
struct WriteSummary {
  std::size_t events = 0;  ///< entries of "traceEvents", metadata included
  std::size_t kernels = 0;
  std::size_t nccl_kernels = 0;
  std::size_t memcpys = 0;
  std::size_t memsets = 0;
  std::size_t api_calls = 0;
  std::size_t ranges = 0;
  std::size_t instants = 0;
  std::size_t gpu_annotations = 0;
  std::size_t flows = 0;  ///< flow pairs: one per GPU activity linked to its API call
  std::size_t memory_samples = 0;
  std::uint64_t unlinked_gpu_activities = 0;  ///< no API record with their correlation id
  std::uint64_t untimed_records = 0;          ///< GPU activities with start = end = 0 (skipped)
  std::uint64_t negative_durations = 0;       ///< end before start (written with dur 0)
  std::uint64_t unmatched_marker_ends = 0;
  std::uint64_t unclosed_ranges = 0;
  std::uint64_t unmatched_releases = 0;
  std::int64_t base_time_ns = 0;  ///< "baseTimeNanoseconds"
};

/// Writes profiles; stateless apart from its options, so one writer may serve several threads.
class ProfileWriter {
public:
  explicit ProfileWriter(WriterOptions options = {});
  /// The JSON document; `summary`, if given, receives the counts.
  std::string to_json(const Profile& profile, WriteSummary* summary = nullptr) const;
  /// Writes the document to `path` (through a temporary file renamed into place). Throws dtsim::Error if the file
  /// cannot be written.
  WriteSummary write_file(const Profile& profile, const std::string& path) const;

private:
  WriterOptions options_;
};

/// One line for humans: records, buffers, dropped records, conversion time, and what could not be interpreted.
std::string format_overhead(const CollectionStats& stats, const WriteSummary& summary);

}  // namespace dtsim::profiler
