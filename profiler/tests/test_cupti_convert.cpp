// Unit tests of the CUPTI record conversion (cupti/convert.cpp) on hand-made CUPTI records: no GPU needed, only
// the CUPTI headers and library. Built where CUPTI is found.
#include <cupti.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "profiler/cupti/convert.hpp"
#include "profiler/interpret/profile_writer.hpp"

namespace dtsim::profiler::cupti {
namespace {

#if CUPTI_API_VERSION >= 130000
using KernelT = CUpti_ActivityKernel10;
using MemcpyT = CUpti_ActivityMemcpy6;
using MemoryT = CUpti_ActivityMemory4;
using DeviceT = CUpti_ActivityDevice5;
#else
using KernelT = CUpti_ActivityKernel8;
using MemcpyT = CUpti_ActivityMemcpy4;
using MemoryT = CUpti_ActivityMemory2;
using DeviceT = CUpti_ActivityDevice4;
#endif

template <class T>
const CUpti_Activity& base(const T& r) {
  return reinterpret_cast<const CUpti_Activity&>(r);
}

constexpr std::uint64_t T0 = 1'700'000'000'000'000'000ull;

TEST(CuptiConvert, Kernel) {
  KernelT k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = T0 + 100;
  k.end = T0 + 350;
  k.deviceId = 1;
  k.contextId = 2;
  k.streamId = 13;
  k.correlationId = 77;
  k.gridX = 8;
  k.gridY = 2;
  k.gridZ = 1;
  k.blockX = 128;
  k.blockY = 1;
  k.blockZ = 1;
  k.registersPerThread = 40;
  k.staticSharedMemory = 256;
  k.dynamicSharedMemory = 1024;
  k.name = "_Z6squarePfi";
  Profile p;
  ASSERT_EQ(convert_record(base(k), p), Converted::YES);
  ASSERT_EQ(p.kernels.size(), 1u);
  const KernelRecord& r = p.kernels[0];
  EXPECT_EQ(r.name, "_Z6squarePfi");
  EXPECT_EQ(r.start_ns, static_cast<std::int64_t>(T0 + 100));
  EXPECT_EQ(r.end_ns, static_cast<std::int64_t>(T0 + 350));
  EXPECT_EQ(r.device_id, 1u);
  EXPECT_EQ(r.context_id, 2u);
  EXPECT_EQ(r.stream_id, 13u);
  EXPECT_EQ(r.correlation_id, 77u);
  EXPECT_EQ(r.grid.x, 8);
  EXPECT_EQ(r.grid.y, 2);
  EXPECT_EQ(r.block.x, 128);
  EXPECT_EQ(r.registers_per_thread, 40u);
  EXPECT_EQ(r.static_shared_memory_bytes, 256);
  EXPECT_EQ(r.dynamic_shared_memory_bytes, 1024);

  k.start = k.end = 0;  // CUPTI could not time it
  EXPECT_EQ(convert_record(base(k), p), Converted::UNTIMED);
  EXPECT_EQ(p.kernels.size(), 1u);
}

TEST(CuptiConvert, MemcpyMemsetMemory) {
  MemcpyT c{};
  c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  c.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  c.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  c.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  c.bytes = 1 << 20;
  c.start = T0 + 10;
  c.end = T0 + 20;
  c.streamId = 7;
  c.correlationId = 5;
  c.runtimeCorrelationId = 4;
  CUpti_ActivityMemset4 s{};
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.bytes = 64;
  s.start = T0 + 30;
  s.end = T0 + 31;
  s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  s.correlationId = 6;
  MemoryT m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.address = 0xdead000;
  m.bytes = 4096;
  m.timestamp = T0 + 40;
  m.deviceId = 3;
  Profile p;
  EXPECT_EQ(convert_record(base(c), p), Converted::YES);
  EXPECT_EQ(convert_record(base(s), p), Converted::YES);
  EXPECT_EQ(convert_record(base(m), p), Converted::YES);
  ASSERT_EQ(p.memcpys.size(), 1u);
  EXPECT_EQ(p.memcpys[0].kind, MemcpyKind::DTOH);
  EXPECT_EQ(p.memcpys[0].src_kind, MemoryKind::DEVICE);
  EXPECT_EQ(p.memcpys[0].dst_kind, MemoryKind::PINNED);
  EXPECT_EQ(p.memcpys[0].bytes, 1u << 20);
  EXPECT_EQ(p.memcpys[0].correlation_id, 5u);
  EXPECT_EQ(p.memcpys[0].runtime_correlation_id, 4u);
  EXPECT_EQ(memcpy_event_name(p.memcpys[0]), "Memcpy DtoH (Device -> Pinned)");
  ASSERT_EQ(p.memsets.size(), 1u);
  EXPECT_EQ(memset_event_name(p.memsets[0]), "Memset (Device)");
  ASSERT_EQ(p.memory.size(), 1u);
  EXPECT_EQ(p.memory[0].op, MemoryRecord::Op::RELEASE);
  EXPECT_EQ(p.memory[0].address, 0xdead000u);
  EXPECT_EQ(p.memory[0].device_id, 3u);
}

TEST(CuptiConvert, ApiMarkerNameDevice) {
  CUpti_ActivityAPI a{};
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  a.start = T0;
  a.end = T0 + 5;
  a.processId = 100;
  a.threadId = 101;
  a.correlationId = 9;
  CUpti_ActivityMarker2 start{};
  start.kind = CUPTI_ACTIVITY_KIND_MARKER;
  start.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  start.id = 3;
  start.timestamp = T0 - 10;
  start.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  start.objectId.pt.processId = 100;
  start.objectId.pt.threadId = 101;
  start.name = "step";
  start.domain = nullptr;
  CUpti_ActivityMarker2 end = start;
  end.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
  end.timestamp = T0 + 50;
  end.name = nullptr;
  CUpti_ActivityName n{};
  n.kind = CUPTI_ACTIVITY_KIND_NAME;
  n.objectKind = CUPTI_ACTIVITY_OBJECT_STREAM;
  n.objectId.dcs.deviceId = 0;
  n.objectId.dcs.streamId = 7;
  n.name = "compute";
  DeviceT d{};
  d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  d.id = 0;
  d.name = "NVIDIA H100 80GB HBM3";
  d.globalMemorySize = 85'045'231'616ull;
  d.numMultiprocessors = 132;
  d.computeCapabilityMajor = 9;
  d.numThreadsPerWarp = 32;
  Profile p;
  for (const CUpti_Activity* r : {&base(a), &base(start), &base(end), &base(n), &base(d)})
    EXPECT_EQ(convert_record(*r, p), Converted::YES);
  ASSERT_EQ(p.api_calls.size(), 1u);
  EXPECT_EQ(p.api_calls[0].domain, ApiDomain::RUNTIME);
  EXPECT_EQ(p.api_calls[0].thread_id, 101u);
  // The name comes from CUPTI's own table (no GPU needed for that).
  const auto key = std::make_pair(ApiDomain::RUNTIME, static_cast<std::uint32_t>(a.cbid));
  ASSERT_TRUE(p.api_names.count(key));
  EXPECT_EQ(p.api_names.at(key), "cudaLaunchKernel_v7000");
  ASSERT_EQ(p.markers.size(), 2u);
  EXPECT_EQ(p.markers[0].kind, MarkerRecord::Kind::START);
  EXPECT_EQ(p.markers[0].name, "step");
  EXPECT_EQ(p.markers[1].kind, MarkerRecord::Kind::END);
  EXPECT_EQ(p.markers[1].thread_id, 101u);
  ASSERT_EQ(p.names.size(), 1u);
  EXPECT_EQ(p.names[0].object, NameRecord::Object::STREAM);
  EXPECT_EQ(p.names[0].stream_id, 7u);
  ASSERT_EQ(p.devices.size(), 1u);
  EXPECT_EQ(p.devices[0].sm_count, 132u);
  EXPECT_EQ(p.devices[0].total_memory_bytes, 85'045'231'616ull);

  // Through the writer: the launch carries the enclosing range's id, the stream its NVTX name.
  KernelT k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = T0 + 20;
  k.end = T0 + 30;
  k.streamId = 7;
  k.correlationId = 9;
  k.name = "_Z6squarePfi";
  ASSERT_EQ(convert_record(base(k), p), Converted::YES);
  const auto doc = nlohmann::json::parse(ProfileWriter().to_json(p));
  bool launch = false, kernel = false, stream_name = false;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("cat", "") == "cuda_runtime" && e["name"] == "cudaLaunchKernel") launch = e["args"]["External id"] == 3;
    if (e.value("cat", "") == "kernel") kernel = e["name"] == "square(float*, int)" && e["args"]["External id"] == 3;
    if (e["name"] == "thread_name" && e["pid"] == 0 && e["tid"] == 7)
      stream_name = e["args"]["name"] == "stream 7 compute";
  }
  EXPECT_TRUE(launch);
  EXPECT_TRUE(kernel);
  EXPECT_TRUE(stream_name);
}

TEST(CuptiConvert, UnsupportedKinds) {
  CUpti_ActivityMarker2 sync{};
  sync.kind = CUPTI_ACTIVITY_KIND_MARKER;
  sync.flags = CUPTI_ACTIVITY_FLAG_MARKER_SYNC_ACQUIRE;
  Profile p;
  EXPECT_EQ(convert_record(base(sync), p), Converted::UNSUPPORTED_KIND);
  CUpti_Activity other{};
  other.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  EXPECT_EQ(convert_record(other, p), Converted::UNSUPPORTED_KIND);
  EXPECT_TRUE(p.empty());
}

}  // namespace
}  // namespace dtsim::profiler::cupti
