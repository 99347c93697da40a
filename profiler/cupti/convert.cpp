#include "profiler/cupti/convert.hpp"

#include <cupti_activity.h>

#include <cstdint>
#include <string>

namespace dtsim::profiler::cupti {

namespace {

// Newer CUPTI versions only append fields to a record, so reading a record through the newest struct the headers
// define, or through an older one, sees the same values for the fields used here.
#if CUPTI_API_VERSION >= 130000  // CUDA 13
using KernelT = CUpti_ActivityKernel10;
using MemcpyT = CUpti_ActivityMemcpy6;
using MemcpyPtoPT = CUpti_ActivityMemcpyPtoP4;
using MemsetT = CUpti_ActivityMemset4;
using MemoryT = CUpti_ActivityMemory4;
using DeviceT = CUpti_ActivityDevice5;
#elif CUPTI_API_VERSION >= 17  // CUDA 11.8 .. 12.x
using KernelT = CUpti_ActivityKernel8;
using MemcpyT = CUpti_ActivityMemcpy4;
using MemcpyPtoPT = CUpti_ActivityMemcpyPtoP2;
using MemsetT = CUpti_ActivityMemset2;
using MemoryT = CUpti_ActivityMemory2;
using DeviceT = CUpti_ActivityDevice4;
#else
#error "dtsim_cupti needs CUPTI from CUDA 11.8 or newer"
#endif

std::int64_t ns(std::uint64_t t) { return static_cast<std::int64_t>(t); }
std::string str(const char* s) { return s ? std::string(s) : std::string(); }

MemoryKind memory_kind(std::uint32_t k) {
  return k <= static_cast<std::uint32_t>(MemoryKind::MANAGED_STATIC) ? static_cast<MemoryKind>(k) : MemoryKind::UNKNOWN;
}
MemcpyKind memcpy_kind(std::uint32_t k) {
  return k <= static_cast<std::uint32_t>(MemcpyKind::PTOP) ? static_cast<MemcpyKind>(k) : MemcpyKind::UNKNOWN;
}

Converted on_kernel(const KernelT& r, Profile& out) {
  if (r.start == 0 && r.end == 0) return Converted::UNTIMED;
  KernelRecord k;
  k.name = str(r.name);
  k.start_ns = ns(r.start);
  k.end_ns = ns(r.end);
  k.device_id = r.deviceId;
  k.context_id = r.contextId;
  k.stream_id = r.streamId;
  k.correlation_id = r.correlationId;
  k.grid = {r.gridX, r.gridY, r.gridZ};
  k.block = {r.blockX, r.blockY, r.blockZ};
  k.registers_per_thread = r.registersPerThread;
  k.static_shared_memory_bytes = r.staticSharedMemory;
  k.dynamic_shared_memory_bytes = r.dynamicSharedMemory;
  k.graph_id = r.graphId;
  out.kernels.push_back(std::move(k));
  return Converted::YES;
}

Converted on_memcpy(const MemcpyT& r, Profile& out) {
  if (r.start == 0 && r.end == 0) return Converted::UNTIMED;
  MemcpyRecord m;
  m.kind = memcpy_kind(r.copyKind);
  m.src_kind = memory_kind(r.srcKind);
  m.dst_kind = memory_kind(r.dstKind);
  m.bytes = r.bytes;
  m.start_ns = ns(r.start);
  m.end_ns = ns(r.end);
  m.device_id = r.deviceId;
  m.context_id = r.contextId;
  m.stream_id = r.streamId;
  m.correlation_id = r.correlationId;
  m.runtime_correlation_id = r.runtimeCorrelationId;
  out.memcpys.push_back(m);
  return Converted::YES;
}

Converted on_memcpy_p2p(const MemcpyPtoPT& r, Profile& out) {
  if (r.start == 0 && r.end == 0) return Converted::UNTIMED;
  MemcpyRecord m;
  m.kind = memcpy_kind(r.copyKind);
  m.src_kind = memory_kind(r.srcKind);
  m.dst_kind = memory_kind(r.dstKind);
  m.bytes = r.bytes;
  m.start_ns = ns(r.start);
  m.end_ns = ns(r.end);
  m.device_id = r.deviceId;
  m.context_id = r.contextId;
  m.stream_id = r.streamId;
  m.correlation_id = r.correlationId;
  m.peer_to_peer = true;
  m.src_device_id = r.srcDeviceId;
  m.dst_device_id = r.dstDeviceId;
  m.src_context_id = r.srcContextId;
  m.dst_context_id = r.dstContextId;
  out.memcpys.push_back(m);
  return Converted::YES;
}

Converted on_memset(const MemsetT& r, Profile& out) {
  if (r.start == 0 && r.end == 0) return Converted::UNTIMED;
  MemsetRecord m;
  m.memory_kind = memory_kind(r.memoryKind);
  m.bytes = r.bytes;
  m.value = r.value;
  m.start_ns = ns(r.start);
  m.end_ns = ns(r.end);
  m.device_id = r.deviceId;
  m.context_id = r.contextId;
  m.stream_id = r.streamId;
  m.correlation_id = r.correlationId;
  out.memsets.push_back(m);
  return Converted::YES;
}

Converted on_api(const CUpti_ActivityAPI& r, ApiDomain domain, Profile& out) {
  ApiRecord a;
  a.domain = domain;
  a.cbid = r.cbid;
  a.start_ns = ns(r.start);
  a.end_ns = ns(r.end);
  a.process_id = r.processId;
  a.thread_id = r.threadId;
  a.correlation_id = r.correlationId;
  a.return_value = r.returnValue;
  // Names by callback id, resolved once: the per-record string would cost an allocation per call.
  const auto key = std::make_pair(domain, static_cast<std::uint32_t>(r.cbid));
  if (!out.api_names.count(key)) {
    const char* name = nullptr;
    const auto cb_domain = domain == ApiDomain::RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
    if (cuptiGetCallbackName(cb_domain, r.cbid, &name) != CUPTI_SUCCESS) name = nullptr;
    out.api_names.emplace(key, str(name));
  }
  out.api_calls.push_back(a);
  return Converted::YES;
}

Converted on_marker(const CUpti_ActivityMarker2& r, Profile& out) {
  MarkerRecord m;
  if (r.flags & CUPTI_ACTIVITY_FLAG_MARKER_START) m.kind = MarkerRecord::Kind::START;
  else if (r.flags & CUPTI_ACTIVITY_FLAG_MARKER_END) m.kind = MarkerRecord::Kind::END;
  else if (r.flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) m.kind = MarkerRecord::Kind::INSTANT;
  else return Converted::UNSUPPORTED_KIND;  // NVTX sync markers (acquire/release) are not drawn
  m.id = r.id;
  m.timestamp_ns = ns(r.timestamp);
  m.name = str(r.name);
  m.domain = str(r.domain);
  if (r.objectKind == CUPTI_ACTIVITY_OBJECT_THREAD || r.objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS) {
    m.process_id = r.objectId.pt.processId;
    m.thread_id = r.objectId.pt.threadId;
  }
  out.markers.push_back(std::move(m));
  return Converted::YES;
}

Converted on_name(const CUpti_ActivityName& r, Profile& out) {
  NameRecord n;
  switch (r.objectKind) {
    case CUPTI_ACTIVITY_OBJECT_PROCESS: n.object = NameRecord::Object::PROCESS; break;
    case CUPTI_ACTIVITY_OBJECT_THREAD: n.object = NameRecord::Object::THREAD; break;
    case CUPTI_ACTIVITY_OBJECT_DEVICE: n.object = NameRecord::Object::DEVICE; break;
    case CUPTI_ACTIVITY_OBJECT_CONTEXT: n.object = NameRecord::Object::CONTEXT; break;
    case CUPTI_ACTIVITY_OBJECT_STREAM: n.object = NameRecord::Object::STREAM; break;
    default: return Converted::UNSUPPORTED_KIND;
  }
  if (n.object == NameRecord::Object::PROCESS || n.object == NameRecord::Object::THREAD) {
    n.process_id = r.objectId.pt.processId;
    n.thread_id = r.objectId.pt.threadId;
  } else {
    n.device_id = r.objectId.dcs.deviceId;
    n.context_id = r.objectId.dcs.contextId;
    n.stream_id = r.objectId.dcs.streamId;
  }
  n.name = str(r.name);
  out.names.push_back(std::move(n));
  return Converted::YES;
}

Converted on_memory(const MemoryT& r, Profile& out) {
  MemoryRecord m;
  if (r.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION) m.op = MemoryRecord::Op::ALLOCATION;
  else if (r.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) m.op = MemoryRecord::Op::RELEASE;
  else return Converted::UNSUPPORTED_KIND;
  m.memory_kind = memory_kind(r.memoryKind);
  m.address = r.address;
  m.bytes = r.bytes;
  m.timestamp_ns = ns(r.timestamp);
  m.device_id = r.deviceId;
  m.context_id = r.contextId;
  m.process_id = r.processId;
  m.correlation_id = r.correlationId;
  m.is_async = r.isAsync != 0;
  out.memory.push_back(m);
  return Converted::YES;
}

Converted on_device(const DeviceT& r, Profile& out) {
  DeviceInfo d;
  d.id = r.id;
  d.name = str(r.name);
  d.total_memory_bytes = r.globalMemorySize;
  d.sm_count = r.numMultiprocessors;
  d.compute_major = r.computeCapabilityMajor;
  d.compute_minor = r.computeCapabilityMinor;
  d.core_clock_khz = r.coreClockRate;
  d.memory_bandwidth_kBps = r.globalMemoryBandwidth;
  d.l2_cache_bytes = r.l2CacheSize;
  d.warp_size = r.numThreadsPerWarp;
  d.max_threads_per_block = r.maxThreadsPerBlock;
  d.max_warps_per_sm = r.maxWarpsPerMultiprocessor;
  d.max_blocks_per_sm = r.maxBlocksPerMultiprocessor;
  d.registers_per_block = r.maxRegistersPerBlock;
  d.registers_per_sm = r.maxRegistersPerMultiprocessor;
  d.shared_memory_per_block_bytes = r.maxSharedMemoryPerBlock;
  d.shared_memory_per_sm_bytes = r.maxSharedMemoryPerMultiprocessor;
  out.devices.push_back(std::move(d));
  return Converted::YES;
}

Converted on_external(const CUpti_ActivityExternalCorrelation& r, Profile& out) {
  out.external_correlations.push_back({r.correlationId, r.externalId, static_cast<std::uint32_t>(r.externalKind)});
  return Converted::YES;
}

template <class T>
const T& as(const CUpti_Activity& r) {
  return reinterpret_cast<const T&>(r);
}

}  // namespace

Converted convert_record(const CUpti_Activity& r, Profile& out) {
  switch (r.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return on_kernel(as<KernelT>(r), out);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return on_memcpy(as<MemcpyT>(r), out);
    case CUPTI_ACTIVITY_KIND_MEMCPY2: return on_memcpy_p2p(as<MemcpyPtoPT>(r), out);
    case CUPTI_ACTIVITY_KIND_MEMSET: return on_memset(as<MemsetT>(r), out);
    case CUPTI_ACTIVITY_KIND_RUNTIME: return on_api(as<CUpti_ActivityAPI>(r), ApiDomain::RUNTIME, out);
    case CUPTI_ACTIVITY_KIND_DRIVER: return on_api(as<CUpti_ActivityAPI>(r), ApiDomain::DRIVER, out);
    case CUPTI_ACTIVITY_KIND_MARKER: return on_marker(as<CUpti_ActivityMarker2>(r), out);
    case CUPTI_ACTIVITY_KIND_NAME: return on_name(as<CUpti_ActivityName>(r), out);
    case CUPTI_ACTIVITY_KIND_MEMORY2: return on_memory(as<MemoryT>(r), out);
    case CUPTI_ACTIVITY_KIND_DEVICE: return on_device(as<DeviceT>(r), out);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return on_external(as<CUpti_ActivityExternalCorrelation>(r), out);
    default: return Converted::UNSUPPORTED_KIND;
  }
}

}  // namespace dtsim::profiler::cupti
