// Interpretation of raw records: Kineto's names for copies and memory kinds, API names, demangling, NVTX range
// pairing, the per-device "bytes in use" curve, and the launcher environment. Plain C++, no CUDA.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/interpret/records.hpp"

namespace dtsim::profiler {

/// Kineto's short name of a copy direction: "HtoD", "DtoH", "DtoD", "PtoP", ... ("Unknown" otherwise).
const char* memcpy_kind_name(MemcpyKind kind);
/// Kineto's name of a memory kind: "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static",
/// "Managed Static" ("Unknown" otherwise).
const char* memory_kind_name(MemoryKind kind);
/// Kineto's event name of a copy: "Memcpy HtoD (Pageable -> Device)".
std::string memcpy_event_name(const MemcpyRecord& r);
/// Kineto's event name of a memset: "Memset (Device)".
std::string memset_event_name(const MemsetRecord& r);

/// CUPTI callback names carry the API version ("cudaLaunchKernel_v7000", "cudaMemcpyAsync_ptsz_v7000");
/// traces show the function name without it ("cudaLaunchKernel", "cudaMemcpyAsync_ptsz").
std::string strip_api_version(std::string_view cupti_name);

/// Turns a symbol as CUPTI reports it into the name shown in the trace.
using Demangler = std::function<std::string(const std::string&)>;
/// The C++ ABI demangler (abi::__cxa_demangle); names that are not mangled, or do not demangle, come back as is.
std::string cxa_demangle(const std::string& name);

/// NCCL's kernels are ordinary kernels named "nccl..." ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)",
/// "ncclKernel_..."): true for such a (demangled) name.
bool is_nccl_kernel(std::string_view demangled_name);

/// NVTX marker records turned into ranges and instants.
struct MarkerPairing {
  std::vector<NvtxRange> ranges;       ///< sorted by (process, thread, start, longest first, id)
  std::vector<MarkerRecord> instants;  ///< sorted by (timestamp, process, thread, id)
  std::uint64_t unmatched_ends = 0;    ///< END records whose START was never seen (dropped)
  std::uint64_t unclosed_ranges = 0;   ///< START records never closed (kept, ending at profile_end_ns)
};
/// Pairs START and END markers by id (the order of the input does not matter). A range never closed ends at
/// `profile_end_ns` (at least its own start) and is marked incomplete.
MarkerPairing pair_markers(const std::vector<MarkerRecord>& markers, std::int64_t profile_end_ns);

/// True for the memory kinds that live in device memory and count as "bytes in use" on the device:
/// DEVICE, ARRAY and DEVICE_STATIC. Host memory (PAGEABLE, PINNED) and migratable MANAGED memory do not count.
bool counts_as_device_memory(MemoryKind kind);

/// The per-device "bytes in use" curve built from allocation and release records.
struct MemoryUsage {
  std::vector<MemorySample> samples;                  ///< one per allocation/release, in time order
  std::map<std::uint32_t, std::uint64_t> peak_bytes;  ///< per device
  std::uint64_t unmatched_releases = 0;               ///< releases of addresses not allocated while profiling (ignored)
};
/// Replays allocations and releases in (timestamp, device, releases-before-allocations, address) order.
/// A release subtracts the size recorded at allocation (by device and address), so memory allocated before the
/// profile started never drives the curve below zero; such releases are counted, not applied.
MemoryUsage memory_usage(const std::vector<MemoryRecord>& records);

/// Rank and world size from a launcher's environment: torchrun/Slurm-style RANK and WORLD_SIZE (LOCAL_RANK), or
/// Open MPI's OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE (OMPI_COMM_WORLD_LOCAL_RANK). `lookup` is getenv or a
/// test double; nullopt when neither pair is set to integers with 0 <= rank < size.
std::optional<DistributedInfo> parse_distributed_env(const std::function<const char*(const char*)>& lookup);

/// The output file name: `pattern` with "%p" replaced by the process id, "%r" by the rank (0 if unknown) and
/// "%%" by "%"; an empty pattern means "dtsim_profile.<pid>.json".
std::string expand_output_path(const std::string& pattern, std::uint32_t process_id, std::optional<int> rank);

}  // namespace dtsim::profiler
